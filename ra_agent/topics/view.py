"""One frozen cluster as the SR, expansion and report stages see it: members, E-space query vector, metrics and manifest writes."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.topics import members as cluster
from ra_agent.topics.features import ABSTRACT_FAMILY, centroid, decode_centroid
from ra_agent.topics.members import ACTIVE
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

# cluster_metrics columns a stage may set (the key columns cluster_id / computed_ts are managed here)
METRIC_COLUMNS = (
    "size",
    "cvgr",
    "ers",
    "het_numeric",
    "dispersion",
    "sr_overlap",
    "eligible_trials",
    "prisma_compliant",
    "mean_year",
)
MANIFEST_WRITABLE = ("accepted_new", "expansion_halt")


def cluster_row(store: Store, cluster_id: str) -> sqlite3.Row:
    """The manifest row of a cluster (any status); KeyError when there is none."""
    return cluster.cluster_row(store, cluster_id, active=False)


def member_pmids(store: Store, cluster_id: str) -> list[int]:
    """The cluster's members, ascending."""
    return [int(p) for p in cluster.cluster_members(store, cluster_id)]


def active_members_elsewhere(store: Store, cluster_id: str, pmids: Iterable[int]) -> set[int]:
    """Those of `pmids` that are members of another active cluster."""
    wanted = sorted({int(p) for p in pmids})
    found: set[int] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = store.conn.execute(
            f"SELECT m.pmid FROM cluster_member m JOIN cluster_manifest c ON c.cluster_id = m.cluster_id "
            f"WHERE c.status = ? AND m.cluster_id != ? AND m.pmid IN ({marks})",
            (ACTIVE, cluster_id, *chunk),
        )
        found.update(r[0] for r in rows)
    return found


def pico_path(cfg: Config, cluster_id: str) -> Path:
    """Where run_pico keeps a cluster's PICO records: <data_dir>/pico/<cluster_id>.jsonl."""
    return Workspace.of(cfg).pico_dir / f"{cluster_id}.jsonl"


@dataclass(frozen=True)
class QueryVector:
    """A cluster's direction in the E (title · abstract) space, and where it came from."""

    cluster_id: str
    vector: np.ndarray  # float32, unit norm
    source: str  # "frozen centroid" or how it was recomputed

    @property
    def dim(self) -> int:
        return int(self.vector.size)

    def cosines(self, rows: np.ndarray) -> np.ndarray:
        """Cosine of unit rows to this vector (float64)."""
        return np.asarray(rows, dtype=np.float64) @ self.vector.astype(np.float64)


def e_query_vector(store: Store, cluster_id: str, vectors: Any) -> QueryVector:
    """The cluster's frozen centroid when it was frozen in the E space; otherwise (a PICO space such as
    i|c|o|m) the normalised mean of its members' E vectors, recomputed now and said so in `source`.

    `vectors` is a VectorStore (get/has over the E family); its dimension must match an E centroid.
    """
    row = cluster_row(store, cluster_id)
    if row["feature_space"] == ABSTRACT_FAMILY:
        c = decode_centroid(row["frozen_centroid"], row["centroid_dim"])
        if vectors is not None and c.size != vectors.dim:
            raise ValueError(
                f"cluster {cluster_id} was frozen with {c.size}-dim E vectors; the vector index holds {vectors.dim}"
            )
        return QueryVector(cluster_id, c, "frozen centroid (E space)")
    members = np.asarray(member_pmids(store, cluster_id), dtype=np.int64)
    have = members[vectors.has(members)] if len(members) else members
    if not len(have):
        raise ValueError(f"cluster {cluster_id} ({row['feature_space']}) has no member with an E vector")
    c = centroid(vectors.get(have))
    source = (
        f"E centroid recomputed from {len(have)} of {len(members)} members' E vectors "
        f"(the cluster is frozen in the {row['feature_space']} space)"
    )
    return QueryVector(cluster_id, c.astype(np.float32), source)


