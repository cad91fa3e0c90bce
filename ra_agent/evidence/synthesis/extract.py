"""Arm-level outcome data from trial abstracts by rules: events / total per arm, time point, and the source sentence.

A datum is kept only when both of its numbers are read from the abstract: a count pair ("98/167", "77 of the 103",
"88 (71%) of the 124") in one sentence, or a percentage in one sentence together with that arm's size stated in a
sentence that allocates patients to the arm ("rabeprazole 20 mg (n = 188)", "102 patients received rabeprazole").
A percentage becomes a count only when some integer count reproduces it at the precision it is printed with, and
never from a per-protocol sentence (its denominator is not the arm size). Each datum carries the sentence(s) it
came from, so every number can be traced back to the abstract; the extractor is named in every datum.

Continuous results are read as "mean ± dispersion" ("12.1 +/- 7.9", "12.1 (SD 7.9)") with the arm size from an
allocation sentence, only when the abstract says what the dispersion is: a standard deviation is kept as stated,
a standard error becomes SD = SE × √n (Cochrane Handbook 6.5.2.2); an unlabelled "±" is not read. pH,
concentration and pharmacokinetic sentences are not outcomes and are skipped, as are adverse events.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ra_agent.evidence.pico.text import NUMBER, parse_number, sections_of, sentences
from ra_agent.models import Paper

EXTRACTOR = "rules:arm-numbers-v2"

# Drugs named by their INN stem (PPIs "-prazole", H2-receptor antagonists "-tidine") or by name, and placebo.
DRUG = (
    r"(?:[a-z]+prazole|[a-z]+tidine|placebo|cisapride|metoclopramide|sucralfate|misoprostol|mosapride|domperidone|"
    r"alginate|antacids?|bismuth)"
)
_DOSE = r"(?P<{}>\d+(?:\.\d+)?)\s*(?:mg|milligrams?)\b"
_ARM = re.compile(
    rf"(?:{_DOSE.format('pre')}\s+(?:of\s+)?(?:oral\s+)?)?\b(?P<drug>{DRUG})\b"
    rf"(?:\s*\((?P<abbr>[A-Z][A-Za-z]{{1,5}}\d{{0,3}})\))?(?:\s*,?\s*\(?{_DOSE.format('post')})?",
    re.I,
)
_BARE_DOSE = re.compile(r"\b(?P<dose>\d+(?:\.\d+)?)\s*(?:-\s*)?mg\b", re.I)
# "matching ranitidine placebo", "lansoprazole placebo": a dummy, not an arm
_DUMMY = re.compile(rf"\b(?:matching|identical|dummy)\s+(?:{DRUG}\s+)?placebos?\b|\b{DRUG}[\s-]+placebos?\b|"
                    r"\bplacebo (?:at|in the) (?:bedtime|evening|morning)\b", re.I)  # fmt: skip
_WORD_NUMBER = re.compile(NUMBER, re.I)

_PAIR = re.compile(
    r"\b(?P<e>\d+)\s*(?:\(\s*(?P<p1>\d+(?:\.\d+)?)\s*%\s*\)\s*)?(?:/|out of|of)\s*(?:the\s+)?(?P<t>\d+)\b"
    r"(?:\s*(?:patients|subjects|cases))?(?:\s*\(\s*(?P<p2>\d+(?:\.\d+)?)\s*%\s*\))?"
)
_COUNT_PERCENT = re.compile(r"\b(?P<e>\d+)\s*\(\s*(?P<p>\d+(?:\.\d+)?)\s*%\s*\)(?!\s*(?:/|out of|of)\s*(?:the\s+)?\d)")
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
    r"(?P<u2>weeks?|wks?|months?|days?|mo|years?)\b|(?P<n3>one|two|three|four|six|eight|twelve)[\s-]+(?P<u3>weeks?|months?|years?))",
    re.I,
)
_TIME_LIST = re.compile(
    r"(?P<first>\d+)\s*(?:,|and|or)\s*(?P<second>\d+)[\s-]*(?P<unit>weeks?|wks?|months?|days?)\b", re.I
)
_UNIT_WEEKS = {"w": 1.0, "m": 52 / 12, "d": 1 / 7, "y": 52.0}
_SMALL = {"one": 1, "two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "twelve": 12}

_SKIP = re.compile(r"\badverse|\bside[- ]effects?|\bwithdr[ae]w|\bheadache|\bdiarrh|\bnausea|\bgastrin|\bscreened\b|"
                   r"\bcompleted the (?:study|trial)|\bsmok|\bpH\b|\bconcentrations?\b|pharmacokinetic|\bAUC\b", re.I)  # fmt: skip
_PER_PROTOCOL = re.compile(r"per[- ]protocol|protocol[- ]correct|\bcompleted\b|\bevaluable\b", re.I)
_OUTCOMES = (
    ("remission", re.compile(r"\b(?:neither|no|without|free (?:of|from))\b[^.;]{0,60}\b(?:relapse|recurren)", re.I)),
    ("relapse", re.compile(r"\brelapse|\brecurren", re.I)),
    ("remission", re.compile(r"\bremission|remained healed|\bmaintain", re.I)),
    ("healing", re.compile(r"\bheal", re.I)),
    ("eradication", re.compile(r"\beradicat|\bcure", re.I)),
    ("symptom relief", re.compile(r"\breli(?:ef|eved)|\bresol|symptom[- ]free|free (?:from|of)|asymptomatic|pain[- ]free|"
                                  r"\bimprove", re.I)),
)  # fmt: skip
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
    sd: float | None = None

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
    drug: str
    dose: str  # "" when the sentence names no dose


# ----------------------------------------------------------------------------- sentence analysis


def normalise_text(text: str) -> str:
    """The text the rules read: number words as digits ("One hundred and two" → "102"), dummy placebos blanked.
    Data quote the original sentence, not this one."""

    def digits(m: re.Match[str]) -> str:
        value = parse_number(m.group(0))
        return m.group(0) if value is None or m.group(0).isdigit() else str(value)

    text = _WORD_NUMBER.sub(digits, text)
    return _DUMMY.sub(lambda m: " " * len(m.group(0)), text)


def _drug_name(word: str) -> str:
    word = word.lower()
    return "antacid" if word == "antacids" else word


def _mentions(text: str, aliases: dict[str, tuple[str, str]]) -> list[_Mention]:
    """Arm mentions in order: named drugs with their dose, aliases ("PANT", "OM20") and bare doses of the last drug."""
    found = [_Mention(m.start(), m.end(), _drug_name(m.group("drug")), m.group("pre") or m.group("post") or "")
             for m in _ARM.finditer(text)]  # fmt: skip
    for abbr, (drug, dose) in aliases.items():
        for m in re.finditer(rf"\b{re.escape(abbr)}\b", text):
            if not any(f.start <= m.start() < f.end for f in found):
                found.append(_Mention(m.start(), m.end(), drug, dose))
    found.sort(key=lambda f: f.start)
    out: list[_Mention] = []
    for m in _BARE_DOSE.finditer(text):  # "esomeprazole 40 mg (94.1%) and 20 mg (89.9%)": 20 mg is esomeprazole
        if any(f.start <= m.start() < f.end for f in found):
            continue
        before = [f for f in found if f.end <= m.start()]
        if before and before[-1].drug != "placebo" and m.start() - before[-1].end < 80:
            out.append(_Mention(m.start(), m.end(), before[-1].drug, m.group("dose")))
    return sorted(found + out, key=lambda f: f.start)


def arms_in(text: str) -> list[tuple[str, str]]:
    """(arm label, drug) of every arm the rules find in `text` ("omeprazole 20 mg", "omeprazole"), in order."""
    text = normalise_text(text)
    return list(dict.fromkeys((_arm_label(m.drug, m.dose), m.drug) for m in _mentions(text, _aliases(text))))


def _aliases(text: str) -> dict[str, tuple[str, str]]:
    """Abbreviations the abstract defines for an arm: "pantoprazole (PANT) 40 mg", "lansoprazole 30 mg daily (LAN30)"."""
    out: dict[str, tuple[str, str]] = {}
    for m in _ARM.finditer(text):
        if m.group("abbr"):
            out[m.group("abbr")] = (m.group("drug").lower(), m.group("pre") or m.group("post") or "")
    for m in re.finditer(rf"\b{_DOSE.format('d1')}\s+(?P<drug>{DRUG})[^()]{{0,25}}?\((?P<abbr>[A-Z]{{1,4}}\d{{0,3}})\)|"
                         rf"\b(?P<drug2>{DRUG})\s+{_DOSE.format('d2')}[^()]{{0,25}}?\((?P<abbr2>[A-Z]{{1,4}}\d{{0,3}})\)",
                         text, re.I):  # fmt: skip
        abbr = m.group("abbr") or m.group("abbr2")
        if abbr and abbr.lower() not in {"ms", "mg"}:
            out.setdefault(abbr, ((m.group("drug") or m.group("drug2")).lower(), m.group("d1") or m.group("d2") or ""))
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
        out.append((m.start(), round(value * _UNIT_WEEKS[unit.lower()], 1)))
    return sorted(out)


def outcome_class(text: str) -> str:
    return next((name for name, rx in _OUTCOMES if rx.search(text)), "")


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
    r"(?<![\d.])(?P<mean>[-−]?\d+(?:\.\d+)?)\s*%?\s*(?:±|\+/-|\+/−|\+-)\s*(?P<sd>\d+(?:\.\d+)?)\s*%?"
    r"|(?<![\d.])(?P<mean2>[-−]?\d+(?:\.\d+)?)\s*\(\s*(?:SD|SEM?|s\.d\.)\s*[=:,]?\s*(?P<sd2>\d+(?:\.\d+)?)\s*\)",
    re.I,
)
_SD_WORDS = re.compile(r"\bSD\b|\bs\.d\.|(?i:standard deviation)")
_SE_WORDS = re.compile(r"\bSEM?\b|(?i:standard error)")


def _continuous(text: str) -> list[_Number]:
    """The "mean ± dispersion" values of a sentence, in order."""
    out = []
    for m in _MEAN_SD.finditer(text):
        mean, sd = (
            (m.group("mean"), m.group("sd")) if m.group("mean") is not None else (m.group("mean2"), m.group("sd2"))
        )
        out.append(_Number(m.start(), None, None, None, 0, float(mean.replace("−", "-")), float(sd)))
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
    out: list[_Number] = []
    taken: list[tuple[int, int]] = []
    for m in _PAIR.finditer(masked):
        e, t = int(m.group("e")), int(m.group("t"))
        if 0 <= e <= t and t > 1 and not re.match(r"\s*(?:mg|days?|weeks?|months?)", masked[m.end("t") :]):
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
            out.append(_Number(m.start(), None, None, float(p), len(p.partition(".")[2])))
            taken.append((m.start(), m.end()))
    return sorted(out, key=lambda n: n.start)


def count_from_percent(percent: float, decimals: int, total: int) -> int | None:
    """The count whose share of `total` prints as `percent` at its precision (None when no integer does)."""
    events = round(percent * total / 100)
    return events if 0 <= events <= total and round(100 * events / total, decimals) == percent else None


# ----------------------------------------------------------------------------- arm sizes


def _arm_label(drug: str, dose: str) -> str:
    return f"{drug} {dose} mg" if dose else drug


def arm_sizes(units: list[str], aliases: dict[str, tuple[str, str]]) -> dict[str, tuple[int, str]]:
    """Arm label → (patients allocated, the sentence saying so), from allocation sentences: "(n = 188)" after an arm,
    "102 patients received rabeprazole 20 mg", "pantoprazole n=226", "(62 taking lansoprazole", "221 and 212 patients,
    respectively". Per-protocol and completion counts are not arm sizes."""
    sizes: dict[str, tuple[int, str]] = {}
    for raw in units:
        text = normalise_text(raw)
        arms = _mentions(text, aliases)
        if not arms:
            continue
        for m in re.finditer(r"\bn\s*=\s*(\d+)", text, re.I):
            named_after = [a for a in arms if re.fullmatch(r"\s*in (?:the|each)\s+", text[m.end() : a.start])]
            if named_after:  # "(n=166 in the pantoprazole group, n=162 in the omeprazole group)"
                a = named_after[0]
                sizes.setdefault(_arm_label(a.drug, a.dose), (int(m.group(1)), raw))
                continue
            before = [a for a in arms if a.end <= m.start() and m.start() - a.end < 150]
            if before and not re.search(r"\bn\s*=", text[before[-1].end : m.start()], re.I):
                a = before[-1]
                sizes.setdefault(_arm_label(a.drug, a.dose), (int(m.group(1)), raw))
        for m in re.finditer(r"\b(\d+)\s+(?:patients|subjects)\b(?:\s+with\s+[\w\s-]{0,40}?)?\s*(?:received|were given|"
                             r"were treated with|taking|on|given|to)?\s+(?:either\s+)?(?:with\s+)?", text):  # fmt: skip
            after = [a for a in arms if a.start == m.end()]
            if after:
                sizes.setdefault(_arm_label(after[0].drug, after[0].dose), (int(m.group(1)), raw))
        for m in re.finditer(r"[(,]\s*(\d+)\s+(?:taking|receiving|on|given)\s+", text):
            after = [a for a in arms if a.start == m.end()]
            if after:
                sizes.setdefault(_arm_label(after[0].drug, after[0].dose), (int(m.group(1)), raw))
        for a in arms:  # "pantoprazole (PANT) 40 mg (111 patients," / "ranitidine (RAN) 300 mg (111, aged"
            m = re.match(
                r"\s*(?:daily|once daily|o\.?d\.?|b\.?i\.?d\.?)?\s*\(\s*(\d+)\s*(?:patients)?\s*[,;)]", text[a.end :]
            )
            if m and int(m.group(1)) > 3:
                sizes.setdefault(_arm_label(a.drug, a.dose), (int(m.group(1)), raw))
        m = re.search(r"\b(\d+)\s+and\s+(\d+)\s+(?:patients|subjects),?\s+respectively", text)
        distinct = _distinct(arms)
        if m and len(distinct) == 2:
            for a, n in zip(distinct, (m.group(1), m.group(2)), strict=True):
                sizes.setdefault(_arm_label(a.drug, a.dose), (int(n), raw))
    return sizes


