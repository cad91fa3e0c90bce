"""Frozen clusters over time: tau_assign, incremental assignment, split, merge, drop and the unstable flag."""

from __future__ import annotations

import numpy as np
import pytest

from ra_agent.topics.audit import TermAuditor, describe_clusters
from ra_agent.topics.features import cosine_distances, decode_centroid, tau_assign
from ra_agent.topics.formation import Formation
from ra_agent.topics.lifecycle import (
    apply_audit,
    assign_papers,
    drop_cluster,
    merge_clusters,
    show_noise,
    split_cluster,
)
from ra_agent.topics.members import ACTIVE, DROPPED, MERGED, SPLIT
from ra_agent.topics.metrics import compute_metrics, manifest_table

from .conftest import NOW

HOLD_OUT_FRACTION = 0.10
MIN_RETURN_RATE = 0.70
MEMO_SPLIT_FACTOR = 0.8  # memo 40 §9: max child dispersion < 0.8 x parent dispersion


def members(store, cluster_id: str) -> dict[int, float]:
    rows = store.conn.execute("SELECT pmid, distance FROM cluster_member WHERE cluster_id=?", (cluster_id,))
    return {pmid: distance for pmid, distance in rows}


def manifest_row(store, cluster_id: str):
    return store.conn.execute("SELECT * FROM cluster_manifest WHERE cluster_id=?", (cluster_id,)).fetchone()


def latest_metrics(store, cluster_id: str):
    return store.conn.execute(
        "SELECT * FROM cluster_metrics WHERE cluster_id=? ORDER BY computed_ts DESC LIMIT 1", (cluster_id,)
    ).fetchone()


def active_ids(store) -> list[str]:
    return [r["cluster_id"] for r in manifest_table(store)]


def test_tau_assign_is_p95_of_member_distances(store, demo, cfg):
    for cid in active_ids(store):
        row = manifest_row(store, cid)
        stored = members(store, cid)
        distances = np.array(list(stored.values()))
        assert row["tau_assign"] == pytest.approx(np.percentile(distances, 95), rel=1e-12)
        centroid = decode_centroid(row["frozen_centroid"], row["centroid_dim"])
        recomputed = cosine_distances(demo.features.vectors(list(stored)), centroid)
        assert np.allclose(recomputed, distances, rtol=0, atol=1e-9)
        assert 0 < row["tau_assign"] <= distances.max()


def test_tau_assign_fallback(cfg):
    assert tau_assign(np.array([0.05]), cfg.clustering) == cfg.clustering.tau_assign_fallback == 0.20
    assert tau_assign(np.array([]), cfg.clustering) == 0.20


def test_held_out_members_return_to_their_cluster(empty_store, clustered, demo, cfg):
    """Freeze clusters without 10% of their members, then assign those: most must come home."""
    formation = clustered[1].formation
    rng = np.random.default_rng(0)
    source: dict[int, int] = {}
    for idx in range(formation.n_clusters):
        pool = formation.members(idx)
        for pmid in rng.choice(pool, size=max(1, round(HOLD_OUT_FRACTION * len(pool))), replace=False):
            source[int(pmid)] = idx
    kept = ~np.isin(formation.features.pmids, list(source))
    frozen = Formation(formation.features.subset(formation.features.pmids[kept]), formation.labels[kept])
    decisions = TermAuditor(cfg).audit(describe_clusters(empty_store, frozen, cfg, now=NOW))
    ids = apply_audit(empty_store, frozen, decisions, cfg, audit_by=TermAuditor.name, now=NOW)
    cluster_of_idx = dict(enumerate(ids))  # the rule-based auditor keeps every cluster, in idx order

    held_out = assign_papers(empty_store, demo.features.subset(list(source)), cfg)
    home = np.mean([held_out.assigned.get(p) == cluster_of_idx[i] for p, i in source.items()])

    # baselines: a uniform guess among the clusters, and how often a noise paper gets into any cluster at all
    noise = assign_papers(empty_store, demo.features.subset(formation.noise), cfg)
    noise_admitted = len(noise.assigned) / len(formation.noise)
    uniform_guess = 1 / formation.n_clusters
    assert home >= MIN_RETURN_RATE and home > uniform_guess, (home, uniform_guess)
    assert home > 2 * noise_admitted, (home, noise_admitted)
    assert set(noise.unassigned) <= {r["pmid"] for r in show_noise(empty_store, len(formation.noise))}


