"""Cluster lifecycle: apply the audit, freeze, admit new papers by tau_assign, split, merge, drop
(docs/architecture.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.topics.audit import (
    DISCARD,
    AuditDecision,
    ClusterAuditor,
    TermAuditor,
    describe_clusters,
    validate_decisions,
)
from ra_agent.topics.features import (
    ABSTRACT_FAMILY,
    HET_FAMILIES,
    PICO_FEATURE_FAMILIES,
    Features,
    cosine_distances,
    decode_centroid,
    encode_centroid,
    frozen_centroid,
    tau_assign,
)
from ra_agent.topics.formation import Formation, form_clusters
from ra_agent.topics.members import (
    ACTIVE,
    DROPPED,
    MERGED,
    SPLIT,
    add_to_pool,
    check_feature_space,
    cluster_members,
    cluster_row,
    new_cluster_id,
    pmid_list,
    sql_chunks,
    write_members,
)
from ra_agent.topics.metrics import compute_metrics

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- lifecycle


@dataclass(frozen=True, eq=False)
class ClusteringResult:
    formation: Formation
    decisions: list[AuditDecision]
    cluster_ids: list[str]  # new clusters, in provisional (descending size) order of the kept ones
    intake: Assignment | None = None  # formation noise offered to the frozen clusters by tau_assign

    @property
    def noise_share(self) -> float:
        """Share of the clustered papers left in the unassigned pool as noise after the intake."""
        left = len(self.formation.noise) if self.intake is None else len(self.intake.unassigned)
        return left / len(self.formation.features) if len(self.formation.features) else 0.0


def apply_audit(
    store: Store,
    formation: Formation,
    decisions: Sequence[AuditDecision],
    cfg: Config,
    *,
    audit_by: str,
    goal_id: str | None = None,
    now: datetime | None = None,
    metrics: bool = True,
) -> list[str]:
    """Freeze the kept clusters (centroid, tau_assign, members), pool noise and discards, compute metrics."""
    with store.transaction():
        ids = _freeze(store, formation, decisions, cfg, audit_by=audit_by, goal_id=goal_id, parent_id=None,
                      noise_reason="noise")  # fmt: skip
    if metrics:
        compute_metrics(store, formation.features, cfg, ids, now=now)
    return ids


def noise_intake(store: Store, formation: Formation, cfg: Config, *, reason: str) -> Assignment:
    """Intake of formation noise: each noise paper joins its nearest frozen centroid within tau_assign.

    The rest stay in the unassigned pool under `reason`. Centroids and tau_assign do not move.
    """
    result = assign_papers(store, formation.features.subset(formation.noise), cfg, pool_reason=reason)
    log.info(
        "noise intake: %d of %d noise papers joined a cluster by tau_assign, %d stay unassigned (%.0f %% of %d)",
        len(result.assigned), len(formation.noise), len(result.unassigned),
        100 * len(result.unassigned) / max(len(formation.features), 1), len(formation.features),
    )  # fmt: skip
    return result


def cluster_corpus(
    store: Store,
    features: Features,
    cfg: Config,
    auditor: ClusterAuditor | None = None,
    *,
    goal_id: str | None = None,
    now: datetime | None = None,
) -> ClusteringResult:
    """Form, describe, audit (TermAuditor unless another auditor is given) and freeze clusters of `features`.

    Then the formation's noise passes the tau_assign intake and the metrics are computed on the final members.
    """
    auditor = auditor or TermAuditor(cfg)
    formation = form_clusters(features, cfg)
    decisions = auditor.audit(describe_clusters(store, formation, cfg, now=now))
    ids = apply_audit(store, formation, decisions, cfg, audit_by=auditor.name, goal_id=goal_id, metrics=False)
    intake = noise_intake(store, formation, cfg, reason="noise")
    compute_metrics(store, features, cfg, ids, now=now)
    return ClusteringResult(formation, decisions, ids, intake)


@dataclass(frozen=True)
class Assignment:
    assigned: dict[int, str]  # pmid -> cluster_id
    unassigned: list[int]  # beyond tau_assign of the nearest centroid (or no cluster at all)
    already_members: list[int]  # skipped: already in an active cluster


def assign_papers(store: Store, features: Features, cfg: Config, *, pool_reason: str = "") -> Assignment:
    """Admit each paper to its nearest active frozen centroid when 1 - cos <= that cluster's tau_assign.

    Papers beyond it go to the unassigned pool (reason `pool_reason`, default "beyond_tau", or "no_cluster"
    when there is no usable cluster). Centroids and tau_assign never change here.
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
    for chunk in sql_chunks(pmid_list(features.pmids)):
        marks = ",".join("?" * len(chunk))
        members.update(
            r[0]
            for r in store.conn.execute(
                f"SELECT m.pmid FROM cluster_member m JOIN cluster_manifest c ON c.cluster_id = m.cluster_id "
                f"WHERE c.status = ? AND m.pmid IN ({marks})",
                (ACTIVE, *chunk),
            )
        )
    todo = np.array([p not in members for p in pmid_list(features.pmids)], dtype=bool)
    rows = np.flatnonzero(todo)
    best = np.full(len(rows), -1)
    distance = np.full(len(rows), np.inf)
    if usable and len(rows):
        centroids = np.stack([decode_centroid(r["frozen_centroid"], r["centroid_dim"]) for r in usable])
        step = cfg.embedding.topk_chunk_rows
        for start in range(0, len(rows), step):
            sims = features.matrix[rows[start : start + step]].astype(np.float64) @ centroids.T.astype(np.float64)
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
        add_to_pool(store, pmids[~admitted], pool_reason or ("beyond_tau" if usable else "no_cluster"))
    result = Assignment(
        assigned={int(p): usable[b]["cluster_id"] for p, b in zip(pmids[admitted], best[admitted], strict=True)},
        unassigned=pmid_list(pmids[~admitted]),
        already_members=pmid_list(features.pmids[~todo]),
    )
    log.info(
        "assignment: %d papers admitted, %d to the unassigned pool, %d already members",
        len(result.assigned), len(result.unassigned), len(result.already_members),
    )  # fmt: skip
    return result


