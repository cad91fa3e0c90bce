"""The sr_overlap asset's answer for a cluster (`SrOverlap`): which reviews cover the cluster by title cosine, what
they could have included of its trials, and where the answer is kept (<data_dir>/sr/<id>.json). It describes the
cluster layer; a review question's coverage is its set's (`evidence.questions`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra_agent.config import Config
from ra_agent.evidence.questions.corpus import cited_by
from ra_agent.evidence.questions.model import CoveringReview
from ra_agent.evidence.questions.reviews import review_reason
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

OVERLAP_DEFINITION = (
    "sr_overlap = share of the cluster's eligible trials that at least one covering review could have included "
    "(a covering review has cosine >= {threshold} to the cluster centroid; it could include a trial its reference "
    "list cites when ra holds that list, else a trial published no later than the review); 0 when no review covers"
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

    @property
    def definition(self) -> str:
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SrOverlap:
        values = {k: data[k] for k in ("cluster_id", "query", "overlap", "sr_pmids", "n_reviews", "offline")}
        extra = {k: data[k] for k in ("reviews", "threshold", "pivot_at", "searched", "centroid_source", "error",
                                      "trials_total", "trials_covered", "trial_basis") if k in data}  # fmt: skip
        return cls(
            **values,
            **extra,
            cosines={int(k): float(v) for k, v in data.get("cosines", {}).items()},
            reasons={int(k): str(v) for k, v in data.get("reasons", {}).items()},
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
