"""Arm-level outcome data from trial abstracts by rules: events / total (or mean, dispersion and n) per arm, time
point, outcome, analysis set and the source sentence, in any field (rules:arm-numbers-v3).

Arms are named in the trial's own words (`arms.Lexicon`): the agents and classes of the class vocabulary, placebo
and no-treatment controls, the arms ra's PICO rules read from the allocation sentence, and the names the abstract
defines for them ("(group QD)", "(Fragmin)"); arms joined by "/", "+" or "plus" are one combined arm. No list of
drugs is read, except the first rules' acid-suppressant names the class table lacks (antacids, alginate).

A datum is kept only when both of its numbers are read from the abstract: a count pair ("98/167", "77 of the 103",
"88 (71%) of the 124") in one sentence, a stated count ("22 patients (14.1%)", "13 [3%]", "nine in the LMWH group",
"no case in group BID", "7 vs 1" after the two arms it compares, "0, 0, 2 and 1 …, respectively"), or a percentage,
together with that arm's size stated in a sentence that allocates patients to the arm ("rabeprazole 20 mg (n =
188)", "102 patients received rabeprazole", "group QD: 55 patients", the patients of a crossover trial) or as the
denominator of the arm's count pairs. A percentage becomes a count only when some integer count reproduces it at
the precision it is printed with, never from a per-protocol sentence, and not over a size that another printed
percentage of the arm cannot be a share of; of several sizes of an arm (randomised, analysed) the one the percentage
reproduces is taken. Thresholds, ranges, demographics and effect measures ("by more than 20%", "82% female", "risk
reduction 19%") are not results. Each datum carries the sentence(s) it came from, so every number can be traced back
to the abstract; the extractor is named in every datum.

Outcomes are named by class (the first rules' healing, relapse, remission, eradication, symptom relief, and
thrombosis, bleeding, death, infection, response, adverse events) with the abstract's own words beside
(`outcome_words`). Harms are read like any outcome; pharmacokinetic, pH, gastrin, baseline, preference, screening,
withdrawal and completion sentences are skipped. The analysis set is "PP" when the result or its arm size is over
completers, evaluable or assessable patients, "ITT" when over the numbers randomised or the abstract says its
analysis is by intention to treat, else "".

Continuous results are read as "mean ± dispersion" ("12.1 +/- 7.9", "12.1 (SD 7.9)"; a "from A to B" baseline is
left out) with the arm size from an allocation sentence or an "n = 19" beside the value: a standard deviation is
kept as stated, a standard error becomes SD = SE × √n (Cochrane Handbook 6.5.2.2), an unlabelled "±" is kept as
printed (`spread`, dispersion "±") with no SD, so it is listed but pooled only once a reviewer states what it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ra_agent.evidence.classes import agents_in
from ra_agent.evidence.pico.text import NUMBER, POP_NOUN, parse_number, sections_of, sentences
from ra_agent.evidence.synthesis.arms import DRUG, QUALIFIER, UNIT, Lexicon, arm_role
from ra_agent.evidence.synthesis.arms import NUMBER as AMOUNT
from ra_agent.models import Paper

EXTRACTOR = "rules:arm-numbers-v3"
__all__ = ["DRUG", "EXTRACTOR", "OUTCOME_CLASSES", "ArmDatum", "arm_role", "arms_in", "extract_arm_data",
           "time_points"]  # fmt: skip


def _dose(name: str) -> str:
    return rf"(?P<{name}>{AMOUNT})\s*-?\s*(?P<{name}_unit>{UNIT})\b"


# an arm mention: a term of the abstract's lexicon (`{TERMS}`) with a dose or a qualifier before or after it
_ARM = (
    rf"(?:(?P<qual>{QUALIFIER})\s+)?(?:{_dose('pre')}\s+(?:(?:once|twice)\s+(?:a\s+)?daily\s+)?(?:dose\s+)?(?:of\s+)?(?:oral\s+)?)?"
    r"\b(?P<drug>{TERMS})\b"
    rf"(?:\s*\((?P<abbr>[A-Z][A-Za-z]{{1,5}}\d{{0,3}})\))?(?:\s*,?\s*\(?{_dose('post')})?"
)
_BARE_DOSE = re.compile(rf"\b(?P<dose>{AMOUNT})\s*(?:-\s*)?(?P<dose_unit>mg)\b", re.I)
# "matching ranitidine placebo", "lansoprazole placebo": a dummy, not an arm
_DUMMY = re.compile(rf"\b(?:matching|identical|dummy)\s+(?:{DRUG}\s+)?placebos?\b|\b{DRUG}[\s-]+placebos?\b|"
                    r"\bplacebo (?:at|in the) (?:bedtime|evening|morning)\b", re.I)  # fmt: skip
_WORD_NUMBER = re.compile(NUMBER, re.I)

_PAIR = re.compile(  # brackets may stand for parentheses: "13 [3%]"
    r"\b(?P<e>\d+)\s*(?:\(\s*(?P<p1>\d+(?:\.\d+)?)\s*%\s*\)\s*)?(?:/|out of|of)\s*(?:the\s+)?(?P<t>\d+)\b"
    r"(?:\s*(?:patients|subjects|cases))?(?:\s*[(\[]\s*(?P<p2>\d+(?:\.\d+)?)\s*%\s*[)\]])?"
)
_COUNT_PERCENT = re.compile(r"\b(?P<e>\d+)\s*(?:(?:patients|subjects|children|cases)\s*)?[(\[]\s*(?P<p>\d+(?:\.\d+)?)\s*%\s*[)\]]"
                            r"(?!\s*(?:/|out of|of)\s*(?:the\s+)?\d)")  # fmt: skip
# a count with no percentage tied to an arm named right after it: "nine in the LMWH group", "no case in group BID",
# "three major bleeds on LMWH and none on placebo", "No major haemorrhages were observed in the enoxaparin arm"
_COUNT_WORDS = r"(?:[a-z-]+\s+){0,4}?"
# a percentage that states a threshold or a change, not a share of an arm ("by more than 20%", "a 50% drop")
_THRESHOLD = re.compile(r"\b(?:more|less|greater|fewer|higher|lower) than\s+\d+(?:\.\d+)?\s*%|\b(?:at least|up to|over|"
                        r"under|by|a)\s+\d+(?:\.\d+)?\s*%|[<>≤≥]\s*\d+(?:\.\d+)?\s*%|\d+(?:\.\d+)?\s*%\s*(?:or (?:more|greater)|"
                        r"reduction|decrease|increase|drop|fall|rise|improvement in)|\b(?:risk|relative|absolute)\s+"
                        r"(?:risk\s+)?(?:reduction|increase|difference)s?\s+(?:of\s+)?\d+(?:\.\d+)?\s*%|\d+(?:\.\d+)?\s*%\s*"
                        r"(?:female|male|women|men|girls|boys|white|black|caucasian)\b|\b(?:almost|approximately|about|"
                        r"nearly|around|roughly|~)\s*\d+(?:\.\d+)?\s*%|\d+(?:\.\d+)?\s*%\s*to\s*\d+(?:\.\d+)?\s*%", re.I)  # fmt: skip
_PERCENT = re.compile(r"(?<![\d.])(?P<p>\d+(?:\.\d+)?)\s*%(?!\s*(?:CI|confidence))")
_PERCENT_ENUM = re.compile(
    r"(?<![\d.])(?P<p>\d+(?:\.\d+)?)(?=\s*(?:,|and|%?\s*vs\.?|%?\s*-)\s*(?:\d+(?:\.\d+)?\s*(?:,|and)\s*)*\d+(?:\.\d+)?\s*%)"
)
_CI_PAREN = re.compile(
    r"\((?:[^()]*\b(?:CI|confidence)\b[^()]*)\)|\bCI\b[^;)]*|\b(?:difference|gain)\s+(?:of\s+)?\d+(?:\.\d+)?\s*%|"
    r"\bP\s*[<=>≤≥]\s*[\d.]+",
    re.I,
)
_TIME = re.compile(
    r"\b(?:(?:weeks?|wks?|months?|days?)\s+(?P<n1>\d+)|(?P<n2>\d+)(?:\s*(?:,|and|or|to|-)\s*\d+)*[\s-]*"
    r"(?P<u2>weeks?|wks?|months?|days?|mo|years?|hours?|h)\b|(?P<n3>one|two|three|four|six|eight|twelve)[\s-]+"
    r"(?P<u3>weeks?|months?|years?|hours?))",
    re.I,
)
_TIME_LIST = re.compile(
    r"(?P<first>\d+)\s*(?:,|and|or)\s*(?P<second>\d+)[\s-]*(?P<unit>weeks?|wks?|months?|days?)\b", re.I
)
_UNIT_WEEKS = {"w": 1.0, "m": 52 / 12, "d": 1 / 7, "y": 52.0, "h": 1 / 168}
_SMALL = {"one": 1, "two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "twelve": 12}

_SKIP = re.compile(r"\bwithdr[ae]w|\bgastrin|\bscreened\b|\bcompleted the (?:study|trial)|\bsmok|\bpH\b|"
                   r"(?<!glucose )\bconcentrations?\b|pharmacokinetic|\bAUC\b|\bbaseline\b|\bpreferred\b|\bpreference|"
                   r"\bunderwent\b", re.I)  # fmt: skip
_PER_PROTOCOL = re.compile(r"per[- ]protocol|protocol[- ]correct|\bcompleted\b|\bevaluable\b|\bassessable\b|"
                           r"\bunderwent\b|\badequate for\b", re.I)  # fmt: skip
_ITT = re.compile(r"intent(?:ion)?[- ]to[- ]treat|\bm?ITT\b|\brandomi[sz]ed\b|\brandomly (?:assigned|allocated)", re.I)
# Outcome classes, first match wins: the first rules' classes (healing, relapse, remission, eradication, symptom
# relief), and the kinds of outcome a review pools in any field (thrombotic events, bleeding, death, infection,
# response, adverse events), named after MeSH headings; the words of the abstract are kept beside the class.
_OUTCOMES = (
    ("remission", re.compile(r"\b(?:neither|no|without|free (?:of|from))\b[^.;]{0,60}\b(?:relapse|recurren)", re.I)),
    ("thrombosis", re.compile(r"\bthrombos[ie]s|\bthromb(?:i|us|otic|oembol\w*)\b|\bthromboembol|(?-i:\br?(?:DVT|VTE|CVT|PE)s?\b)|"
                              r"\bembol(?:i|ism|us)\b|\bocclusi", re.I)),
    ("relapse", re.compile(r"\brelapse|\brecurren", re.I)),
    ("remission", re.compile(r"\bremission|remained healed|\bmaintain", re.I)),
    ("healing", re.compile(r"\bheal", re.I)),
    ("eradication", re.compile(r"\beradicat|\bcure", re.I)),
    ("symptom relief", re.compile(r"\breli(?:ef|eved)|\bresol|symptom[- ]free|free (?:from|of)|asymptomatic|pain[- ]free|"
                                  r"\bimprove|headache[- ](?:free|response)|\bheadache\b[^.;]{0,30}\bdisappeared|"
                                  r"decrease in pain", re.I)),
    ("bleeding", re.compile(r"\bbleed|\bha?emorrha|\bha?ematoma", re.I)),
    ("death", re.compile(r"\bdeaths?\b|\bdied\b|\bmortality\b|\bfatal", re.I)),
    ("infection", re.compile(r"\binfecti|\bsepsis\b|\bbacter(?:a)?emia", re.I)),
    ("response", re.compile(r"\bresponse|\bresponders?\b|\bsatisf(?:ied|action)\b|\bprevented\b|\bcompliance", re.I)),
    ("adverse events", re.compile(r"\badverse|\bside[- ]effects?|\btoxicit|\bheadaches?\b|\bdiarrh|\bnausea|"
                                  r"\bdizziness|\bsomnolence|\bhypoglyc(?:a)?emi", re.I)),
)  # fmt: skip
HARMS = ("bleeding", "death", "adverse events")  # outcome classes that are harms
OUTCOME_CLASSES = tuple(dict.fromkeys(name for name, _ in _OUTCOMES))
_RESPECTIVELY = re.compile(r"\b(?:respectively|respective|corresponding)\b", re.I)


@dataclass(frozen=True)
class ArmDatum:
    """One arm's dichotomous result at one time point, with the sentences its numbers came from."""

    pmid: int
    arm: str  # "rabeprazole 20 mg"
    drug: str  # "rabeprazole"
    outcome: str  # "healing", "relapse", "remission", "symptom relief", "eradication"
    weeks: float | None
    events: int
    total: int
    sentence: str  # the sentence stating the result
    size_sentence: str  # the sentence stating the arm size when the total came from there, else ""
    extractor: str = EXTRACTOR
    mean: float | None = None  # a continuous result: mean and standard deviation over `total` patients
    sd: float | None = None  # None for a continuous result whose "±" the abstract does not name (see `spread`)
    outcome_words: str = ""  # the abstract's words for the outcome ("symptomatic CVC-associated thromboses")
    analysis: str = ""  # "ITT" (the numbers randomised, or the abstract says so), "PP" (completers, evaluable), ""
    spread: float | None = None  # a continuous result's dispersion as printed
    dispersion: str = ""  # what `spread` is: "SD", "SE" or "±" (the abstract does not say)

    @property
    def continuous(self) -> bool:
        return self.mean is not None

    @property
    def percent(self) -> float:
        return 100.0 * self.events / self.total

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    drug: str  # the arm key (`arms.Lexicon`): an agent, "placebo", a control or a name the abstract defines
    dose: str  # "20 mg", "3000 IU", a qualifier ("fixed-dose"), or "" when the sentence names none


