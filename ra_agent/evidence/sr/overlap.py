"""find_existing_sr's answer for a cluster (`SrOverlap`): which reviews cover it, by the goal's review question or by
title cosine, what they could have included of its trials, and where the answer is kept (<data_dir>/sr/<id>.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra_agent.config import Config
from ra_agent.evidence.questions.build import assess_coverage, build_questions
from ra_agent.evidence.questions.corpus import cited_by, topic_reviews
from ra_agent.evidence.questions.model import CoveringReview
from ra_agent.evidence.questions.reviews import is_review, review_reason
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

OVERLAP_DEFINITION = (
    "sr_overlap = share of the cluster's eligible trials that at least one covering review could have included "
    "(a covering review has cosine >= {threshold} to the cluster centroid; it could include a trial its reference "
    "list cites when ra holds that list, else a trial published no later than the review); 0 when no review covers"
)


QUESTION_OVERLAP_DEFINITION = (
    "sr_overlap = share of the cluster's trials eligible for the goal's review question (evidence.questions rules) "
    "that the best-matching review whose own question encompasses it could have included (its reference list when "
    "ra holds it, else the trials published no later than it); a review covers when that share >= sr_overlap_pivot; "
    "0 when none does"
)


@dataclass
class SrOverlap:
    """find_existing_sr's answer: the reviews found for a cluster, those covering it, and the overlap.

    `reviews` are all reviews found (best cosine first); `sr_pmids` those at or above `threshold`
    (the prior SRs that cover the cluster), detailed in `covering`; `overlap` = trials_covered /
    trials_total, the share of the cluster's eligible trials the covering reviews could have included
    (OVERLAP_DEFINITION; 0.0 when no review covers or the cluster has no trial).
    """

    cluster_id: str
    query: str
    overlap: float
    sr_pmids: list[int]
    n_reviews: int
    offline: bool
    cosines: dict[int, float] = field(default_factory=dict)
    reviews: list[int] = field(default_factory=list)
    threshold: float = 0.75
    pivot_at: float = 0.6
    searched: str = "pubmed"  # "pubmed" (live E-utilities) or "local corpus" (FTS5 offline rule)
    centroid_source: str = ""
    error: str = ""
    reasons: dict[int, str] = field(default_factory=dict)  # offline: why each paper counts as a review
    covering: list[CoveringReview] = field(default_factory=list)
    trials_total: int = 0
    trials_covered: int = 0
    trial_basis: str = ""  # which papers count as the cluster's trials (see `cluster_trials`)
    decided_by: str = "title cosine"  # "title cosine" or "review question" (the goal's topic, evidence.questions)
    question: str = ""  # the goal's question (PICO in words) when decided_by is "review question"
    why: dict[int, str] = field(default_factory=dict)  # review question: why each covering review encompasses it
    trials_since: list[int] = field(default_factory=list)  # eligible trials after the newest covering review
    question_trials: list[int] = field(default_factory=list)  # review question: the trials it counted
    verdict: str = ""  # review question: covered / covered, update warranted / gap / too few trials
    verdict_reason: str = ""
    not_answering: dict[int, str] = field(default_factory=dict)  # review question: reviews that do not answer it
    question_id: str = ""  # review question: its stable id (q-...)
    question_words: str = ""  # review question: the question as a reviewer writes it
    trial_reasons: dict[int, str] = field(default_factory=dict)  # review question: why each trial is eligible
    unchecked: list[str] = field(default_factory=list)  # review question: what this run could not check
    judged_by: str = ""  # review question: who judged eligibility and coverage

    @property
    def definition(self) -> str:
        if self.decided_by == "review question":
            return QUESTION_OVERLAP_DEFINITION
        return OVERLAP_DEFINITION.format(threshold=self.threshold)

    @property
    def covered(self) -> bool:
        """overlap > sr_overlap_pivot: an existing review covers the topic and the agent should pivot."""
        return self.overlap > self.pivot_at

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "query": self.query,
            "overlap": self.overlap,
            "sr_pmids": self.sr_pmids,
            "n_reviews": self.n_reviews,
            "offline": self.offline,
            "cosines": {str(k): v for k, v in self.cosines.items()},
            "reviews": self.reviews,
            "threshold": self.threshold,
            "pivot_at": self.pivot_at,
            "covered": self.covered,
            "searched": self.searched,
            "centroid_source": self.centroid_source,
            "error": self.error,
            "reasons": {str(k): v for k, v in self.reasons.items()},
            "covering": [c.as_dict() for c in self.covering],
            "trials_total": self.trials_total,
            "trials_covered": self.trials_covered,
            "trial_basis": self.trial_basis,
            "definition": self.definition,
            "decided_by": self.decided_by,
            "question": self.question,
            "why": {str(k): v for k, v in self.why.items()},
            "trials_since": self.trials_since,
            "question_trials": self.question_trials,
            "verdict": self.verdict,
            "verdict_reason": self.verdict_reason,
            "not_answering": {str(k): v for k, v in self.not_answering.items()},
            "question_id": self.question_id,
            "question_words": self.question_words,
            "trial_reasons": {str(k): v for k, v in self.trial_reasons.items()},
            "unchecked": self.unchecked,
            "judged_by": self.judged_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SrOverlap:
        values = {k: data[k] for k in ("cluster_id", "query", "overlap", "sr_pmids", "n_reviews", "offline")}
        extra = {k: data[k] for k in ("reviews", "threshold", "pivot_at", "searched", "centroid_source", "error",
                                      "trials_total", "trials_covered", "trial_basis", "decided_by", "question",
                                      "trials_since", "question_trials", "verdict", "verdict_reason",
                                      "question_id", "question_words", "unchecked", "judged_by")
                 if k in data}  # fmt: skip
        return cls(
            **values,
            **extra,
            cosines={int(k): float(v) for k, v in data.get("cosines", {}).items()},
            reasons={int(k): str(v) for k, v in data.get("reasons", {}).items()},
            why={int(k): str(v) for k, v in data.get("why", {}).items()},
            not_answering={int(k): str(v) for k, v in data.get("not_answering", {}).items()},
            trial_reasons={int(k): str(v) for k, v in data.get("trial_reasons", {}).items()},
            covering=[CoveringReview.from_dict(c) for c in data.get("covering", [])],
        )


def sr_result_path(cfg: Config, cluster_id: str) -> Path:
    """Where find_existing_sr keeps its answer for a cluster: <data_dir>/sr/<cluster_id>.json."""
    return Workspace.of(cfg).root / "sr" / f"{cluster_id}.json"


def load_sr_overlap(cfg: Config, cluster_id: str) -> SrOverlap | None:
    """The last find_existing_sr answer for a cluster, or None."""
    path = sr_result_path(cfg, cluster_id)
    return SrOverlap.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def cluster_trials(cfg: Config, store: Store, cluster_id: str, exclude: Sequence[int] = ()) -> tuple[list[Paper], str]:
    """The papers sr_overlap counts as the cluster's trials, and which rule chose them.

    With PICO records (run_pico has run): the eligible trials (`evidence.pico` eligibility: randomised,
    population, intervention and outcome stated; never a review). Without them: every member that
    `review_reason` does not call a review. Papers in `exclude` (the reviews found) are never trials.
    """
    from ra_agent.evidence.pico.extract import is_eligible_trial, read_pico
    from ra_agent.topics.view import member_pmids, pico_path

    skip = set(exclude)
    papers = [p for p in store.papers(member_pmids(store, cluster_id)) if p.pmid not in skip]
    path = pico_path(cfg, cluster_id)
    if path.exists():
        records = {r.pmid: r for r in read_pico(path)}
        return [p for p in papers if is_eligible_trial(p, records.get(p.pmid))], "eligible trials (PICO records)"
    return [p for p in papers if review_reason(p) is None], "cluster members that are not reviews (no PICO records yet)"


def covering_reviews(
    store: Store, papers: Sequence[Paper], cosines: Mapping[int, float], trials: Sequence[Paper]
) -> list[CoveringReview]:
    """What each covering review could have included of `trials`: the trials its reference list cites
    when ra holds the list, else the trials published no later than the review (a trial or review
    without a year is never counted as included)."""
    out = []
    for paper in papers:
        cited = cited_by(store, paper.pmid)
        if cited:
            basis, covered = "reference list", [t.pmid for t in trials if t.pmid in cited]
        else:
            basis = "publication year"
            covered = [t.pmid for t in trials if t.year is not None and paper.year is not None and t.year <= paper.year]
        out.append(CoveringReview(paper.pmid, paper.year, paper.title, basis, covered, cosine=cosines[paper.pmid]))
    return out


def question_coverage(
    cfg: Config, store: Store, cluster_id: str, topic: Any, found: Sequence[Paper], cosines: Mapping[int, float]
) -> tuple[list[int], list[CoveringReview], list[Paper], dict[str, Any]]:
    """The review-question test for a cluster: its members eligible for the goal's topic form the question's
    trials; the reviews found by the label search and every review of the local corpus whose own question
    encompasses the topic's (`questions.build.assess_coverage`) are checked; those holding >= [sr]
    sr_overlap_pivot of the trials cover it, best match first. Returns (covering PMIDs, their details, the trials,
    SrOverlap fields)."""
    from ra_agent.topics.view import member_pmids

    members = [p for p in store.papers(member_pmids(store, cluster_id)) if not is_review(p)]
    reviews = {p.pmid: p for p in [*found, *topic_reviews(store)]}
    topic = topic.with_corpus([*members, *reviews.values()])
    questions, _ = build_questions(topic, members)
    question = questions[0]
    references = {pmid: cited_by(store, pmid) for pmid in reviews}
    assess_coverage([question], list(reviews.values()), topic, pivot=cfg.sr.sr_overlap_pivot,
                    update_after=cfg.sr.update_after_trials, min_trials=cfg.sr.min_eligible_trials,
                    references={k: v for k, v in references.items() if v})  # fmt: skip
    holding = [r for r in question.reviews if r.share >= cfg.sr.sr_overlap_pivot and question.trials]
    details = [CoveringReview(r.pmid, r.year, r.title, r.basis, r.trials_covered, cosine=cosines.get(r.pmid, 0.0))
               for r in holding]  # fmt: skip
    by_pmid = {p.pmid: p for p in members}
    trials = [by_pmid[p] for p in question.trial_pmids]
    decision = {"decided_by": "review question", "question": question.pico, "verdict": question.verdict,
                "verdict_reason": question.verdict_reason, "not_answering": question.not_answering,
                "question_id": question.id, "question_words": question.in_words, "trial_reasons": question.trials,
                "unchecked": question.unchecked, "judged_by": question.judged_by,
                "why": {r.pmid: r.why for r in question.reviews}, "trials_since": question.trials_since,
                "question_trials": question.trial_pmids}  # fmt: skip
    return [r.pmid for r in holding], details, trials, decision
