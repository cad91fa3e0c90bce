"""Comparisons inside a question: which intervention-vs-comparator pairs the trials report, in which condition, per
outcome and time point.

Arms come from the extracted arm data (`extract.ArmDatum`): a drug belongs to its class by `evidence.classes`
(WHO INN stems and ATC groups: "-prazole" proton pump inhibitors, "-tidine" H2-receptor antagonists, ...), placebo
is placebo, any other drug is its own class. Within one trial:
- two classes (a PPI against an H2-receptor antagonist, a PPI against placebo) give a class comparison; arms of
  the same class are combined (events and totals summed, as the Cochrane Handbook 23.3.4 advises for multi-arm
  trials) so that no patient is counted twice;
- two drugs of one class give a head-to-head comparison (the drugs in alphabetical order, doses of one drug
  combined);
- two doses of one drug give a dose comparison (the highest against the lowest dose).
Every comparison is within one condition (`condition.condition_of`: a duodenal-ulcer trial never joins an
oesophagitis comparison). Every trial joins every comparison its arms support, per outcome and time point it
reports for both sides; a trial without usable numbers is placed in the comparison its PICO intervention and
comparator name (`planned_comparisons`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ra_agent.evidence.classes import agents_in, classes_named
from ra_agent.evidence.synthesis.arms import is_control
from ra_agent.evidence.synthesis.condition import NOT_STATED
from ra_agent.evidence.synthesis.extract import ArmDatum, arms_in

PPI = "proton pump inhibitor"
H2RA = "H2-receptor antagonist"
PLACEBO = "placebo"
NO_TREATMENT = "no treatment"  # a control arm that is not a placebo: no <agent>, usual or standard care, observation
CLASS, HEAD_TO_HEAD, DOSE = "class", "head-to-head", "dose"
ANALYSIS_ORDER = {"ITT": 0, "": 1, "PP": 2}  # a trial's result over the numbers randomised before one over completers


def drug_class(drug: str) -> str:
    """The class of an arm key: the class of the agent it starts with (evidence.classes: "nadroparin (group QD)" is a
    low-molecular-weight heparin), "placebo", "no treatment" for another control, else the arm itself."""
    if drug == PLACEBO:
        return PLACEBO
    if is_control(drug):
        return NO_TREATMENT
    agents = agents_in(drug)
    return agents[0].cls if agents and drug.lower().startswith(agents[0].word) and " + " not in drug else drug


@dataclass(frozen=True)
class Side:
    """One side of a comparison in one trial: the arms combined and their summed counts (or continuous summary)."""

    arms: tuple[str, ...]
    events: int
    total: int
    data: tuple[ArmDatum, ...]  # the arm data (and so the sentences) behind the counts

    @property
    def mean(self) -> float | None:
        return self.data[0].mean if len(self.data) == 1 else None

    @property
    def sd(self) -> float | None:
        return self.data[0].sd if len(self.data) == 1 else None


@dataclass(frozen=True)
class TrialContrast:
    """One trial's data for one comparison, outcome and time point."""

    pmid: int
    intervention: Side
    comparator: Side


@dataclass(frozen=True)
class Comparison:
    """An intervention-vs-comparator pair in one condition ("proton pump inhibitor vs H2-receptor antagonist in
    erosive oesophagitis"), with its kind and the class of each side."""

    kind: str  # CLASS, HEAD_TO_HEAD, DOSE
    intervention: str
    comparator: str
    condition: str = NOT_STATED
    intervention_class: str = ""
    comparator_class: str = ""

    @property
    def arms(self) -> str:
        return f"{self.intervention} vs {self.comparator}"

    @property
    def label(self) -> str:
        return f"{self.arms} in {self.condition}"


@dataclass(frozen=True)
class OutcomeContrasts:
    """The trials that report one outcome at one time point for one comparison."""

    comparison: Comparison
    outcome: str
    weeks: float | None
    trials: tuple[TrialContrast, ...]
    continuous: bool = False  # means and SDs (pooled as a standardised mean difference), not events/totals

    @property
    def label(self) -> str:
        return f"{self.outcome}{f' at {_weeks(self.weeks)}' if self.weeks is not None else ''}"


def _weeks(weeks: float) -> str:
    months = round(weeks * 12 / 52)
    if weeks >= 26 and abs(months * 52 / 12 - weeks) < 0.6:
        return f"{months} months"
    return f"{weeks:g} week{'' if weeks == 1 else 's'}"


def _dose(arm: str) -> float:
    m = re.search(r"(\d+(?:\.\d+)?) (?:mg|µg|IU)$", arm)
    return float(m.group(1)) if m else -1.0


def _class_order(first: Sequence[str]) -> dict[str, int]:
    """Sort key of classes: the question's classes (else proton pump inhibitors) first, placebo last."""
    return {**{c: 0 for c in (first or (PPI,))}, H2RA: 2, PLACEBO: 3, NO_TREATMENT: 3}