@dataclass(frozen=True)
class _Words:
    """The arm vocabulary of one abstract: its lexicon, the regex of its arm mentions and its aliases."""

    lexicon: Lexicon
    arm: re.Pattern[str]
    aliases: dict[str, tuple[str, str]]
    background: frozenset[str] = frozenset()  # agents every combined arm shares (given to all arms)
    dosed: str = ""  # the abstract's one drug named with several doses ("" when none or several)

    @classmethod
    def of(cls, text: str, arms: Sequence[str] = (), *, class_names: bool = True) -> _Words:
        lexicon = Lexicon.of(text, arms, class_names=class_names)
        words = cls(lexicon, lexicon.pattern(_ARM), {})
        words = cls(lexicon, words.arm, _aliases(text, words))
        found = _mentions(text, words)
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


def _dose_of(m: re.Match[str], *names: str) -> str:
    """ "20 mg", "3000 IU" of the first dose group of `m` that matched, else its qualifier ("fixed-dose"), else ""."""
    for name in names:
        if m.group(name):
            unit = m.group(f"{name}_unit").lower()
            unit = "mg" if unit.startswith(("mg", "milligram")) else "µg" if unit in ("µg", "μg", "mcg") else "IU"
            return f"{m.group(name).replace(',', '')} {unit}"
    qual = m.groupdict().get("qual")
    return re.sub(r"[\s-]+", "-", qual.lower()) if qual else ""


