"""Comparisons inside a question: which intervention-vs-comparator pairs the trials report, per outcome and time point.

Arms come from the extracted arm data (`extract.ArmDatum`): a drug named by its INN stem belongs to a class
(proton pump inhibitor "-prazole", H2-receptor antagonist "-tidine", placebo, else itself). Within one trial:
- two classes (a PPI against an H2-receptor antagonist, a PPI against placebo) give a class comparison; arms of
  the same class are combined (events and totals summed, as the Cochrane Handbook 23.3.4 advises for multi-arm
  trials) so that no patient is counted twice;
- two PPIs give a head-to-head comparison (the drugs in alphabetical order, doses of one drug combined);
- two doses of one drug give a dose comparison (the highest against the lowest dose).
Every trial joins every comparison its arms support, per outcome and time point it reports for both sides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ra_agent.evidence.synthesis.extract import ArmDatum

PPI = "proton pump inhibitor"
H2RA = "H2-receptor antagonist"


def drug_class(drug: str) -> str:
    if drug.endswith("prazole"):
        return PPI
    if drug.endswith("tidine"):
        return H2RA
    return drug


@dataclass(frozen=True)
class Side:
    """One side of a comparison in one trial: the arms combined and their summed counts."""

    arms: tuple[str, ...]
    events: int
    total: int
    data: tuple[ArmDatum, ...]  # the arm data (and so the sentences) behind the counts


@dataclass(frozen=True)
class TrialContrast:
    """One trial's counts for one comparison, outcome and time point."""

    pmid: int
    intervention: Side
    comparator: Side


@dataclass(frozen=True)
class Comparison:
    """An intervention-vs-comparator pair ("proton pump inhibitor vs H2-receptor antagonist") with its kind."""

    kind: str  # "class", "head-to-head", "dose"
    intervention: str
    comparator: str

    @property
    def label(self) -> str:
        return f"{self.intervention} vs {self.comparator}"


@dataclass(frozen=True)
class OutcomeContrasts:
    """The trials that report one outcome at one time point for one comparison."""

    comparison: Comparison
    outcome: str
    weeks: float | None
    trials: tuple[TrialContrast, ...]

    @property
    def label(self) -> str:
        return f"{self.outcome}{f' at {_weeks(self.weeks)}' if self.weeks is not None else ''}"


def _weeks(weeks: float) -> str:
    months = round(weeks * 12 / 52)
    return f"{months} months" if weeks >= 26 and abs(months * 52 / 12 - weeks) < 0.6 else f"{weeks:g} weeks"


_CLASS_ORDER = {PPI: 0, H2RA: 2, "placebo": 3}


def _dose(arm: str) -> float:
    m = re.search(r"(\d+(?:\.\d+)?) mg$", arm)
    return float(m.group(1)) if m else -1.0


def _side(data: Sequence[ArmDatum]) -> Side:
    return Side(tuple(sorted({d.arm for d in data})), sum(d.events for d in data), sum(d.total for d in data),
                tuple(data))  # fmt: skip


def _trial_contrasts(group: Sequence[ArmDatum]) -> list[tuple[Comparison, TrialContrast]]:
    """One trial's arm data at one outcome and time point → its contrasts (see the module docstring)."""
    by_arm: dict[str, ArmDatum] = {}
    for d in group:
        by_arm.setdefault(d.arm, d)
    arms = list(by_arm.values())
    pmid = arms[0].pmid if arms else 0
    out: list[tuple[Comparison, TrialContrast]] = []
    classes: dict[str, list[ArmDatum]] = {}
    for d in arms:
        classes.setdefault(drug_class(d.drug), []).append(d)
    ordered = sorted(classes, key=lambda c: (_CLASS_ORDER.get(c, 1), c))
    for i, first in enumerate(ordered):
        for second in ordered[i + 1 :]:
            comparison = Comparison("class", first, second)
            out.append((comparison, TrialContrast(pmid, _side(classes[first]), _side(classes[second]))))
    drugs: dict[str, list[ArmDatum]] = {}
    for d in classes.get(PPI, []):
        drugs.setdefault(d.drug, []).append(d)
    names = sorted(drugs)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            comparison = Comparison("head-to-head", first, second)
            out.append((comparison, TrialContrast(pmid, _side(drugs[first]), _side(drugs[second]))))
    for drug, doses in drugs.items():
        dosed = sorted((d for d in doses if _dose(d.arm) > 0), key=lambda d: _dose(d.arm))
        if len(dosed) >= 2 and _dose(dosed[-1].arm) > _dose(dosed[0].arm):
            comparison = Comparison("dose", f"{drug} higher dose", f"{drug} lower dose")
            out.append((comparison, TrialContrast(pmid, _side([dosed[-1]]), _side([dosed[0]]))))
    return out


def outcome_key(outcome: str) -> str:
    """The outcome a datum is pooled under: its class ("symptom relief: improvement in well-being" → "symptom relief")."""
    return outcome.split(":", 1)[0]


def comparisons(data: Iterable[ArmDatum]) -> list[OutcomeContrasts]:
    """Every comparison × outcome × time point the arm data support, most trials first."""
    groups: dict[tuple[int, str, float | None], list[ArmDatum]] = {}
    for d in data:
        if ":" in d.outcome:  # one of several outcomes listed in one sentence: reported, not pooled
            continue
        groups.setdefault((d.pmid, outcome_key(d.outcome), d.weeks), []).append(d)
    found: dict[tuple[Comparison, str, float | None], list[TrialContrast]] = {}
    for (_pmid, outcome, weeks), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        for comparison, contrast in _trial_contrasts(group):
            found.setdefault((comparison, outcome, weeks), []).append(contrast)
    out = [OutcomeContrasts(c, o, w, tuple(t)) for (c, o, w), t in found.items()]
    return sorted(out, key=lambda oc: (-len(oc.trials), oc.comparison.kind != "class", oc.comparison.label, oc.outcome,
                                       oc.weeks or 0))  # fmt: skip