def semantic_tau_start(cfg: Config, store: Store, cluster_id: str, q: QueryVector, vectors: Any) -> tuple[float, str]:
    """The cluster's own starting cosine (tau_start_rule "p95"), the P(tau_assign_percentile) edge of its members.

    For an E-space cluster 1 - tau_assign, the edge frozen with its centroid; otherwise the cosine to the
    query vector that tau_assign_percentile % of the members reach now, rounded to 4 decimals; [expansion.semantic] tau_start when tau_start_rule is
    "fixed" or fewer than two members have an E vector. Returns (tau, how it was set).
    """
    sem = cfg.expansion.semantic
    if sem.tau_start_rule == "fixed":
        return sem.tau_start, "fixed tau_start"
    row = cluster_row(store, cluster_id)
    if row["feature_space"] == ABSTRACT_FAMILY and row["tau_assign"] is not None:
        # the edge frozen with the centroid: papers the tau_assign intake admitted later lie inside it and
        # would raise a recomputed percentile, as the centroid does not move with them
        edge = round(1.0 - float(row["tau_assign"]), 4)
        return edge, f"frozen P{cfg.clustering.tau_assign_percentile:g} edge (1 - tau_assign)"
    ids = np.asarray(member_pmids(store, cluster_id), dtype=np.int64)
    ids = ids[vectors.has(ids)] if len(ids) else ids
    if len(ids) < 2:
        return sem.tau_start, f"fallback tau_start ({len(ids)} members with an E vector)"
    cosines = q.cosines(vectors.get(ids))
    tau = round(float(np.percentile(cosines, 100 - cfg.clustering.tau_assign_percentile)), 4)
    return tau, f"P{cfg.clustering.tau_assign_percentile:g} edge of {len(ids)} members"


# ----------------------------------------------------------------------------- metrics and manifest writes


def latest_metrics(store: Store, cluster_id: str) -> dict[str, Any] | None:
    """The cluster's newest cluster_metrics row as a dict, or None."""
    row = store.conn.execute(
        "SELECT * FROM cluster_metrics WHERE cluster_id=? ORDER BY computed_ts DESC LIMIT 1", (cluster_id,)
    ).fetchone()
    return dict(row) if row else None


def set_cluster_metrics(store: Store, cluster_id: str, **values: Any) -> dict[str, Any]:
    """Set columns of the cluster's latest cluster_metrics row (booleans stored as 0/1); returns the row.

    Without a row yet, one is created (computed_ts = now, size = current member count).
    """
    unknown = sorted(set(values) - set(METRIC_COLUMNS))
    if unknown:
        raise ValueError(f"unknown cluster_metrics column(s) {unknown} (known: {', '.join(METRIC_COLUMNS)})")
    cluster_row(store, cluster_id)
    clean = {k: int(v) if isinstance(v, bool) else v for k, v in values.items()}
    with store.transaction():
        latest = store.conn.execute(
            "SELECT computed_ts FROM cluster_metrics WHERE cluster_id=? ORDER BY computed_ts DESC LIMIT 1",
            (cluster_id,),
        ).fetchone()
        if latest is None:
            size = store.conn.execute("SELECT COUNT(*) FROM cluster_member WHERE cluster_id=?", (cluster_id,))
            row = {"size": size.fetchone()[0], **clean}
            cols = ", ".join(row)
            store.conn.execute(
                f"INSERT INTO cluster_metrics(cluster_id, computed_ts, {cols}) VALUES (?, ?, {', '.join('?' * len(row))})",
                (cluster_id, int(time.time()), *row.values()),
            )
        elif clean:
            sets = ", ".join(f"{k}=?" for k in clean)
            store.conn.execute(
                f"UPDATE cluster_metrics SET {sets} WHERE cluster_id=? AND computed_ts=?",
                (*clean.values(), cluster_id, latest[0]),
            )
    log.info("cluster %s metrics: %s", cluster_id, ", ".join(f"{k}={v}" for k, v in clean.items()))
    return latest_metrics(store, cluster_id) or {}


def set_manifest(store: Store, cluster_id: str, **values: Any) -> None:
    """Set expansion fields of a cluster's manifest row (accepted_new, expansion_halt)."""
    unknown = sorted(set(values) - set(MANIFEST_WRITABLE))
    if unknown:
        raise ValueError(f"cluster_manifest column(s) {unknown} are not writable here ({', '.join(MANIFEST_WRITABLE)})")
    cluster_row(store, cluster_id)
    sets = ", ".join(f"{k}=?" for k in values)
    with store.transaction():
        store.conn.execute(f"UPDATE cluster_manifest SET {sets} WHERE cluster_id=?", (*values.values(), cluster_id))


__all__ = [
    "METRIC_COLUMNS",
    "QueryVector",
    "active_members_elsewhere",
    "cluster_row",
    "e_query_vector",
    "latest_metrics",
    "member_pmids",
    "pico_path",
    "semantic_tau_start",
    "set_cluster_metrics",
    "set_manifest",
]