# ----------------------------------------------------------------------------- sentence analysis


def normalise_text(text: str) -> str:
    """The text the rules read: number words as digits ("One hundred and two" → "102"), dummy placebos blanked.
    Data quote the original sentence, not this one."""

    def digits(m: re.Match[str]) -> str:
        value = parse_number(m.group(0))
        return m.group(0) if value is None or m.group(0).isdigit() else str(value)

    text = _WORD_NUMBER.sub(digits, text)
    return _DUMMY.sub(lambda m: " " * len(m.group(0)), text)


def _mentions(text: str, words: _Words, *, combine: bool = True) -> list[_Mention]:
    """Arm mentions in order: arm terms with their dose, aliases ("PANT", "OM20") and bare doses of the drug named
    just before them (else just after: "5 mg, 10 mg or 20 mg of apixaban")."""
    found = [_Mention(m.start(), m.end(), *(words.aliases.get(m.group("drug")) or
                                            (words.lexicon.key(m.group("drug")), _dose_of(m, "pre", "post"))))
             for m in words.arm.finditer(text)]  # fmt: skip
    for abbr, (drug, dose) in words.aliases.items():
        for m in re.finditer(rf"\b{re.escape(abbr)}\b", text):
            if not any(f.start <= m.start() < f.end for f in found):
                found.append(_Mention(m.start(), m.end(), drug, dose))
    found = sorted(found, key=lambda f: f.start)
    found = _combined(text, found, words.background) if combine else found
    out: list[_Mention] = []
    for m in _BARE_DOSE.finditer(text):  # "esomeprazole 40 mg (94.1%) and 20 mg (89.9%)": 20 mg is esomeprazole
        if any(f.start <= m.start() < f.end for f in found):
            continue
        before = [f for f in found if f.end <= m.start()]
        after = [f for f in found if f.start >= m.end()]
        dose = _dose_of(m, "dose")
        if before and before[-1].drug != "placebo" and m.start() - before[-1].end < 80:
            out.append(_Mention(m.start(), m.end(), before[-1].drug, dose))
        elif not before and after and after[0].drug != "placebo" and after[0].start - m.end() < 80:
            out.append(_Mention(m.start(), m.end(), after[0].drug, dose))
        elif not before and not after and words.dosed:  # "in the 100-mg group": the abstract's one dosed drug
            out.append(_Mention(m.start(), m.end(), words.dosed, dose))
    return sorted(found + out, key=lambda f: f.start)


_JOINED = re.compile(r"\s*(?:/|\+|\bplus\b)\s*", re.I)


def _combined(text: str, found: list[_Mention], background: frozenset[str] = frozenset()) -> list[_Mention]:
    """Mentions joined by "/", "+" or "plus" are one arm ("insulin/metformin": "insulin + metformin"); an agent every
    such combination of the abstract shares (`background`) is left out of the arm's name ("metformin")."""
    out: list[_Mention] = []
    for f in found:
        prev = out[-1] if out else None
        if prev and _JOINED.fullmatch(text[prev.end : f.start]) and prev.drug != f.drug:
            parts = [d for d in dict.fromkeys((*prev.drug.split(" + "), f.drug)) if d not in background]
            out[-1] = _Mention(prev.start, f.end, " + ".join(parts) or prev.drug, prev.dose or f.dose)
        else:
            out.append(f)
    return out


def arms_in(text: str) -> list[tuple[str, str]]:
    """(arm label, drug) of every arm the rules find in `text` ("omeprazole 20 mg", "omeprazole"), in order."""
    text = normalise_text(text)
    mentions = _mentions(text, _Words.of(text, class_names=False), combine=False)  # each drug of a combination
    return list(dict.fromkeys((_arm_label(m.drug, m.dose), m.drug) for m in mentions))


def _aliases(text: str, words: _Words) -> dict[str, tuple[str, str]]:
    """Abbreviations the abstract defines for an arm: "pantoprazole (PANT) 40 mg", "lansoprazole 30 mg daily (LAN30)"."""
    out: dict[str, tuple[str, str]] = {}
    for m in words.arm.finditer(text):
        if m.group("abbr") and m.group("abbr").lower() not in words.lexicon.keys:
            out[m.group("abbr")] = (words.lexicon.key(m.group("drug")), _dose_of(m, "pre", "post"))
    for m in words.arm.finditer(text):
        tail = re.match(r"[^()]{0,25}?\((?P<abbr>[A-Z]{1,4}\d{0,3})\)", text[m.end() :])
        dose = _dose_of(m, "pre", "post")
        if tail and dose[:1].isdigit() and tail.group("abbr").lower() not in {"ms", "mg", "iu"}:
            out.setdefault(tail.group("abbr"), (words.lexicon.key(m.group("drug")), dose))
    return out


def time_points(text: str) -> list[tuple[int, float]]:
    """(position, weeks) of each time point: "after 4 and 8 weeks" gives two, "wk 4", "12 months", "day 14"."""
    out: list[tuple[int, float]] = []
    for m in _TIME_LIST.finditer(text):
        unit = _UNIT_WEEKS[m.group("unit")[0].lower()]
        out += [(m.start("first"), round(int(m.group("first")) * unit, 1)),
                (m.start("second"), round(int(m.group("second")) * unit, 1))]  # fmt: skip
    for m in _TIME.finditer(text):
        if any(m.start() <= pos < m.end() for pos, _ in out):
            continue
        if m.group("n1"):
            value, unit = int(m.group("n1")), m.group(0)[0]
        elif m.group("n2"):
            value, unit = int(m.group("n2")), m.group("u2")[0]
        else:
            value, unit = _SMALL[m.group("n3").lower()], m.group("u3")[0]
        if re.search(r"\bage[ds]?\b[\s,:(]*(?:\w+\s+){0,2}$", text[max(0, m.start() - 25) : m.start()], re.I):
            continue  # "mean age, 37.6 years"
        if unit.lower() == "h" and not (_HOUR_BEFORE.search(text[: m.start()]) or _HOUR_AFTER.match(text[m.end() :])):
            continue  # "over 24 hours", "24-h pH": a measurement window, not when the outcome was assessed
        weeks = value * _UNIT_WEEKS[unit.lower()]
        out.append((m.start(), round(weeks, 3 if unit.lower() == "h" else 1)))
    return sorted(out)


_HOUR_BEFORE = re.compile(r"\b(?:at|within|after|by|until)\s+$", re.I)
_HOUR_AFTER = re.compile(r"\s*(?:post-?dos\w*|after (?:dosing|treatment|the dose|drug))", re.I)


def outcome_class(text: str) -> str:
    return next((name for name, rx in _OUTCOMES if rx.search(text)), "")


_FUNCTION = re.compile(r"(?:the|a|an|of|in|with|and|or|was|were|had|has|have|occurred|developed|observed|there|"
                       r"patients?|rates?|incidences?|frequency|number|at|by|for|to|on|no|any|total|both|all|"
                       r"\d.*)$", re.I)  # fmt: skip


