"""find_existing_sr (memo 70 §2.5): the systematic-review search for a cluster and its overlap with the cluster."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from ra_agent.config import Config
from ra_agent.embed.embedder import Embedder, encode_batched
from ra_agent.evidence.reviews import is_review, review_reason
from ra_agent.fileio import atomic_write
from ra_agent.ingest.http import ApiError, failure_level
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.view import cluster_row, e_query_vector, set_cluster_metrics
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

SYSTEMATIC_SUBSET = "systematic[sb]"
MAX_TERM_WORDS = 4  # a label piece longer than this is free text: its content words become separate terms
SNIPPET_CHARS = 200
QUERY_MAX_CHARS = 300


# ============================================================================ find_existing_sr


def label_terms(label: str, max_terms: int) -> list[str]:
    """Search terms of a cluster label, most distinctive first.

    A label is split at "·", ";", ",", "|" and "vs"/"versus"; stop words are trimmed from the ends of
    each piece; a piece of more than MAX_TERM_WORDS words (free-text labels) contributes its content
    words one by one. Case-insensitive duplicates are dropped; at most `max_terms` terms are kept.
    """
    terms: list[str] = []
    for piece in re.split(r"\s*(?:·|;|,|\||\bversus\b|\bvs\b\.?)\s*", label, flags=re.I):
        words = re.findall(r"[A-Za-z0-9][\w'-]*", piece)
        while words and words[0].lower() in ENGLISH_STOP_WORDS:
            words.pop(0)
        while words and words[-1].lower() in ENGLISH_STOP_WORDS:
            words.pop()
        if not words:
            continue
        parts = (
            [w for w in words if w.lower() not in ENGLISH_STOP_WORDS]
            if len(words) > MAX_TERM_WORDS
            else [" ".join(words)]
        )
        for part in parts:
            if part.lower() not in {t.lower() for t in terms}:
                terms.append(part)
    return terms[:max_terms]


def _term_clauses(terms: Sequence[str]) -> list[str]:
    """Every pair of terms ANDed (the single term when there is one): a review must match two label terms."""
    if not terms:
        raise ValueError("the cluster label yields no search terms")
    if len(terms) == 1:
        return [terms[0]]
    return [f"{a} AND {b}" for a, b in combinations(terms, 2)]


def pubmed_sr_query(terms: Sequence[str]) -> str:
    """PubMed query for reviews matching at least two label terms, each clause restricted to systematic[sb].

    Written as an OR of fully parenthesised AND-clauses, which PubMed and simple term evaluators
    read the same way, e.g. `(a AND b AND systematic[sb]) OR (a AND c AND systematic[sb])`.
    """
    return " OR ".join(f"({clause} AND {SYSTEMATIC_SUBSET})" for clause in _term_clauses(terms))


def local_sr_query(terms: Sequence[str]) -> str:
    """The same term rule for the local full-text index (Store.search), without the PubMed subset filter."""
    return " OR ".join(f"({clause})" for clause in _term_clauses(terms))


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


@dataclass(frozen=True)
class CoveringReview:
    """A review at or above the cosine threshold and what it could have included of the cluster's trials."""

    pmid: int
    year: int | None
    title: str
    cosine: float
    basis: str  # "reference list" (ra holds the review's references) or "publication year"
    trials_covered: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {"pmid": self.pmid, "year": self.year, "title": self.title, "cosine": self.cosine,
                "basis": self.basis, "trials_covered": self.trials_covered}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CoveringReview:
        return cls(int(data["pmid"]), data.get("year"), str(data.get("title", "")), float(data["cosine"]),
                   str(data.get("basis", "")), [int(p) for p in data.get("trials_covered", [])])  # fmt: skip


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


def _live_reviews(cfg: Config, store: Store, eutils: Any, query: str) -> list[Paper]:
    """esearch + efetch of the reviews PubMed returns for `query`, stored (source "efetch") so reports can cite them."""
    handle = eutils.esearch(query, retmax=cfg.sr.sr_retmax, usehistory=False)
    papers = eutils.efetch(handle.ids) if handle.ids else []
    store.upsert_papers(papers, source="efetch", query=query, batch_size=cfg.embedding.refresh_threshold)
    rank = {pmid: i for i, pmid in enumerate(handle.ids)}
    return sorted(papers, key=lambda p: rank.get(p.pmid, len(rank)))


def _local_reviews(cfg: Config, store: Store, query: str) -> tuple[list[Paper], dict[int, str]]:
    """Best-matching local papers for the label query that pass `review_reason`, at most sr_retmax."""
    total = store.conn.execute("SELECT COUNT(*) FROM paper").fetchone()[0]
    hits = store.search(query, limit=max(total, 1))
    found: list[Paper] = []
    reasons: dict[int, str] = {}
    for start in range(0, len(hits), 500):
        for paper in store.papers(hits[start : start + 500]):
            reason = review_reason(paper)
            if reason:
                found.append(paper)
                reasons[paper.pmid] = reason
                if len(found) >= cfg.sr.sr_retmax:
                    return found, reasons
    return found, reasons


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


