"""find_existing_sr: the systematic-review search for a cluster (PubMed, or the local corpus offline) and its overlap
with the cluster (`overlap.py`)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from ra_agent.config import Config
from ra_agent.embed.embedder import Embedder, encode_batched
from ra_agent.evidence.questions.reviews import review_reason
from ra_agent.evidence.sr.overlap import SrOverlap, cluster_trials, covering_reviews, sr_result_path
from ra_agent.fileio import atomic_write
from ra_agent.ingest.http import ApiError, failure_level
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.view import cluster_row, e_query_vector, set_cluster_metrics

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


def find_existing_sr(
    cfg: Config,
    store: Store,
    cluster_id: str,
    *,
    embedder: Embedder,
    eutils: Any = None,
    vectors: Any = None,
) -> SrOverlap:
    """Overlap of a cluster with prior systematic reviews (docs/architecture.md), written to its latest metrics row.

    This is the cluster layer's view (the sr_overlap asset); a goal's find_existing_sr reads its question's coverage
    from the question's set (`agent.questions.load_question_set`).

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
    )
    set_cluster_metrics(store, cluster_id, sr_overlap=result.overlap)
    atomic_write(sr_result_path(cfg, cluster_id), json.dumps(result.as_dict(), indent=2) + "\n")
    log.info(
        "find_existing_sr %s (%s, %s): %d reviews, %d covering (%s) %d of %d trials, overlap %.3f%s",
        cluster_id, row["label"], result.searched, result.n_reviews, len(covering),
        f"cosine >= {threshold:.2f}",
        len(included), len(trials), result.overlap,
        " -> covered, pivot" if result.covered else "",
    )  # fmt: skip
    return result