def outcome_words(text: str, arm_rx: re.Pattern[str] | None = None) -> str:
    """The abstract's words for the outcome of a sentence: the words its outcome class matched, with up to two
    words before them that are not function words or arm names ("symptomatic CVC-associated thromboses", "major
    bleeding"); "" when no class matches."""
    rx = next((rx for _, rx in _OUTCOMES if rx.search(text)), None)
    if rx is None:
        return ""
    m = rx.search(text)
    assert m is not None
    end = m.end() + len(re.match(r"[\w-]*", text[m.end() :]).group(0))  # type: ignore[union-attr]
    tail = re.match(r"\s+(?:events?|episodes?|rates?|responses?)\b", text[end:])
    end += tail.end() if tail else 0
    masked = arm_rx.sub(lambda a: "\x00" * len(a.group(0)), text) if arm_rx else text
    start = m.start() - len(re.search(r"[\w-]*$", text[: m.start()]).group(0))  # type: ignore[union-attr]
    for _ in range(2):
        prev = re.search(r"([A-Za-z][\w-]*)\s+$", masked[:start])
        if not prev or _FUNCTION.fullmatch(prev.group(1)) or "\x00" in prev.group(0):
            break
        start = prev.start(1)
    return " ".join(text[start:end].split())


@dataclass(frozen=True)
class _Number:
    start: int
    events: int | None  # a stated count
    total: int | None
    percent: float | None
    decimals: int
    mean: float | None = None  # a continuous result ("12.1 +/- 7.9")
    sd: float | None = None


_MEAN_SD = re.compile(
    r"(?<![\d.,])(?P<mean>[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*%?\s*(?:±|\+/-|\+/−|\+-)\s*"
    r"(?P<sd>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)\s*%?"
    r"|(?<![\d.])(?P<mean2>[-−]?\d+(?:\.\d+)?)\s*\(\s*(?:SD|SEM?|s\.d\.)\s*[=:,]?\s*(?P<sd2>\d+(?:\.\d+)?)\s*\)",
    re.I,
)
_SD_WORDS = re.compile(r"\bSD\b|\bs\.d\.|(?i:standard deviation)")
_SE_WORDS = re.compile(r"\bSEM?\b|(?i:standard error)")


def _continuous(text: str) -> list[_Number]:
    """The "mean ± dispersion" values of a sentence, in order; the first value of "from A to B" (a baseline) is not
    a result."""
    out = []
    for m in _MEAN_SD.finditer(text):
        if re.search(r"\bfrom\s+(?:a\s+mean\s+of\s+)?$", text[: m.start()], re.I) or re.match(
            r"\s*(?:[^\s\d(),;]+\s*)?to\s+[-−]?\d", text[m.end() :]
        ):
            continue
        mean, sd = (
            (m.group("mean"), m.group("sd")) if m.group("mean") is not None else (m.group("mean2"), m.group("sd2"))
        )
        value = lambda v: float(v.replace("−", "-").replace(",", ""))  # noqa: E731
        out.append(_Number(m.start(), None, None, None, 0, value(mean), value(sd)))
    return out


def dispersion(sentence: str, abstract: str) -> str:
    """What a "±" of this abstract is: "SD", "SE" (the sentence's own word first, then the abstract's), else ""."""
    for text in (sentence, abstract):
        sd, se = bool(_SD_WORDS.search(text)), bool(_SE_WORDS.search(text))
        if sd != se:
            return "SD" if sd else "SE"
    return ""


def _numbers(text: str) -> list[_Number]:
    """Count pairs and percentages in order; percentages inside a CI or P parenthesis and differences are skipped,
    and so are the values of "mean ± dispersion" (read by `_continuous`)."""
    masked = _MEAN_SD.sub(lambda m: " " * len(m.group(0)), text)
    masked = _CI_PAREN.sub(lambda m: " " * len(m.group(0)), masked)
    masked = _THRESHOLD.sub(lambda m: " " * len(m.group(0)), masked)
    # an allocation parenthesis ("(n=408; 324 [79%] on fixed-dose …)") describes the arm, it states no result
    masked = re.sub(r"\(\s*n\s*=[^()]*\)", lambda m: " " * len(m.group(0)), masked, flags=re.I)
    out: list[_Number] = []
    taken: list[tuple[int, int]] = []
    for m in _PAIR.finditer(masked):
        e, t = int(m.group("e")), int(m.group("t"))
        chain = masked[max(0, m.start() - 1) : m.start()] == "/" or masked[m.end("t") : m.end("t") + 1] == "/"
        if 0 <= e <= t and t > 1 and not chain and not re.match(r"\s*(?:mg|days?|weeks?|months?|hours?|h\b)",
                                                                   masked[m.end("t") :]):  # fmt: skip
            p = m.group("p1") or m.group("p2")
            out.append(_Number(m.start(), e, t, float(p) if p else None, 0))
            taken.append((m.start(), m.end()))
            # "69% (100/144)": the percentage before the pair is the same number
            before = re.search(r"(\d+(?:\.\d+)?)\s*%\s*\(\s*$", masked[: m.start()])
            if before:
                taken.append((before.start(), m.start()))
    for m in _COUNT_PERCENT.finditer(masked):  # "61 (98%) patients who received lansoprazole"
        if not any(a <= m.start() < b for a, b in taken):
            p = m.group("p")
            out.append(_Number(m.start(), int(m.group("e")), None, float(p), len(p.partition(".")[2])))
            taken.append((m.start(), m.end()))
    for rx in (_PERCENT, _PERCENT_ENUM):
        for m in rx.finditer(masked):
            if any(a <= m.start() < b for a, b in taken) or re.match(r"\s*(?:mg|patients)", masked[m.end() :]):
                continue
            p = m.group("p")
            pair = next((n for n in out if n.total and n.start > m.end() and n.start - m.end() < 40), None)
            if pair and pair.total and pair.events is not None and not re.search(r"\d", masked[m.end() : pair.start]):
                if round(100 * pair.events / pair.total, len(p.partition(".")[2])) == float(p):
                    continue  # "4%, 7 of 174": the pair's own percentage
            out.append(_Number(m.start(), None, None, float(p), len(p.partition(".")[2])))
            taken.append((m.start(), m.end()))
    for m in re.finditer(r"(?<![\d.])(?P<a>\d+)\s+(?:vs\.?|versus)\s+(?P<b>\d+)(?![\d.%]|\s*(?:%|mg|years?|months?|weeks?|"
                         r"days?|hours?))", masked):  # fmt: skip
        if not any(a <= m.start() < b for a, b in taken):  # "(7 vs 1, p=0.07)": two counts, one per arm
            out += [_Number(m.start("a"), int(m.group("a")), None, None, 0),
                    _Number(m.start("b"), int(m.group("b")), None, None, 0)]  # fmt: skip
    return sorted(out, key=lambda n: n.start)


def _versus_pairs(text: str, numbers: list[_Number], arms: list[_Mention]
                  ) -> list[tuple[_Number, _Mention]]:  # fmt: skip
    """Two results joined by "vs"/"versus" right after the two arms they compare, in the order the sentence names
    them ("with warfarin compared with no warfarin (7 vs 1", "compared with B, A was superior (13 [3%] vs 34 [7%]":
    A then B)."""
    out: list[tuple[_Number, _Mention]] = []
    for first, second in zip(numbers, numbers[1:], strict=False):
        between = text[first.start : second.start]
        if not re.search(r"\b(?:vs\.?|versus)\s*$", re.sub(r"[\[(][^\])]*[\])]", "", between).strip() + " "):
            continue
        earlier = [n.start for n in numbers if n.start < first.start]
        since = max(earlier, default=0)
        named = _distinct(a for a in arms if since <= a.start < first.start)
        if len(named) != 2:
            continue
        lead = text[max(since, 0) : named[0].start]
        order = (
            named[::-1]
            if re.search(r"\b(?:compared (?:with|to)|versus|vs\.?|than)\s+(?:the\s+)?$", lead, re.I)
            else named
        )
        out += [(first, order[0]), (second, order[1])]
    return out


