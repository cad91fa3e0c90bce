"""The class vocabulary: which agent belongs to which treatment class, by published naming systems (the table in
`table.py`, read here).

Rules, not a model. The table (`classes.table`: about 170 classes over the WHO ATC groups A, B, C, G, H, J, L,
M, N, P, R, S and the psychological therapy families) places an agent in a class by:
- its WHO International Nonproprietary Name stem (WHO, "The use of stems in the selection of INN for
  pharmaceutical substances", 2018 and later lists): -prazole proton pump inhibitors, -tidine H2-receptor
  antagonists, -parin low-molecular-weight heparins, -xaban factor Xa inhibitors, -vastatin statins, -olol beta
  blockers, -pril ACE inhibitors, -sartan angiotensin II receptor antagonists, -afil PDE5 inhibitors, -cillin
  penicillins, -oxacin fluoroquinolones, -tadine/-astine antihistamines, -azepam benzodiazepines, ...;
- the named members of classes whose INNs share no stem (warfarin, acenocoumarol and phenprocoumon are
  vitamin K antagonists in ATC B01AA; baclofen and tizanidine are muscle relaxants in ATC M03B);
- the WHO ATC grouping above a class (ATC B01A antithrombotic agents holds heparins, vitamin K antagonists and
  factor Xa inhibitors: all are "anticoagulants"; C10 lipid-modifying agents holds statins and fibrates), kept as
  each class's `parents`;
- every drug class at the top of its ATC group sits under "pharmacological treatment" (a question about "drug
  treatments" or "pharmacological interventions" takes any of them);
- psychological therapies by the names of their families (Cochrane Common Mental Disorders group's
  classification: cognitive behavioural, behavioural, third-wave, psychodynamic, humanistic, integrative
  (interpersonal), systemic (family, couples) therapies).
Brand names are not in the table (INNs only). A word followed by one that makes it a condition or a test
("opioid use disorder", "steroid-induced", "estrogen receptor") is not an agent (`table.CONDITION_AFTER`).
When two patterns match the same words, a named member or a class's name wins over an INN stem (ranibizumab is an
anti-VEGF agent before it is a -mab), a longer stem over a shorter one (aripiprazole is an antipsychotic, not a
-prazole); a word ending in a stem that is no drug ("cholesterol", "histidine") is not an agent
(`table.NOT_AGENTS`).
MeSH headings of a record (when the store holds them) add agents by the same table: the heading
"Heparin, Low-Molecular-Weight" names the class itself.

The table is general (it knows nothing of any one review); `classes_of` and `agents_in` read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from ra_agent.evidence.classes.table import CLASSES, CONDITION_AFTER, NOT_AGENTS, DrugClass

__all__ = ["CLASSES", "DrugClass", "Agent", "agents_in", "classes_named", "lineage", "member_pattern"]

BY_NAME = {c.name: c for c in CLASSES}
_CONDITION_AFTER = re.compile(CONDITION_AFTER, re.I)
_NOT_AGENTS = re.compile(NOT_AGENTS, re.I)
DRUG = "pharmacological treatment"
# "no <treatment>": the generic words, or the name of any class of the table ("no anticoagulation", "no PPI")
_NO_TREATMENT = "|".join(["prophylaxis", "treatment", "intervention", "therapy", "medication", "drug",
                          *(name for cls in CLASSES for name in cls.names)])  # fmt: skip
PLACEBO = re.compile(
    rf"\bplacebo\w*|\bno (?:active |additional |specific )?(?:{_NO_TREATMENT})\b(?!-)|\bwait(?:ing)?[- ]list\b"
    r"|\b(?:enhanced )?usual care\b|\bstandard care\b|\buntreated\b|\bobservation\b|\bcontrol group\b"
    r"|\btreatment as usual\b|(?-i:\bTAU\b)|\battention[- ](?:placebo|control)\b|\bclinical management\b|\bsham\b",
    re.I,
)


@dataclass(frozen=True)
class Agent:
    """An intervention named in a record: the word as written and the class it belongs to."""

    word: str  # lower-case
    cls: str

    def in_class(self, name: str) -> bool:
        """Whether this agent belongs to class `name` (itself or a parent, transitively)."""
        return name in lineage(self.cls)


@cache
def lineage(name: str) -> tuple[str, ...]:
    """The class and every broader class above it (ATC levels), nearest first."""
    out, todo = [], [name]
    while todo:
        cls = todo.pop(0)
        if cls not in out:
            out.append(cls)
            todo.extend(_parents(cls))
    return tuple(out)


def _parents(name: str) -> tuple[str, ...]:
    """A class's broader classes; a drug class at the top of its ATC group sits under "pharmacological treatment"."""
    cls = BY_NAME.get(name)
    if cls is None:
        return ()
    if cls.parents or name == DRUG or not cls.source.startswith("WHO"):
        return cls.parents
    return (DRUG,)


