"""Arm-level outcome data from trial abstracts by rules: events / total (or mean, dispersion and n) per arm, time
point, outcome, analysis set and the source sentence, in any field (rules:arm-numbers-v5.1: the third round, v5,
with the reading fixes of 2026-11-28: numbers read whole and as printed, a pair after "A compared with B" kept off
the arm named last).

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

The reading has four parts: `mentions` (the arms a sentence names), `numbers` (its counts, percentages, means,
time points and outcome classes), `sizes` (the patients allocated to each arm) and this module, which lays each
sentence's numbers out over its arms and makes the data.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Any

from ra_agent.evidence.pico.text import POP_NOUN, sections_of, sentences
from ra_agent.evidence.synthesis.arms import DRUG, arm_role
from ra_agent.evidence.synthesis.mentions import Mention, Words, arm_label, arm_mentions, arms_in, distinct_arms
from ra_agent.evidence.synthesis.numbers import (
    OUTCOME_CLASSES,
    PER_PROTOCOL,
    Number,
    continuous_values,
    count_from_percent,
    count_list,
    dispersion,
    normalise_text,
    numbers_in,
    outcome_class,
    outcome_words,
    time_points,
)
from ra_agent.evidence.synthesis.sizes import Sizes, arm_sizes, sizes_of
from ra_agent.models import Paper

EXTRACTOR = "rules:arm-numbers-v5.1"
__all__ = ["DRUG", "EXTRACTOR", "OUTCOME_CLASSES", "ArmDatum", "arm_role", "arms_in", "extract_arm_data",
           "time_points"]  # fmt: skip


_SKIP = re.compile(r"\bwithdr[ae]w|\bgastrin|\bscreened\b|\bcompleted the (?:study|trial)|\bsmok|\bpH\b|"
                   r"(?<!glucose )\bconcentrations?\b|pharmacokinetic|\bAUC\b|\bbaseline\b|\bpreferred\b|\bpreference|"
                   r"\bunderwent\b|"
                   # an aim, or rates over time (life-table, cumulative, per patient-years, annualised), not arm shares
                   r"\b(?:aim|objective|purpose)s?\b[^.;]{0,60}\b(?:was|were|is|are) to\b|\bcumulative\b|actuarial|"
                   r"life[- ]table|Kaplan|annuali[sz]ed|\bprobability\b|\bper\s+(?:100|1,?000)\s+(?:patient|person)|"
                   r"(?:patient|person)[- ]years?\b|\bper year\b", re.I)  # fmt: skip
_ITT = re.compile(r"intent(?:ion)?[- ]to[- ]treat|\bm?ITT\b|\brandomi[sz]ed\b|\brandomly (?:assigned|allocated)", re.I)
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


def _versus_pairs(text: str, numbers: list[Number], arms: list[Mention]
                  ) -> list[tuple[Number, Mention]]:  # fmt: skip
    """Two results joined by "vs"/"versus" right after the two arms they compare, in the order the sentence names
    them ("with warfarin compared with no warfarin (7 vs 1", "compared with B, A was superior (13 [3%] vs 34 [7%]":
    A then B)."""
    out: list[tuple[Number, Mention]] = []
    for first, second in zip(numbers, numbers[1:], strict=False):
        between = text[first.start : second.start]
        if not re.search(r"\b(?:vs\.?|versus)\s*$", re.sub(r"[\[(][^\])]*[\])]", "", between).strip() + " "):
            continue
        earlier = [n.start for n in numbers if n.start < first.start]
        since = max(earlier, default=0)
        named = distinct_arms(a for a in arms if since <= a.start < first.start)
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


def _counts_in_arms(text: str, arms: list[Mention], taken: list[Number]) -> list[tuple[Number, Mention]]:
    """Counts tied to the arm named right after them, with no percentage: "nine in the LMWH group", "four cases in
    group QD and no case in group BID", "three major bleeds on LMWH and none on placebo", "Three placebo patients
    had …", "No major haemorrhages were observed in the enoxaparin arm". Allocation words between count and arm
    ("patients treated with") make it an arm size, not a count."""
    out: list[tuple[Number, Mention]] = []
    for a in arms:
        before = text[max(0, a.start - 80) : a.start]
        m = re.search(r"(?<![\d.,/])\b(?P<e>\d+|[Nn]o|[Nn]one)\s+(?!(?:wks?|weeks?|days?|months?|years?|hours?|h|mg|g|ml|IU|units?|mm|cm|kg|mmol|Hg|bpm|beats|points?)\b)"
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
        out.append((Number(start, events, None, None, 0), a))
    return out


# ----------------------------------------------------------------------------- results


def _group_assign(
    text: str, numbers: list[Number], arms: list[Mention], times: list[float], outcome: str, arm_rx: re.Pattern[str]
) -> list[tuple[Number, Mention, float | None, str]]:
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


def _arm_major_direction(text: str, arms: list[Mention]) -> str:
    """ "before" when each arm heads its list ("pantoprazole: 84% and 90%"), "after" when each list ends with its arm
    ("61% and 74%, respectively, for omeprazole"), else "" (the sentence is not a list per arm)."""
    if all(re.match(r"\s*(?:group)?\s*:", text[a.end :]) for a in arms):
        return "before"
    if all(re.search(r"respectively,?\s+(?:for|in|with)\s+(?:the\s+)?$", text[: a.start]) for a in arms):
        return "after"
    return ""


def _arm_major(
    numbers: list[Number], arms: list[Mention], times: list[float], outcome: str, direction: str
) -> list[tuple[Number, Mention, float | None, str]]:
    """Each number to the arm that heads or ends its list; an arm's numbers take the time points in order."""
    by_arm: dict[tuple[str, str], list[tuple[Number, Mention]]] = {}
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
    text: str, numbers: list[Number], arms: list[Mention], times: list[tuple[int, float]], outcome: str
) -> list[tuple[Number, Mention, float | None, str]]:
    """Each number to the arm the sentence ties it to: one named just before it ("lansoprazole (92%)"), else one
    named right after it ("67/86 in the omeprazole group", "10 (17%) patients in the propranolol group", "68% of
    patients taking diltiazem"), else the arm a clause opens with and states no other number of ("Atenolol did not
    affect LVM (119 ± 12 to 120 ± 17"); a number the sentence ties to no arm this way ("64% of participants) than
    antidepressant medication", "Eight of 19 on active treatment but none on placebo") is left out. One number per
    arm and time point."""
    out = []
    used: set[tuple[str, str, float | None]] = set()
    taken: set[tuple[str, str, None]] = set()
    for i, n in enumerate(numbers):
        nxt = numbers[i + 1].start if i + 1 < len(numbers) else 10**9
        prev = numbers[i - 1].start if i else -1
        tight = [
            a
            for a in arms
            if a.end <= n.start
            and (a.drug, a.dose, None) not in taken
            and re.fullmatch(
                r"[\s,:(]*(?:(?:groups?|dose|arm|-?treated|patients|subjects)[\s,:(]*)*", text[a.end : n.start]
            )
        ]
        following = [a for a in arms if n.start < a.start < nxt and _tied_after(text[n.start : a.start])]
        preceding = [a for a in arms if prev < a.end <= n.start and not _CLAUSE_BREAK.search(text[a.end : n.start])]
        if _PAIR_NEXT.match(text, _end_of(text, n)) and re.search(
            r"\b(?:than|compared|versus|vs\.?)\s", text[max(prev, 0) : n.start], re.I
        ):  # "than in B-treated patients (72% vs. 45%": the pair is A's then B's, not B's first
            tight, preceding = [], []
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