_NOT_EVENTS = re.compile(r"\b(?:treated|receiv\w*|randomi[sz]ed|allocated|assigned|taking|given|included|enrolled|"
                         r"evaluable|analy[sz]ed|aged?|years?|months?|weeks?|days?)\b", re.I)  # fmt: skip


def _counts_in_arms(text: str, arms: list[_Mention], taken: list[_Number]) -> list[tuple[_Number, _Mention]]:
    """Counts tied to the arm named right after them, with no percentage: "nine in the LMWH group", "four cases in
    group QD and no case in group BID", "three major bleeds on LMWH and none on placebo", "Three placebo patients
    had …", "No major haemorrhages were observed in the enoxaparin arm". Allocation words between count and arm
    ("patients treated with") make it an arm size, not a count."""
    out: list[tuple[_Number, _Mention]] = []
    for a in arms:
        before = text[max(0, a.start - 80) : a.start]
        m = re.search(r"\b(?P<e>\d+|[Nn]o|[Nn]one)\s+(?!(?:wks?|weeks?|days?|months?|years?|hours?|h|mg|g|ml|IU|units?)\b)"
                      r"(?P<w>(?:[A-Za-z-]+\s+){0,5}?)(?:in|on|among)\s+(?:the\s+)?"
                      r"(?:group\s+)?$|\b(?P<e2>\d+)\s+$", before)  # fmt: skip
        if m is None:
            continue
        start = a.start - len(before) + m.start()
        if any(n.start <= start <= n.start + 12 for n in taken) or (m.group("w") and _NOT_EVENTS.search(m.group("w"))):
            continue
        if (m.group("e") or "").isdigit() and re.fullmatch(rf"\s*(?:{POP_NOUN}\s+)?", m.group("w") or ""):
            continue  # "769 patients in the nadroparin group": the arm's size, not a count of events
        if m.group("e2") and not re.match(r"\s*(?:patients|subjects|cases)\b", text[a.end :]):
            continue
        if not re.match(r"\s*(?:group|arm|patients|subjects)?\b", text[a.end :]):
            continue
        word = (m.group("e") or m.group("e2")).lower()
        events = 0 if word in ("no", "none") else int(word)
        out.append((_Number(start, events, None, None, 0), a))
    return out


def _count_list(text: str) -> list[_Number]:
    """A list of bare counts in a "respectively" sentence: "there were 0, 0, 2 and 1 major bleeds, respectively"."""
    m = re.search(
        r"\b(\d+)((?:\s*,\s*\d+)*),?\s+and\s+(\d+)\s+(?:[A-Za-z-]+\s+){0,4}?[A-Za-z-]+,?\s+respectively", text
    )
    if m is None or re.search(r"%|\d\s*(?:mg|years?|months?|weeks?|days?)\b", m.group(0)):
        return []
    values = [m.group(1), *re.findall(r"\d+", m.group(2)), m.group(3)]
    positions = [m.start() + i for i in range(len(values))]
    return [_Number(pos, int(v), None, None, 0) for pos, v in zip(positions, values, strict=True)]


def count_from_percent(percent: float, decimals: int, total: int) -> int | None:
    """The count whose share of `total` prints as `percent` at its precision (None when no integer does)."""
    events = round(percent * total / 100)
    return events if 0 <= events <= total and round(100 * events / total, decimals) == percent else None


# ----------------------------------------------------------------------------- arm sizes


def _arm_label(drug: str, dose: str) -> str:
    if not dose:
        return drug
    return f"{drug} {dose}" if dose[:1].isdigit() else f"{dose} {drug}"


Sizes = dict[str, list[tuple[int, str]]]  # arm label -> the sizes stated for it, with their sentences, in order


def _add_size(sizes: Sizes, a: _Mention, n: int, sentence: str) -> None:
    found = sizes.setdefault(_arm_label(a.drug, a.dose), [])
    if n > 1 and all(n != m for m, _ in found):
        found.append((n, sentence))


def arm_sizes(units: list[str], words: _Words) -> Sizes:
    """Arm label → the patients allocated to it (with the sentence saying so), from allocation sentences: "(n = 188)"
    after an arm, "102 patients received rabeprazole 20 mg", "pantoprazole n=226", "(62 taking lansoprazole", "221
    and 212 patients, respectively", "99 patients were randomized to LMWH and 87 to placebo", "group QD: 55
    patients", "769 patients in the nadroparin group", "(combination group)" closing the clause that allocates 27
    patients, "155 patients in each treatment group", the patients of a crossover trial (each takes every arm);
    then the denominators of count pairs ("30/126 for placebo"). Per-protocol and completion counts are not arm sizes.
    An arm may have several (randomised, analysed): a percentage picks the one it reproduces."""
    sizes: Sizes = {}
    pairs: list[tuple[_Mention, int, str]] = []
    crossover = any(re.search(r"cross-?over", u, re.I) for u in units)
    for raw in units:
        text = normalise_text(raw)
        arms = _mentions(text, words)
        if crossover and re.search(r"randomi[sz]|cross-?over", text, re.I) and not _PER_PROTOCOL.search(text):
            m = re.search(rf"\b(\d+)\s+(?:[A-Za-z-]+\s+|\([^()]*(?:\([^()]*\)[^()]*)*\)\s*){{0,6}}?{POP_NOUN}\b", text)
            for a in _distinct(_mentions(" ".join(normalise_text(u) for u in units), words)) if m else ():
                _add_size(sizes, a, int(m.group(1)), raw) if m else None
        if not arms:
            continue
        for m in re.finditer(r"\bn\s*=\s*(\d+)", text, re.I):
            named_after = [a for a in arms if re.fullmatch(r"\s*in (?:the|each)\s+", text[m.end() : a.start])]
            if named_after:  # "(n=166 in the pantoprazole group, n=162 in the omeprazole group)"
                _add_size(sizes, named_after[0], int(m.group(1)), raw)
                continue
            before = [a for a in arms if a.end <= m.start() and m.start() - a.end < 150]
            if before and not re.search(r"\bn\s*=", text[before[-1].end : m.start()], re.I):
                _add_size(sizes, before[-1], int(m.group(1)), raw)
        for m in re.finditer(r"\b(\d+)\s+(?:patients|subjects)\b(?:\s+with\s+[\w\s-]{0,40}?)?\s*(?:received|were given|"
                             r"were treated with|taking|on|given|to|were randomi[sz]ed to(?: receive)?|were (?:randomly )?"
                             r"(?:assigned|allocated) to|in (?:the|each)|(?:were )?included in (?:the )?)?\s+(?:either\s+)?"
                             r"(?:with\s+)?(?:group\s+)?|\band\s+(\d+)\s+to\s+", text):  # fmt: skip
            after = [a for a in arms if a.start == m.end()]
            every = (
                after
                and re.match(r"\s*(?:,|or|and)\s", text[after[0].end :])
                and any(
                    a.start > after[0].end
                    and re.fullmatch(r"\s*(?:,|or|and)\s+(?:to\s+)?", text[after[0].end : a.start])
                    for a in arms
                )
            )  # "113 patients were randomized to nadroparin or placebo": the trial, not one arm
            if after and not every and not _PER_PROTOCOL.search(text[max(0, m.start() - 60) : m.end()]):
                _add_size(sizes, after[0], int(m.group(1) or m.group(2)), raw)
        for m in re.finditer(r"[(,]\s*(\d+)\s+(?:taking|receiving|on|given)\s+", text):
            after = [a for a in arms if a.start == m.end()]
            if after:
                _add_size(sizes, after[0], int(m.group(1)), raw)
        for (
            a
        ) in arms:  # "pantoprazole (PANT) 40 mg (111 patients," / "ranitidine (RAN) 300 mg (111, aged" / "group QD: 55"
            m = re.match(r"\s*(?:daily|once daily|o\.?d\.?|b\.?i\.?d\.?)?\s*\(\s*(\d+)\s*(?:patients)?\s*[,;)]|"
                         rf"\s*:\s*(\d+)\s+{POP_NOUN}", text[a.end :])  # fmt: skip
            if m and int(m.group(1) or m.group(2)) > 3:
                _add_size(sizes, a, int(m.group(1) or m.group(2)), raw)
        for m in re.finditer(r"\b(\d+)\s+(?:patients|subjects)\s+were\s+randomi[sz]ed\s+to\s+[^;.]{0,120}?\((?=[^()]*group\))",
                             text):  # fmt: skip
            inside = [a for a in arms if a.start > m.end() - 1 and a.start - m.end() < 20]
            if inside:  # "27 patients were randomized to continue OHAs … (combination group)"
                _add_size(sizes, inside[0], int(m.group(1)), raw)
        m = re.search(r"\b(\d+)\s+and\s+(\d+)\s+(?:patients|subjects),?\s+respectively", text)
        distinct = _distinct(arms)
        if m and len(distinct) == 2:
            for a, n in zip(distinct, (m.group(1), m.group(2)), strict=True):
                _add_size(sizes, a, int(n), raw)
        for number in _numbers(text):
            for a in _nearest_after(text, number, arms):
                if number.total is not None and not _PER_PROTOCOL.search(text):
                    pairs.append((a, number.total, raw))
    each = next((m for u in units if (m := re.search(r"\b(\d+)\s+(?:patients|subjects)\s+in each (?:treatment )?(?:group|arm)",
                                                     normalise_text(u)))), None)  # fmt: skip
    for (
        a,
        n,
        raw,
    ) in pairs:  # the denominators of count pairs: after the allocation sentences, or first when they are one
        found = sizes.setdefault(_arm_label(a.drug, a.dose), [])
        same = [c for c in found if c[0] == n]
        if same:
            found.remove(same[0])
            found.insert(0, same[0])
        else:
            _add_size(sizes, a, n, raw)
    if each:
        for a in _distinct(_mentions(" ".join(normalise_text(u) for u in units), words)):
            _add_size(sizes, a, int(each.group(1)), each.string)
    return {k: v for k, v in sizes.items() if v}


