"""Memo 50 expansion: semantic boundary loop, parent coverage on real citation edges, downstream chase, RAM guard."""

from __future__ import annotations

import json
import logging

import pytest

from ra_agent.ingest.eutils import EutilsClient
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.store.schema import PROV_PUBMED
from ra_agent.topics.expansion import (
    EMPTY_POOL,
    NO_CHILDREN,
    NO_KEEP,
    NO_SEEDS,
    RAM_GUARD,
    TAU_FLOOR,
    expansion_history,
    parent_shares,
    ripple,
    select_parents,
    semantic_boundary,
)
from ra_agent.topics.judge import Candidate, ask_judge
from ra_agent.topics.view import cluster_row, e_query_vector

from .conftest import ScriptedBrain

PLENTY = lambda: 1 << 50  # noqa: E731 - free RAM far above the reserve
NONE_LEFT = lambda: 1  # noqa: E731 - one byte free: the guard trips


def manifest(world, cluster_id):
    return cluster_row(world.store, cluster_id)


def keep_nothing(messages):
    return 'Nothing here belongs to the cluster.\nAction: {"tool": "judge_boundary", "args": {"keep_pmids": []}}'


# ---------------------------------------------------------------------------- semantic boundary loop


def test_semantic_boundary_shrinks(demo):
    cid = demo.trials_cluster
    sem = demo.cfg.expansion.semantic
    candidates = demo.unassigned()
    before = set(demo.members(cid))
    result = semantic_boundary(demo.cfg, demo.store, cid, candidates, RulesBrain(), vectors=demo.vectors,
                               available_bytes=PLENTY)  # fmt: skip
    steps = result.thresholds
    # memo_update §9: the loop starts at the cluster's own P95 edge (an E-space cluster: 1 - tau_assign; fp16
    # vectors), skipping the thresholds above every candidate
    assert result.tau_start == pytest.approx(1 - manifest(demo, cid)["tau_assign"], abs=1e-3)
    skipped = round((result.tau_start - steps[0]) / sem.delta_tau, 6)
    assert skipped == int(skipped) >= 0 and len(steps) >= 2
    q = e_query_vector(demo.store, cid, demo.vectors)
    cos = dict(zip(candidates, q.cosines(demo.vectors.get(candidates)), strict=True))
    assert max(cos.values()) >= steps[0] and (skipped == 0 or max(cos.values()) < steps[0] + sem.delta_tau)
    assert all(b < a for a, b in zip(steps, steps[1:], strict=False))  # strictly decreasing ...
    assert all(a - b == pytest.approx(sem.delta_tau) for a, b in zip(steps, steps[1:], strict=False))  # by delta
    assert result.halted_by in (NO_KEEP, TAU_FLOOR, EMPTY_POOL)
    if result.halted_by == TAU_FLOOR:
        assert steps[-1] - sem.delta_tau < sem.tau_floor <= steps[-1]
    if result.halted_by == NO_KEEP:
        assert len(result.batches[-1].kept) <= sem.no_keep_limit
    assert [b.threshold for b in result.batches] == steps[: len(result.batches)]
    shown = [p for b in result.batches for p in b.shown]
    assert len(shown) == len(set(shown))  # nobody is shown twice
    for batch in result.batches:
        assert len(batch.shown) <= sem.boundary_batch_size
        assert all(cos[p] >= batch.threshold for p in batch.shown)
        # the rules judge keeps exactly the shown papers at or above its cosine hint
        assert batch.kept == [p for p in batch.shown if round(cos[p], 4) >= sem.judge_keep_cosine]
    # accepted papers pass the tau_assign intake; the pool was already beyond every tau_assign, so none joins
    assert result.accepted and result.admitted == [] and set(demo.members(cid)) == before
    assert manifest(demo, cid)["accepted_new"] == len(result.accepted)
    assert manifest(demo, cid)["expansion_halt"] is None
    assert not set(result.admitted) & set(demo.unassigned())  # admitted papers leave the unassigned pool
    reasons = dict(demo.store.conn.execute("SELECT pmid, reason FROM unassigned_pool").fetchall())
    beyond = set(result.accepted) - set(result.admitted)
    assert all(reasons[p] == f"expansion_beyond_tau:{cid}" for p in beyond if p in reasons)
    logged = expansion_history(demo.cfg, cid)[-1]
    assert logged["mode"] == "semantic" and logged["accepted"] == result.accepted