# the number's pair follows: "72% vs. 45%", "13 of 23 patients, (57%), versus five of 23" (its own words and
# brackets between)
_PAIR_NEXT = re.compile(r"\s*(?:(?:patients|subjects|cases)\b\s*)?[,;]?\s*(?:[(\[][^()\[\]]*[)\]]\s*[,;]?\s*)*"
                        r"(?:vs\.?|versus)\s*[-−]?\d", re.I)  # fmt: skip
_CLAUSE_BREAK = re.compile(r"[;\]]|\b(?:but|whereas|while|than|compared|versus|vs\.?|respectively|and|or)\b", re.I)
_NUMBER_TOKEN = re.compile(r"[-−]?[\d.,]+\s*(?:(?:%|/\s*\d+|(?:out\s+)?of\s+(?:the\s+)?\d+|(?:±|\+/-|\+-)\s*[\d.,]+|"
                           r"[(\[][^()\[\]]*[)\]])\s*)*")  # fmt: skip
_TIED_AFTER = re.compile(r"(?:(?:of\s+)?(?:the\s+)?(?:patients|subjects|cases|children|participants|women|men|individuals|"
                         r"those)\s+)?(?:(?:who|that)\s+(?:were\s+)?)?(?:(?:[a-z-]+\s+){0,4}?(?:in|on|with|for|among|"
                         r"receiving|received|taking|took|treated with|given|administered|after|of|(?:assigned|allocated|"
                         r"randomi[sz]ed) to)\s+(?:the\s+)?(?:(?:patients|subjects)\s+(?:in|on|with|receiving|taking|given)\s+"
                         r"(?:the\s+)?)?)?", re.I)  # fmt: skip