def _distinct(arms: Iterable[_Mention]) -> list[_Mention]:
    seen: dict[tuple[str, str], _Mention] = {}
    for a in arms:
        seen.setdefault((a.drug, a.dose), a)
    return list(seen.values())


# ----------------------------------------------------------------------------- results


def _group_assign(
    text: str, numbers: list[_Number], arms: list[_Mention], times: list[float], outcome: str
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
            if not outcome_class(segment) or (g and _ARM.search(segment)):  # a list per arm, not per outcome: not read
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
            and re.fullmatch(r"[\s,:(]*(?:groups?[\s,:(]*)?", text[a.end : n.start])
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
    aliases = _aliases(whole)
    sizes = arm_sizes(units, aliases)
    doses: dict[str, set[str]] = {}
    for a in _mentions(whole, aliases):
        if a.dose:
            doses.setdefault(a.drug, set()).add(a.dose)
    out: list[ArmDatum] = []
    seen: set[tuple[str, str, float | None]] = set()
    lasttime_points: list[float] = []
    last_arms: list[_Mention] = []
    last_outcome = ""
    for raw in units:
        text = normalise_text(raw)
        times = time_points(text)
        arms = _mentions(text, aliases)
        outcome = outcome_class(text) or last_outcome
        numbers, continuous = _numbers(text), _continuous(text)
        if times:
            lasttime_points = [w for _, w in times]
        kind = dispersion(raw, whole) if continuous else ""
        if _SKIP.search(text) or not ((numbers and outcome) or (continuous and kind)):
            last_arms, last_outcome = (arms or last_arms), outcome
            continue
        respectively = bool(_RESPECTIVELY.search(text))
        distinct = _distinct(arms) or (_distinct(last_arms) if respectively else [])
        if not distinct:
            continue
        layout = _Layout(text, arms, distinct, times, lasttime_points, respectively)
        found = [_datum(paper.pmid, raw, number, arm, weeks, named, sizes, doses)
                 for number, arm, weeks, named in layout.assign(numbers, outcome)] if outcome else []  # fmt: skip
        if continuous and kind and len(_distinct(arms)) >= 2:  # a between-arm result, each arm named in the sentence
            named = _continuous_outcome(text, continuous[0].start)
            found += [_continuous_datum(paper.pmid, raw, number, arm, weeks, named, kind, sizes, doses)
                      for number, arm, weeks, _ in layout.assign(continuous, named, nearest=False)]  # fmt: skip
        for datum in found:
            key = (datum.arm, datum.outcome, datum.weeks) if datum else ("", "", None)
            if datum and key not in seen:
                seen.add(key)
                out.append(datum)
        last_arms, last_outcome = (arms or last_arms), outcome
    return out


@dataclass(frozen=True)
class _Layout:
    """How a sentence lays its numbers out over its arms (see `assign`)."""

    text: str
    arms: list[_Mention]
    distinct: list[_Mention]
    times: list[tuple[int, float]]
    lasttime_points: list[float]
    respectively: bool

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
            return _group_assign(self.text, numbers, self.distinct, time_list, outcome)
        if not nearest:
            return []
        return _nearest(self.text, numbers, arms, self.times or [(0, w) for w in self.lasttime_points[-1:]], outcome)


_LEAD_WORDS = re.compile(r"\b(?:was|were|is|are|of|in|with|the|a|an|mean|means|and|than|to|for|at|by|from|on|"
                         r"significantly|respectively|group|groups|patients|treatment|reduced|increased|decreased|"
                         r"changed?|vs|versus)\b", re.I)  # fmt: skip


def _continuous_outcome(text: str, first_value: int) -> str:
    """The words naming a continuous result: up to four words before its first value that are not arm names or
    function words ("the GSRS reflux score was 2.67 ± 0.4 with …" → "GSRS reflux score")."""
    before = _ARM.sub(" ", text[:first_value])
    words = [w for w in re.findall(r"[A-Za-z][\w-]*", before.split("(")[-1] if "(" in before[-25:] else before)
             if not _LEAD_WORDS.fullmatch(w)]  # fmt: skip
    return "mean " + " ".join(words[-4:]).lower() if words else "mean (outcome not named)"


def _continuous_datum(pmid: int, sentence: str, number: _Number, arm: _Mention, weeks: float | None, outcome: str,
                      kind: str, sizes: dict[str, tuple[int, str]], doses: dict[str, set[str]]) -> ArmDatum | None:  # fmt: skip
    """A continuous datum needs its arm size from an allocation sentence; a standard error becomes SE × √n."""
    dose = arm.dose or (next(iter(doses[arm.drug])) if len(doses.get(arm.drug, ())) == 1 else "")
    label = _arm_label(arm.drug, dose)
    size = sizes.get(label) or _only_size(arm.drug, sizes, doses)
    if size is None or number.mean is None or number.sd is None or _PER_PROTOCOL.search(sentence):
        return None
    sd = number.sd if kind == "SD" else round(number.sd * math.sqrt(size[0]), 4)
    return ArmDatum(pmid, label, arm.drug, outcome, weeks, 0, size[0], sentence,
                    "" if size[1] == sentence else size[1], mean=number.mean, sd=sd)  # fmt: skip


def _datum(pmid: int, sentence: str, number: _Number, arm: _Mention, weeks: float | None, outcome: str,
           sizes: dict[str, tuple[int, str]], doses: dict[str, set[str]]) -> ArmDatum | None:  # fmt: skip
    dose = arm.dose or (next(iter(doses[arm.drug])) if len(doses.get(arm.drug, ())) == 1 else "")
    label = _arm_label(arm.drug, dose)
    if number.events is not None and number.total is not None:
        return ArmDatum(pmid, label, arm.drug, outcome, weeks, number.events, number.total, sentence, "")
    if number.events is not None:  # a stated count with its percentage: the arm size must reproduce the percentage
        size = sizes.get(label) or _only_size(arm.drug, sizes, doses)
        if (
            size is None
            or number.percent is None
            or count_from_percent(number.percent, number.decimals, size[0]) != number.events
        ):
            return None
        return ArmDatum(pmid, label, arm.drug, outcome, weeks, number.events, size[0], sentence,
                        "" if size[1] == sentence else size[1])  # fmt: skip
    if number.percent is None or _PER_PROTOCOL.search(sentence):
        return None
    size = sizes.get(label) or _only_size(arm.drug, sizes, doses)
    if size is None:
        return None
    events = count_from_percent(number.percent, number.decimals, size[0])
    if events is None:
        return None
    return ArmDatum(pmid, label, arm.drug, outcome, weeks, events, size[0], sentence,
                    "" if size[1] == sentence else size[1])  # fmt: skip


def _only_size(drug: str, sizes: dict[str, tuple[int, str]], doses: dict[str, set[str]]) -> tuple[int, str] | None:
    """The arm size of a drug named without its dose, when the abstract names one dose of it and sizes one arm."""
    if len(doses.get(drug, ())) > 1:
        return None
    found = [v for k, v in sizes.items() if k.split()[0] == drug]
    return found[0] if len(found) == 1 else None