def test_accepted_papers_pass_the_tau_assign_intake(demo):
    """Memo 50 §1: the judge's keeps join the cluster only within its tau_assign, like any new paper.

    Candidates: the five most central members taken out of the cluster (new papers within its edge) and
    five unassigned papers (beyond every tau_assign).
    """
    cid = demo.trials_cluster
    central = [p for p, _ in demo.store.conn.execute(
        "SELECT pmid, distance FROM cluster_member WHERE cluster_id=? ORDER BY distance, pmid LIMIT 5", (cid,))]  # fmt: skip
    demo.store.conn.executemany("DELETE FROM cluster_member WHERE cluster_id=? AND pmid=?", [(cid, p) for p in central])
    q = e_query_vector(demo.store, cid, demo.vectors)
    pooled = sorted(demo.unassigned(), key=lambda p: -float(q.cosines(demo.vectors.get([p]))[0]))[:5]
    result = semantic_boundary(demo.cfg, demo.store, cid, [*central, *pooled], RulesBrain(), vectors=demo.vectors,
                               available_bytes=PLENTY)  # fmt: skip
    assert set(central) <= set(result.accepted)  # the rules judge keeps papers at or above its cosine hint
    assert set(result.admitted) == set(central) and set(central) <= set(demo.members(cid))
    tau = manifest(demo, cid)["tau_assign"]
    distance = dict(demo.store.conn.execute("SELECT pmid, distance FROM cluster_member WHERE cluster_id=?", (cid,)))
    assert all(distance[p] <= tau for p in central)
    reasons = dict(demo.store.conn.execute("SELECT pmid, reason FROM unassigned_pool").fetchall())
    for p in set(result.accepted) & set(pooled):
        assert p not in demo.members(cid) and reasons[p] == f"expansion_beyond_tau:{cid}"


def test_semantic_boundary_is_reproducible(demo_template, tmp_path):
    from .conftest import _world

    results = []
    for name in ("a", "b"):
        for world in _world(demo_template, tmp_path / name):
            cid = world.trials_cluster
            results.append(semantic_boundary(world.cfg, world.store, cid, world.unassigned(), RulesBrain(),
                                             vectors=world.vectors, available_bytes=PLENTY))  # fmt: skip
    assert results[0].batches == results[1].batches


def test_semantic_boundary_stops_when_the_judge_keeps_nothing(demo):
    cid = demo.trials_cluster
    before = demo.members(cid)
    judge = ScriptedBrain(keep_nothing)
    result = semantic_boundary(demo.cfg, demo.store, cid, demo.unassigned(), judge, vectors=demo.vectors,
                               available_bytes=PLENTY)  # fmt: skip
    assert result.halted_by == NO_KEEP and len(result.batches) == 1 and result.accepted == []
    assert len(result.thresholds) == 1 and len(judge.calls) == 1
    assert '"task": "boundary_judge"' in judge.calls[0][-1]["content"]
    assert demo.members(cid) == before and manifest(demo, cid)["accepted_new"] == 0


def test_semantic_boundary_skips_members_and_other_clusters(demo):
    clusters = [c["cluster_id"] for c in demo.clusters()]
    cid, other = clusters[0], clusters[1]
    candidates = demo.members(cid)[:5] + demo.members(other)[:5]
    result = semantic_boundary(demo.cfg, demo.store, cid, candidates, RulesBrain(), vectors=demo.vectors,
                               available_bytes=PLENTY)  # fmt: skip
    assert result.candidates == 0 and result.in_other_cluster == 5 and result.halted_by == EMPTY_POOL