def _nearest_after(text: str, n: _Number, arms: list[_Mention]) -> list[_Mention]:
    """The arm a count pair is over when it names it right after ("30/126 for placebo", "6 of 21 patients in the
    nadroparin group")."""
    if n.total is None:
        return []
    after = [a for a in arms if a.start > n.start and re.fullmatch(r"[^;(]{0,40}?\b(?:for|in|on|with|taking|receiving|"
                                                                    r"treated with|after)\s+(?:the\s+)?",
                                                                    text[n.start : a.start])]  # fmt: skip
    return after[:1]


def _distinct(arms: Iterable[_Mention]) -> list[_Mention]:
    seen: dict[tuple[str, str], _Mention] = {}
    for a in arms:
        seen.setdefault((a.drug, a.dose), a)
    return list(seen.values())


# ----------------------------------------------------------------------------- results


def _group_assign(
    text: str, numbers: list[_Number], arms: list[_Mention], times: list[float], outcome: str, arm_rx: re.Pattern[str]
) -> list[tuple[_Number, _Mention, float | None, str]]:
    """Numbers listed in arm order ("respectively", or not interleaved with the arms), one group per time point, or
    one group per outcome named before it ("pain (39% vs 25%), well-being (55% vs 41%)") at the one time point."""
    k = len(arms)
    if k == 0 or len(numbers) % k:
        return []
    groups = len(numbers) // k
    per_time = groups > 1 and len(times) == groups
    if groups > 1 and not per_time and len(times) > 1:
        return []
    out = []
    for g in range(groups):
        t = times[g] if per_time else (times[0] if times else None)
        named = outcome
        if groups > 1 and not per_time:
            start = numbers[g * k - 1].start if g else 0
            segment = text[start : numbers[g * k].start]
            if not outcome_class(segment) or (
                g and arm_rx.search(segment)
            ):  # a list per arm, not per outcome: not read
                return []
            named = f"{outcome_class(segment)}: {_phrase(segment)}"
        for i, arm in enumerate(arms):
            out.append((numbers[g * k + i], arm, t, named))
    return out


def _phrase(segment: str) -> str:
    """The outcome words of a list segment: ", improvement in overall well-being (" → "improvement in overall well-being"."""
    words = re.sub(r"^[^a-zA-Z]*(?:and\s+)?|[\s(]*$", "", segment.split(")")[-1])
    return " ".join(words.split()[-6:])


def _arm_major_direction(text: str, arms: list[_Mention]) -> str:
    """ "before" when each arm heads its list ("pantoprazole: 84% and 90%"), "after" when each list ends with its arm
    ("61% and 74%, respectively, for omeprazole"), else "" (the sentence is not a list per arm)."""
    if all(re.match(r"\s*(?:group)?\s*:", text[a.end :]) for a in arms):
        return "before"
    if all(re.search(r"respectively,?\s+(?:for|in|with)\s+(?:the\s+)?$", text[: a.start]) for a in arms):
        return "after"
    return ""


def _arm_major(
    numbers: list[_Number], arms: list[_Mention], times: list[float], outcome: str, direction: str
) -> list[tuple[_Number, _Mention, float | None, str]]:
    """Each number to the arm that heads or ends its list; an arm's numbers take the time points in order."""
    by_arm: dict[tuple[str, str], list[tuple[_Number, _Mention]]] = {}
    for n in numbers:
        near = (
            [a for a in arms if a.end <= n.start][-1:]
            if direction == "before"
            else [a for a in arms if a.start > n.start][:1]
        )
        if near:
            by_arm.setdefault((near[0].drug, near[0].dose), []).append((n, near[0]))
    out = []
    for found in by_arm.values():
        if len(found) == len(times):
            out += [(n, a, t, outcome) for (n, a), t in zip(found, times, strict=True)]
        elif len(found) == 1 and len(times) <= 1:
            out.append((found[0][0], found[0][1], times[0] if times else None, outcome))
    return out


def _nearest(
    text: str, numbers: list[_Number], arms: list[_Mention], times: list[tuple[int, float]], outcome: str
) -> list[tuple[_Number, _Mention, float | None, str]]:
    """Each number to its arm: one named just before it ("lansoprazole (92%)"), else the first named after it and
    before the next number ("67/86 in the omeprazole group"), else the nearest before; one number per arm and time."""
    out = []
    used: set[tuple[str, str, float | None]] = set()
    taken: set[tuple[str, str, None]] = set()
    for i, n in enumerate(numbers):
        nxt = numbers[i + 1].start if i + 1 < len(numbers) else 10**9
        tight = [
            a
            for a in arms
            if a.end <= n.start
            and (a.drug, a.dose, None) not in taken
            and re.fullmatch(
                r"[\s,:(]*(?:(?:groups?|dose|arm|-?treated|patients|subjects)[\s,:(]*)*", text[a.end : n.start]
            )
        ]
        following = [a for a in arms if n.start < a.start < nxt]
        preceding = [a for a in arms if a.end <= n.start]
        arm = (tight or following[:1] or preceding[-1:] or [None])[-1 if tight else 0]
        if arm is None:
            continue
        before = [w for pos, w in times if pos <= n.start]
        after = [w for pos, w in times if pos > n.start]
        t = before[-1] if before else (after[0] if after else None)
        key = (arm.drug, arm.dose, t)
        if key not in used:
            used.add(key)
            taken.add((arm.drug, arm.dose, None))
            out.append((n, arm, t, outcome))
    return out