def _cited_by(store: Store, review: int) -> set[int]:
    return {r[0] for r in store.conn.execute("SELECT dst FROM ref WHERE src=? AND dst>0", (review,))}


def covering_reviews(
    store: Store, papers: Sequence[Paper], cosines: Mapping[int, float], trials: Sequence[Paper]
) -> list[CoveringReview]:
    """What each covering review could have included of `trials`: the trials its reference list cites
    when ra holds the list, else the trials published no later than the review (a trial or review
    without a year is never counted as included)."""
    out = []
    for paper in papers:
        cited = _cited_by(store, paper.pmid)
        if cited:
            basis, covered = "reference list", [t.pmid for t in trials if t.pmid in cited]
        else:
            basis = "publication year"
            covered = [t.pmid for t in trials if t.year is not None and paper.year is not None and t.year <= paper.year]
        out.append(CoveringReview(paper.pmid, paper.year, paper.title, cosines[paper.pmid], basis, covered))
    return out


def topic_reviews(store: Store) -> list[Paper]:
    """Every paper of the local corpus that `questions.is_review` calls a review (a LIKE pre-filter on publication
    types, journal, title and abstract, then the rule)."""

    rows = store.conn.execute(
        "SELECT pmid FROM paper WHERE LOWER(pub_types) LIKE '%review%' OR LOWER(pub_types) LIKE '%meta-analysis%' "
        "OR LOWER(journal) LIKE '%cochrane%' OR LOWER(title) LIKE '%systematic%' OR LOWER(title) LIKE '%meta%' "
        "OR LOWER(abstract) LIKE '%systematic%review%' OR LOWER(abstract) LIKE '%meta%analy%'"
    )
    pmids = [r[0] for r in rows]
    papers = [p for start in range(0, len(pmids), 500) for p in store.papers(pmids[start : start + 500])]
    return [p for p in papers if is_review(p)]


