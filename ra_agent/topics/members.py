"""The cluster manifest in the store: rows, members, the unassigned pool, freezing a cluster."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence

import numpy as np

from ra_agent.store.db import Store
from ra_agent.topics.features import Features, Pmids

log = logging.getLogger(__name__)

# cluster_manifest.status values
ACTIVE, SPLIT, MERGED, DROPPED = "active", "split", "merged_into", "dropped"
SQL_CHUNK = 500  # PMIDs per `IN (...)` query, well below SQLite's host-parameter limit


# ----------------------------------------------------------------------------- store plumbing


def sql_chunks(items: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(items), SQL_CHUNK):
        yield items[start : start + SQL_CHUNK]


def pmid_list(pmids: Pmids) -> list[int]:
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


def check_feature_space(row: sqlite3.Row, features: Features) -> None:
    if row["feature_space"] != features.space or row["centroid_dim"] != features.dim:
        raise ValueError(
            f"cluster {row['cluster_id']} was frozen in {row['feature_space']} ({row['centroid_dim']} dims), "
            f"features are {features.space} ({features.dim} dims)"
        )


def new_cluster_id(store: Store, founding: Pmids, feature_space: str) -> str:
    """A cluster's id from its content: sha1 of the feature space and its founding members (the sorted PMIDs its
    frozen centroid is the mean of)[:12]. The same data, handbook and config give the same ids in every workspace
    and on every run; the id never changes after (the tau_assign intake and merges add members, never a new id).
    When the id is taken (the same founding members frozen again, after a drop or a split), the next of
    "<content>#2", "#3", ... is used: deterministic too."""
    content = f"{feature_space}\n" + ",".join(str(p) for p in sorted(pmid_list(founding)))
    for n in range(1, 10_000):
        cid = hashlib.sha1((content if n == 1 else f"{content}#{n}").encode()).hexdigest()[:12]
        if not store.conn.execute("SELECT 1 FROM cluster_manifest WHERE cluster_id=?", (cid,)).fetchone():
            return cid
    raise RuntimeError(f"no free cluster id for {content[:80]}...")


def write_members(store: Store, cluster_id: str, pmids: Pmids, distances: np.ndarray) -> None:
    """Upsert memberships and take the papers out of the unassigned pool (inside a transaction)."""
    now = int(time.time())
    ids = pmid_list(pmids)
    store.conn.executemany(
        "INSERT OR REPLACE INTO cluster_member(cluster_id, pmid, distance, assigned_ts) VALUES (?,?,?,?)",
        [(cluster_id, p, float(d), now) for p, d in zip(ids, distances, strict=True)],
    )
    store.conn.executemany("DELETE FROM unassigned_pool WHERE pmid=?", [(p,) for p in ids])


def add_to_pool(store: Store, pmids: Pmids, reason: str) -> None:
    """Put papers that are in no active cluster into the unassigned pool (inside a transaction)."""
    now = int(time.time())
    store.conn.executemany(
        "INSERT OR REPLACE INTO unassigned_pool(pmid, reason, added_ts) SELECT ?, ?, ? WHERE NOT EXISTS ("
        "SELECT 1 FROM cluster_member m JOIN cluster_manifest c ON c.cluster_id = m.cluster_id "
        "WHERE m.pmid = ? AND c.status = ?)",
        [(p, reason, now, p, ACTIVE) for p in pmid_list(pmids)],
    )


def noise_share(store: Store) -> tuple[int, int]:
    """(papers in the unassigned pool, papers clustered so far = members of active clusters + the pool)."""
    pool = store.conn.execute("SELECT COUNT(*) FROM unassigned_pool").fetchone()[0]
    members = store.conn.execute(
        "SELECT COUNT(DISTINCT m.pmid) FROM cluster_member m JOIN cluster_manifest c ON c.cluster_id = m.cluster_id "
        "WHERE c.status = ? AND m.pmid NOT IN (SELECT pmid FROM unassigned_pool)",
        (ACTIVE,),
    ).fetchone()[0]
    return int(pool), int(pool + members)