def _tied_after(between: str) -> bool:
    """Whether the words between a number and the arm named after it tie them: "(17%) patients in the ", " of
    patients taking ", " in " (no clause break, bracket or other number between)."""
    rest = re.sub(r"\s*[(\[][^()\[\]]*%[^()\[\]]*[)\]]", "", between)  # "(3.6%)", "[24%]": the number's own share
    token = _NUMBER_TOKEN.match(rest)
    rest = re.sub(r"^[)\]]\s*", "", rest[token.end() :] if token else rest)
    return (
        len(rest) <= 60
        and not re.search(r"[\d()\[\];]", rest)
        and not _CLAUSE_BREAK.search(rest)
        and bool(_TIED_AFTER.fullmatch(rest))
    )


def extract_arm_data(paper: Paper) -> list[ArmDatum]:
    """Every arm-level result the abstract states with both its numbers, dichotomous (events/total) or continuous
    (mean, SD, n); see the module docstring."""
    units = [u for section in sections_of(paper) for u in sentences(section.text)]
    if not units:
        return []
    whole = normalise_text(" ".join(units))
    words = Words.of(f"{paper.title} {whole}", _pico_arms(paper))
    sizes = arm_sizes(units, words)
    doses: dict[str, set[str]] = {}
    for a in arm_mentions(whole, words):
        if a.dose:
            doses.setdefault(a.drug, set()).add(a.dose)
    # a count pair printed in three sentences or more is a name ("compound 48/80"), not a result
    slashed = [set(re.findall(r"\b\d+/\d+\b", normalise_text(u))) for u in units]
    names = {p for p in set().union(*slashed) if sum(p in u for u in slashed) >= 3}
    out: list[ArmDatum] = []
    seen: set[tuple[str, str, str, float | None]] = set()
    not_denominators: set[tuple[str, int]] = set()
    itt = bool(_ITT_SAID.search(whole)) and not PER_PROTOCOL.search(whole)
    sized = distinct_arms(
        a for a in arm_mentions(whole, words) if sizes_of(arm_label(a.drug, a.dose), a.drug, sizes, doses)
    )
    two_arms = sized if len(sized) == 2 else []
    lasttime_points: list[float] = []
    last_arms: list[Mention] = []
    last_outcome = ""
    for raw in units:
        text = normalise_text(raw)
        times = time_points(text)
        arms = arm_mentions(text, words)
        outcome = outcome_class(text) or last_outcome
        numbers, continuous = numbers_in(text), continuous_values(text)
        numbers = [n for n in numbers if not any(text.startswith(name, n.start) for name in names)]
        if times:
            lasttime_points = [w for _, w in times]
        kind = (dispersion(raw, whole) or "±") if continuous else ""
        respectively = bool(_RESPECTIVELY.search(text))
        if respectively and not numbers and outcome:
            numbers = count_list(text)
        counted = _counts_in_arms(text, arms, numbers) if outcome else []
        if _SKIP.search(text) or not (((numbers or counted) and outcome) or continuous):
            last_arms, last_outcome = (arms or last_arms), outcome
            continue
        distinct = distinct_arms(arms) or (distinct_arms(last_arms) if respectively else [])
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
            several = not arm.dose and len(doses.get(arm.drug, ())) > 1  # "lansoprazole" of 15 and 30 mg: no one arm
            if number.events is None and number.percent is not None and number.decimals and not several:
                label = _label(arm, doses)
                for n, _ in sizes_of(label, arm.drug, sizes, doses):
                    if count_from_percent(number.percent, number.decimals, n) is None:
                        not_denominators.add((label, n))
        if continuous:
            named = _continuous_outcome(text, continuous[0].start, words.arm)
            if len(distinct_arms(arms)) >= 2:  # a between-arm result, each arm named in the sentence
                placed = layout.assign(continuous, named, nearest=len(continuous) == len(distinct_arms(arms)))
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
    arms: list[Mention]
    distinct: list[Mention]
    times: list[tuple[int, float]]
    lasttime_points: list[float]
    respectively: bool
    arm_rx: re.Pattern[str]

    def assign(
        self, numbers: list[Number], outcome: str, *, nearest: bool = True
    ) -> list[tuple[Number, Mention, float | None, str]]:
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
        if not self.respectively and len(self.distinct) == 1 and nearest:  # one arm named: it must be tied to
            return _nearest(self.text, numbers, arms, self.times or [(0, w) for w in self.lasttime_points[-1:]],
                            outcome)  # each number ("Eight of 19 on active treatment but none on placebo": not placebo's)  # fmt: skip
        if self.respectively or not interleaved:
            if any(_UNNAMED_GROUP.match(self.text, _end_of(self.text, n)) for n in numbers):
                return []  # "compared to 25% in the customary group": a number of an arm the rules do not name
            return _group_assign(self.text, numbers, self.distinct, time_list, outcome, self.arm_rx)
        if not nearest:
            return []
        return _nearest(self.text, numbers, arms, self.times or [(0, w) for w in self.lasttime_points[-1:]], outcome)