def extract_arm_data(paper: Paper) -> list[ArmDatum]:
    """Every arm-level result the abstract states with both its numbers, dichotomous (events/total) or continuous
    (mean, SD, n); see the module docstring."""
    units = [u for section in sections_of(paper) for u in sentences(section.text)]
    if not units:
        return []
    whole = normalise_text(" ".join(units))
    words = _Words.of(f"{paper.title} {whole}", _pico_arms(paper))
    sizes = arm_sizes(units, words)
    doses: dict[str, set[str]] = {}
    for a in _mentions(whole, words):
        if a.dose:
            doses.setdefault(a.drug, set()).add(a.dose)
    out: list[ArmDatum] = []
    seen: set[tuple[str, str, str, float | None]] = set()
    not_denominators: set[tuple[str, int]] = set()
    itt = bool(_ITT_SAID.search(whole)) and not _PER_PROTOCOL.search(whole)
    sized = _distinct(a for a in _mentions(whole, words) if _sizes_of(_arm_label(a.drug, a.dose), a.drug, sizes, doses))
    two_arms = sized if len(sized) == 2 else []
    lasttime_points: list[float] = []
    last_arms: list[_Mention] = []
    last_outcome = ""
    for raw in units:
        text = normalise_text(raw)
        times = time_points(text)
        arms = _mentions(text, words)
        outcome = outcome_class(text) or last_outcome
        numbers, continuous = _numbers(text), _continuous(text)
        if times:
            lasttime_points = [w for _, w in times]
        kind = (dispersion(raw, whole) or "±") if continuous else ""
        respectively = bool(_RESPECTIVELY.search(text))
        if respectively and not numbers and outcome:
            numbers = _count_list(text)
        counted = _counts_in_arms(text, arms, numbers) if outcome else []
        if _SKIP.search(text) or not (((numbers or counted) and outcome) or continuous):
            last_arms, last_outcome = (arms or last_arms), outcome
            continue
        distinct = _distinct(arms) or (_distinct(last_arms) if respectively else [])
        if not distinct:
            continue
        layout = _Layout(text, arms, distinct, times, lasttime_points, respectively, words.arm)
        at = [w for _, w in times] or lasttime_points
        placed = [(n, a, at[-1] if at else None, outcome) for n, a in counted]
        paired = [] if respectively else _versus_pairs(text, numbers, arms)
        placed += [(n, a, at[-1] if at else None, outcome) for n, a in paired]
        rest = [n for n in numbers if all(n is not m for m, _ in paired)]
        placed += layout.assign(rest, outcome) if outcome and (rest or not paired) else []
        found = [_datum(paper.pmid, raw, number, arm, weeks, named, sizes, doses)
                 for number, arm, weeks, named in placed] if outcome else []  # fmt: skip
        for number, arm, _, _ in placed:  # a printed decimal percentage no integer of a size reproduces
            if number.events is None and number.percent is not None and number.decimals:
                label = _arm_label(arm.drug, arm.dose or next(iter(doses.get(arm.drug, {""}))))
                for n, _ in _sizes_of(label, arm.drug, sizes, doses):
                    if count_from_percent(number.percent, number.decimals, n) is None:
                        not_denominators.add((label, n))
        if continuous:
            named = _continuous_outcome(text, continuous[0].start, words.arm)
            if len(_distinct(arms)) >= 2:  # a between-arm result, each arm named in the sentence
                placed = layout.assign(continuous, named, nearest=len(continuous) == len(_distinct(arms)))
            else:
                placed = _one_arm_continuous(text, continuous, arms, two_arms, times, lasttime_points, named, words.arm)
            found += [_continuous_datum(paper.pmid, raw, number, arm, weeks, this, kind, sizes, doses)
                      for number, arm, weeks, this in placed]  # fmt: skip
        words_here = outcome_words(text, words.arm)
        for datum in found:
            if datum is None:
                continue
            datum = replace(datum, outcome_words=datum.outcome_words or words_here, analysis=_analysis(datum, itt))
            key = (datum.arm, datum.outcome, datum.outcome_words, datum.weeks)
            if key not in seen:
                seen.add(key)
                out.append(datum)
        last_arms, last_outcome = (arms or last_arms), outcome
    # a size over which one of the arm's printed percentages cannot be a share is not that arm's denominator: the
    # percentages converted with it are dropped (their denominator is another, unstated one)
    return [d for d in out if not ((d.arm, d.total) in not_denominators and d.size_sentence and not d.continuous
                                   and not re.search(rf"\b{d.events}\b", d.sentence))]  # fmt: skip


@dataclass(frozen=True)
class _Layout:
    """How a sentence lays its numbers out over its arms (see `assign`)."""

    text: str
    arms: list[_Mention]
    distinct: list[_Mention]
    times: list[tuple[int, float]]
    lasttime_points: list[float]
    respectively: bool
    arm_rx: re.Pattern[str]

    def assign(
        self, numbers: list[_Number], outcome: str, *, nearest: bool = True
    ) -> list[tuple[_Number, _Mention, float | None, str]]:
        """Each number to its arm and time point: per-arm lists ("pantoprazole: 84% and 90%, respectively;
        omeprazole: …", "61% and 74%, respectively, for omeprazole"), arm-ordered lists ("respectively", or numbers
        not interleaved with the arms), else (when `nearest`) the arm named nearest to each number."""
        if not numbers:
            return []
        arms = self.arms
        interleaved = bool(arms) and any(arms[0].start < n.start < arms[-1].end for n in numbers)
        time_list = [w for _, w in self.times] or self.lasttime_points
        major = _arm_major_direction(self.text, arms) if interleaved else ""
        if major:
            return _arm_major(numbers, arms, time_list, outcome, major)
        if self.respectively or not interleaved:
            return _group_assign(self.text, numbers, self.distinct, time_list, outcome, self.arm_rx)
        if not nearest:
            return []
        return _nearest(self.text, numbers, arms, self.times or [(0, w) for w in self.lasttime_points[-1:]], outcome)


_LEAD_WORDS = re.compile(r"\b(?:was|were|is|are|of|in|with|the|a|an|mean|means|and|than|to|for|at|by|from|on|"
                         r"significantly|respectively|group|groups|patients|treatment|reduced|increased|decreased|"
                         r"changed?|vs|versus)\b", re.I)  # fmt: skip


