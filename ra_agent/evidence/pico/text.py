"""Text units the PICO rules read: sentences, section labels, the document view, number words."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from ra_agent.models import Paper


@dataclass(frozen=True)
class Found:
    """One extracted field value and the cue that justified it (kept as audit evidence)."""

    value: str
    cue: str


# --------------------------------------------------------------------------- text units

_ABBREV_END = re.compile(r"(?:\b[A-Z]|\bvs|\be\.g|\bi\.e|\bet al|\bapprox|\bno|\bfig|\bdr|\bst)\.$", re.I)
_SENT_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_INLINE_LABEL = re.compile(r"(?:^|(?<=[.!?:]\s))([A-Z][A-Za-z ,&/-]{2,60}?):\s+")
_LABEL_WORDS = re.compile(
    r"\b(background|objectives?|aims?|purpose|methods?|results?|findings|conclusions?|design|setting|"
    r"participants|patients|subjects|population|interventions?|exposures?|outcomes?|measures?|"
    r"endpoints?|comparators?|context|importance|introduction|interpretation|significance)\b",
    re.I,
)
_BACKGROUND_LABEL = re.compile(r"BACKGROUND|INTRODUCTION|CONTEXT|IMPORTANCE|RATIONALE")
_RESULTS_LABEL = re.compile(r"RESULTS?|FINDINGS|CONCLUSIONS?|INTERPRETATION|SIGNIFICANCE|DISCUSSION|LESSONS|RELEVANCE")
_STATS = re.compile(r"\d\s*%|\b[pP]\s*[<=>≤≥]|\bCI\b|\b(?:odds|hazard|risk|rate) ratio\b|\bN\.?S\.?\b")
_WORD = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")
_STOP_WORDS_AFTER = re.compile(r",\s+(?:i\.e\.|e\.g\.)|\s+(?:i\.e\.|e\.g\.)\s")


def sentences(text: str) -> list[str]:
    """Sentences of an abstract; does not break after initials, "vs." or "e.g."."""
    out: list[str] = []
    for piece in _SENT_BREAK.split(text.strip()):
        if out and _ABBREV_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        elif piece:
            out.append(piece)
    return out


SECTION_FIELDS = (
    ("O", re.compile(r"\b(?:OUTCOMES?|ENDPOINTS?|END POINTS?)\b")),
    ("I", re.compile(r"\bINTERVENTIONS?\b|\bEXPOSURES?\b")),
    ("C", re.compile(r"\bCOMPARATORS?\b|\bCOMPARISONS?\b|\bCONTROLS?\b")),
    ("P", re.compile(r"\bPARTICIPANTS\b|\bPATIENTS?\b|\bSUBJECTS\b|\bPOPULATION\b|\bSAMPLE\b")),
    ("StudyDesign", re.compile(r"\bDESIGN\b")),
    ("Setting", re.compile(r"\bSETTINGS?\b")),
)


_COMBINED = re.compile(r"\bMETHODS?\b|\bMATERIALS?\b|\bRESULTS?\b|\bCONCERNS?\b")


def labelled_fields(sections: list[Section]) -> dict[str, str]:
    """Field → section text for sections whose label names exactly one field ("INTERVENTIONS", "PATIENTS").

    Labels naming several fields ("DESIGN, SETTING, AND PARTICIPANTS") or mixed with methods/results
    ("PATIENTS AND METHODS") are left to the sentence cues, which read every section.
    """
    out: dict[str, str] = {}
    for section in sections:
        if not section.label or _COMBINED.search(section.label):
            continue
        named = [f for f, rx in SECTION_FIELDS if rx.search(section.label)]
        if len(named) == 1 and named[0] not in out:
            out[named[0]] = section.text
    return out


POP_NOUN = (
    r"(?:patients|subjects|participants|volunteers|adults|children|infants|neonates|newborns|adolescents|"
    r"women|men|outpatients|inpatients|individuals|people|persons|users|smokers|asthmatics|"
    r"mothers|families|students|workers|veterans|residents|survivors|recipients|"
    r"patient|subject|participant|individual|person|child|infant|woman|man)"
)


POP_WORDS = frozenset(_WORD.findall(POP_NOUN))


@dataclass(frozen=True)
class Section:
    label: str  # upper-cased label, "" when unlabelled
    text: str


def sections_of(paper: Paper) -> list[Section]:
    """Sections under the labels the article prints ("INTERVENTIONS:" inline in the abstract text), else the
    record's section labels (which may be NLM categories such as METHODS), else one unlabelled section."""
    text = paper.abstract or " ".join(s.text for s in paper.sections)
    cuts = [m for m in _INLINE_LABEL.finditer(text) if _is_label(m.group(1))]
    if not cuts and any(s.label for s in paper.sections):
        return [Section(s.label.strip().upper(), s.text.strip()) for s in paper.sections if s.text.strip()]
    if not cuts:
        return [Section("", text.strip())] if text.strip() else []
    lead = text[: cuts[0].start()].strip()
    found = [Section("", lead)] if lead else []
    for m, nxt in zip(cuts, [*cuts[1:], None], strict=True):
        body = text[m.end() : nxt.start() if nxt else len(text)].strip()
        if body:
            found.append(Section(m.group(1).strip().upper(), body))
    return found


