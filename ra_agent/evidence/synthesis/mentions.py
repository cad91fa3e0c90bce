"""Arm mentions in an abstract's sentences: the terms of its lexicon (`arms.Lexicon`) with their doses or qualifiers,
the abbreviations it defines for an arm, bare doses of the drug named beside them, and arms joined by "/", "+" or
"plus" as one combined arm (read by `extract`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ra_agent.evidence.classes import agents_in
from ra_agent.evidence.synthesis.arms import NUMBER as AMOUNT
from ra_agent.evidence.synthesis.arms import QUALIFIER, UNIT, Lexicon
from ra_agent.evidence.synthesis.numbers import normalise_text

__all__ = ["Mention", "Words", "arm_label", "arm_mentions", "arms_in", "distinct_arms", "dose_of"]


def _dose(name: str) -> str:
    return rf"(?P<{name}>{AMOUNT})\s*-?\s*(?P<{name}_unit>{UNIT})\b"


# an arm mention: a term of the abstract's lexicon (`{TERMS}`) with a dose or a qualifier before or after it
_ARM = (
    rf"(?:(?P<qual>{QUALIFIER})\s+)?(?:{_dose('pre')}\s+(?:(?:once|twice)\s+(?:a\s+)?daily\s+)?(?:dose\s+)?(?:of\s+)?(?:oral\s+)?)?"
    r"\b(?P<drug>{TERMS})\b"
    rf"(?:\s*\((?P<abbr>[A-Z][A-Za-z]{{1,5}}\d{{0,3}})\))?(?:\s*,?\s*\(?{_dose('post')})?"
)
_BARE_DOSE = re.compile(rf"\b(?P<dose>{AMOUNT})\s*(?:-\s*)?(?P<dose_unit>mg)\b", re.I)


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    drug: str  # the arm key (`arms.Lexicon`): an agent, "placebo", a control or a name the abstract defines
    dose: str  # "20 mg", "3000 IU", a qualifier ("fixed-dose"), or "" when the sentence names none


@dataclass(frozen=True)
class Words:
    """The arm vocabulary of one abstract: its lexicon, the regex of its arm mentions and its aliases."""

    lexicon: Lexicon
    arm: re.Pattern[str]
    aliases: dict[str, tuple[str, str]]
    background: frozenset[str] = frozenset()  # agents every combined arm shares (given to all arms)
    dosed: str = ""  # the abstract's one drug named with several doses ("" when none or several)

    @classmethod
    def of(cls, text: str, arms: Sequence[str] = (), *, class_names: bool = True) -> Words:
        lexicon = Lexicon.of(text, arms, class_names=class_names)
        words = cls(lexicon, lexicon.pattern(_ARM), {})
        words = cls(lexicon, words.arm, _aliases(text, words))
        found = arm_mentions(text, words)
        combos = {m.drug for m in found if " + " in m.drug}
        shared = (
            frozenset.intersection(*(frozenset(c.split(" + ")) for c in combos)) if len(combos) > 1 else frozenset()
        )
        doses: dict[str, set[str]] = {}
        for m in found:
            if m.dose[:1].isdigit() and m.drug != "placebo":
                doses.setdefault(m.drug, set()).add(m.dose)
        dosed = [d for d, v in doses.items() if len(v) > 1 and agents_in(d)]
        return cls(lexicon, words.arm, words.aliases, shared, dosed[0] if len(dosed) == 1 else "")


def dose_of(m: re.Match[str], *names: str) -> str:
    """ "20 mg", "3000 IU" of the first dose group of `m` that matched, else its qualifier ("fixed-dose"), else ""."""
    for name in names:
        if m.group(name):
            unit = m.group(f"{name}_unit").lower()
            unit = "mg" if unit.startswith(("mg", "milligram")) else "µg" if unit in ("µg", "μg", "mcg") else "IU"
            return f"{m.group(name).replace(',', '')} {unit}"
    qual = m.groupdict().get("qual")
    return re.sub(r"[\s-]+", "-", qual.lower()) if qual else ""


def arm_mentions(text: str, words: Words, *, combine: bool = True) -> list[Mention]:
    """Arm mentions in order: arm terms with their dose, aliases ("PANT", "OM20") and bare doses of the drug named
    just before them (else just after: "5 mg, 10 mg or 20 mg of apixaban")."""
    found = [Mention(m.start(), m.end(), *(words.aliases.get(m.group("drug")) or
                                            (words.lexicon.key(m.group("drug")), dose_of(m, "pre", "post"))))
             for m in words.arm.finditer(text)]  # fmt: skip
    for abbr, (drug, dose) in words.aliases.items():
        for m in re.finditer(rf"\b{re.escape(abbr)}\b", text):
            if not any(f.start <= m.start() < f.end for f in found):
                found.append(Mention(m.start(), m.end(), drug, dose))
    found = sorted(found, key=lambda f: f.start)
    found = _combined(text, found, words.background) if combine else found
    out: list[Mention] = []
    for m in _BARE_DOSE.finditer(text):  # "esomeprazole 40 mg (94.1%) and 20 mg (89.9%)": 20 mg is esomeprazole
        if any(f.start <= m.start() < f.end for f in found):
            continue
        before = [f for f in found if f.end <= m.start()]
        after = [f for f in found if f.start >= m.end()]
        dose = dose_of(m, "dose")
        if before and before[-1].drug != "placebo" and m.start() - before[-1].end < 80:
            out.append(Mention(m.start(), m.end(), before[-1].drug, dose))
        elif not before and after and after[0].drug != "placebo" and after[0].start - m.end() < 80:
            out.append(Mention(m.start(), m.end(), after[0].drug, dose))
        elif not before and not after and words.dosed:  # "in the 100-mg group": the abstract's one dosed drug
            out.append(Mention(m.start(), m.end(), words.dosed, dose))
    return sorted(found + out, key=lambda f: f.start)


_JOINED = re.compile(r"\s*(?:/|\+|\bplus\b)\s*", re.I)


def _combined(text: str, found: list[Mention], background: frozenset[str] = frozenset()) -> list[Mention]:
    """Mentions joined by "/", "+" or "plus" are one arm ("insulin/metformin": "insulin + metformin"); an agent every
    such combination of the abstract shares (`background`) is left out of the arm's name ("metformin")."""
    out: list[Mention] = []
    for f in found:
        prev = out[-1] if out else None
        if prev and _JOINED.fullmatch(text[prev.end : f.start]) and prev.drug != f.drug:
            parts = [d for d in dict.fromkeys((*prev.drug.split(" + "), f.drug)) if d not in background]
            out[-1] = Mention(prev.start, f.end, " + ".join(parts) or prev.drug, prev.dose or f.dose)
        else:
            out.append(f)
    return out