def test_judge_output_is_restricted_to_the_papers_shown(demo):
    shown = [Candidate(1, "a", 0.9), Candidate(2, "b", 0.2)]
    liar = ScriptedBrain('Action: {"tool": "judge_boundary", "args": {"keep_pmids": [1, 99]}}')
    verdict = ask_judge(liar, "label", shown, 0.45)
    assert verdict.keep == [1] and verdict.ignored == [99]
    broken = ScriptedBrain('Action: {"tool": "judge_boundary", "args": {keep_pmids: [1,}', "no json again")
    assert ask_judge(broken, "label", shown, 0.45).keep == [] and len(broken.calls) == 2
    assert ask_judge(RulesBrain(), "label", shown, 0.45).keep == [1]


# ---------------------------------------------------------------------------- RAM guard


def test_ram_guard(demo, caplog):
    cid = demo.trials_cluster
    before = demo.members(cid)
    with caplog.at_level(logging.WARNING, logger="ra_agent.topics.expansion"):
        result = semantic_boundary(demo.cfg, demo.store, cid, demo.unassigned(), RulesBrain(), vectors=demo.vectors,
                                   available_bytes=NONE_LEFT)  # fmt: skip
    assert result.halted_by == RAM_GUARD and result.batches == [] and result.accepted == []
    assert "expansion_halt: RAM guard" in caplog.text
    assert manifest(demo, cid)["expansion_halt"] == "RAM" and demo.members(cid) == before


def test_ram_guard_trips_mid_loop(demo):
    cid = demo.trials_cluster
    readings = iter([1 << 50] * 2)  # enough RAM for the first round's two checks, then nothing
    result = semantic_boundary(demo.cfg, demo.store, cid, demo.unassigned(), RulesBrain(), vectors=demo.vectors,
                               available_bytes=lambda: next(readings, 1))  # fmt: skip
    assert result.halted_by == RAM_GUARD and len(result.batches) == 1
    assert manifest(demo, cid)["expansion_halt"] == "RAM"
    assert manifest(demo, cid)["accepted_new"] == len(result.accepted) == len(result.batches[0].kept)


def test_ripple_respects_the_ram_guard(medline, embedder):
    cid = medline.trials_cluster
    result = ripple(medline.cfg, medline.store, cid, RulesBrain(), vectors=medline.vectors, embedder=embedder,
                    available_bytes=NONE_LEFT)  # fmt: skip
    assert result.halted_by == RAM_GUARD and result.accepted == [] and result.parents_judged == []
    assert manifest(medline, cid)["expansion_halt"] == "RAM"


# ---------------------------------------------------------------------------- ripple on real citation edges


def test_parent_coverage(medline, embedder):
    cid = medline.trials_cluster
    up = medline.cfg.expansion.upstream
    members = medline.members(cid)
    shares = parent_shares(medline.store, members)
    assert shares and shares[0].count >= 2  # real reference lists share some cited papers
    top = shares[0]
    citing = medline.store.conn.execute("SELECT COUNT(DISTINCT src) FROM ref WHERE dst=?", (top.pmid,)).fetchone()[0]
    assert top.count == citing and top.share == pytest.approx(citing / len(members))
    result = ripple(medline.cfg, medline.store, cid, RulesBrain(), vectors=medline.vectors, embedder=embedder,
                    available_bytes=PLENTY)  # fmt: skip
    assert result.coverage == pytest.approx(sum(p.share for p in result.parents))
    assert result.coverage >= result.alpha or len(result.parents) == up.max_parents
    assert result.alpha in (up.alpha_coverage, up.alpha_coverage / 2)
    assert result.coverage - result.parents[-1].share < result.alpha  # no parent beyond the one that reached alpha
    # offline, the cited papers are not in the local corpus: nothing to judge, no seeds
    assert result.parents_unresolved == [p.pmid for p in result.parents] and result.halted_by == NO_SEEDS
    assert manifest(medline, cid)["accepted_new"] == 0