def _word_pattern(piece: str) -> re.Pattern[str]:
    """Abbreviations (capitals, an optional plural "s?") match case-sensitively, everything else ignores case."""
    bare = piece.removesuffix("s?")
    return re.compile(rf"\b(?:{piece})\b", 0 if bare.isupper() and bare.isalpha() else re.I)


def _required(piece: str) -> str:
    """The longest run of letters every match of a regex piece contains (outside groups, classes and
    quantified letters), lower-cased: a text lacking it skips the piece's regex (speed only: the regex decides)."""
    runs, run, depth, i = [], "", 0, 0
    while i < len(piece):
        ch, nxt = piece[i], piece[i + 1 : i + 2]
        if ch == "\\":
            runs, run, i = [*runs, run], "", i + 2
            continue
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if depth == 0 and ch.isalpha() and nxt not in ("?", "*", "+", "{"):
            run += ch
        else:
            runs, run = [*runs, run], ""
        i += 1
    return max([*runs, run], key=len).lower()


@cache
def _patterns() -> list[tuple[re.Pattern[str], str, bool, str]]:
    """(pattern, class, names the class itself, letters it needs): named members first (ranibizumab is an
    anti-VEGF agent before it is a -mab), then the words naming classes ("anthracycline" is not a -cycline), then
    INN stems, longest first (aripiprazole is an antipsychotic, not a -prazole)."""
    stems = sorted(((stem, cls.name) for cls in CLASSES for stem in cls.stems), key=lambda pair: -len(pair[0]))
    out = [(_word_pattern(member), cls.name, False, _required(member)) for cls in CLASSES for member in cls.members]
    out += [(_word_pattern(name), cls.name, True, _required(name)) for cls in CLASSES for name in cls.names]
    out += [(re.compile(rf"\b\w{{3,}}{stem}\b", re.I), cls, False, stem) for stem, cls in stems]
    return out


def _matches(text: str, names_only: bool = False) -> list[tuple[int, int, str, str]]:
    """(start, end, word, class) of every match in `text` that lies inside no longer match, in text order; of
    several patterns matching the same words the first of `_patterns` (member, name, longer stem) wins."""
    text = text or ""
    lower = text.lower()
    found = [(m.start(), m.end(), rank, m.group(0).lower(), cls)
             for rank, (pattern, cls, names_class, needs) in enumerate(_patterns())
             if (names_class or not names_only) and needs in lower
             for m in pattern.finditer(text)
             if not _CONDITION_AFTER.match(text, m.end()) and not _NOT_AGENTS.fullmatch(m.group(0))]  # fmt: skip
    spans = {(s, e) for s, e, _, _, _ in found}
    out, seen = [], set()
    for start, end, _, word, cls in sorted(found):
        inside = any(s <= start and end <= e and (e - s) > (end - start) for s, e in spans)
        if not inside and (start, end) not in seen:
            seen.add((start, end))
            out.append((start, end, word, cls))
    return out


def agents_in(text: str) -> list[Agent]:
    """Every agent or class named in `text`, in order of first mention, one per word. A match lying inside a longer
    match ('heparin' inside 'low-molecular-weight heparin') is the longer one's word, not a mention of its own;
    'omeprazole' named beside 'esomeprazole' is its own mention."""
    found: dict[str, Agent] = {}
    for _, _, word, cls in _matches(text):
        found.setdefault(word, Agent(word, cls))
    return list(found.values())


def classes_named(text: str) -> list[str]:
    """The classes whose own names occur in `text` ("anticoagulation" → anticoagulant), in order of mention; a name
    inside a longer one ("heparin" in "low-molecular-weight heparin") is the longer one's."""
    return list(dict.fromkeys(cls for _, _, _, cls in _matches(text, names_only=True)))


def member_pattern(cls: str) -> re.Pattern[str]:
    """A regex matching any agent or name of class `cls` or of a class below it (for coverage checks)."""
    below = [c for c in CLASSES if cls in lineage(c.name)]
    pieces = [p for c in below for p in (*c.names, *c.members, *(rf"\w{{3,}}{s}" for s in c.stems))]
    return re.compile(rf"\b(?:{'|'.join(pieces)})\b(?!{CONDITION_AFTER})", re.I)