def _one_arm_continuous(text: str, values: list[_Number], arms: list[_Mention], two_arms: list[_Mention],
                        times: list[tuple[int, float]], last_times: list[float], outcome: str,
                        arm_rx: re.Pattern[str]) -> list[tuple[_Number, _Mention, float | None, str]]:  # fmt: skip
    """Continuous values of a sentence naming one arm: each value its own time point ("For the combination group, FPG
    decreased … to 8.9 ± 3.0 at 3 months and to 8.6 ± 2.5 at 6 months"), or, in a two-arm trial, "a versus b" after
    the arm that is the sentence's subject or stands right before a ("Metformin reduced fasting glucose (6.1 ± 0.4 vs
    6.4 ± 0.4)", "less with insulin/metformin: 0.9 ± 0.4 … versus 2.7 ± 0.4"): a is that arm's, b the other arm's."""
    named = _distinct(a for a in arms if a.end <= values[0].start)
    if len(_distinct(arms)) != 1 or not named:
        return []
    arm = named[0]
    at = [w for _, w in times] or last_times[-1:]
    if len(values) == len(at) and (len(values) > 1 or not two_arms):
        return [(v, arm, w, outcome) for v, w in zip(values, at, strict=True)]
    lead = not re.search(r"[A-Za-z]", re.sub(r"^(?:the|in|with|after|for|administration of|treatment with)\b", "",
                                              text[: arm.start].strip(), flags=re.I))  # fmt: skip
    close = re.fullmatch(r"[\s:(,]*(?:[A-Za-z-]+\s+){0,3}?[\s:(,]*", text[arm.end : values[0].start])
    other = [a for a in two_arms if (a.drug, a.dose) != (arm.drug, arm.dose) and a.drug != arm.drug]
    if not (lead or close) or len(other) != 1 or not any(a.drug == arm.drug for a in two_arms):
        return []
    w = at[0] if len(at) == 1 else None
    out: list[tuple[_Number, _Mention, float | None, str]] = []
    for first, second in zip(values, values[1:], strict=False):  # each "a vs b" pair, its own outcome words
        between = re.sub(r"^[-−]?[\d.,]+\s*%?\s*(?:±|\+/-|\+/−|\+-)\s*[\d.,]+", "", text[first.start : second.start])
        if re.search(r"\b(?:vs\.?|versus)\s*$", between):
            named = _continuous_outcome(text, first.start, arm_rx) if out else outcome
            out += [(first, arm, w, named), (second, other[0], w, named)]
    return out


def _continuous_outcome(text: str, first_value: int, arm_rx: re.Pattern[str]) -> str:
    """The words naming a continuous result: up to four words before its first value that are not arm names or
    function words ("the GSRS reflux score was 2.67 ± 0.4 with …" → "GSRS reflux score")."""
    before = arm_rx.sub(" ", text[:first_value])
    words = [w for w in re.findall(r"[A-Za-z][\w-]*", before.split("(")[-1] if "(" in before[-25:] else before)
             if not _LEAD_WORDS.fullmatch(w)]  # fmt: skip
    return "mean " + " ".join(words[-4:]).lower() if words else "mean (outcome not named)"


def _continuous_datum(pmid: int, sentence: str, number: _Number, arm: _Mention, weeks: float | None, outcome: str,
                      kind: str, sizes: Sizes, doses: dict[str, set[str]]) -> ArmDatum | None:  # fmt: skip
    """A continuous datum needs its arm size from an allocation sentence ("n = 19" beside the value first); a
    standard error becomes SE × √n."""
    dose = arm.dose or (next(iter(doses[arm.drug])) if len(doses.get(arm.drug, ())) == 1 else "")
    label = _arm_label(arm.drug, dose)
    beside = re.match(r"[^;()]{0,20}?,\s*n\s*=\s*(\d+)", sentence[number.start :]) if number.start >= 0 else None
    candidates = [(int(beside.group(1)), sentence)] if beside else _sizes_of(label, arm.drug, sizes, doses)
    size = candidates[0] if candidates else None
    if size is None or number.mean is None or number.sd is None or _PER_PROTOCOL.search(sentence):
        return None
    sd = number.sd if kind == "SD" else round(number.sd * math.sqrt(size[0]), 4) if kind == "SE" else None
    return ArmDatum(pmid, label, arm.drug, outcome, weeks, 0, size[0], sentence,
                    "" if size[1] == sentence else size[1], mean=number.mean, sd=sd, spread=number.sd,
                    dispersion=kind)  # fmt: skip


def _datum(pmid: int, sentence: str, number: _Number, arm: _Mention, weeks: float | None, outcome: str,
           sizes: Sizes, doses: dict[str, set[str]]) -> ArmDatum | None:  # fmt: skip
    dose = arm.dose or (next(iter(doses[arm.drug])) if len(doses.get(arm.drug, ())) == 1 else "")
    label = _arm_label(arm.drug, dose)
    if number.events is not None and number.total is not None:
        return ArmDatum(pmid, label, arm.drug, outcome, weeks, number.events, number.total, sentence, "")
    candidates = _sizes_of(label, arm.drug, sizes, doses)
    if number.events is not None:  # a stated count: its percentage picks the arm size it reproduces (else the first)
        fits = [c for c in candidates if number.percent is None and number.events <= c[0] or
                number.percent is not None and count_from_percent(number.percent, number.decimals, c[0]) == number.events]  # fmt: skip
        if not fits:
            return None
        size = fits[0]
        return ArmDatum(pmid, label, arm.drug, outcome, weeks, number.events, size[0], sentence,
                        "" if size[1] == sentence else size[1])  # fmt: skip
    if number.percent is None or _PER_PROTOCOL.search(sentence):
        return None
    fits = [(c, e) for c in candidates if (e := count_from_percent(number.percent, number.decimals, c[0])) is not None]
    if not fits:
        return None
    size, events = fits[0]
    return ArmDatum(pmid, label, arm.drug, outcome, weeks, events, size[0], sentence,
                    "" if size[1] == sentence else size[1])  # fmt: skip


_ITT_SAID = re.compile(r"intent(?:ion)?[- ]to[- ]treat|\bm?ITT\b", re.I)


def _analysis(d: ArmDatum, itt_abstract: bool) -> str:
    """ "PP" when the result or its arm size is over completers, evaluable or assessable patients; "ITT" when it is
    over the numbers randomised (the size sentence allocates them, or the abstract's analysis is by intention to
    treat and names no per-protocol set); else ""."""
    if _PER_PROTOCOL.search(d.sentence) or _PER_PROTOCOL.search(d.size_sentence):
        return "PP"
    if _ITT.search(d.sentence) or _ITT.search(d.size_sentence) or itt_abstract:
        return "ITT"
    return ""


def _pico_arms(paper: Paper) -> list[str]:
    """The arms ra's PICO rules read from the abstract's allocation sentence (I and C), in the trial's words."""
    from ra_agent.evidence.pico.arms import find_arms
    from ra_agent.evidence.pico.text import Doc

    found = find_arms(Doc(paper))
    return [arm for f in found if f is not None for arm in f.value.split("; ") if arm.strip()]


def _sizes_of(label: str, drug: str, sizes: Sizes, doses: dict[str, set[str]]) -> list[tuple[int, str]]:
    """The sizes stated for an arm, else (`_only_size`) for its drug named without the dose."""
    return sizes.get(label) or _only_size(drug, sizes, doses) or []


def _only_size(drug: str, sizes: Sizes, doses: dict[str, set[str]]) -> list[tuple[int, str]] | None:
    """The arm sizes of a drug named without its dose, when the abstract names one dose of it and sizes one arm."""
    if len(doses.get(drug, ())) > 1:
        return None
    labels = {_arm_label(drug, d) for d in (*doses.get(drug, ()), "")}
    found = [
        v for k, v in sizes.items() if k in labels or (k.startswith(f"{drug} ") and k[len(drug) + 1 :][:1].isdigit())
    ]
    return found[0] if len(found) == 1 else None