def question_coverage(
    cfg: Config, store: Store, cluster_id: str, topic: Any, found: Sequence[Paper], cosines: Mapping[int, float]
) -> tuple[list[int], list[CoveringReview], list[Paper], dict[str, Any]]:
    """The review-question test for a cluster: its members eligible for the goal's topic form the question's
    trials; the reviews found by the label search and every review of the local corpus whose own question
    encompasses the topic's (`questions.assess_coverage`) are checked; those holding >= [sr] sr_overlap_pivot
    of the trials cover it, best match first (`questions.assess_coverage`). Returns (covering PMIDs, their details,
    the trials, SrOverlap fields)."""
    from ra_agent.evidence.questions import assess_coverage as assess
    from ra_agent.evidence.questions import build_questions
    from ra_agent.topics.view import member_pmids

    members = [p for p in store.papers(member_pmids(store, cluster_id)) if not is_review(p)]
    reviews = {p.pmid: p for p in [*found, *topic_reviews(store)]}
    topic = topic.with_corpus([*members, *reviews.values()])
    questions, _ = build_questions(topic, members)
    question = questions[0]
    references = {pmid: _cited_by(store, pmid) for pmid in reviews}
    assess([question], list(reviews.values()), topic, pivot=cfg.sr.sr_overlap_pivot,
           update_after=cfg.sr.update_after_trials, min_trials=cfg.sr.min_eligible_trials,
           references={k: v for k, v in references.items() if v})  # fmt: skip
    holding = [r for r in question.reviews if r.share >= cfg.sr.sr_overlap_pivot and question.trials]
    details = [CoveringReview(r.pmid, r.year, r.title, cosines.get(r.pmid, 0.0), r.basis, r.trials_covered)
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


def find_existing_sr(
    cfg: Config,
    store: Store,
    cluster_id: str,
    *,
    embedder: Embedder,
    eutils: Any = None,
    vectors: Any = None,
    topic: Any = None,
) -> SrOverlap:
    """Overlap of a cluster with prior systematic reviews (memo 70 §2.5), written to its latest metrics row.

    With the goal's `topic` (an `evidence.questions.Topic`, from its handbook's seed query) the deciding test
    is the review question, not the title cosine: see `question_coverage` (the cosines are still listed).

    1. Terms from the cluster label (`label_terms`, at most [clustering] audit_label_terms).
    2. Online (an E-utilities client is given and the API is not marked offline): PubMed esearch of
       `pubmed_sr_query(terms)` (at least two label terms AND systematic[sb]), efetch of the hits,
       stored with source "efetch". Offline, or when the client fails (ApiUnavailable or an NCBI
       error): the local corpus via FTS5 over `local_sr_query(terms)`, keeping papers that pass
       `review_reason` (publication type Systematic Review / Meta-Analysis / Review, or the title or
       abstract says "systematic review" or "meta-analysis"), best match first.
    3. The reviews' titles are embedded and compared (cosine) with the cluster's E-space vector: the
       frozen centroid when the cluster was frozen on E vectors, else the centroid of its members' E
       vectors recomputed now (see `e_query_vector`, reported as `centroid_source`).
    4. Reviews at cosine >= [sr] sr_cosine_threshold cover the cluster. overlap = share of the cluster's
       trials (`cluster_trials`) that a covering review could have included (`covering_reviews`; 0.0 when
       none covers), written as sr_overlap into the cluster's latest cluster_metrics row, and the whole
       answer to <data_dir>/sr/<cluster_id>.json.
    """
    from ra_agent.store.vectors import open_active

    vectors = vectors if vectors is not None else open_active(cfg)
    row = cluster_row(store, cluster_id)
    q = e_query_vector(store, cluster_id, vectors)
    if q.dim != embedder.dim:
        raise ValueError(f"embedder {embedder.model_id} gives {embedder.dim}-dim vectors; cluster vectors have {q.dim}")
    terms = label_terms(row["label"], cfg.clustering.audit_label_terms)
    query = pubmed_sr_query(terms)
    offline, error, reasons = True, "", {}
    papers: list[Paper] = []
    if eutils is not None and not store.api_state("eutils")["offline"]:
        if getattr(eutils, "store", None) is None:
            eutils.store = store  # its request outcomes drive the offline counter
        try:
            papers, offline = _live_reviews(cfg, store, eutils, query), False
        except ApiError as exc:
            error = str(exc)
            log.log(failure_level(exc), "find_existing_sr %s: E-utilities failed (%s); searching the local corpus",
                    cluster_id, exc)  # fmt: skip
    elif eutils is not None:
        error = "E-utilities marked offline"
    if offline:
        papers, reasons = _local_reviews(cfg, store, local_sr_query(terms))
    texts = [p.title or p.abstract[:SNIPPET_CHARS] for p in papers]
    encoded = encode_batched(embedder, texts, cfg.embedding.batch_size, halve_on_oom=cfg.hardware.gpu_batch_halving)
    kept = [papers[i] for i in encoded.kept]
    cos = q.cosines(encoded.vectors) if len(kept) else np.zeros(0)
    cosines = {p.pmid: round(float(c), 4) for p, c in zip(kept, cos, strict=True)}
    ranked = sorted(cosines, key=lambda pmid: (-cosines[pmid], pmid))
    threshold = cfg.sr.sr_cosine_threshold
    covering = [pmid for pmid in ranked if cosines[pmid] >= threshold]
    trials, trial_basis = cluster_trials(cfg, store, cluster_id, exclude=ranked)
    by_pmid = {p.pmid: p for p in kept}
    decision: dict[str, Any] = {}
    if topic is not None:
        covering, details, trials, decision = question_coverage(cfg, store, cluster_id, topic, kept, cosines)
        trial_basis = "trials eligible for the goal's review question (evidence.questions rules)"
        included = {pmid for review in details[:1] for pmid in review.trials_covered}
        ranked += [pmid for pmid in covering if pmid not in ranked]  # covering reviews found by the question
    else:
        details = covering_reviews(store, [by_pmid[p] for p in covering], cosines, trials)
        included = {pmid for review in details for pmid in review.trials_covered}
    overlap = len(included) / len(trials) if trials else 0.0
    result = SrOverlap(
        cluster_id=cluster_id,
        query=query if not offline else local_sr_query(terms),
        overlap=round(overlap, 4),
        sr_pmids=covering,
        n_reviews=len(ranked),
        offline=offline,
        cosines=cosines,
        reviews=ranked,
        threshold=threshold,
        pivot_at=cfg.sr.sr_overlap_pivot,
        searched="local corpus" if offline else "pubmed",
        centroid_source=q.source,
        error=error,
        reasons={p: reasons[p] for p in ranked if p in reasons},
        covering=details,
        trials_total=len(trials),
        trials_covered=len(included),
        trial_basis=trial_basis,
        **decision,
    )
    if topic is not None:  # Success is judged on the goal's question: its trials are the eligible ones
        set_cluster_metrics(store, cluster_id, sr_overlap=result.overlap, eligible_trials=len(trials))
    else:
        set_cluster_metrics(store, cluster_id, sr_overlap=result.overlap)
    atomic_write(sr_result_path(cfg, cluster_id), json.dumps(result.as_dict(), indent=2) + "\n")
    log.info(
        "find_existing_sr %s (%s, %s): %d reviews, %d covering (%s) %d of %d trials, overlap %.3f%s",
        cluster_id, row["label"], result.searched, result.n_reviews, len(covering),
        f"review question {result.question}" if topic is not None else f"cosine >= {threshold:.2f}",
        len(included), len(trials), result.overlap,
        " -> covered, pivot" if result.covered else "",
    )  # fmt: skip
    return result