_UNNAMED_GROUP = re.compile(r"\s*(?:patients\s+)?(?:in|on|with|for)\s+the\s+(?:[a-z-]+\s+){1,2}(?:group|arm)\b", re.I)


def _end_of(text: str, n: Number) -> int:
    """Where a number's own words end ("25%", "44/47", "13 (16.0%)")."""
    token = _NUMBER_TOKEN.match(text, n.start)
    return token.end() if token else n.start


_LEAD_WORDS = re.compile(r"\b(?:was|were|is|are|of|in|with|the|a|an|mean|means|and|than|to|for|at|by|from|on|"
                         r"significantly|respectively|group|groups|patients|treatment|reduced|increased|decreased|"
                         r"changed?|vs|versus)\b", re.I)  # fmt: skip


def _one_arm_continuous(text: str, values: list[Number], arms: list[Mention], two_arms: list[Mention],
                        times: list[tuple[int, float]], last_times: list[float], outcome: str,
                        arm_rx: re.Pattern[str]) -> list[tuple[Number, Mention, float | None, str]]:  # fmt: skip
    """Continuous values of a sentence naming one arm: each value its own time point ("For the combination group, FPG
    decreased … to 8.9 ± 3.0 at 3 months and to 8.6 ± 2.5 at 6 months"), or, in a two-arm trial, "a versus b" after
    the arm that is the sentence's subject or stands right before a ("Metformin reduced fasting glucose (6.1 ± 0.4 vs
    6.4 ± 0.4)", "less with insulin/metformin: 0.9 ± 0.4 … versus 2.7 ± 0.4"): a is that arm's, b the other arm's."""
    named = distinct_arms(a for a in arms if a.end <= values[0].start)
    if len(distinct_arms(arms)) != 1 or not named:
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
    out: list[tuple[Number, Mention, float | None, str]] = []
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


def _label(arm: Mention, doses: dict[str, set[str]]) -> str:
    """An arm's label; a drug named without its dose takes the abstract's one dose of it (with several: none)."""
    dose = arm.dose or (next(iter(doses[arm.drug])) if len(doses.get(arm.drug, ())) == 1 else "")
    return arm_label(arm.drug, dose)


def _continuous_datum(pmid: int, sentence: str, number: Number, arm: Mention, weeks: float | None, outcome: str,
                      kind: str, sizes: Sizes, doses: dict[str, set[str]]) -> ArmDatum | None:  # fmt: skip
    """A continuous datum needs its arm size from an allocation sentence ("n = 19" beside the value first); a
    standard error becomes SE × √n."""
    label = _label(arm, doses)
    beside = re.match(r"[^;()]{0,20}?,\s*n\s*=\s*(\d+)", sentence[number.start :]) if number.start >= 0 else None
    candidates = [(int(beside.group(1)), sentence)] if beside else sizes_of(label, arm.drug, sizes, doses)
    size = candidates[0] if candidates else None
    if size is None or number.mean is None or number.sd is None or PER_PROTOCOL.search(sentence):
        return None
    sd = number.sd if kind == "SD" else round(number.sd * math.sqrt(size[0]), 4) if kind == "SE" else None
    return ArmDatum(pmid, label, arm.drug, outcome, weeks, 0, size[0], sentence,
                    "" if size[1] == sentence else size[1], mean=number.mean, sd=sd, spread=number.sd,
                    dispersion=kind)  # fmt: skip


def _datum(pmid: int, sentence: str, number: Number, arm: Mention, weeks: float | None, outcome: str,
           sizes: Sizes, doses: dict[str, set[str]]) -> ArmDatum | None:  # fmt: skip
    label = _label(arm, doses)
    if number.events is not None and number.total is not None:
        return ArmDatum(pmid, label, arm.drug, outcome, weeks, number.events, number.total, sentence, "")
    candidates = sizes_of(label, arm.drug, sizes, doses)
    if number.events is not None:  # a stated count: its percentage picks the arm size it reproduces (else the first)
        fits = [c for c in candidates if number.percent is None and number.events <= c[0] or
                number.percent is not None and count_from_percent(number.percent, number.decimals, c[0]) == number.events]  # fmt: skip
        if not fits:
            return None
        size = fits[0]
        return ArmDatum(pmid, label, arm.drug, outcome, weeks, number.events, size[0], sentence,
                        "" if size[1] == sentence else size[1])  # fmt: skip
    if number.percent is None or PER_PROTOCOL.search(sentence):
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
    if PER_PROTOCOL.search(d.sentence) or PER_PROTOCOL.search(d.size_sentence):
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