def admit_by_tau(store: Store, cfg: Config, vectors: Any, pmids: Iterable[int], *, pool_reason: str) -> Assignment:
    """Papers accepted by expansion pass the intake like any new paper (`assign_papers`).

    Features come from the vector store `vectors` (E, plus the PICO families when every paper has them,
    so PICO-space clusters are reachable); papers beyond every tau_assign go to the pool as `pool_reason`.
    """
    ids = np.asarray(sorted({int(p) for p in pmids}), dtype=np.int64)
    if not len(ids):
        return Assignment({}, [], [])
    families = {ABSTRACT_FAMILY: vectors.get(ids)}
    for family in (*HET_FAMILIES, *PICO_FEATURE_FAMILIES):
        if family in getattr(vectors, "families", ()) and family not in families and vectors.has(ids, family).all():
            families[family] = vectors.get(ids, family)
    return assign_papers(store, Features.build(ids, families, cfg.clustering.features), cfg, pool_reason=pool_reason)


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
    """Re-run the formation inside one cluster (sizes capped at split_min_cluster_size) and freeze the audited children.

    Children get new ids, parent_id = the parent and their own frozen centroids; the parent's
    status becomes "split"; papers that are noise inside it pass the tau_assign intake (any active
    cluster) and the rest go to the unassigned pool. Returns
    the child ids; [] (nothing changed) when HDBSCAN finds fewer than two sub-clusters.
    """
    parent = cluster_row(store, cluster_id)
    check_feature_space(parent, features)
    formation = form_clusters(features.subset(cluster_members(store, cluster_id)), cfg, split=True)
    if formation.n_clusters < 2:
        log.info("split of %s: HDBSCAN found %d sub-clusters, nothing split", cluster_id, formation.n_clusters)
        return []
    auditor = auditor or TermAuditor(cfg)
    decisions = auditor.audit(describe_clusters(store, formation, cfg, now=now))
    with store.transaction():
        store.conn.execute("UPDATE cluster_manifest SET status=? WHERE cluster_id=?", (SPLIT, cluster_id))
        children = _freeze(store, formation, decisions, cfg, audit_by=auditor.name, goal_id=goal_id,
                           parent_id=cluster_id, noise_reason=f"split_noise:{cluster_id}")  # fmt: skip
    noise_intake(store, formation, cfg, reason=f"split_noise:{cluster_id}")
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
        check_feature_space(row, features)
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
        add_to_pool(store, pmids, f"dropped:{cluster_id}")
    log.info("dropped %s (%d members)", cluster_id, len(pmids))
    return pmid_list(pmids)


def show_noise(store: Store, limit: int) -> list[dict[str, Any]]:
    """Unassigned papers (noise, discards, dropped, beyond tau) with titles, newest first."""
    rows = store.conn.execute(
        "SELECT u.pmid, COALESCE(p.title, '') AS title, p.year, u.reason, u.added_ts FROM unassigned_pool u "
        "LEFT JOIN paper p ON p.pmid = u.pmid ORDER BY u.added_ts DESC, u.pmid LIMIT ?",
        (limit,),
    )
    return [dict(r) for r in rows]


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
        cid = new_cluster_id(store, decision.label, goal_id)
        store.conn.execute(
            "INSERT INTO cluster_manifest(cluster_id, label, summary, frozen_centroid, centroid_dim, feature_space, "
            "tau_assign, parent_id, status, audit_by, created_ts) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (cid, decision.label, decision.summary, encode_centroid(c), c.size, feats.space,
             tau_assign(distances, cfg.clustering), parent_id, ACTIVE, audit_by, created),
        )  # fmt: skip
        write_members(store, cid, feats.pmids[rows], distances)
        ids.append(cid)
    discarded = [d.idx for d in decisions if d.action == DISCARD]
    add_to_pool(store, formation.members(discarded), f"audit_discard:{audit_by}")
    add_to_pool(store, formation.noise, noise_reason)
    log.info(
        "audit by %s: %d kept, %d merged, %d discarded, %d noise papers to the unassigned pool",
        audit_by, len(groups), sum(len(g) - 1 for g in groups.values()), len(discarded), len(formation.noise),
    )  # fmt: skip
    return ids