def test_assignment_never_moves_centroids(store, demo, clustered, cfg):
    before = {
        cid: (manifest_row(store, cid)["frozen_centroid"], manifest_row(store, cid)["tau_assign"])
        for cid in active_ids(store)
    }
    result = assign_papers(store, demo.features, cfg)  # every paper: members are skipped, noise is tried
    assert len(result.already_members) == sum(clustered[1].formation.sizes())
    assert len(result.assigned) + len(result.unassigned) == len(clustered[1].formation.noise)
    after = {
        cid: (manifest_row(store, cid)["frozen_centroid"], manifest_row(store, cid)["tau_assign"]) for cid in before
    }
    assert after == before
    for pmid, cid in result.assigned.items():
        row = manifest_row(store, cid)
        assert members(store, cid)[pmid] <= row["tau_assign"]
    remaining = {r[0] for r in store.conn.execute("SELECT pmid FROM unassigned_pool")}
    assert remaining == set(result.unassigned)


def test_merge_recomputes_centroid_and_tau(store, demo, cfg):
    target, source = active_ids(store)[:2]
    union = set(members(store, target)) | set(members(store, source))
    old_tau = manifest_row(store, target)["tau_assign"]
    assert merge_clusters(store, source, target, demo.features, cfg, now=NOW) == target
    merged = members(store, target)
    assert set(merged) == union
    tau = manifest_row(store, target)["tau_assign"]
    assert tau == pytest.approx(np.percentile(list(merged.values()), 95), rel=1e-12)
    assert tau != old_tau
    assert manifest_row(store, source)["status"] == MERGED
    assert manifest_row(store, source)["merged_into"] == target
    assert latest_metrics(store, target)["size"] == len(union)
    assert source not in active_ids(store)
    with pytest.raises(ValueError, match="not active"):
        merge_clusters(store, source, target, demo.features, cfg)


def test_split_reduces_dispersion(store, demo, cfg):
    """Memo 40 §9 on a genuinely mixed parent: two real clusters merged into one."""
    target, source = active_ids(store)[:2]
    parent = merge_clusters(store, source, target, demo.features, cfg, now=NOW)
    parent_dispersion = latest_metrics(store, parent)["dispersion"]
    parent_members = set(members(store, parent))

    children = split_cluster(store, parent, demo.features, cfg, now=NOW)

    assert len(children) >= 2 and parent not in children
    child_dispersion = [latest_metrics(store, c)["dispersion"] for c in children]
    assert max(child_dispersion) < MEMO_SPLIT_FACTOR * parent_dispersion
    assert manifest_row(store, parent)["status"] == SPLIT
    for child in children:
        row = manifest_row(store, child)
        assert row["parent_id"] == parent and row["status"] == ACTIVE
        assert set(members(store, child)) <= parent_members
        assert len(members(store, child)) >= cfg.clustering.split_min_cluster_size
    split_noise = {
        r[0] for r in store.conn.execute("SELECT pmid FROM unassigned_pool WHERE reason=?", (f"split_noise:{parent}",))
    }
    in_children = set().union(*(members(store, c) for c in children))
    assert split_noise | in_children == parent_members and not split_noise & in_children


def test_split_of_a_homogeneous_cluster_changes_nothing(store, demo, cfg):
    cid = active_ids(store)[-1]
    strict = cfg.with_overrides(clustering={"split_min_cluster_size": len(members(store, cid))})
    assert split_cluster(store, cid, demo.features, strict, now=NOW) == []
    assert manifest_row(store, cid)["status"] == ACTIVE


def test_drop_sends_members_to_the_pool(store, demo, cfg):
    cid = active_ids(store)[-1]
    dropped = drop_cluster(store, cid)
    assert set(dropped) == set(members(store, cid))
    assert manifest_row(store, cid)["status"] == DROPPED
    assert cid not in active_ids(store)
    pool = {r["pmid"]: r for r in show_noise(store, len(demo.papers))}
    assert all(pool[p]["reason"] == f"dropped:{cid}" and pool[p]["title"] for p in dropped)
    again = assign_papers(store, demo.features.subset(dropped), cfg)
    assert cid not in set(again.assigned.values())


def test_unstable_flag(store, demo, cfg):
    ids = active_ids(store)
    dispersion = {cid: latest_metrics(store, cid)["dispersion"] for cid in ids}
    size = {cid: latest_metrics(store, cid)["size"] for cid in ids}
    # MiniLM dispersions of these clusters are ~0.1, far below the memo's 0.70: nothing is unstable by default
    assert not any(manifest_row(store, cid)["unstable"] for cid in ids)

    threshold = float(np.mean(list(dispersion.values())))
    compute_metrics(store, demo.features, cfg.with_overrides(clustering={"dispersion_split": threshold}), now=NOW)
    for cid in ids:
        expected = dispersion[cid] >= threshold and size[cid] >= cfg.clustering.unstable_min_size
        assert bool(manifest_row(store, cid)["unstable"]) == expected
    assert any(manifest_row(store, cid)["unstable"] for cid in ids)

    big_only = cfg.with_overrides(clustering={"dispersion_split": 0.0, "unstable_min_size": max(size.values())})
    compute_metrics(store, demo.features, big_only, now=NOW)
    assert {cid for cid in ids if manifest_row(store, cid)["unstable"]} == {max(size, key=size.get)}