def _is_label(label: str) -> bool:
    return label.isupper() or bool(_LABEL_WORDS.search(label)) and len(label.split()) <= 6


class Sentence:
    """One sentence, the label of its section, and what the rules ask of it often (computed once)."""

    __slots__ = ("text", "label", "words", "is_result", "is_background", "has_number")

    def __init__(self, text: str, label: str = ""):
        self.text, self.label = text, label
        self.words = frozenset(_WORD.findall(text.lower()))
        # in a results/conclusions section, or carrying statistics (percentages, p values, CIs)
        self.is_result = bool(_RESULTS_LABEL.search(label) or _STATS.search(text))
        self.is_background = bool(_BACKGROUND_LABEL.search(label))
        self.has_number = bool(_DIGIT.search(text) or self.words & NUMBER_WORDS)

    @property
    def has_people(self) -> bool:
        return bool(self.words & POP_WORDS)


@dataclass
class Doc:
    """One paper split into sections and sentences, shared by every field rule."""

    paper: Paper
    sections: list[Section] = field(init=False)

    def __post_init__(self) -> None:
        self.sections = sections_of(self.paper)

    @property
    def title(self) -> str:
        return self.paper.title

    @cached_property
    def body(self) -> str:
        return " ".join(s.text for s in self.sections)

    @cached_property
    def sentences(self) -> list[Sentence]:
        return [Sentence(t, s.label) for s in self.sections for t in sentences(s.text)]

    @cached_property
    def methods(self) -> list[Sentence]:
        """Sentences outside results/conclusions that carry no statistics."""
        return [s for s in self.sentences if not s.is_result]

    @cached_property
    def labelled(self) -> dict[str, str]:
        return labelled_fields(self.sections)

    @cached_property
    def _word_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for w in re.findall(r"[a-z][\w-]*", f"{self.title} {self.body}".lower()):
            counts[w] = counts.get(w, 0) + 1
        return counts

    def mentions(self, word: str) -> int:
        """How often `word` (lower case) occurs in the title and abstract."""
        return self._word_counts.get(word, 0)


def _clip_words(text: str, n: int = 30) -> str:
    text = _STOP_WORDS_AFTER.split(text, maxsplit=1)[0]
    words = text.split()
    text = " ".join(words[:n]) if len(words) > n else text.strip()
    return text.rstrip(" ,;:").removesuffix(".") if not re.search(r"\b\w\.\w\.$", text) else text.rstrip(" ,;:")


def _snippet(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _balanced_tail(phrase: str) -> str:
    """`phrase` without a leading fragment that closes a parenthesis it never opened ("pylori) eradication rate")."""
    depth = 0
    for i, ch in enumerate(phrase):
        depth += ch == "("
        if ch == ")":
            if depth == 0:
                return phrase[i + 1 :].strip()
            depth -= 1
    return phrase


def _split_top(text: str, separator: re.Pattern[str]) -> list[str]:
    """`text` split at `separator` matches outside parentheses and brackets."""
    depth, depth_at = 0, []
    for ch in text:
        depth_at.append(depth)
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
    cuts, start = [], 0
    for m in separator.finditer(text):
        if m.start() >= start and depth_at[m.start()] == 0:
            cuts.append(text[start : m.start()])
            start = m.end()
    cuts.append(text[start:])
    return cuts


# --------------------------------------------------------------------------- numbers

_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
NUMBER_WORDS = frozenset([*_UNITS, *_TENS, "hundred", "thousand"])
_NUM_WORD = "|".join(sorted(NUMBER_WORDS, key=lambda w: (-len(w), w)))
NUMBER = rf"(?:\b\d{{1,3}}(?:,\d{{3}})+\b|\b\d+\b|\b(?:{_NUM_WORD})(?:(?:[\s-]+|\s+and\s+)(?:{_NUM_WORD}))*\b)"


def parse_number(text: str) -> int | None:
    """An integer from digits ("1,282") or English number words ("One hundred and seven")."""
    text = text.strip().lower().replace(",", "")
    if text.isdigit():
        return int(text)
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", text):
        if word == "and":
            continue
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word == "thousand":
            total += max(current, 1) * 1000
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None