def arms_in(text: str) -> list[tuple[str, str]]:
    """(arm label, drug) of every arm the rules find in `text` ("omeprazole 20 mg", "omeprazole"), in order."""
    text = normalise_text(text)
    mentions = arm_mentions(text, Words.of(text, class_names=False), combine=False)  # each drug of a combination
    return list(dict.fromkeys((arm_label(m.drug, m.dose), m.drug) for m in mentions))


def _aliases(text: str, words: Words) -> dict[str, tuple[str, str]]:
    """Abbreviations the abstract defines for an arm: "pantoprazole (PANT) 40 mg", "lansoprazole 30 mg daily (LAN30)"."""
    out: dict[str, tuple[str, str]] = {}
    for m in words.arm.finditer(text):
        if m.group("abbr") and m.group("abbr").lower() not in words.lexicon.keys:
            out[m.group("abbr")] = (words.lexicon.key(m.group("drug")), dose_of(m, "pre", "post"))
    for m in words.arm.finditer(text):
        tail = re.match(r"[^()]{0,25}?\((?P<abbr>[A-Z]{1,4}\d{0,3})\)", text[m.end() :])
        dose = dose_of(m, "pre", "post")
        if tail and dose[:1].isdigit() and tail.group("abbr").lower() not in {"ms", "mg", "iu"}:
            out.setdefault(tail.group("abbr"), (words.lexicon.key(m.group("drug")), dose))
    return out


def arm_label(drug: str, dose: str) -> str:
    if not dose:
        return drug
    return f"{drug} {dose}" if dose[:1].isdigit() else f"{dose} {drug}"


def distinct_arms(arms: Iterable[Mention]) -> list[Mention]:
    seen: dict[tuple[str, str], Mention] = {}
    for a in arms:
        seen.setdefault((a.drug, a.dose), a)
    return list(seen.values())
