"""The arms of a trial in its own words: which words of an abstract name an arm, and which side of a review question
an arm is on.

An arm is named by (`Lexicon.of`, all read from the abstract, none from a list of drugs):
- an agent or class of the class vocabulary (`evidence.classes.agents_in`: INN stems, named members, class names);
  a class named where the abstract names exactly one agent of it ("LMWH" beside "dalteparin") is that agent's arm;
- a control: placebo, "no <agent or treatment>", "without prophylaxis", usual, standard or current care,
  observation, a control group (`evidence.classes.PLACEBO` and the negations of the abstract's own agents);
- an arm ra's PICO rules read from the allocation sentence (`evidence.pico.arms.find_arms`) that names no agent
  ("acupuncture", "external pneumatic compression"): its words;
- a name the abstract defines for one of these in parentheses ("low molecular weight heparin (Fragmin)",
  "... once daily (group QD)", "combination treatment (CT, n = 20)"); when two names are defined for one agent
  (group QD and group BID of nadroparin) each is an arm of its own.
An arm's side (`arm_role`): the intervention ("I") when an agent it names belongs to one of the question's classes,
else the comparator ("C").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ra_agent.evidence.classes import PLACEBO, agents_in, classes_named, lineage

# Drugs the first rules named by INN stem or by name (kept: the class table covers most, not antacids or alginate)
DRUG = (
    r"(?:[a-z]+prazole|[a-z]+tidine|placebo|cisapride|metoclopramide|sucralfate|misoprostol|mosapride|domperidone|"
    r"alginate|antacids?|bismuth)"
)
NUMBER = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+(?:\.\d+)?)"
UNIT = r"(?:mg|milligrams?|µg|μg|mcg|IU|U|units?)"
QUALIFIER = (
    r"(?:(?:fixed|low|high|standard|full|reduced|prophylactic|therapeutic|adjusted|mini)[- ]dose|dose[- ]adjusted|"
    r"once[- ]daily|twice[- ]daily)"
)
# words that never name an arm on their own (a PICO arm made only of them adds nothing)
_GENERIC = frozenset(
    "treatment treatments therapy therapies group groups arm arms care drug drugs agent agents medication "
    "injection injections tablet tablets regimen regimens dose doses daily once twice standard usual current their "
    "the a an of with and or plus alone either same placebo patients subjects".split()
)
_CONTROL_WORDS = (
    r"(?:(?:their\s+)?(?:usual|standard|customary|conventional|current)\s+(?:care|therapy|treatment|medications?|"
    r"management)|observation(?:\s+alone)?|control\s+groups?|controls?)"
)
# words of a condition, a population or a setting: a PICO arm holding one names no treatment ("selected lymphomas",
# "metastatic lung", "first-line")
_NOT_TREATMENT = re.compile(r"\w+(?:omas?|itis|emia|aemia)\b|\b(?:cancers?|tumou?rs?|carcinomas?|diseases?|disorders?|"
                            r"syndromes?|failure|infections?|metastatic|advanced|line|stage|patients?|subjects?|"
                            r"children|adults?|women|men)\b", re.I)  # fmt: skip
# an arm named by what it combines ("combination treatment (CT, n = 20)", "combined therapy")
_COMBINATION = r"(?:combination|combined)\s+(?:therapy|treatment|group)"
_DEFINES = re.compile(r"\s*\((?:group\s+|arm\s+)?(?P<abbr>[A-Z][A-Za-z]{0,11}\d{0,3}|[A-Z]{1,3}\+[A-Z]{1,3}|"
                      r"[a-z][\w-]+(?:\s+[a-z][\w-]+)?\s+group)(?:\s*,\s*[nN]\s*=\s*\d+)?\)")  # fmt: skip
_GROUP_NAME = re.compile(r"\(?(?P<pre>group|arm)\s+(?P<abbr>[A-Z][A-Za-z]{0,3}\d{0,2})\)?|"
                         r"\((?P<abbr2>[A-Z]{2,4})(?:\s*,\s*[nN]\s*=\s*\d+)?\)")  # fmt: skip


def _flexible(word: str) -> str:
    """A regex for a written term: spaces and hyphens interchangeable ("low-molecular-weight heparin")."""
    return r"[\s-]+".join(re.escape(w) for w in re.split(r"[\s-]+", word.strip()))


def _norm(text: str) -> str:
    return re.sub(r"[\s-]+", " ", text.strip().lower())


@dataclass
class Lexicon:
    """The words of one abstract that name its arms, each with the arm key it stands for (see the module docstring)."""

    keys: dict[str, str] = field(default_factory=dict)  # written term (normalised) -> arm key
    exact: dict[str, str] = field(default_factory=dict)  # case-sensitive names (abbreviations) -> arm key
    classes: dict[str, str] = field(default_factory=dict)  # arm key -> the words that name its agents (for roles)

    @classmethod
    def of(cls, text: str, arms: Sequence[str] = (), *, class_names: bool = True) -> Lexicon:
        """The lexicon of an abstract (`text`: title and abstract) and of the arms ra's PICO names (`arms`);
        `class_names=False`: a class's name is no arm (a PICO field's "PPI alone" names no drug of its own)."""
        lex = cls()
        agents = [
            a for a in agents_in(text) if class_names or not (classes_named(a.word) or classes_named(a.word.upper()))
        ]
        members = [a for a in agents if not classes_named(a.word) and not classes_named(a.word.upper())]
        for agent in agents:
            key = agent.word
            if classes_named(agent.word) or classes_named(agent.word.upper()):  # a class's name: its only agent here
                below = {m.word for m in members if agent.cls in lineage(m.cls)}
                key = next(iter(below)) if len(below) == 1 else agent.cls
            lex.keys.setdefault(_norm(agent.word), key)
        for m in re.finditer(rf"\b{DRUG}\b", text, re.I):
            lex.keys.setdefault(
                _norm(m.group(0)), "antacid" if m.group(0).lower() == "antacids" else m.group(0).lower()
            )
        for m in PLACEBO.finditer(text):
            written = _norm(m.group(0))
            lex.keys.setdefault(written, "placebo" if written.startswith("placebo") else written)
        negatable = "|".join(_flexible(w) for w in sorted(lex.keys, key=len, reverse=True) if lex.keys[w] != "placebo")
        negation = rf"\b(?:no|without)\s+(?:(?:additional|active|specific|any)\s+)?(?:{negatable + '|' if negatable else ''}" \
                   r"prophylaxis|treatment|therapy|anticoagulation)\b"  # fmt: skip
        for m in re.finditer(negation, text, re.I):
            lex.keys.setdefault(_norm(m.group(0)), _norm(m.group(0)))
        for m in re.finditer(rf"\b{_CONTROL_WORDS}\b", text, re.I):
            lex.keys.setdefault(_norm(m.group(0)), _norm(re.sub(r"^their\s+", "", m.group(0), flags=re.I)))
        for m in re.finditer(rf"\b{_COMBINATION}\b", text, re.I):
            lex.keys.setdefault(_norm(m.group(0)), "combination")
        for arm in arms:
            lex._add_pico_arm(arm, text)
        lex._add_defined_names(text)
        return lex

    def _add_pico_arm(self, arm: str, text: str) -> None:
        """A PICO arm naming no agent and no control: its words, and its last word alone when distinctive."""
        phrase = re.sub(r"^(?:(?:the|a|an|their|either|traditional|chinese)\s+)+", "", arm.strip(), flags=re.I)
        phrase = re.split(r"\s*[(,;]|\s+(?:for|in|at|with|on|by)\s+", phrase)[0]
        words = phrase.split()
        if not 1 <= len(words) <= 4 or agents_in(phrase) or PLACEBO.search(phrase) or _norm(phrase) in self.keys:
            return
        if all(w.lower() in _GENERIC or not re.fullmatch(r"[A-Za-z-]{3,}", w) for w in words):
            return
        if _NOT_TREATMENT.search(phrase):  # a population or a line of therapy the PICO arm picked up
            return
        key = _norm(phrase)
        self.keys.setdefault(key, key)
        last = words[-1].lower()
        if len(last) >= 6 and last not in _GENERIC and re.search(rf"\b{re.escape(last)}\b", text, re.I):
            self.keys.setdefault(last, key)

    def _add_defined_names(self, text: str) -> None:
        """Names defined in parentheses right after an arm term ("heparin (Fragmin)", "once daily (group QD)")."""
        pattern = self.pattern()
        defined: dict[str, list[str]] = {}
        for m in pattern.finditer(text):
            tail = text[m.end() : m.end() + 60]
            d = _DEFINES.match(tail) or _group_after(tail)
            if d:
                abbr = d.group("abbr") or ""
                if abbr and abbr.lower() not in self.keys and abbr.upper() not in ("MG", "IU", "SC", "IV"):
                    defined.setdefault(self.key(m.group("drug")), []).append(abbr)
        for key, names in defined.items():
            names = list(dict.fromkeys(names))
            for name in names:
                abbreviation = name.isupper() or len(name) <= 3
                if len(names) > 1:  # two names for one agent: two arms ("group QD", "group BID")
                    arm = f"{key} ({'group ' if len(name) <= 3 else ''}{name})"
                else:  # an abbreviation is the term; a word of its own ("Fragmin") is shown with it
                    arm = key if abbreviation else f"{key} ({name})"
                if abbreviation:
                    self.exact[name] = arm
                else:
                    self.keys[_norm(name)] = arm
                if not abbreviation and len(names) == 1:  # "Fragmin": every name of the agent is this arm
                    for written, k in list(self.keys.items()):
                        if k == key:
                            self.keys[written] = arm

    def pattern(self, dose: str = "") -> re.Pattern[str]:
        """The abstract's arm terms, longest first, as the group `drug` of one regex."""
        loose = sorted(self.keys, key=len, reverse=True)
        pieces = [_flexible(w) for w in loose] + [rf"(?-i:{re.escape(w)})" for w in sorted(self.exact, key=len,
                                                                                                 reverse=True)]  # fmt: skip
        terms = "|".join(pieces) or r"(?!x)x"
        return re.compile(dose.replace("{TERMS}", terms) if dose else rf"\b(?P<drug>{terms})\b", re.I)

    def key(self, written: str) -> str:
        """The arm key a written term stands for."""
        if written in self.exact:
            return self.exact[written]
        return self.keys.get(_norm(written), _norm(written))

    def arm_keys(self) -> set[str]:
        return set(self.keys.values()) | set(self.exact.values())