def test_select_parents_caps_at_max_parents(medline):
    shares = parent_shares(medline.store, medline.members(medline.trials_cluster))
    parents, coverage = select_parents(shares, alpha=1e9, max_parents=30)
    assert len(parents) == min(30, len(shares)) and coverage < 1e9
    parents, coverage = select_parents(shares, alpha=0.0, max_parents=30)
    assert parents == [] and coverage == 0.0


def test_ripple_online_efetches_parents(medline, embedder, eutils_server, crossref_server):
    cfg = medline.cfg.with_overrides(ingest={"eutils_base_url": eutils_server.base_url, "retry_attempts": 1,
                                             "backoff_factor": 0.01, "max_qps": 100.0,
                                             "crossref_base_url": crossref_server.base_url, "crossref_wait_s": 0.01,
                                             "crossref_max_qps": 100.0})  # fmt: skip
    cid = medline.trials_cluster
    result = ripple(cfg, medline.store, cid, RulesBrain(), eutils=EutilsClient(cfg), vectors=medline.vectors,
                    embedder=embedder, available_bytes=PLENTY)  # fmt: skip
    fetched = [r for r in eutils_server.requests if r.path.endswith("efetch.fcgi")]
    assert fetched and not result.eutils_offline
    # members stored without a reference list had theirs asked for on demand (memo 20/50), before the parents
    refs_asked = [r for r in eutils_server.requests_to("elink.fcgi") if r.param("linkname") == "pubmed_pubmed_refs"]
    assert refs_asked and refs_asked[0].t < fetched[0].t
    asked = {int(x) for r in fetched for x in r.param("id").split(",")}
    assert asked == {p.pmid for p in result.parents}  # the recorded PubMed holds none of them: still unresolved
    assert result.halted_by == NO_SEEDS


def test_downstream_chase_follows_citers(demo, embedder):
    """The demo CSV has no reference lists, so this test adds citation edges between real demo papers: three
    unassigned papers cite one paper outside the cluster (the parent); one more cites a citer."""
    cid = demo.trials_cluster
    q = e_query_vector(demo.store, cid, demo.vectors)
    pool = demo.unassigned()
    ranked = sorted(pool, key=lambda p: -float(q.cosines(demo.vectors.get([p]))[0]))
    parent, citers, grandchild, far = ranked[0], ranked[1:4], ranked[4], ranked[-1]
    members = demo.members(cid)
    edges = [(m, parent, PROV_PUBMED) for m in members[:10]]  # 10 members cite the parent: f = 10 / N
    edges += [(c, parent, PROV_PUBMED) for c in [*citers, far]] + [(grandchild, citers[0], PROV_PUBMED)]
    demo.store.add_refs(edges)
    result = ripple(demo.cfg, demo.store, cid, RulesBrain(), vectors=demo.vectors, embedder=embedder,
                    available_bytes=PLENTY)  # fmt: skip
    assert result.parents[0].pmid == parent and result.parents[0].count == 10
    assert result.parents_accepted == [parent]  # its cosine clears the rules judge's hint
    first = result.rounds[0]
    assert first.generation == 1 and first.children == 4
    gate = demo.cfg.expansion.upstream.tau_sem_child
    cos = {p: float(q.cosines(demo.vectors.get([p]))[0]) for p in [*citers, far, grandchild]}
    assert set(first.kept) == {p for p in [*citers, far] if cos[p] >= gate}
    assert far not in first.kept or cos[far] >= gate
    if citers[0] in first.kept:
        assert result.rounds[1].children == 1 and result.rounds[1].kept == ([grandchild] if cos[grandchild] >= gate
                                                                             else [])  # fmt: skip
    assert result.halted_by in (NO_KEEP, NO_CHILDREN)
    assert set(result.admitted) == set(result.accepted) & set(demo.members(cid))  # the tau_assign intake decides
    assert manifest(demo, cid)["accepted_new"] == len(result.accepted)
    assert json.loads(json.dumps(result.to_dict()))["cluster_id"] == cid
