"""Expansion engine: the semantic boundary loop and the upstream/downstream ripple, under the RAM guard
(docs/architecture.md)."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ra_agent.config import Config
from ra_agent.hardware import ram_low, system_available_bytes
from ra_agent.ingest.http import ApiError
from ra_agent.store.db import Store
from ra_agent.topics.judge import Candidate, Verdict, ask_judge
from ra_agent.topics.lifecycle import admit_by_tau
from ra_agent.topics.view import (
    QueryVector,
    active_members_elsewhere,
    cluster_row,
    e_query_vector,
    member_pmids,
    semantic_tau_start,
    set_manifest,
)
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

AvailableBytes = Callable[[], int]
NO_KEEP, TAU_FLOOR, RAM_GUARD, EMPTY_POOL, NO_SEEDS, NO_CHILDREN = (
    "no_keep", "tau_floor", "ram_guard", "empty_pool", "no_seeds", "no_children",
)  # fmt: skip
RAM_HALT = "RAM"  # cluster_manifest.expansion_halt after a RAM-guard stop ([hardware] ram_reserve_bytes)


# ----------------------------------------------------------------------------- shared plumbing


def _halt_ram(cfg: Config, store: Store, cluster_id: str, where: str) -> None:
    log.warning("expansion_halt: RAM guard (%s, cluster %s: free RAM below %d bytes)", where, cluster_id,
                cfg.hardware.ram_reserve_bytes)  # fmt: skip
    set_manifest(store, cluster_id, expansion_halt=RAM_HALT)


def _finish(store: Store, cluster_id: str, accepted: Sequence[int], halted_by: str) -> None:
    """The count of newly accepted papers goes to cluster_manifest (and the RAM mark, or none)."""
    if halted_by == RAM_GUARD:
        set_manifest(store, cluster_id, accepted_new=len(accepted))
    else:
        set_manifest(store, cluster_id, accepted_new=len(accepted), expansion_halt=None)


def expansion_log_path(cfg: Config, cluster_id: str) -> Path:
    """<data_dir>/expansion/<cluster_id>.jsonl: one line per expansion run (candidates, judged, accepted)."""
    return Workspace.of(cfg).root / "expansion" / f"{cluster_id}.jsonl"


def _log_run(cfg: Config, cluster_id: str, record: dict[str, Any]) -> None:
    path = expansion_log_path(cfg, cluster_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"ts": int(time.time()), **record}) + "\n")


def expansion_history(cfg: Config, cluster_id: str) -> list[dict[str, Any]]:
    """Every expansion run logged for a cluster, oldest first (empty when none ran)."""
    path = expansion_log_path(cfg, cluster_id)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _rng(cfg: Config, cluster_id: str, mode: str) -> random.Random:
    return random.Random(f"{cfg.expansion.semantic.sample_seed}:{cluster_id}:{mode}")


def _sample(rng: random.Random, pmids: Iterable[int], k: int) -> list[int]:
    pool = sorted(pmids)
    return sorted(rng.sample(pool, min(k, len(pool))))


def _judge(
    store: Store, judge: Any, label: str, shown: Sequence[int], cos: dict[int, float], hint: float,
    cfg: Config | None = None,
) -> Verdict:  # fmt: skip
    """ask_judge over the shown PMIDs (title + abstract cut to [tokens] judge_abstract_tokens); no prompt when none."""
    from ra_agent.embed.tokens import encoder_for, truncate_tokens_many

    if not shown:
        return Verdict([])
    cfg = cfg or Config()
    papers = {p.pmid: p for p in store.papers(list(shown))}
    raw = [papers[p].abstract if p in papers else "" for p in shown]
    cut = truncate_tokens_many(raw, cfg.tokens.judge_abstract_tokens, encoder_for(cfg))
    candidates = [Candidate(p, (papers[p].title or r[:200]) if p in papers else "", cos[p], c + " …" if c != r else c)
                  for p, r, c in zip(shown, raw, cut, strict=True)]  # fmt: skip
    return ask_judge(judge, label, candidates, hint)


def _admit(cfg: Config, store: Store, result: Any, keep: Sequence[int], vectors: Any, available_bytes: AvailableBytes,
           where: str) -> bool:  # fmt: skip
    """Kept papers pass the tau_assign intake (`admit_by_tau`) into result.accepted and .admitted (those
    that joined this cluster); False, with nothing admitted, when the RAM guard trips first."""
    if keep and ram_low(cfg, available_bytes):
        _halt_ram(cfg, store, result.cluster_id, where)
        return False
    intake = admit_by_tau(store, cfg, vectors, keep, pool_reason=f"expansion_beyond_tau:{result.cluster_id}")
    result.accepted.extend(keep)
    result.admitted.extend(p for p in keep if intake.assigned.get(int(p)) == result.cluster_id)
    return True


# ----------------------------------------------------------------------------- semantic boundary loop


@dataclass(frozen=True)
class BoundaryBatch:
    threshold: float
    pool: int  # candidates at or above the threshold not judged yet
    shown: list[int]
    kept: list[int]
    error: str = ""


@dataclass
class ExpansionResult:
    """One semantic boundary run: thresholds tried (strictly decreasing), batches, why it stopped."""

    cluster_id: str
    accepted: list[int]
    thresholds: list[float]
    batches: list[BoundaryBatch]
    halted_by: str  # "no_keep" | "tau_floor" | "ram_guard" | "empty_pool"
    candidates: int = 0  # usable candidates (with a vector, not in an active cluster)
    no_vector: list[int] = field(default_factory=list)
    in_other_cluster: int = 0
    judge: str = ""
    query_source: str = ""
    admitted: list[int] = field(default_factory=list)  # accepted papers that joined this cluster by tau_assign
    tau_start: float = 0.0  # the cluster's own start (tau_start_rule); leading thresholds without candidates skipped
    tau_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _usable_candidates(
    store: Store, cluster_id: str, candidate_pmids: Iterable[int], vectors: Any
) -> tuple[np.ndarray, list[int], int]:
    """(usable PMIDs, PMIDs without a vector, count in another active cluster); members of this cluster are dropped."""
    members = set(member_pmids(store, cluster_id))
    wanted = sorted({int(p) for p in candidate_pmids} - members)
    elsewhere = active_members_elsewhere(store, cluster_id, wanted)
    wanted = [p for p in wanted if p not in elsewhere]
    ids = np.asarray(wanted, dtype=np.int64)
    has = vectors.has(ids) if len(ids) else np.zeros(0, bool)
    return ids[has], ids[~has].tolist(), len(elsewhere)


def semantic_boundary(
    cfg: Config,
    store: Store,
    cluster_id: str,
    candidate_pmids: Iterable[int],
    judge: Any,
    *,
    vectors: Any,
    available_bytes: AvailableBytes = system_available_bytes,
) -> ExpansionResult:
    """March outward from the cluster centroid in cosine steps, the judge validating each frontier.

    Q_vec is the cluster's E-space vector (`e_query_vector`: the frozen centroid, or the members' E
    centroid for PICO-space clusters). Candidates are the given PMIDs minus this cluster's members and
    members of other active clusters, with an E vector. Each round, from threshold = the cluster's own
    `semantic_tau_start` less the delta_tau steps above every candidate:

    1. stop (ram_guard) when free RAM < [hardware] ram_reserve_bytes; stop (tau_floor) below tau_floor;
    2. pool = candidates with cosine >= threshold not judged yet (the accepted are subtracted; a
       paper the judge rejected is not shown again either); stop (empty_pool) when it is empty;
    3. a seeded random sample of boundary_batch_size goes to the judge (`ask_judge`, hint
       judge_keep_cosine); kept papers pass the tau_assign intake at once (`_admit`);
    4. stop (no_keep) when the judge keeps <= no_keep_limit; else threshold -= delta_tau.

    accepted_new (and expansion_halt 'RAM' after a RAM stop) are written to cluster_manifest.
    """
    sem = cfg.expansion.semantic
    row = cluster_row(store, cluster_id)
    q = e_query_vector(store, cluster_id, vectors)
    ids, no_vector, elsewhere = _usable_candidates(store, cluster_id, candidate_pmids, vectors)
    if no_vector:
        log.info("semantic boundary %s: %d candidates have no E vector and are skipped", cluster_id, len(no_vector))
    cos = dict(zip(ids.tolist(), q.cosines(vectors.get(ids)).tolist(), strict=True)) if len(ids) else {}
    rng = _rng(cfg, cluster_id, "semantic")
    result = ExpansionResult(cluster_id, [], [], [], NO_KEEP, len(cos), no_vector, elsewhere, judge.name, q.source)
    result.tau_start, result.tau_source = semantic_tau_start(cfg, store, cluster_id, q, vectors)
    judged: set[int] = set()
    step, top = 0, max([*cos.values(), sem.tau_floor]) if cos else result.tau_start  # out to the first candidates
    while round(result.tau_start - step * sem.delta_tau, 10) > top:
        step += 1
    while True:
        threshold = round(result.tau_start - step * sem.delta_tau, 10)
        if ram_low(cfg, available_bytes):
            result.halted_by = RAM_GUARD
            _halt_ram(cfg, store, cluster_id, f"semantic boundary at threshold {threshold:.2f}")
            break
        if threshold < sem.tau_floor:
            result.halted_by = TAU_FLOOR
            break
        result.thresholds.append(threshold)
        pool = [p for p, c in cos.items() if c >= threshold and p not in judged]
        if not pool:
            result.halted_by = EMPTY_POOL
            break
        shown = _sample(rng, pool, sem.boundary_batch_size)
        verdict = _judge(store, judge, row["label"], shown, cos, sem.judge_keep_cosine, cfg)
        judged.update(shown)
        result.batches.append(BoundaryBatch(threshold, len(pool), shown, verdict.keep, verdict.error))
        if not _admit(cfg, store, result, verdict.keep, vectors, available_bytes, "before admitting a judged batch"):
            result.halted_by = RAM_GUARD
            break
        log.info("semantic boundary %s: threshold %.2f, pool %d, shown %d, kept %d", cluster_id, threshold,
                 len(pool), len(shown), len(verdict.keep))  # fmt: skip
        if len(verdict.keep) <= sem.no_keep_limit:
            result.halted_by = NO_KEEP
            break
        step += 1
    _finish(store, cluster_id, result.accepted, result.halted_by)
    record = {"mode": "semantic", "judge": judge.name, "candidates": sorted(cos), "judged": sorted(judged),
              "accepted": result.accepted, "admitted": result.admitted, "halted_by": result.halted_by,
              "thresholds": result.thresholds, "tau_start": result.tau_start}  # fmt: skip
    _log_run(cfg, cluster_id, record)
    log.info("semantic boundary %s: from %.4f (%s), %d accepted (%d joined by tau_assign) over %d rounds, "
             "halted by %s", cluster_id, result.tau_start, result.tau_source, len(result.accepted),
             len(result.admitted), len(result.batches), result.halted_by)  # fmt: skip
    return result


# ----------------------------------------------------------------------------- ripple: upstream parents


@dataclass(frozen=True)
class ParentShare:
    pmid: int
    count: int  # members citing it
    share: float  # f(p) = count / N


def parent_shares(store: Store, members: Sequence[int]) -> list[ParentShare]:
    """Papers the members cite (ref edges, src = member), with f(p) = count(p) / N, best first.

    Parents that are members themselves and unmapped references (dst 0) are left out.
    """
    n = len(members)
    inside = set(members)
    counts: dict[int, int] = {}
    for start in range(0, n, 500):
        chunk = list(members[start : start + 500])
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT dst, COUNT(DISTINCT src) FROM ref WHERE src IN ({marks}) AND dst > 0 GROUP BY dst"
        for dst, k in store.conn.execute(sql, chunk):
            if dst not in inside:
                counts[dst] = counts.get(dst, 0) + k
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [ParentShare(p, k, k / n) for p, k in ranked]


def select_parents(shares: Sequence[ParentShare], alpha: float, max_parents: int) -> tuple[list[ParentShare], float]:
    """Accept parents in order until coverage Σ f(p) >= alpha or max_parents are collected; (parents, coverage)."""
    chosen: list[ParentShare] = []
    coverage = 0.0
    for parent in shares:
        if coverage >= alpha or len(chosen) >= max_parents:
            break
        chosen.append(parent)
        coverage += parent.share
    return chosen, coverage


@dataclass
class RippleRound:
    generation: int  # 1 = citers of the accepted parents, 2 = citers of generation 1, ...
    children: int  # new citing papers found
    resolved: int  # ... with a stored record and an E vector
    passed_gate: int  # ... with cosine >= tau_sem_child
    shown: list[int]
    kept: list[int]
    error: str = ""


@dataclass
class RippleResult:
    """One ripple run: parents chosen by citation share, their judgement, then the citer rounds."""

    cluster_id: str
    parents: list[ParentShare]
    coverage: float
    alpha: float  # the alpha the final selection used
    alpha_halved: bool
    parents_judged: list[int]
    parents_accepted: list[int]
    parents_unresolved: list[int]  # no record in the store (offline, or unknown to PubMed)
    rounds: list[RippleRound]
    accepted: list[int]
    halted_by: str  # "no_keep" | "no_children" | "no_seeds" | "ram_guard"
    eutils_offline: bool = False
    admitted: list[int] = field(default_factory=list)  # accepted papers that joined this cluster by tau_assign
    judge: str = ""
    query_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Resolver:
    """Brings papers into the store (efetch when online) and the vector index (embedding), and measures cosines."""

    def __init__(self, cfg: Config, store: Store, eutils: Any, vectors: Any, embedder: Any, q: QueryVector):
        self.cfg, self.store, self.eutils, self.vectors, self.embedder, self.q = (
            cfg,
            store,
            eutils,
            vectors,
            embedder,
            q,
        )
        self.offline = eutils is None or bool(store.api_state("eutils")["offline"])
        if embedder is not None and getattr(vectors, "model", embedder.model_id) != embedder.model_id:
            raise ValueError(f"embedder {embedder.model_id} does not match the vector index ({vectors.model})")

    def fetch(self, pmids: Sequence[int]) -> None:
        missing = sorted(set(pmids) - self.store.existing_pmids(pmids))
        if not missing or self.offline:
            return
        if getattr(self.eutils, "store", None) is None:
            self.eutils.store = self.store
        try:
            papers = self.eutils.efetch(missing)
        except ApiError as exc:
            self.offline = True
            log.error("ripple: efetch of %d papers failed (%s); continuing with the local corpus", len(missing), exc)
            return
        self.store.upsert_papers(papers, source="efetch", query="ripple",
                                 batch_size=self.cfg.embedding.refresh_threshold)  # fmt: skip

    def cited_by(self, pmids: Sequence[int]) -> set[int]:
        """Citers of `pmids`: ref edges (dst in pmids), plus elink cited-by when online."""
        found: set[int] = set()
        for start in range(0, len(pmids), 500):
            chunk = list(pmids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self.store.conn.execute(f"SELECT src FROM ref WHERE dst IN ({marks})", chunk))
        if not self.offline and pmids:
            try:
                for citers in self.eutils.cited_by(list(pmids)).values():
                    found.update(citers)
            except ApiError as exc:
                self.offline = True
                log.error("ripple: elink cited-by failed (%s); using local citation edges only", exc)
        return found

    def cosines(self, pmids: Sequence[int]) -> dict[int, float]:
        """Cosine to the cluster vector for the papers that are stored (embedding those without a vector)."""
        from ra_agent.embed.index import embed_missing

        stored = sorted(self.store.existing_pmids(pmids))
        if stored and self.embedder is not None:
            embed_missing(self.vectors, self.embedder, self.store, stored, self.cfg)
        ids = np.asarray(stored, dtype=np.int64)
        ids = ids[self.vectors.has(ids)] if len(ids) else ids
        if not len(ids):
            return {}
        return dict(zip(ids.tolist(), self.q.cosines(self.vectors.get(ids)).tolist(), strict=True))


def ripple(
    cfg: Config,
    store: Store,
    cluster_id: str,
    judge: Any,
    *,
    eutils: Any = None,
    vectors: Any,
    embedder: Any,
    available_bytes: AvailableBytes = system_available_bytes,
) -> RippleResult:
    """Ripple: upstream parents by citation share, then downstream citers, each gated by the judge.

    Upstream: f(p) = members citing p / N over `ref`; parents are accepted in order until Σ f >= alpha
    ([expansion.upstream] alpha_coverage) or max_parents; missing records are efetched when online,
    embedded, and their titles judged (hint tau_sem_child). If the judge rejects >= gemma_reject_threshold
    of them, alpha is halved once and the smaller selection judged again. Accepted parents are admitted
    and form the seed set.
    Downstream: citers of the current set (ref edges, plus elink cited-by online) that are not known yet
    are fetched, embedded and kept when cosine >= tau_sem_child; a seeded sample of boundary_batch_size is
    judged, the kept ones admitted and become the next set; the loop ends when the judge keeps none,
    no new citer turns up, or the RAM guard trips (expansion_halt 'RAM').
    """
    up, sem = cfg.expansion.upstream, cfg.expansion.semantic
    row = cluster_row(store, cluster_id)
    q = e_query_vector(store, cluster_id, vectors)
    members = member_pmids(store, cluster_id)
    resolver = _Resolver(cfg, store, eutils, vectors, embedder, q)
    if not resolver.offline:  # members' reference lists fetched when ripple asks for their parents
        from ra_agent.ingest.pipeline import fetch_references

        fetch_references(cfg, store, members, eutils=eutils)
    shares = parent_shares(store, members)
    alpha, halved = up.alpha_coverage, False
    result = RippleResult(cluster_id, [], 0.0, alpha, False, [], [], [], [], [], NO_SEEDS, judge=judge.name,
                          query_source=q.source)  # fmt: skip
    known = set(members) | active_members_elsewhere(store, cluster_id, [s.pmid for s in shares])
    considered: set[int] = set()  # candidates with a record and a vector, for the PRISMA flow
    while True:
        if ram_low(cfg, available_bytes):
            result.halted_by = RAM_GUARD
            _halt_ram(cfg, store, cluster_id, "ripple upstream")
            return _end_ripple(cfg, store, result, resolver, considered)
        parents, coverage = select_parents(shares, alpha, up.max_parents)
        result.parents, result.coverage, result.alpha, result.alpha_halved = parents, coverage, alpha, halved
        ids = [p.pmid for p in parents if p.pmid not in known]
        resolver.fetch(ids)
        cos = resolver.cosines(ids)
        result.parents_unresolved = [p for p in ids if p not in cos]
        considered.update(cos)
        shown = sorted(cos)
        verdict = _judge(store, judge, row["label"], shown, cos, up.tau_sem_child, cfg)
        result.parents_judged, result.parents_accepted = shown, verdict.keep
        rejected = (len(shown) - len(verdict.keep)) / len(shown) if shown else 0.0
        log.info("ripple %s upstream: %d parents (coverage %.3f, alpha %.3f), %d judged, %d kept", cluster_id,
                 len(parents), coverage, alpha, len(shown), len(verdict.keep))  # fmt: skip
        if shown and rejected >= up.gemma_reject_threshold and not halved:
            alpha, halved = alpha / 2, True
            continue
        break
    if not _admit(cfg, store, result, verdict.keep, vectors, available_bytes, "before admitting judged parents"):
        result.halted_by = RAM_GUARD
        return _end_ripple(cfg, store, result, resolver, considered)
    known.update(p.pmid for p in parents)
    current, generation = list(verdict.keep), 0
    result.halted_by = NO_SEEDS if not current else NO_KEEP
    rng = _rng(cfg, cluster_id, "ripple")
    while current:
        if ram_low(cfg, available_bytes):
            result.halted_by = RAM_GUARD
            _halt_ram(cfg, store, cluster_id, f"ripple downstream generation {generation + 1}")
            break
        generation += 1
        children = sorted(resolver.cited_by(current) - known)
        if not children:
            result.halted_by = NO_CHILDREN
            break
        children = sorted(set(children) - active_members_elsewhere(store, cluster_id, children))
        known.update(children)
        resolver.fetch(children)
        cos = resolver.cosines(children)
        considered.update(cos)
        passing = [p for p, c in cos.items() if c >= up.tau_sem_child]
        shown = _sample(rng, passing, sem.boundary_batch_size)
        verdict = _judge(store, judge, row["label"], shown, cos, up.tau_sem_child, cfg)
        result.rounds.append(RippleRound(generation, len(children), len(cos), len(passing), shown, verdict.keep,
                                         verdict.error))  # fmt: skip
        if not _admit(cfg, store, result, verdict.keep, vectors, available_bytes, "before admitting judged citers"):
            result.halted_by = RAM_GUARD
            break
        log.info("ripple %s downstream gen %d: %d citers, %d embedded, %d >= %.2f, %d shown, %d kept", cluster_id,
                 generation, len(children), len(cos), len(passing), up.tau_sem_child, len(shown),
                 len(verdict.keep))  # fmt: skip
        current = verdict.keep
        if not current:
            result.halted_by = NO_KEEP
    return _end_ripple(cfg, store, result, resolver, considered)


def _end_ripple(
    cfg: Config, store: Store, result: RippleResult, resolver: _Resolver, considered: set[int]
) -> RippleResult:
    result.eutils_offline = resolver.offline
    _finish(store, result.cluster_id, result.accepted, result.halted_by)
    judged = sorted({*result.parents_judged, *(p for r in result.rounds for p in r.shown)})
    record = {"mode": "ripple", "judge": result.judge, "candidates": sorted(considered), "judged": judged,
              "accepted": result.accepted, "halted_by": result.halted_by, "coverage": result.coverage,
              "alpha": result.alpha}  # fmt: skip
    _log_run(cfg, result.cluster_id, record)
    log.info(
        "ripple %s: %d accepted (%d parents, %d citers), halted by %s",
        result.cluster_id,
        len(result.accepted),
        len(result.parents_accepted),
        len(result.accepted) - len(result.parents_accepted),
        result.halted_by,
    )
    return result
