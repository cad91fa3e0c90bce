"""The review question's shared types, a leaf of `evidence.questions`: a question (`ReviewQuestion`), a review that
answers it (`CoveringReview`), a judge's answers (`Eligibility` for a trial, `Judgement` for a review) and the verdict
names; it imports nothing of its own folder."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ra_agent.evidence.classes import Agent, lineage

RULES = "rules (evidence.questions: title, abstract, MeSH headings, publication types, year)"
VERDICTS = ("gap", "covered", "covered, update warranted", "too few trials")

# The comparators a trial names that are not a class of the table (`trials.comparators_of` finds them)
PLACEBO_ARM = "placebo or no treatment"
DOSE_OR_SCHEDULE = "dose, schedule or formulation"
NOT_NAMED = "comparator not named in the title or abstract"
NON_DRUG_LABELS = ("surgery", "a procedure", "exercise, diet or education")
# What kind of comparison a comparator makes: the branches of a question's tree, and what a handbook may limit
PLACEBO_KIND, SAME_CLASS, OTHER_CLASS, NON_DRUG_KIND, DOSE_KIND, UNNAMED = (
    "placebo or no treatment", "head to head within the class", "another class", "non-drug", "dose or schedule",
    "not named")  # fmt: skip
KINDS = (PLACEBO_KIND, SAME_CLASS, OTHER_CLASS, NON_DRUG_KIND, DOSE_KIND, UNNAMED)


def comparator_kind(comparator: str) -> str:
    """The kind of comparison a comparator label makes (one of KINDS): "another <class>" is head to head within
    the class, a class of the table another class."""
    if comparator == PLACEBO_ARM:
        return PLACEBO_KIND
    if comparator.startswith("another "):
        return SAME_CLASS
    if comparator == DOSE_OR_SCHEDULE:
        return DOSE_KIND
    if comparator == NOT_NAMED:
        return UNNAMED
    if comparator in NON_DRUG_LABELS:
        return NON_DRUG_KIND
    return OTHER_CLASS


def compares_with(comparator: str, wanted: str) -> bool:
    """Whether a trial's comparator label is the class `wanted` or a narrower one: "another proton pump inhibitor"
    (head to head within the class) compares with a proton pump inhibitor, as "H2-receptor antagonist" does with
    an H2-receptor antagonist."""
    cls = comparator.removeprefix("another ")
    return cls == wanted or wanted in lineage(cls)


@dataclass(frozen=True)
class Judgement:
    """Whether a review answers a question, why, who judged, and how well it matches (higher ranks first)."""

    verdict: bool
    reason: str
    judged_by: str
    rank: tuple = field(default=())


@dataclass(frozen=True)
class Eligibility:
    """Whether a record is an eligible trial for a topic, why, what it tests against what, and who judged."""

    pmid: int
    eligible: bool
    reason: str
    agents: tuple[Agent, ...] = ()
    comparator: str = ""  # the comparator it names first
    judged_by: str = RULES
    comparators: tuple[str, ...] = ()  # every comparator it names (a multi-arm trial names several)

    @property
    def comparator_kind(self) -> str:
        return comparator_kind(self.comparator) if self.comparator else ""

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of comparison it makes (`KINDS`), one per comparator."""
        return tuple(dict.fromkeys(comparator_kind(c) for c in self.comparators or (self.comparator,) if c))

    def as_dict(self) -> dict[str, Any]:
        return {"pmid": self.pmid, "eligible": self.eligible, "reason": self.reason,
                "agents": [a.word for a in self.agents], "comparator": self.comparator,
                "comparator_kind": self.comparator_kind, "comparators": list(self.comparators),
                "judged_by": self.judged_by}  # fmt: skip


@dataclass
class CoveringReview:
    """A review that covers a question and which of its trials it could have included (`basis`: "reference list"
    when ra holds the review's references, else "publication year").

    Found by the review question's rules (`build.assess_coverage`): `why` its own question encompasses the question
    and the `share` of the question's trials it could include; `cosine` stays None. Listed by find_existing_sr
    (`evidence.sr`): `cosine`, its title's cosine to the cluster (0.0 when the review question found it).
    """

    pmid: int
    year: int | None
    title: str
    basis: str
    trials_covered: list[int]
    why: str = ""
    share: float = 0.0
    cosine: float | None = None

    def as_dict(self) -> dict[str, Any]:
        if self.cosine is None:  # found by the review question's rules
            return {"pmid": self.pmid, "year": self.year, "title": self.title, "why": self.why, "basis": self.basis,
                    "trials_covered": self.trials_covered, "share": self.share}  # fmt: skip
        return {"pmid": self.pmid, "year": self.year, "title": self.title, "cosine": self.cosine,
                "basis": self.basis, "trials_covered": self.trials_covered}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CoveringReview:
        """A covering review as `as_dict` wrote it (by the review question's rules, or with find_existing_sr's
        cosine)."""
        cosine = float(data["cosine"]) if data.get("cosine") is not None else None
        return cls(int(data["pmid"]), data.get("year"), str(data.get("title", "")), str(data.get("basis", "")),
                   [int(p) for p in data.get("trials_covered", [])], why=str(data.get("why", "")),
                   share=float(data.get("share", 0.0)), cosine=cosine)  # fmt: skip


