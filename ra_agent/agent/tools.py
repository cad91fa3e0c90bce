"""Tool execution: a validated Action becomes inline effects (light tools) or stage requests (heavy tools).

Light tools (prisma_check, propose_alternative_pico, embed_text, the cluster commands,
update_goal) run inside the cycle. Heavy tools (search_pubmed, run_pico,
find_existing_sr) return `StageRequest`s: Dagster materialises them through the
agent sensor, the local runner through `stages.perform`. The LLM never names a file:
every path is derived here from ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ra_agent.agent.goal import GoalState, GoalStore, apply_llm_mutation
from ra_agent.agent.handbook import Handbook, load_handbook
from ra_agent.agent.stages import StageRequest, after_new_papers, expansion_key
from ra_agent.config import Config
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.protocol import ValidAction
from ra_agent.llm.structured import ask_structured
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace, register_query

log = logging.getLogger(__name__)

CONFIRM_YES = re.compile(r"\b(yes|confirm(ed)?|proceed)\b", re.I)
CONFIRM_NO = re.compile(r"\b(no|decline|abort)\b", re.I)
CONFIRM_SCHEMA = ReplySchema("confirm", {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
                                         "required": ["answer"], "additionalProperties": False})  # fmt: skip


@dataclass
class ToolContext:
    cfg: Config
    store: Store
    goal: GoalState
    goals: GoalStore
    handbook: Handbook
    brain: Any
    embedder_factory: Callable[[], Any]
    reply: str = ""  # the brain's reply this cycle (its reasoning explains a stop)


@dataclass
class ToolEffect:
    """What one tool call did: a JSON-able result for the history and the next prompt, and heavy work."""

    result: dict[str, Any]
    requests: list[StageRequest] = field(default_factory=list)


def _features(ctx: ToolContext):
    from ra_agent.topics.organise import load_features

    return load_features(ctx.cfg, ctx.store)


def _confirm_large(ctx: ToolContext, size: int) -> bool:
    """Above the guard, ask the brain "Are you sure?" before a batch PICO call."""
    limit = ctx.cfg.sr.pico_confirm_above
    question = (
        f"run_pico would send {size} abstracts to the LLM (guard: {limit}). Are you sure? Answer yes or no.\n"
        f"<state>{json.dumps({'task': 'confirm', 'size': size, 'limit': limit})}</state>"
    )
    asked = ask_structured(ctx.brain, [{"role": "user", "content": question}], CONFIRM_SCHEMA)
    log.info("run_pico confirmation (%d > %d) by %s: %s", size, limit, ctx.brain.name, asked.note())
    reply = asked.text  # {"answer": "yes"} when constrained, the rules' or a refusing server's words otherwise
    yes, no = CONFIRM_YES.search(reply), CONFIRM_NO.search(reply)
    return bool(yes) and (not no or yes.start() < no.start())


def search_pubmed(ctx: ToolContext, query: str, retmax: int, expand_mode: str) -> ToolEffect:
    key = register_query(ctx.store, query, retmax=retmax, origin=ctx.goal.goal_id)
    requests = [StageRequest("search", key, f"search_pubmed {query!r}"), *after_new_papers("new search results")]
    if ctx.goal.cluster_id:  # grow the focus cluster from what the search brought in
        requests.append(StageRequest("expand", expansion_key(ctx.goal.cluster_id, expand_mode),
                                     f"{expand_mode} expansion of {ctx.goal.cluster_id}"))  # fmt: skip
    return ToolEffect({"query": query, "query_key": key, "expand_mode": expand_mode}, requests)


def run_pico(ctx: ToolContext, cluster_id: str | None = None, pmid_list: list[int] | None = None) -> ToolEffect:
    from ra_agent.evidence.pico.extract import run_pico as extract
    from ra_agent.evidence.pico.llm_extract import make_extractor

    if cluster_id is not None:
        size = ctx.store.conn.execute(
            "SELECT COUNT(*) FROM cluster_member WHERE cluster_id=?", (cluster_id,)
        ).fetchone()[0]
        if size == 0:
            return ToolEffect({"error": "unknown_cluster", "cluster_id": cluster_id})
        if size > ctx.cfg.sr.pico_confirm_above and not _confirm_large(ctx, size):
            return ToolEffect({"declined": True, "cluster_id": cluster_id, "size": size})
        return ToolEffect({"cluster_id": cluster_id, "size": size}, [StageRequest("pico", cluster_id, "run_pico")])
    papers = ctx.store.papers(pmid_list or [])
    digest = hashlib.sha1(",".join(map(str, sorted(p.pmid for p in papers))).encode()).hexdigest()[:10]
    path = Workspace.of(ctx.cfg).pico_dir / f"list-{digest}.jsonl"
    confirm = lambda n: _confirm_large(ctx, n)  # noqa: E731
    result = extract(papers, make_extractor(ctx.brain, ctx.cfg), path, confirm=confirm,
                     confirm_above=ctx.cfg.sr.pico_confirm_above)  # fmt: skip
    return ToolEffect({"pmids": len(papers), "unknown_pmids": len(set(pmid_list or [])) - len(papers),
                       **result.metadata()})  # fmt: skip


def find_existing_sr(ctx: ToolContext, cluster_id: str) -> ToolEffect:
    return ToolEffect({"cluster_id": cluster_id}, [StageRequest("sr_overlap", cluster_id, "find_existing_sr")])


def prisma_check(ctx: ToolContext, cluster_id: str) -> ToolEffect:
    """seek_gap: PRISMA status of each review covering the cluster (PMC full text when online, else the
    abstract). conduct_SR: ra writes its own SR draft first, checks it, regenerates it once with explicit
    statements of the items found missing, and keeps the checked draft with its PRISMA 2020 checklist."""
    from ra_agent.evidence.prisma.check import prisma_check as check
    from ra_agent.evidence.prisma.store import save_prisma
    from ra_agent.evidence.reports.common import ReportError
    from ra_agent.evidence.sr.overlap import load_sr_overlap

    if ctx.goal.primary_goal == "conduct_SR":
        try:
            return _check_own_draft(ctx, cluster_id)
        except ReportError as exc:
            return ToolEffect({"cluster_id": cluster_id, "error": "no_draft", "message": str(exc)[:300]})
    found = load_sr_overlap(ctx.cfg, cluster_id)
    result = check(ctx.cfg, ctx.store, cluster_id, ctx.brain, sr_pmids=found.sr_pmids if found else [],
                   eutils=_eutils(ctx))  # fmt: skip
    save_prisma(ctx.cfg, cluster_id, result)
    return ToolEffect({"cluster_id": cluster_id, **result.as_dict(), "judged_by": result.judged_by,
                       "source": result.source, "undetermined": result.undetermined,
                       "reviews": {str(r.pmid): r.status for r in result.reviews}})  # fmt: skip


def _eutils(ctx: ToolContext):
    """An E-utilities client for PMC full texts, or None offline."""
    if ctx.cfg.ingest.offline or ctx.store.api_state("eutils")["offline"]:
        return None
    from ra_agent.ingest.eutils import EutilsClient

    return EutilsClient(ctx.cfg, store=ctx.store)


def _covered_dossier(ctx: ToolContext, cluster_id: str) -> None:
    """seek_gap pivots away from a cluster covered by prior reviews: write its dossier first (verdict "covered
    by review X → pivot", the reviews checked with their PRISMA status) so the judgement is on record."""
    from ra_agent.agent.reporting import goal_reports_dir, record_report
    from ra_agent.evidence.prisma.check import review_statuses
    from ra_agent.evidence.reports.common import ReportError
    from ra_agent.evidence.reports.gap_dossier import gap_dossier
    from ra_agent.evidence.sr.overlap import load_sr_overlap

    sr = load_sr_overlap(ctx.cfg, cluster_id)
    if sr is None or not sr.covered or ctx.goal.primary_goal != "seek_gap":
        return
    prisma = review_statuses(ctx.cfg, ctx.store, sr.sr_pmids, ctx.brain, _eutils(ctx))
    try:
        path = gap_dossier(ctx.cfg, ctx.store, cluster_id, goal_id=ctx.goal.goal_id, brain_name=ctx.brain.name,
                           sr=sr, prisma=prisma, out_dir=goal_reports_dir(ctx.cfg, ctx.goal.goal_id))  # fmt: skip
    except ReportError as exc:
        log.warning("dossier of covered cluster %s not written: %s", cluster_id, exc)
        return
    record_report(ctx.cfg, ctx.goals, ctx.goal, "gap_dossier", cluster_id, path, verdict="covered")


def _check_own_draft(ctx: ToolContext, cluster_id: str) -> ToolEffect:
    """Write ra's SR draft, judge it, fill the missing items once, write the final draft with its checklist."""
    from ra_agent.agent.reporting import goal_question, goal_reports_dir, workspace_relative
    from ra_agent.evidence.prisma.check import prisma_check as check
    from ra_agent.evidence.prisma.checklist import checked_text
    from ra_agent.evidence.prisma.store import save_prisma
    from ra_agent.evidence.reports.sr_draft import sr_draft

    question, arms = goal_question(ctx.cfg, ctx.goal), {}  # the LLM reads each trial's arms once

    def draft(prisma=None, fill=()):
        return sr_draft(ctx.cfg, ctx.store, cluster_id, goal_id=ctx.goal.goal_id, brain_name=ctx.brain.name,
                        prisma=prisma, fill=fill, out_dir=goal_reports_dir(ctx.cfg, ctx.goal.goal_id),
                        question=question, brain=ctx.brain, arm_cache=arms)  # fmt: skip

    def judge(path):
        return check(ctx.cfg, ctx.store, cluster_id, ctx.brain, draft_text=checked_text(path.read_text("utf-8")))

    result = judge(draft())
    first_missing = list(result.missing_items)
    if first_missing:  # regenerate with explicit statements of the missing items, then judge again
        result = judge(draft(fill=first_missing))
        result.filled = first_missing
    save_prisma(ctx.cfg, cluster_id, result)
    path = draft(prisma=result)
    checklist = path.with_name(f"{path.stem}_prisma_checklist.md")
    flow = path.with_name(f"{path.stem}_prisma_flow.png")
    ctx.goal.record("report_written", kind="sr_draft", cluster_id=cluster_id, path=workspace_relative(ctx.cfg, path))
    return ToolEffect({"cluster_id": cluster_id, **result.as_dict(), "judged_by": result.judged_by,
                       "source": "draft", "missing_first_check": first_missing, "draft": path.name,
                       "checklist": checklist.name, "flow_diagram": flow.name})  # fmt: skip


def propose_alternative_pico(ctx: ToolContext, exclude_pmids: list[int]) -> ToolEffect:
    """Craft a new theme from the papers the covering reviews leave out, write a new handbook and start a
    goal on it. A failed attempt is recorded too, so the agent does not repeat it."""
    from ra_agent.agent.spawn import spawn_handbook
    from ra_agent.evidence.sr.alternative import propose_alternative_pico as propose
    from ra_agent.evidence.sr.overlap import load_sr_overlap

    cluster_id = _cluster_of(ctx.cfg, ctx.store, exclude_pmids) or ctx.goal.cluster_id
    if cluster_id:
        _covered_dossier(ctx, cluster_id)
        found = load_sr_overlap(ctx.cfg, cluster_id)
        if found and set(exclude_pmids) <= set(found.sr_pmids):  # the state block lists 20 of them at most
            exclude_pmids = sorted(found.sr_pmids)
    limit = ctx.cfg.goal.max_spawn_depth
    if ctx.goal.spawn_depth >= limit:  # guard against endless spawning: goals of goals of goals...
        message = f"spawn depth {ctx.goal.spawn_depth} reached [goal] max_spawn_depth = {limit}"
        ctx.goal.record("alternative_failed", cluster_id=cluster_id, message=message)
        return ToolEffect({"error": "max_spawn_depth", "cluster_id": cluster_id, "message": message})
    try:
        alt = propose(ctx.cfg, ctx.store, ctx.brain, exclude_pmids, cluster_id=cluster_id)
    except ValueError as exc:
        ctx.goal.record("alternative_failed", cluster_id=cluster_id, message=str(exc)[:300])
        return ToolEffect({"error": "no_alternative", "cluster_id": cluster_id, "message": str(exc)[:300]})
    from ra_agent.evidence.questions.topic import keep_to_topic

    decision = keep_to_topic(ctx.handbook.seed_query, alt.seed_query, ctx.handbook.prose)
    if decision.seed_query is None:  # it would broaden the intervention or drop the comparator
        message = f"skipped: outside the goal's topic ({decision.skipped})"
        ctx.goal.record("alternative_skipped", cluster_id=cluster_id, seed_query=alt.seed_query, message=message)
        return ToolEffect({"error": "outside_topic", "cluster_id": cluster_id, "seed_query": alt.seed_query,
                           "message": message})  # fmt: skip
    if decision.note:  # a spawned goal narrows the parent's question, never another condition
        alt = replace(alt, seed_query=decision.seed_query)
        ctx.goal.record("alternative_narrowed", cluster_id=cluster_id, seed_query=decision.seed_query,
                        note=decision.note)  # fmt: skip
    earlier = _goal_on_theme(ctx.goals, alt.seed_query)
    if earlier is not None:  # one spawned goal per theme, whichever goal proposed it first
        message = f"theme {alt.seed_query!r} already has goal {earlier}"
        ctx.goal.record("alternative_failed", cluster_id=cluster_id, message=message, existing_goal=earlier)
        return ToolEffect({"error": "theme_has_a_goal", "cluster_id": cluster_id, "existing_goal": earlier,
                           "seed_query": alt.seed_query})  # fmt: skip
    out_dir = Workspace.of(ctx.cfg).root / "handbooks"
    handbook_path = spawn_handbook(ctx.cfg, ctx.handbook.path, alt.seed_query, out_dir, new_pico=alt.new_PICO)
    spawned = load_handbook(handbook_path)
    child = ctx.goals.create(str(handbook_path), spawned.primary_goal, alt.new_PICO, brain=ctx.brain.name)
    child.parent_goal, child.spawn_depth = ctx.goal.goal_id, ctx.goal.spawn_depth + 1
    # the covered cluster is what the child pivots away from: it looks for its theme elsewhere
    child.rejected_clusters = [c for c in [cluster_id, *ctx.goal.rejected_clusters] if c]
    child.record("spawned_from", parent_goal=ctx.goal.goal_id, new_PICO=alt.new_PICO, seed_query=alt.seed_query,
                 depth=child.spawn_depth, rejected_clusters=child.rejected_clusters)  # fmt: skip
    ctx.goals.save(child)
    ctx.goal.record("alternative_proposed", cluster_id=cluster_id, new_goal=child.goal_id,
                    new_PICO=alt.new_PICO, handbook=handbook_path.name)  # fmt: skip
    log.info("goal %s spawned goal %s on %r (seed query %r, handbook %s)", ctx.goal.goal_id, child.goal_id,
             alt.new_PICO, alt.seed_query, handbook_path)  # fmt: skip
    return ToolEffect({"new_PICO": alt.new_PICO, "seed_query": alt.seed_query, "new_goal": child.goal_id,
                       "judged_by": alt.judged_by})  # fmt: skip


def _goal_on_theme(goals: GoalStore, seed_query: str) -> str | None:
    """The goal already spawned on this seed query (compared case- and space-insensitively), if any."""
    wanted = " ".join(seed_query.lower().split())
    for state in goals.states():
        for h in state.events("spawned_from"):
            if " ".join(str(h.get("seed_query", "")).lower().split()) == wanted:
                return state.goal_id
    return None


def _cluster_of(cfg: Config, store: Store, pmids: list[int]) -> str | None:
    """The active cluster these PMIDs describe: the one whose find_existing_sr result lists them as its
    covering reviews, else the one holding most of them as members."""
    from ra_agent.evidence.sr.overlap import load_sr_overlap

    if not pmids:
        return None
    for (cluster_id,) in store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status='active'"):
        found = load_sr_overlap(cfg, cluster_id)
        if found and set(pmids) <= set(found.sr_pmids):
            return cluster_id
    marks = ",".join("?" * len(pmids))
    row = store.conn.execute(
        f"SELECT m.cluster_id, COUNT(*) n FROM cluster_member m JOIN cluster_manifest c USING (cluster_id) "
        f"WHERE c.status='active' AND m.pmid IN ({marks}) GROUP BY m.cluster_id ORDER BY n DESC LIMIT 1",
        pmids,
    ).fetchone()
    return row[0] if row else None


def embed_text(ctx: ToolContext, text: str | list[str]) -> ToolEffect:
    """Embed strings and report, for each, the closest frozen clusters by cosine."""
    import numpy as np

    from ra_agent.topics.features import decode_centroid

    texts = [text] if isinstance(text, str) else list(text)
    vectors = ctx.embedder_factory().encode(texts)
    rows = ctx.store.conn.execute(
        "SELECT cluster_id, label, frozen_centroid, centroid_dim FROM cluster_manifest "
        "WHERE status='active' AND centroid_dim=?",
        (vectors.shape[1],),
    ).fetchall()
    nearest = []
    if rows:
        centroids = np.stack([decode_centroid(r["frozen_centroid"], r["centroid_dim"]) for r in rows])
        sims = vectors @ centroids.T
        for t, s in zip(texts, sims, strict=True):
            top = np.argsort(-s)[:3]
            nearest.append({"text": t[:80], "nearest": [[rows[i]["cluster_id"], round(float(s[i]), 3)] for i in top]})
    return ToolEffect({"embedded": len(texts), "dim": int(vectors.shape[1]), "nearest_clusters": nearest})


def split_cluster(ctx: ToolContext, cluster_id: str) -> ToolEffect:
    from ra_agent.topics.lifecycle import split_cluster as split

    children = split(ctx.store, cluster_id, _features(ctx), ctx.cfg, goal_id=ctx.goal.goal_id)
    requests = [StageRequest("organise", reason=f"split {cluster_id}")] if children else []
    return ToolEffect({"cluster_id": cluster_id, "children": children}, requests)


def merge_clusters(ctx: ToolContext, source: str, target: str) -> ToolEffect:
    from ra_agent.topics.lifecycle import merge_clusters as merge

    merged = merge(ctx.store, source, target, _features(ctx), ctx.cfg)
    ctx.goal.record("merge_clusters", source=source, target=target)
    return ToolEffect({"source": source, "target": target, "result": merged},
                      [StageRequest("organise", reason=f"merge {source} into {target}")])  # fmt: skip


def drop_cluster(ctx: ToolContext, cluster_id: str) -> ToolEffect:
    from ra_agent.topics.lifecycle import drop_cluster as drop

    pooled = drop(ctx.store, cluster_id)
    return ToolEffect({"cluster_id": cluster_id, "unassigned": len(pooled)},
                      [StageRequest("organise", reason=f"drop {cluster_id}")])  # fmt: skip


def show_noise(ctx: ToolContext, limit: int) -> ToolEffect:
    from ra_agent.topics.lifecycle import show_noise as noise

    rows = noise(ctx.store, limit)
    return ToolEffect({"noise": [{"pmid": r["pmid"], "title": r["title"][:120], "reason": r["reason"]} for r in rows]})


def update_goal(ctx: ToolContext, changes: dict[str, Any]) -> ToolEffect:
    entries = apply_llm_mutation(ctx.goal, changes)
    for entry in entries:  # a stop by the brain carries its own words as the reason (not yet persisted)
        if entry["event"] == "stopped":
            entry["reason"] = f"the brain stopped the goal: {reasoning_tail(ctx.reply)}"
    return ToolEffect({"changed": sorted(changes), "events": [e["event"] for e in entries]})


def reasoning_tail(reply: str, lines: int = 2, limit: int = 300) -> str:
    """The last reasoning lines of a reply (before its Action line), for a history reason."""
    text = [ln.strip() for ln in reply.rsplit("Action:", 1)[0].splitlines() if ln.strip()]
    bullets = [ln for ln in text if ln[:1] in "-•*"]  # a bulleted reasoning: its points, not its header
    kept = [ln.lstrip("-•* ").strip() for ln in (bullets or text)[-lines:]]
    return (" ".join(kept) or "no reasoning given")[:limit]


TOOLS: dict[str, Callable[..., ToolEffect]] = {
    f.__name__: f
    for f in (
        search_pubmed,
        run_pico,
        find_existing_sr,
        prisma_check,
        propose_alternative_pico,
        embed_text,
        split_cluster,
        merge_clusters,
        drop_cluster,
        show_noise,
        update_goal,
    )  # fmt: skip
}


def execute(ctx: ToolContext, action: ValidAction) -> ToolEffect:
    """Run a validated action (embed_text arrives split into ≤ max_items calls, merged here)."""
    effects = [TOOLS[action.tool](ctx, **call) for call in action.calls()]
    if len(effects) == 1:
        return effects[0]
    return ToolEffect({"calls": [e.result for e in effects]}, [r for e in effects for r in e.requests])