def _pairs(arms: Sequence[tuple[str, str]], condition: str, first: Sequence[str] = ()) -> list[tuple[Comparison, list[str], list[str]]]:  # fmt: skip
    """The comparisons a trial's arms support, each with the arm labels on either side.

    `arms` are (arm label, drug) pairs ("rabeprazole 20 mg", "rabeprazole"); see the module docstring."""
    order = _class_order(first)
    classes: dict[str, list[tuple[str, str]]] = {}
    for arm in arms:
        classes.setdefault(drug_class(arm[1]), []).append(arm)
    ordered = sorted(classes, key=lambda c: (order.get(c, 1), c))
    out = []
    for i, one in enumerate(ordered):
        for two in ordered[i + 1 :]:
            out.append((Comparison(CLASS, one, two, condition, one, two), [a for a, _ in classes[one]],
                        [a for a, _ in classes[two]]))  # fmt: skip
    for cls, members in classes.items():
        if cls in (PLACEBO, NO_TREATMENT):
            continue
        drugs: dict[str, list[str]] = {}
        for arm, drug in members:
            drugs.setdefault(drug, []).append(arm)
        names = sorted(drugs)
        for i, one in enumerate(names):
            for two in names[i + 1 :]:
                out.append((Comparison(HEAD_TO_HEAD, one, two, condition, cls, cls), drugs[one], drugs[two]))
        for drug, labels in drugs.items():
            dosed = sorted((a for a in labels if _dose(a) > 0), key=_dose)
            if len(dosed) >= 2 and _dose(dosed[-1]) > _dose(dosed[0]):
                comparison = Comparison(DOSE, f"{drug} higher dose", f"{drug} lower dose", condition, cls, cls)
                out.append((comparison, [dosed[-1]], [dosed[0]]))
    return out


def _side(data: Sequence[ArmDatum]) -> Side:
    return Side(tuple(sorted({d.arm for d in data})), sum(d.events for d in data), sum(d.total for d in data),
                tuple(data))  # fmt: skip


def _trial_contrasts(group: Sequence[ArmDatum], condition: str, first: Sequence[str]) -> list[tuple[Comparison, TrialContrast]]:  # fmt: skip
    """One trial's arm data at one outcome and time point → its contrasts (see the module docstring). Continuous
    data contrast only single arms (means of two arms cannot be summed)."""
    by_arm: dict[str, ArmDatum] = {}
    for d in sorted(group, key=lambda d: ANALYSIS_ORDER.get(d.analysis, 1)):  # intention to treat first
        by_arm.setdefault(d.arm, d)
    pmid = group[0].pmid if group else 0
    out = []
    for comparison, one, two in _pairs([(d.arm, d.drug) for d in by_arm.values()], condition, first):
        left, right = [by_arm[a] for a in one], [by_arm[a] for a in two]
        if group[0].continuous and (len(left) > 1 or len(right) > 1):
            continue
        out.append((comparison, TrialContrast(pmid, _side(left), _side(right))))
    return out


def outcome_key(outcome: str) -> str:
    """The outcome a datum is pooled under: its class ("symptom relief: improvement in well-being" → "symptom relief")."""
    return outcome.split(":", 1)[0]


def comparisons(
    data: Iterable[ArmDatum], conditions: Mapping[int, str] | None = None, first: Sequence[str] = ()
) -> list[OutcomeContrasts]:
    """Every comparison × outcome × time point the arm data support, most trials first. `conditions` gives each
    trial's condition (PMID → label); `first` the classes put on the intervention side (the question's)."""
    conditions = conditions or {}
    groups: dict[tuple[int, bool, str, float | None], list[ArmDatum]] = {}
    for d in data:
        if ":" in d.outcome:  # one of several outcomes listed in one sentence: reported, not pooled
            continue
        if (
            d.continuous and d.sd is None
        ):  # a "±" the abstract does not name: listed, pooled once a reviewer gives the SD
            continue
        groups.setdefault((d.pmid, d.continuous, outcome_key(d.outcome), d.weeks), []).append(d)
    found: dict[tuple[Comparison, bool, str, float | None], list[TrialContrast]] = {}
    for (pmid, continuous, outcome, weeks), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3] or 0)):  # fmt: skip
        for comparison, contrast in _trial_contrasts(group, conditions.get(pmid, NOT_STATED), first):
            found.setdefault((comparison, continuous, outcome, weeks), []).append(contrast)
    out = [OutcomeContrasts(c, o, w, tuple(t), k) for (c, k, o, w), t in found.items()]
    return sorted(out, key=lambda oc: (-len(oc.trials), oc.comparison.kind != CLASS, oc.continuous, oc.comparison.label,
                                       oc.outcome, oc.weeks or 0))  # fmt: skip


def arms_named(text: str) -> list[tuple[str, str]]:
    """(arm label, drug) of every drug named in a PICO field, with its dose when one follows ("omeprazole 20 mg"):
    the arms the extraction rules find (`extract.arms_in`), then any other agent `evidence.classes` knows; words
    naming a class ("proton pump inhibitors", "antibiotics") are not drugs."""
    out = arms_in(text)
    known = {drug for _, drug in out}
    for agent in agents_in(text):
        if agent.word in known or classes_named(agent.word) or classes_named(agent.word.upper()):  # "ppi" too
            continue
        m = re.search(rf"\b{re.escape(agent.word)}\b\W{{0,3}}(?:(\d+(?:\.\d+)?)\s*mg\b)?", text, re.I)
        dose = m.group(1) if m and m.group(1) else ""
        out.append((f"{agent.word} {dose} mg" if dose else agent.word, agent.word))
        known.add(agent.word)
    return out


def planned_comparisons(
    intervention: str, comparator: str, condition: str, first: Sequence[str] = ()
) -> list[Comparison]:
    """The comparisons a trial's PICO intervention and comparator fields name (for a trial whose abstract gives no
    usable numbers): the class, head-to-head or dose comparisons of the drugs named in either field."""
    return [c for c, _, _ in _pairs(arms_named(f"{intervention}; {comparator}"), condition, first)]


def slug(text: str) -> str:
    """A file-name form of `text`; a long one is cut at 64 characters and keeps a hash of the whole."""
    out = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return out if len(out) <= 72 else f"{out[:64]}_{hashlib.sha1(out.encode()).hexdigest()[:7]}"
