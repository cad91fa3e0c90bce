"""Topic clusters (memo 40): HDBSCAN formation, audit, frozen centroids, tau_assign, assignment, split/merge/drop, metrics."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TypeAlias, cast

import numpy as np

from ra_agent.config import ClusteringConfig, Config
from ra_agent.fileio import atomic_writer
from ra_agent.store.db import Store

log = logging.getLogger(__name__)

Pmids: TypeAlias = Sequence[int] | np.ndarray  # PMIDs as a list or an int64 array

NOISE = -1  # HDBSCAN's label for papers in no cluster

# Vector families, named as in the vector store: E = title · abstract; p i c o m = PICO fields + study design.
ABSTRACT_FAMILY = "E"
PICO_FEATURE_FAMILIES = ("i", "c", "o", "m")  # memo 40 §2.1: [I ‖ C ‖ O ‖ StudyDesign]
HET_FAMILIES = ("p", "i", "c", "o")  # memo 40 §7: het_numeric over P, I, C, O
PICO_SPACE = "|".join(PICO_FEATURE_FAMILIES)

# cluster_manifest.status values
ACTIVE, SPLIT, MERGED, DROPPED = "active", "split", "merged_into", "dropped"
KEEP, MERGE_INTO, DISCARD = "keep", "merge_into", "discard"
AUDIT_ACTIONS = (KEEP, MERGE_INTO, DISCARD)

# Tokenisation of the rule-based labeller: words of two or more characters starting with a letter,
# unigrams and bigrams (so "helicobacter pylori" can be one term).
TERM_TOKEN_PATTERN = r"(?u)\b[^\W\d_][\w-]*\w\b"
TERM_NGRAMS = (1, 2)
SQL_CHUNK = 500  # PMIDs per `IN (...)` query, well below SQLite's host-parameter limit

# Cluster map figure (presentation only)
MAP_FIGSIZE_IN = (7, 6)
MAP_DPI = 100
MAP_POINT_SIZE = {"noise": 4, "cluster": 6}
MAP_COLOURMAP = "tab20"

MANIFEST_COLUMNS = ("cluster_id", "label", "size", "mean_year", "ers", "cvgr", "het_numeric", "dispersion", "unstable")


class AuditError(ValueError):
    """Audit decisions that cannot be applied; the message says which decision and why."""


# ----------------------------------------------------------------------------- features


def unit_rows(x: np.ndarray) -> np.ndarray:
    """float32 copy of `x` with every non-zero row scaled to unit L2 norm (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _family_key(name: str) -> str:
    return ABSTRACT_FAMILY if name.upper() == ABSTRACT_FAMILY else name.lower()


def _has_pico(families: Mapping[str, np.ndarray]) -> bool:
    if not all(f in families for f in PICO_FEATURE_FAMILIES):
        return False
    return bool(np.all(np.any(np.hstack([families[f] for f in PICO_FEATURE_FAMILIES]) != 0, axis=1)))


@dataclass(frozen=True, eq=False)
class Features:
    """Row-normalised feature vectors of some papers in one feature space (so euclidean distance ≈ cosine).

    `space` is "E" (abstract vectors) or "i|c|o|m" (concatenated PICO vectors); `families` keeps every
    family that was given, rows unit-normalised, for het_numeric.
    """

    pmids: np.ndarray
    matrix: np.ndarray
    space: str
    families: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, pmids: Pmids, families: Mapping[str, np.ndarray], mode: str = "auto") -> Features:
        """Feature matrix from vector families keyed "E", "p", "i", "c", "o", "m" (rows aligned with `pmids`).

        mode "abstract" uses E; "pico" uses [i ‖ c ‖ o ‖ m], each family unit-normalised before
        concatenation (a missing field is a zero block) and the row normalised again; "auto" uses
        PICO when all four families are given and every paper has at least one non-zero PICO field.
        """
        ids = np.asarray(pmids, dtype=np.int64)
        if len(np.unique(ids)) != len(ids):
            raise ValueError("PMIDs must be unique")
        fams = {_family_key(k): unit_rows(v) for k, v in families.items() if v is not None}
        for name, rows in fams.items():
            if rows.ndim != 2 or len(rows) != len(ids):
                raise ValueError(f"family {name}: expected ({len(ids)}, dim) rows, got {rows.shape}")
        if mode not in ("auto", "abstract", "pico"):
            raise ValueError(f"unknown feature mode {mode!r} (auto, abstract, pico)")
        if mode == "pico" or (mode == "auto" and _has_pico(fams)):
            missing = [f for f in PICO_FEATURE_FAMILIES if f not in fams]
            if missing:
                raise ValueError(f"PICO features need families {', '.join(missing)}")
            matrix, space = unit_rows(np.hstack([fams[f] for f in PICO_FEATURE_FAMILIES])), PICO_SPACE
        elif ABSTRACT_FAMILY in fams:
            matrix, space = fams[ABSTRACT_FAMILY], ABSTRACT_FAMILY
        else:
            raise ValueError("abstract features need the E family")
        empty = ~np.any(matrix != 0, axis=1)
        if empty.any():
            raise ValueError(
                f"{int(empty.sum())} papers have an all-zero {space} vector, e.g. {ids[empty][:5].tolist()}"
            )
        return cls(ids, matrix, space, fams)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.pmids)

    @cached_property
    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.pmids, kind="stable")
        return order, self.pmids[order]

    def rows(self, pmids: Pmids) -> np.ndarray:
        """Row numbers of the given PMIDs; KeyError when some have no vector here."""
        order, keys = self._index
        wanted = np.asarray(pmids, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, wanted), 0, max(len(keys) - 1, 0))
        found = keys[pos] == wanted if len(keys) else np.zeros(len(wanted), bool)
        if not found.all():
            raise KeyError(
                f"{int((~found).sum())} PMIDs have no {self.space} vector, e.g. {wanted[~found][:5].tolist()}"
            )
        return order[pos]

    def vectors(self, pmids: Pmids) -> np.ndarray:
        return self.matrix[self.rows(pmids)]

    def subset(self, pmids: Pmids) -> Features:
        """The same features restricted to (and ordered like) `pmids`."""
        rows = self.rows(pmids)
        return Features(self.pmids[rows], self.matrix[rows], self.space, {k: v[rows] for k, v in self.families.items()})

    def het_families(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The P, I, C, O family rows that exist (empty when no PICO vectors were given)."""
        return {f: self.families[f][rows] for f in HET_FAMILIES if f in self.families}


# ----------------------------------------------------------------------------- vector maths


def centroid(x: np.ndarray) -> np.ndarray:
    """Normalised mean of unit rows."""
    return unit_rows(x.mean(axis=0, keepdims=True))[0]


def encode_centroid(c: np.ndarray) -> bytes:
    return np.asarray(c, dtype=np.float16).tobytes()


def decode_centroid(blob: bytes, dim: int) -> np.ndarray:
    """A stored fp16 centroid as a float32 unit vector."""
    c = np.frombuffer(blob, dtype=np.float16)
    if c.size != dim:
        raise ValueError(f"centroid blob holds {c.size} values, manifest says {dim}")
    return unit_rows(c.astype(np.float32)[None, :])[0]


def frozen_centroid(x: np.ndarray) -> np.ndarray:
    """The centroid exactly as it is read back after storage (fp16 round trip), so stored distances match."""
    c = centroid(x)
    return decode_centroid(encode_centroid(c), c.size)


def cosine_distances(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """1 - cos(row, c) for unit rows and a unit centroid, in float64."""
    return 1.0 - np.asarray(x, dtype=np.float64) @ np.asarray(c, dtype=np.float64)


def tau_assign(distances: np.ndarray, ccfg: ClusteringConfig) -> float:
    """P(tau_assign_percentile) of member distances; tau_assign_fallback when fewer than two members."""
    if len(distances) < 2:
        return ccfg.tau_assign_fallback
    tau = float(np.percentile(distances, ccfg.tau_assign_percentile))
    return tau if math.isfinite(tau) else ccfg.tau_assign_fallback


def dispersion(x: np.ndarray, c: np.ndarray) -> float:
    """1 - mean cosine of the members to the (frozen) centroid."""
    return float(cosine_distances(x, c).mean())


def het_numeric(families: Mapping[str, np.ndarray]) -> float | None:
    """Mean over the given P/I/C/O families of 1 - mean pairwise cosine (zero rows = missing field, skipped).

    None when no family has two non-empty rows. Uses sum_{i≠j} cos = |Σx|² - n for unit rows.
    """
    values = []
    for rows in families.values():
        rows = rows[np.any(rows != 0, axis=1)].astype(np.float64)
        n = len(rows)
        if n < 2:
            continue
        total = rows.sum(axis=0)
        values.append(1.0 - (float(total @ total) - n) / (n * (n - 1)))
    return float(np.mean(values)) if values else None


# ----------------------------------------------------------------------------- formation


@dataclass(frozen=True, eq=False)
class Formation:
    """Provisional clusters: one label per feature row, -1 noise, 0.. by descending size."""

    features: Features
    labels: np.ndarray
    reduced_dims: int = 0  # PCA dims HDBSCAN ran on; 0 = the full feature vectors

    @property
    def n_clusters(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0

    def member_rows(self, idx: int | Sequence[int]) -> np.ndarray:
        return np.flatnonzero(np.isin(self.labels, idx))

    def members(self, idx: int | Sequence[int]) -> np.ndarray:
        return self.features.pmids[self.member_rows(idx)]

    @property
    def noise(self) -> np.ndarray:
        return self.members(NOISE)

    def sizes(self) -> list[int]:
        return [int(n) for n in np.bincount(self.labels[self.labels >= 0], minlength=self.n_clusters)]


def _by_size(labels: np.ndarray) -> np.ndarray:
    """Relabel clusters 0.. by descending size (ties: lower original label first); noise stays -1."""
    found = labels[labels >= 0]
    if not found.size:
        return labels
    sizes = np.bincount(found)
    order = np.lexsort((np.arange(sizes.size), -sizes))
    new = np.full(sizes.size, NOISE)
    new[order] = np.arange(sizes.size)
    return np.where(labels >= 0, new[np.maximum(labels, 0)], NOISE)


def reduce_dimensions(x: np.ndarray, ccfg: ClusteringConfig) -> np.ndarray:
    """PCA to reduce_dims fitted on reduce_sample evenly spaced rows, applied in chunks, rows re-normalised.

    HDBSCAN's tree-based minimum spanning tree degrades towards brute force in hundreds of
    dimensions; a few dozen principal components keep it fast on large inputs.
    """
    from sklearn.decomposition import PCA

    sample = x[np.linspace(0, len(x) - 1, min(len(x), ccfg.reduce_sample)).astype(np.int64)]
    pca = PCA(n_components=ccfg.reduce_dims, svd_solver="covariance_eigh").fit(sample)
    out = np.empty((len(x), ccfg.reduce_dims), dtype=np.float32)
    for start in range(0, len(x), ccfg.reduce_sample):
        out[start : start + ccfg.reduce_sample] = pca.transform(x[start : start + ccfg.reduce_sample])
    return unit_rows(out)


def hdbscan_labels(x: np.ndarray, ccfg: ClusteringConfig, min_cluster_size: int) -> tuple[np.ndarray, int]:
    """HDBSCAN labels of unit rows (euclidean on the sphere ≈ cosine) and the PCA dims used (0 = none)."""
    n = len(x)
    if n < max(min_cluster_size, ccfg.min_samples + 1):
        return np.full(n, NOISE), 0
    reduced = 0
    if 0 < ccfg.reduce_dims < x.shape[1] and n > ccfg.reduce_above and ccfg.reduce_dims <= min(n, ccfg.reduce_sample):
        x, reduced = reduce_dimensions(x, ccfg), ccfg.reduce_dims
    import hdbscan  # slow import: only when clustering

    model = hdbscan.HDBSCAN(
        min_samples=ccfg.min_samples,
        min_cluster_size=min_cluster_size,
        metric="euclidean",
        cluster_selection_method=ccfg.cluster_selection_method,
    )
    return _by_size(model.fit_predict(x)), reduced


def form_clusters(features: Features, cfg: Config, *, min_cluster_size: int | None = None) -> Formation:
    """Provisional clusters of `features` (memo 40 §2); min_cluster_size defaults to the config's."""
    started = time.perf_counter()
    labels, reduced = hdbscan_labels(
        features.matrix, cfg.clustering, min_cluster_size or cfg.clustering.min_cluster_size
    )
    formation = Formation(features, labels, reduced)
    log.info(
        "HDBSCAN over %d %s vectors (%s): %d clusters %s, %d noise, %.1f s",
        len(features), features.space, f"PCA {reduced} dims" if reduced else f"{features.dim} dims",
        formation.n_clusters, formation.sizes(), len(formation.noise), time.perf_counter() - started,
    )  # fmt: skip
    return formation


# ----------------------------------------------------------------------------- distinctive terms


def mesh_headings(mesh: Sequence[str]) -> list[str]:
    """Descriptor names of MeSH entries, without major-topic stars and /qualifiers."""
    return sorted({m.split("/")[0].replace("*", "").strip() for m in mesh} - {""})


def distinctive_terms(
    docs: Sequence[Any], labels: np.ndarray, n_clusters: int, n_terms: int, *, mesh: bool = False
) -> list[list[str]]:
    """Top `n_terms` class-based TF-IDF terms of each cluster 0..n_clusters-1 against the rest of the corpus.

    For cluster c with n_c papers, out of N: tf = share of c's papers containing the term and
    idf = ln((1 + N - n_c) / (1 + papers outside c containing it)), the rest being the other clusters
    and the noise (idf = 1 when nothing lies outside c). A term that is as common outside as inside
    scores about 0. Docs are texts (English stop words removed, uni- and bigrams; a term sharing a
    word with a better one is skipped) or, with `mesh`, lists of MeSH entries. Ties go alphabetically.
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import CountVectorizer

    if mesh:
        vectorizer = CountVectorizer(binary=True, analyzer=cast(Any, mesh_headings), lowercase=False)
    else:
        vectorizer = CountVectorizer(
            binary=True, stop_words="english", ngram_range=TERM_NGRAMS, token_pattern=TERM_TOKEN_PATTERN
        )
    try:
        counts = sparse.csr_matrix(vectorizer.fit_transform(docs))
    except ValueError:  # empty vocabulary: no words (or no MeSH) at all
        return [[] for _ in range(n_clusters)]
    classes = np.where(np.asarray(labels) >= 0, labels, n_clusters)
    indicator = sparse.csr_matrix(
        (np.ones(len(classes)), (classes, np.arange(len(classes)))), shape=(n_clusters + 1, len(classes))
    )
    per_class = sparse.csr_matrix(indicator @ counts, dtype=np.float64)  # papers containing each term, per class
    in_corpus = np.asarray(counts.sum(axis=0), dtype=np.float64).ravel()
    sizes = np.bincount(classes, minlength=n_clusters + 1)
    vocab = vectorizer.get_feature_names_out()
    out = []
    for c in range(n_clusters):
        row = per_class.getrow(c)
        rest = len(classes) - sizes[c]
        idf = np.log((1.0 + rest) / (1.0 + in_corpus[row.indices] - row.data)) if rest else 1.0
        scores = row.data / sizes[c] * idf
        ranked = row.indices[np.lexsort((vocab[row.indices], -scores))]
        out.append(_pick_terms((str(vocab[i]) for i in ranked), n_terms, share_words=mesh))
    return out


def _pick_terms(ranked: Iterator[str], n_terms: int, *, share_words: bool) -> list[str]:
    picked: list[str] = []
    used: set[str] = set()
    for term in ranked:
        words = set(term.lower().split())
        if not share_words and words & used:
            continue
        picked.append(term)
        used |= words
        if len(picked) == n_terms:
            break
    return picked


# ----------------------------------------------------------------------------- audit


@dataclass(frozen=True)
class ClusterMetrics:
    """Memo 40 §7 metrics of one cluster (sr_overlap stays None until find_existing_sr computes it)."""

    size: int
    cvgr: float
    ers: float
    het_numeric: float | None
    dispersion: float
    mean_year: float | None
    sr_overlap: float | None = None


@dataclass(frozen=True)
class ClusterBrief:
    """What an auditor sees of one provisional cluster."""

    idx: int
    size: int
    terms: tuple[str, ...]  # distinctive title/abstract terms, best first
    mesh_terms: tuple[str, ...]  # distinctive MeSH headings (empty without MeSH)
    sample_titles: tuple[str, ...]  # titles of the members nearest the centroid
    year_min: int | None
    year_max: int | None
    metrics: ClusterMetrics


@dataclass(frozen=True)
class AuditDecision:
    """One auditor verdict: keep (with label + summary), merge_into target_idx, or discard."""

    idx: int
    action: str
    target_idx: int | None = None
    label: str = ""
    summary: str = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> AuditDecision:
        """From the memo-40 JSON shape, e.g. {"idx": 1, "action": "merge_into", "target_idx": 0}."""
        target = obj.get("target_idx")
        return cls(
            idx=int(obj["idx"]),
            action=str(obj["action"]),
            target_idx=None if target is None else int(target),
            label=str(obj.get("label") or ""),
            summary=str(obj.get("summary") or ""),
        )


class ClusterAuditor(Protocol):
    """Judges provisional clusters; `name` is recorded as the manifest's `audit_by`."""

    name: str

    def audit(self, briefs: Sequence[ClusterBrief]) -> list[AuditDecision]: ...


class TermAuditor:
    """Deterministic rule-based auditor (no language model): keeps every cluster and names it by its distinctive terms.

    The label joins the best MeSH headings and title/abstract terms (interleaved, MeSH first);
    the summary is one sentence built from those terms, the size and the year range.
    """

    name = "rules:distinctive-terms"

    def __init__(self, cfg: Config):
        self.n_terms = cfg.clustering.audit_label_terms

    def audit(self, briefs: Sequence[ClusterBrief]) -> list[AuditDecision]:
        return [AuditDecision(b.idx, KEEP, label=self.label(b), summary=self.summary(b)) for b in briefs]

    def label(self, brief: ClusterBrief) -> str:
        terms: list[str] = []
        for pair in _round_robin(brief.mesh_terms, brief.terms):
            for term in pair:
                if not any(term.lower() in t.lower() or t.lower() in term.lower() for t in terms):
                    terms.append(term)
        if not terms:
            return brief.sample_titles[0] if brief.sample_titles else f"cluster {brief.idx}"
        return " · ".join(terms[: self.n_terms])

    def summary(self, brief: ClusterBrief) -> str:
        years = f"{brief.year_min}–{brief.year_max}" if brief.year_min is not None else "years unknown"
        text = f"{brief.size} papers ({years})"
        if brief.terms:
            text += f" whose most distinctive title/abstract terms are {_join_words(brief.terms)}"
        if brief.mesh_terms:
            text += f"; leading MeSH headings: {', '.join(brief.mesh_terms)}"
        if not brief.terms and not brief.mesh_terms and brief.sample_titles:
            text += f"; most central title: {brief.sample_titles[0]}"
        return text + "."


def _round_robin(*seqs: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """Round-robin tuples over sequences of unequal length, dropping exhausted ones."""
    for i in range(max((len(s) for s in seqs), default=0)):
        yield tuple(s[i] for s in seqs if i < len(s))


def _join_words(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def describe_clusters(
    store: Store, formation: Formation, cfg: Config, *, now: datetime | None = None
) -> list[ClusterBrief]:
    """Briefs for the auditor: distinctive terms (vs the rest of `formation`), central titles, years, metrics."""
    ccfg = cfg.clustering
    feats = formation.features
    papers = {p.pmid: p for p in store.papers(feats.pmids.tolist())}
    if len(papers) < len(feats):
        log.warning("%d clustered PMIDs have no paper row; they count as empty text", len(feats) - len(papers))
    records = [papers.get(int(pmid)) for pmid in feats.pmids]
    texts = [f"{p.title} {p.abstract}" if p else "" for p in records]
    k = formation.n_clusters
    words = distinctive_terms(texts, formation.labels, k, ccfg.audit_label_terms)
    mesh = distinctive_terms(
        [p.mesh if p else [] for p in records], formation.labels, k, ccfg.audit_label_terms, mesh=True
    )
    briefs = []
    for idx in range(k):
        rows = formation.member_rows(idx)
        x = feats.matrix[rows]
        c = centroid(x)
        central = rows[np.argsort(-(x @ c), kind="stable")[: ccfg.audit_sample_titles]]
        years = [records[r].year for r in rows if records[r] and records[r].year is not None]
        briefs.append(
            ClusterBrief(
                idx=idx,
                size=len(rows),
                terms=tuple(words[idx]),
                mesh_terms=tuple(mesh[idx]),
                sample_titles=tuple(records[r].title for r in central if records[r]),
                year_min=min(years) if years else None,
                year_max=max(years) if years else None,
                metrics=measure_cluster(store, feats.pmids[rows], x, c, cfg, het=feats.het_families(rows), now=now),
            )
        )
    return briefs


def validate_decisions(decisions: Sequence[AuditDecision], n_clusters: int) -> dict[int, list[int]]:
    """Check one decision per provisional cluster; return kept idx -> [idx, idx merged into it...].

    merge_into may chain (a into b into c) but must end at a kept cluster.
    """
    by_idx: dict[int, AuditDecision] = {}
    for d in decisions:
        if not 0 <= d.idx < n_clusters:
            raise AuditError(f"idx {d.idx} is not a provisional cluster (0..{n_clusters - 1})")
        if d.idx in by_idx:
            raise AuditError(f"idx {d.idx} has more than one decision")
        if d.action not in AUDIT_ACTIONS:
            raise AuditError(f"idx {d.idx}: action {d.action!r} is not one of {', '.join(AUDIT_ACTIONS)}")
        if d.action == KEEP and not d.label.strip():
            raise AuditError(f"idx {d.idx}: keep needs a label")
        by_idx[d.idx] = d
    missing = sorted(set(range(n_clusters)) - set(by_idx))
    if missing:
        raise AuditError(f"no decision for idx {missing}")
    groups = {i: [i] for i in sorted(by_idx) if by_idx[i].action == KEEP}
    for i in sorted(by_idx):
        if by_idx[i].action != MERGE_INTO:
            continue
        seen, j = {i}, by_idx[i].target_idx
        while True:
            if j is None or not 0 <= j < n_clusters:
                raise AuditError(f"idx {i}: merge_into needs a target_idx in 0..{n_clusters - 1}")
            if j in seen:
                raise AuditError(f"idx {i}: merge_into chain loops back to idx {j}")
            if by_idx[j].action == DISCARD:
                raise AuditError(f"idx {i}: merge_into target idx {j} is discarded")
            if by_idx[j].action == KEEP:
                groups[j].append(i)
                break
            seen.add(j)
            j = by_idx[j].target_idx
    return groups


# ----------------------------------------------------------------------------- store plumbing


def _chunks(items: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(items), SQL_CHUNK):
        yield items[start : start + SQL_CHUNK]


def _ints(pmids: Pmids) -> list[int]:
    return [int(p) for p in pmids]


def cluster_row(store: Store, cluster_id: str, *, active: bool = True) -> sqlite3.Row:
    """A cluster's manifest row; KeyError when unknown, ValueError when `active` and it is not."""
    row = store.conn.execute("SELECT * FROM cluster_manifest WHERE cluster_id=?", (cluster_id,)).fetchone()
    if row is None:
        raise KeyError(f"no cluster {cluster_id!r}")
    if active and row["status"] != ACTIVE:
        raise ValueError(f"cluster {cluster_id} is {row['status']}, not active")
    return row


def cluster_members(store: Store, cluster_id: str) -> np.ndarray:
    """PMIDs of a cluster's members (for a split, merged or dropped cluster: its members at that time), sorted."""
    rows = store.conn.execute("SELECT pmid FROM cluster_member WHERE cluster_id=? ORDER BY pmid", (cluster_id,))
    return np.array([r[0] for r in rows], dtype=np.int64)


def _check_space(row: sqlite3.Row, features: Features) -> None:
    if row["feature_space"] != features.space or row["centroid_dim"] != features.dim:
        raise ValueError(
            f"cluster {row['cluster_id']} was frozen in {row['feature_space']} ({row['centroid_dim']} dims), "
            f"features are {features.space} ({features.dim} dims)"
        )


def _new_cluster_id(store: Store, label: str, goal_id: str | None) -> str:
    """sha1(goal + label + nanosecond timestamp)[:12], bumping the timestamp until the id is unused."""
    ts = time.time_ns()
    while True:
        cid = hashlib.sha1(f"{goal_id or ''}\n{label}\n{ts}".encode()).hexdigest()[:12]
        if not store.conn.execute("SELECT 1 FROM cluster_manifest WHERE cluster_id=?", (cid,)).fetchone():
            return cid
        ts += 1


def write_members(store: Store, cluster_id: str, pmids: Pmids, distances: np.ndarray) -> None:
    """Upsert memberships and take the papers out of the unassigned pool (inside a transaction)."""
    now = int(time.time())
    ids = _ints(pmids)
    store.conn.executemany(
        "INSERT OR REPLACE INTO cluster_member(cluster_id, pmid, distance, assigned_ts) VALUES (?,?,?,?)",
        [(cluster_id, p, float(d), now) for p, d in zip(ids, distances, strict=True)],
    )
    store.conn.executemany("DELETE FROM unassigned_pool WHERE pmid=?", [(p,) for p in ids])


def _pool(store: Store, pmids: Pmids, reason: str) -> None:
    """Put papers that are in no active cluster into the unassigned pool (inside a transaction)."""
    now = int(time.time())
    store.conn.executemany(
        "INSERT OR REPLACE INTO unassigned_pool(pmid, reason, added_ts) SELECT ?, ?, ? WHERE NOT EXISTS ("
        "SELECT 1 FROM cluster_member m JOIN cluster_manifest c ON c.cluster_id = m.cluster_id "
        "WHERE m.pmid = ? AND c.status = ?)",
        [(p, reason, now, p, ACTIVE) for p in _ints(pmids)],
    )


def _freeze(
    store: Store,
    formation: Formation,
    decisions: Sequence[AuditDecision],
    cfg: Config,
    *,
    audit_by: str,
    goal_id: str | None,
    parent_id: str | None,
    noise_reason: str,
) -> list[str]:
    """Apply audit decisions inside the caller's transaction: freeze kept clusters, pool the rest."""
    groups = validate_decisions(decisions, formation.n_clusters)
    by_idx = {d.idx: d for d in decisions}
    feats = formation.features
    created = int(time.time())
    ids = []
    for idx, group in groups.items():
        rows = formation.member_rows(group)
        c = frozen_centroid(feats.matrix[rows])
        distances = cosine_distances(feats.matrix[rows], c)
        decision = by_idx[idx]
        cid = _new_cluster_id(store, decision.label, goal_id)
        store.conn.execute(
            "INSERT INTO cluster_manifest(cluster_id, label, summary, frozen_centroid, centroid_dim, feature_space, "
            "tau_assign, parent_id, status, audit_by, created_ts) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (cid, decision.label, decision.summary, encode_centroid(c), c.size, feats.space,
             tau_assign(distances, cfg.clustering), parent_id, ACTIVE, audit_by, created),
        )  # fmt: skip
        write_members(store, cid, feats.pmids[rows], distances)
        ids.append(cid)
    discarded = [d.idx for d in decisions if d.action == DISCARD]
    _pool(store, formation.members(discarded), f"audit_discard:{audit_by}")
    _pool(store, formation.noise, noise_reason)
    log.info(
        "audit by %s: %d kept, %d merged, %d discarded, %d noise papers to the unassigned pool",
        audit_by, len(groups), sum(len(g) - 1 for g in groups.values()), len(discarded), len(formation.noise),
    )  # fmt: skip
    return ids


# ----------------------------------------------------------------------------- lifecycle


@dataclass(frozen=True, eq=False)
class ClusteringResult:
    formation: Formation
    decisions: list[AuditDecision]
    cluster_ids: list[str]  # new clusters, in provisional (descending size) order of the kept ones


def apply_audit(
    store: Store,
    formation: Formation,
    decisions: Sequence[AuditDecision],
    cfg: Config,
    *,
    audit_by: str,
    goal_id: str | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Freeze the kept clusters (centroid, tau_assign, members), pool noise and discards, compute metrics."""
    with store.transaction():
        ids = _freeze(store, formation, decisions, cfg, audit_by=audit_by, goal_id=goal_id, parent_id=None,
                      noise_reason="noise")  # fmt: skip
    compute_metrics(store, formation.features, cfg, ids, now=now)
    return ids


def cluster_corpus(
    store: Store,
    features: Features,
    cfg: Config,
    auditor: ClusterAuditor | None = None,
    *,
    goal_id: str | None = None,
    now: datetime | None = None,
) -> ClusteringResult:
    """Form, describe, audit (TermAuditor unless another auditor is given) and freeze clusters of `features`."""
    auditor = auditor or TermAuditor(cfg)
    formation = form_clusters(features, cfg)
    decisions = auditor.audit(describe_clusters(store, formation, cfg, now=now))
    ids = apply_audit(store, formation, decisions, cfg, audit_by=auditor.name, goal_id=goal_id, now=now)
    return ClusteringResult(formation, decisions, ids)


@dataclass(frozen=True)
class Assignment:
    assigned: dict[int, str]  # pmid -> cluster_id
    unassigned: list[int]  # beyond tau_assign of the nearest centroid (or no cluster at all)
    already_members: list[int]  # skipped: already in an active cluster


def assign_papers(store: Store, features: Features, cfg: Config) -> Assignment:
    """Admit each paper to its nearest active frozen centroid when 1 - cos <= that cluster's tau_assign.

    Papers beyond it go to the unassigned pool. Centroids and tau_assign never change here.
    Clusters frozen in another feature space are ignored (logged).
    """
    clusters = store.conn.execute(
        "SELECT * FROM cluster_manifest WHERE status=? ORDER BY cluster_id", (ACTIVE,)
    ).fetchall()
    usable = [r for r in clusters if r["feature_space"] == features.space and r["centroid_dim"] == features.dim]
    if len(usable) < len(clusters):
        log.warning(
            "%d active clusters are in another feature space than %s", len(clusters) - len(usable), features.space
        )
    members = set()
    for chunk in _chunks(_ints(features.pmids)):
        marks = ",".join("?" * len(chunk))
        members.update(
            r[0]
            for r in store.conn.execute(
                f"SELECT m.pmid FROM cluster_member m JOIN cluster_manifest c ON c.cluster_id = m.cluster_id "
                f"WHERE c.status = ? AND m.pmid IN ({marks})",
                (ACTIVE, *chunk),
            )
        )
    todo = np.array([p not in members for p in _ints(features.pmids)], dtype=bool)
    rows = np.flatnonzero(todo)
    best = np.full(len(rows), -1)
    distance = np.full(len(rows), np.inf)
    if usable and len(rows):
        centroids = np.stack([decode_centroid(r["frozen_centroid"], r["centroid_dim"]) for r in usable])
        step = cfg.embedding.topk_chunk_rows
        for start in range(0, len(rows), step):
            sims = features.matrix[rows[start : start + step]] @ centroids.T
            best[start : start + step] = sims.argmax(axis=1)
            distance[start : start + step] = 1.0 - sims.max(axis=1)
    taus = np.array([r["tau_assign"] for r in usable] + [-np.inf])
    admitted = distance <= taus[best]
    pmids = features.pmids[rows]
    with store.transaction():
        for k, row in enumerate(usable):
            hit = admitted & (best == k)
            if hit.any():
                write_members(store, row["cluster_id"], pmids[hit], distance[hit])
        _pool(store, pmids[~admitted], "beyond_tau" if usable else "no_cluster")
    result = Assignment(
        assigned={int(p): usable[b]["cluster_id"] for p, b in zip(pmids[admitted], best[admitted], strict=True)},
        unassigned=_ints(pmids[~admitted]),
        already_members=_ints(features.pmids[~todo]),
    )
    log.info(
        "assignment: %d papers admitted, %d to the unassigned pool, %d already members",
        len(result.assigned), len(result.unassigned), len(result.already_members),
    )  # fmt: skip
    return result


def split_cluster(
    store: Store,
    cluster_id: str,
    features: Features,
    cfg: Config,
    *,
    auditor: ClusterAuditor | None = None,
    goal_id: str | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Re-run HDBSCAN inside one cluster (split_min_cluster_size) and freeze the audited children.

    Children get new ids, parent_id = the parent and their own frozen centroids; the parent's
    status becomes "split" and papers that are noise inside it go to the unassigned pool. Returns
    the child ids; [] (nothing changed) when HDBSCAN finds fewer than two sub-clusters.
    """
    parent = cluster_row(store, cluster_id)
    _check_space(parent, features)
    formation = form_clusters(
        features.subset(cluster_members(store, cluster_id)), cfg, min_cluster_size=cfg.clustering.split_min_cluster_size
    )
    if formation.n_clusters < 2:
        log.info("split of %s: HDBSCAN found %d sub-clusters, nothing split", cluster_id, formation.n_clusters)
        return []
    auditor = auditor or TermAuditor(cfg)
    decisions = auditor.audit(describe_clusters(store, formation, cfg, now=now))
    with store.transaction():
        store.conn.execute("UPDATE cluster_manifest SET status=? WHERE cluster_id=?", (SPLIT, cluster_id))
        children = _freeze(store, formation, decisions, cfg, audit_by=auditor.name, goal_id=goal_id,
                           parent_id=cluster_id, noise_reason=f"split_noise:{cluster_id}")  # fmt: skip
    compute_metrics(store, features, cfg, children, now=now)
    log.info("split %s into %s", cluster_id, ", ".join(children))
    return children


def merge_clusters(
    store: Store, source: str, target: str, features: Features, cfg: Config, *, now: datetime | None = None
) -> str:
    """Merge `source` into `target`: union of members, new frozen centroid and P95 tau_assign for target.

    The source keeps its history rows but its status becomes merged_into (merged_into = target).
    """
    if source == target:
        raise ValueError("cannot merge a cluster into itself")
    for row in (cluster_row(store, source), cluster_row(store, target)):
        _check_space(row, features)
    pmids = np.union1d(cluster_members(store, source), cluster_members(store, target))
    x = features.vectors(pmids)
    c = frozen_centroid(x)
    distances = cosine_distances(x, c)
    with store.transaction():
        store.conn.execute(
            "UPDATE cluster_manifest SET frozen_centroid=?, tau_assign=? WHERE cluster_id=?",
            (encode_centroid(c), tau_assign(distances, cfg.clustering), target),
        )
        store.conn.execute(
            "UPDATE cluster_manifest SET status=?, merged_into=? WHERE cluster_id=?", (MERGED, target, source)
        )
        store.conn.execute("DELETE FROM cluster_member WHERE cluster_id=?", (target,))
        write_members(store, target, pmids, distances)
    compute_metrics(store, features, cfg, [target], now=now)
    log.info("merged %s into %s (%d members)", source, target, len(pmids))
    return target


def drop_cluster(store: Store, cluster_id: str) -> list[int]:
    """Mark a cluster dropped; its members not in another active cluster go to the unassigned pool."""
    cluster_row(store, cluster_id)
    pmids = cluster_members(store, cluster_id)
    with store.transaction():
        store.conn.execute("UPDATE cluster_manifest SET status=? WHERE cluster_id=?", (DROPPED, cluster_id))
        _pool(store, pmids, f"dropped:{cluster_id}")
    log.info("dropped %s (%d members)", cluster_id, len(pmids))
    return _ints(pmids)


def show_noise(store: Store, limit: int) -> list[dict[str, Any]]:
    """Unassigned papers (noise, discards, dropped, beyond tau) with titles, newest first."""
    rows = store.conn.execute(
        "SELECT u.pmid, COALESCE(p.title, '') AS title, p.year, u.reason, u.added_ts FROM unassigned_pool u "
        "LEFT JOIN paper p ON p.pmid = u.pmid ORDER BY u.added_ts DESC, u.pmid LIMIT ?",
        (limit,),
    )
    return [dict(r) for r in rows]


# ----------------------------------------------------------------------------- metrics


def _member_years(store: Store, pmids: Pmids) -> list[int]:
    years: list[int] = []
    for chunk in _chunks(_ints(pmids)):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT year FROM paper WHERE pmid IN ({marks}) AND year IS NOT NULL"
        years.extend(r[0] for r in store.conn.execute(sql, chunk))
    return years


def citation_velocity(store: Store, pmids: Pmids, years: int, year_now: int) -> float:
    """CVGR: least-squares slope of citations received per year over the `years` years ending at year_now.

    A citation is a `ref` edge whose dst is a member, counted in the citing paper's year (edges from
    papers without a stored year are ignored; each edge counts once). 0.0 without edges in the window
    or with a one-year window (no slope).
    """
    first = year_now - years + 1
    counts = dict.fromkeys(range(first, year_now + 1), 0)
    for chunk in _chunks(_ints(pmids)):
        marks = ",".join("?" * len(chunk))
        sql = (
            f"SELECT p.year, COUNT(*) FROM ref r JOIN paper p ON p.pmid = r.src "
            f"WHERE r.dst IN ({marks}) AND p.year BETWEEN ? AND ? GROUP BY p.year"
        )
        for year, n in store.conn.execute(sql, (*chunk, first, year_now)):
            counts[year] += n
    if years < 2 or not any(counts.values()):
        return 0.0
    x = np.array(list(counts), dtype=np.float64)
    y = np.array(list(counts.values()), dtype=np.float64)
    x -= x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def measure_cluster(
    store: Store,
    pmids: Pmids,
    x: np.ndarray,
    c: np.ndarray,
    cfg: Config,
    *,
    het: Mapping[str, np.ndarray] | None = None,
    now: datetime | None = None,
) -> ClusterMetrics:
    """Metrics of members `pmids` with vectors `x` around centroid `c`.

    ERS uses PubMed's year granularity: a paper is recent when its year >= now.year -
    ceil(ers_window_months / 12) (18 months -> this year and the two before); papers without a
    year count in the size but never as recent. mean_year ignores unknown years.
    """
    ccfg = cfg.clustering
    year_now = (now or datetime.now(UTC)).year
    years = _member_years(store, pmids)
    recent_from = year_now - math.ceil(ccfg.ers_window_months / 12)
    return ClusterMetrics(
        size=len(pmids),
        cvgr=citation_velocity(store, pmids, ccfg.cvgr_years, year_now),
        ers=sum(y >= recent_from for y in years) / len(pmids) if len(pmids) else 0.0,
        het_numeric=het_numeric(het) if het else None,
        dispersion=dispersion(x, c),
        mean_year=float(np.mean(years)) if years else None,
    )


def is_unstable(metrics: ClusterMetrics, ccfg: ClusteringConfig) -> bool:
    """Memo 40 §5.2: dispersion >= dispersion_split and size >= unstable_min_size."""
    return metrics.dispersion >= ccfg.dispersion_split and metrics.size >= ccfg.unstable_min_size


def compute_metrics(
    store: Store,
    features: Features,
    cfg: Config,
    cluster_ids: Sequence[str] | None = None,
    *,
    now: datetime | None = None,
) -> dict[str, ClusterMetrics]:
    """Measure clusters (default: all active), append a cluster_metrics row each, refresh the unstable flag.

    Dispersion is against the frozen centroid. sr_overlap, eligible_trials and prisma_compliant are
    carried forward from the cluster's previous row (their own tools compute them).
    """
    if cluster_ids is None:
        cluster_ids = [
            r[0] for r in store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status=?", (ACTIVE,))
        ]
    now = now or datetime.now(UTC)
    computed_ts = int(now.timestamp())
    results: dict[str, ClusterMetrics] = {}
    carried: dict[str, tuple] = {}
    for cid in cluster_ids:
        row = cluster_row(store, cid, active=False)
        _check_space(row, features)
        pmids = cluster_members(store, cid)
        rows = features.rows(pmids)
        c = decode_centroid(row["frozen_centroid"], row["centroid_dim"])
        metrics = measure_cluster(store, pmids, features.matrix[rows], c, cfg, het=features.het_families(rows), now=now)
        previous = store.conn.execute(
            "SELECT sr_overlap, eligible_trials, prisma_compliant FROM cluster_metrics WHERE cluster_id=? "
            "ORDER BY computed_ts DESC LIMIT 1",
            (cid,),
        ).fetchone()
        carried[cid] = tuple(previous) if previous else (None, None, None)
        results[cid] = dataclasses.replace(metrics, sr_overlap=carried[cid][0])
    with store.transaction():
        for cid, m in results.items():
            store.conn.execute(
                "INSERT OR REPLACE INTO cluster_metrics(cluster_id, computed_ts, size, cvgr, ers, het_numeric, "
                "dispersion, sr_overlap, eligible_trials, prisma_compliant, mean_year) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (cid, computed_ts, m.size, m.cvgr, m.ers, m.het_numeric, m.dispersion, *carried[cid], m.mean_year),
            )
            store.conn.execute(
                "UPDATE cluster_manifest SET unstable=? WHERE cluster_id=?", (int(is_unstable(m, cfg.clustering)), cid)
            )
    return results


# ----------------------------------------------------------------------------- reporting


def manifest_table(store: Store, *, include_inactive: bool = False) -> list[dict[str, Any]]:
    """One dict per cluster (active only unless asked): manifest fields, member count and latest metrics."""
    rows = store.conn.execute(
        "SELECT c.cluster_id, c.label, c.summary, c.status, c.parent_id, c.merged_into, c.tau_assign, c.unstable, "
        "c.audit_by, c.feature_space, c.created_ts, "
        "(SELECT COUNT(*) FROM cluster_member m WHERE m.cluster_id = c.cluster_id) AS size, "
        "mt.cvgr, mt.ers, mt.het_numeric, mt.dispersion, mt.sr_overlap, mt.eligible_trials, mt.prisma_compliant, "
        "mt.mean_year, mt.computed_ts FROM cluster_manifest c "
        "LEFT JOIN cluster_metrics mt ON mt.cluster_id = c.cluster_id AND mt.computed_ts = "
        "(SELECT MAX(computed_ts) FROM cluster_metrics WHERE cluster_id = c.cluster_id) "
        "WHERE ? OR c.status = ? ORDER BY size DESC, c.cluster_id",
        (int(include_inactive), ACTIVE),
    )
    return [dict(r) for r in rows]


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = MANIFEST_COLUMNS, *, limit: int | None = None
) -> str:
    """A Markdown table of `rows` (e.g. manifest_table output) for previews; `limit` caps the rows shown."""
    shown = rows[:limit] if limit is not None else rows
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in shown]
    if len(shown) < len(rows):
        lines.append(f"\n{len(rows) - len(shown)} more rows not shown")
    return "\n".join(lines)


def cluster_map_png(
    vectors: np.ndarray,
    labels: Sequence[Any] | np.ndarray,
    path: str | Path,
    *,
    title: str = "",
    noise_label: Any = NOISE,
) -> Path:
    """A 2-D PCA scatter of the vectors coloured by cluster, written as PNG (Agg canvas).

    `labels` are one per row: provisional indexes, cluster ids or names; rows labelled `noise_label`
    (-1 by default; e.g. "unassigned" with names) are drawn grey. Clusters are coloured by size rank.
    """
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from sklearn.decomposition import PCA

    names = np.array([str(v) for v in labels], dtype=object)
    noise = np.array([v == noise_label for v in labels], dtype=bool)
    clusters, counts = np.unique(names[~noise], return_counts=True)
    ranked = clusters[np.argsort(-counts, kind="stable")]
    xy = (
        PCA(n_components=2, svd_solver="covariance_eigh").fit_transform(vectors)
        if len(vectors) > 2
        else np.zeros((len(vectors), 2))
    )
    fig = Figure(figsize=MAP_FIGSIZE_IN, dpi=MAP_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.scatter(*xy[noise].T, s=MAP_POINT_SIZE["noise"], c="lightgrey", label=f"{noise_label} ({int(noise.sum())})")
    cmap = colormaps[MAP_COLOURMAP]
    for rank, name in enumerate(ranked):
        hit = names == name
        ax.scatter(
            *xy[hit].T, s=MAP_POINT_SIZE["cluster"], color=cmap(rank % cmap.N), label=f"{name} ({int(hit.sum())})"
        )
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title or f"{len(vectors)} papers, {len(ranked)} clusters")
    if len(ranked) <= cmap.N:  # beyond that colours repeat and a legend would mislead
        ax.legend(loc="best", fontsize="small")
    path = Path(path)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path


__all__ = [
    "AuditDecision",
    "AuditError",
    "Assignment",
    "ClusterAuditor",
    "ClusterBrief",
    "ClusterMetrics",
    "ClusteringResult",
    "Features",
    "Formation",
    "TermAuditor",
    "apply_audit",
    "assign_papers",
    "cluster_corpus",
    "cluster_map_png",
    "cluster_members",
    "cluster_row",
    "compute_metrics",
    "describe_clusters",
    "distinctive_terms",
    "drop_cluster",
    "form_clusters",
    "manifest_table",
    "markdown_table",
    "merge_clusters",
    "show_noise",
    "split_cluster",
    "tau_assign",
    "validate_decisions",
    "write_members",
]