@dataclass
class ReviewQuestion:
    """One question a reviewer would write: population × intervention (class) × comparator, its eligible
    trials (each with its reason) and what reviews already answer it.

    Plain data: `trial_pmids`, `intervention`, `comparator` are what later stages (comparisons, pooling)
    read; `verdict` and the metrics are filled by `assess_coverage`.
    """

    id: str
    population: str
    intervention: str  # a class name from evidence.classes (or the agent when it has no class)
    comparator: str  # "any" for the topic's own question
    outcomes: list[str] = field(default_factory=list)
    trials: dict[int, str] = field(default_factory=dict)  # report PMID -> why it is eligible
    years: dict[int, int | None] = field(default_factory=dict)
    studies: dict[str, list[int]] = field(default_factory=dict)  # study id -> its reports here, first report first
    study_links: dict[str, list[str]] = field(default_factory=dict)  # study id -> why its reports are one study
    parent: str | None = None  # id of the broader question this one narrows
    in_scope: bool = True  # False: a comparison the handbook's prose leaves out (shown, never the goal's answer)
    reviews: list[CoveringReview] = field(default_factory=list)  # every review answering it, best match first
    covering: CoveringReview | None = None  # the best-matching review holding >= pivot of its trials
    newest: CoveringReview | None = None  # the newest review holding >= pivot of its trials
    trials_since: list[int] = field(default_factory=list)  # first reports of the studies published after `newest`
    not_answering: dict[int, str] = field(default_factory=dict)  # reviews naming its concepts that do not answer it
    verdict: str = ""
    verdict_reason: str = ""
    judged_by: str = RULES
    unchecked: list[str] = field(default_factory=list)  # what this (offline) run could not check

    @property
    def trial_pmids(self) -> list[int]:
        return sorted(self.trials)

    @property
    def study_firsts(self) -> dict[str, int]:
        """Study id -> the PMID of its first report (the one a list of studies shows)."""
        return {sid: reports[0] for sid, reports in self.studies.items()}

    @property
    def pico(self) -> str:
        versus = "any comparator" if self.comparator == "any" else self.comparator
        return f"P: {self.population} · I: {self.intervention} · C: {versus}"

    @property
    def in_words(self) -> str:
        """The question as a reviewer writes it: "Proton pump inhibitor versus placebo or no treatment for people
        with gastroesophageal reflux"."""
        versus = "" if self.comparator == "any" else f" versus {self.comparator}"
        return f"{self.intervention[:1].upper()}{self.intervention[1:]}{versus} for people with {self.population}"

    @property
    def metrics(self) -> dict[str, Any]:
        """eligible_trials (studies), reports, newest_trial (year), sr_overlap (share of the studies the covering
        review could include) and PRISMA_compliant (None: not checked by these rules)."""
        years = [y for y in self.years.values() if y is not None]
        return {
            "eligible_trials": len(self.studies),
            "reports": len(self.trials),
            "newest_trial": max(years) if years else None,
            "sr_overlap": self.covering.share if self.covering else 0.0,
            "PRISMA_compliant": None,
            "trials_since_review": len(self.trials_since),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "population": self.population, "intervention": self.intervention,
            "comparator": self.comparator, "pico": self.pico, "outcomes": self.outcomes,
            "trials": {str(k): v for k, v in sorted(self.trials.items())},
            "years": {str(k): v for k, v in sorted(self.years.items())}, "studies": self.studies,
            "study_links": self.study_links, "parent": self.parent, "in_scope": self.in_scope,
            "reviews": [r.as_dict() for r in self.reviews],
            "covering": self.covering.as_dict() if self.covering else None,
            "newest": self.newest.as_dict() if self.newest else None, "trials_since": self.trials_since,
            "not_answering": {str(k): v for k, v in self.not_answering.items()}, "verdict": self.verdict, "verdict_reason": self.verdict_reason,
            "judged_by": self.judged_by, "unchecked": self.unchecked, "metrics": self.metrics,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReviewQuestion:
        """A question as `as_dict` wrote it (questions.json); the metrics are computed again from its fields."""

        def review(value: Any) -> CoveringReview | None:
            return CoveringReview.from_dict(value) if value else None

        return cls(
            id=str(data["id"]), population=str(data["population"]), intervention=str(data["intervention"]),
            comparator=str(data["comparator"]), outcomes=[str(o) for o in data.get("outcomes", [])],
            trials={int(k): str(v) for k, v in data.get("trials", {}).items()},
            years={int(k): v for k, v in data.get("years", {}).items()},
            studies={str(k): [int(p) for p in v] for k, v in data.get("studies", {}).items()},
            study_links={str(k): [str(x) for x in v] for k, v in data.get("study_links", {}).items()},
            parent=data.get("parent"), in_scope=bool(data.get("in_scope", True)),
            reviews=[CoveringReview.from_dict(r) for r in data.get("reviews", [])],
            covering=review(data.get("covering")), newest=review(data.get("newest")),
            trials_since=[int(p) for p in data.get("trials_since", [])],
            not_answering={int(k): str(v) for k, v in data.get("not_answering", {}).items()},
            verdict=str(data.get("verdict", "")), verdict_reason=str(data.get("verdict_reason", "")),
            judged_by=str(data.get("judged_by", RULES)), unchecked=[str(u) for u in data.get("unchecked", [])],
        )  # fmt: skip