def _group_after(tail: str) -> re.Match[str] | None:
    """ "… qd, group QD)" or "(CT, n = 20)" within the parenthesis that follows an arm term (at most three words
    after it: "nadroparin calcium QD (…, group QD)")."""
    paren = re.match(r"(?:\s+[A-Za-z]+){0,3}\s*\(([^()]{0,50})\)", tail)
    if paren is None:
        return None
    inner = paren.group(1)
    m = re.search(r"(?:^|[,;]\s*)(?:group|arm)\s+(?P<abbr>[A-Z][A-Za-z]{0,3}\d{0,2})\s*$", inner)
    return m or re.fullmatch(r"(?P<abbr>[A-Z]{2,4})(?:\s*,\s*[nN]\s*=\s*\d+)?", inner)


def is_control(arm: str) -> bool:
    """Whether an arm label names a control: placebo, no treatment, usual or standard care, observation."""
    return bool(PLACEBO.search(arm) or re.match(rf"^(?:no|without)\b|^{_CONTROL_WORDS}$", arm, re.I))


def arm_role(arm: str, classes: Iterable[str]) -> str:
    """ "I" when the arm names an agent of one of `classes` (or below one), else "C" (placebo, no treatment, another
    class, a non-drug arm). A control ("no warfarin") is "C" whatever it names."""
    if is_control(arm):
        return "C"
    wanted = tuple(classes)
    return "I" if any(c in lineage(a.cls) for a in agents_in(arm) for c in wanted) else "C"


def agents_of(arm: str) -> list[str]:
    """The classes of the agents an arm label names, nearest first (empty for a control or a non-drug arm)."""
    return [] if is_control(arm) else [a.cls for a in agents_in(arm)]


def mentioned(text: str, words: Iterable[str]) -> bool:
    return any(re.search(rf"\b{_flexible(w)}\b", text, re.I) for w in words)
