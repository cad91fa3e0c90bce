"""Tool execution: a validated Action becomes inline effects (light tools) or stage requests (heavy tools).

Light tools (run_pico on a question or a PMID list, find_existing_sr, prisma_check, propose_alternative_pico,
embed_text, the cluster commands, update_goal) run inside the cycle; the review-question tools read the handbook's
QuestionSet (`goal_questions`), never compute a question's studies or verdict. Heavy work (search_pubmed, run_pico on
a cluster, the questions judged again) is returned as `StageRequest`s: Dagster materialises them through the agent
sensor, the local runner through `stages.perform`. The LLM never names a file: every path is derived here from ids.
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
from ra_agent.agent.goal_questions import covering_pmids, goal_calls, goal_question_set, questions_request
from ra_agent.agent.handbook import Handbook, recorded_handbook
from ra_agent.agent.stages import StageRequest, after_new_papers, expansion_key
from ra_agent.agent.success import HandbookError
from ra_agent.config import Config
from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.question_set import QuestionSet, QuestionSetError
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
    requests += questions_request(ctx.cfg, ctx.handbook, "new search results")
    return ToolEffect({"query": query, "query_key": key, "expand_mode": expand_mode}, requests)


class QuestionUnavailable(LookupError):
    """A tool named a question the handbook's current set does not hold, or the set must be judged again first."""


def _question(ctx: ToolContext, question_id: str) -> tuple[QuestionSet, ReviewQuestion]:
    """The handbook's current set and one of its questions; QuestionUnavailable (the cycle records it as the
    brain's error) when the set is stale or the id is not one of its questions."""
    qset, why = goal_question_set(ctx.cfg, ctx.store, ctx.goal, ctx.handbook)
    if qset is None:
        raise QuestionUnavailable(f"the handbook's questions are not available now ({why}); they are judged again "
                                  "before the next cycle")  # fmt: skip
    try:
        return qset, qset.question(question_id)
    except QuestionSetError as exc:
        raise QuestionUnavailable(str(exc)) from None


def run_pico(ctx: ToolContext, question_id: str | None = None, cluster_id: str | None = None,
             pmid_list: list[int] | None = None) -> ToolEffect:  # fmt: skip
    """PICO of a question's reports (pico/<question id>.jsonl, inline), of a cluster's members (the pico stage), or
    of a PMID list (inline); above [sr] pico_confirm_above abstracts the brain is asked first."""
    from ra_agent.evidence.pico.extract import run_pico as extract
    from ra_agent.evidence.pico.llm_extract import make_extractor
    from ra_agent.topics.view import pico_path

    if cluster_id is not None:
        size = ctx.store.conn.execute(
            "SELECT COUNT(*) FROM cluster_member WHERE cluster_id=?", (cluster_id,)
        ).fetchone()[0]
        if size == 0:
            return ToolEffect({"error": "unknown_cluster", "cluster_id": cluster_id})
        if size > ctx.cfg.sr.pico_confirm_above and not _confirm_large(ctx, size):
            return ToolEffect({"declined": True, "cluster_id": cluster_id, "size": size})
        return ToolEffect({"cluster_id": cluster_id, "size": size}, [StageRequest("pico", cluster_id, "run_pico")])
    if question_id is not None:
        _, question = _question(ctx, question_id)
        papers = ctx.store.papers(sorted(question.trials))
        path, named = pico_path(ctx.cfg, question_id), {"question_id": question_id}
    else:
        papers = ctx.store.papers(pmid_list or [])
        digest = hashlib.sha1(",".join(map(str, sorted(p.pmid for p in papers))).encode()).hexdigest()[:10]
        path = Workspace.of(ctx.cfg).pico_dir / f"list-{digest}.jsonl"
        named = {"pmids": len(papers), "unknown_pmids": len(set(pmid_list or [])) - len(papers)}
    confirm = lambda n: _confirm_large(ctx, n)  # noqa: E731
    result = extract(papers, make_extractor(ctx.brain, ctx.cfg), path, confirm=confirm,
                     confirm_above=ctx.cfg.sr.pico_confirm_above)  # fmt: skip
    return ToolEffect({**named, **result.metadata()})


def find_existing_sr(ctx: ToolContext, question_id: str) -> ToolEffect:
    """The reviews that answer a question and whether one covers it, as its set holds them (the numbers `ra
    questions` prints). Online, PubMed is also searched for reviews of the handbook's topic (`(<seed query>) AND
    systematic[sb]`); the records it brings in are judged with the questions again before the next cycle."""
    qset, question = _question(ctx, question_id)
    covering = question.covering
    result = {
        "question_id": question_id, "question": question.in_words, "verdict": question.verdict,
        "studies": len(question.studies), "reviews_answering": len(question.reviews),
        "covering": {"pmid": covering.pmid, "year": covering.year, "title": covering.title[:160]} if covering else None,
        "covering_pmids": covering_pmids(ctx.cfg, question), "sr_overlap": question.metrics["sr_overlap"],
        "trials_since_review": len(question.trials_since), "reviews_checked": qset.reviews_checked,
    }  # fmt: skip
    requests: list[StageRequest] = []
    if not (ctx.cfg.ingest.offline or ctx.store.api_state("eutils")["offline"]) and qset.seed_query:
        query = f"({qset.seed_query}) AND systematic[sb]"
        key = register_query(ctx.store, query, retmax=ctx.cfg.sr.sr_retmax, origin=ctx.goal.goal_id)
        requests = [StageRequest("search", key, f"reviews of {question_id} in PubMed"),
                    *after_new_papers("reviews found in PubMed"),
                    *questions_request(ctx.cfg, ctx.handbook, "reviews found in PubMed")]  # fmt: skip
        result["pubmed_query"] = query
    return ToolEffect(result, requests)


def prisma_check(ctx: ToolContext, question_id: str) -> ToolEffect:
    """seek_gap: the PRISMA status of each review covering the question (PMC full text when online, else the
    abstract); no covering review: not compliant (none exists). conduct_SR: ra writes its own SR draft of the
    question first, checks it, regenerates it once with explicit statements of the items found missing, and keeps
    the checked draft with its PRISMA 2020 checklist. The result is kept per question (sr/<question id>.prisma.json)."""
    from ra_agent.evidence.prisma.check import review_statuses
    from ra_agent.evidence.prisma.store import save_prisma
    from ra_agent.evidence.reports.common import ReportError

    qset, question = _question(ctx, question_id)
    if ctx.goal.primary_goal == "conduct_SR":
        try:
            return _check_own_draft(ctx, qset, question)
        except ReportError as exc:
            return ToolEffect({"question_id": question_id, "error": "no_draft", "message": str(exc)[:300]})
    result = review_statuses(ctx.cfg, ctx.store, covering_pmids(ctx.cfg, question), ctx.brain, _eutils(ctx))
    save_prisma(ctx.cfg, question_id, result)
    return ToolEffect({"question_id": question_id, "PRISMA_compliant": result.compliance, **result.as_dict(),
                       "judged_by": result.judged_by, "source": result.source, "undetermined": result.undetermined,
                       "reviews": {str(r.pmid): r.status for r in result.reviews}})  # fmt: skip


def _eutils(ctx: ToolContext):
    """An E-utilities client for PMC full texts, or None offline."""
    if ctx.cfg.ingest.offline or ctx.store.api_state("eutils")["offline"]:
        return None
    from ra_agent.ingest.eutils import EutilsClient

    return EutilsClient(ctx.cfg, store=ctx.store)


def _covered_dossier(ctx: ToolContext, qset: QuestionSet, question: ReviewQuestion) -> None:
    """seek_gap pivots away from a covered question: its dossier is written first (the question's verdict, the
    reviews checked with the PRISMA status of its covering review) so the judgement is on record."""
    from ra_agent.agent.reporting import goal_reports_dir, record_report
    from ra_agent.evidence.prisma.store import load_prisma
    from ra_agent.evidence.reports.common import ReportError
    from ra_agent.evidence.reports.gap_dossier import gap_dossier

    if ctx.goal.primary_goal != "seek_gap" or not question.verdict.startswith("covered"):
        return
    prisma = load_prisma(ctx.cfg, question.id) if question.id in goal_calls(ctx.goal)["prisma_check"] else None
    try:
        path = gap_dossier(ctx.cfg, ctx.store, qset, question, goal_id=ctx.goal.goal_id, brain_name=ctx.brain.name,
                           prisma=prisma, out_dir=goal_reports_dir(ctx.cfg, ctx.goal.goal_id))  # fmt: skip
    except ReportError as exc:
        log.warning("dossier of covered question %s not written: %s", question.id, exc)
        return
    record_report(ctx.cfg, ctx.goals, ctx.goal, "gap_dossier", question.id, path)


def _check_own_draft(ctx: ToolContext, qset: QuestionSet, question: ReviewQuestion) -> ToolEffect:
    """Write ra's SR draft of the question, judge it, fill the missing items once, write the final draft with its
    checklist."""
    from ra_agent.agent.reporting import goal_reports_dir, synthesis_question, workspace_relative
    from ra_agent.evidence.prisma.check import check_draft
    from ra_agent.evidence.prisma.checklist import checked_text
    from ra_agent.evidence.prisma.store import save_prisma
    from ra_agent.evidence.reports.sr_draft import sr_draft

    asked, arms = synthesis_question(ctx.cfg, ctx.goal, question), {}  # the LLM reads each trial's arms once

    def draft(prisma=None, fill=()):
        return sr_draft(ctx.cfg, ctx.store, qset, question, goal_id=ctx.goal.goal_id, brain_name=ctx.brain.name,
                        prisma=prisma, fill=fill, out_dir=goal_reports_dir(ctx.cfg, ctx.goal.goal_id),
                        synthesis_question=asked, brain=ctx.brain, arm_cache=arms)  # fmt: skip

    def judge(path):
        return check_draft(ctx.cfg, ctx.brain, checked_text(path.read_text("utf-8")))

    result = judge(draft())
    first_missing = list(result.missing_items)
    if first_missing:  # regenerate with explicit statements of the missing items, then judge again
        result = judge(draft(fill=first_missing))
        result.filled = first_missing
    save_prisma(ctx.cfg, question.id, result)
    path = draft(prisma=result)
    checklist = path.with_name(f"{path.stem}_prisma_checklist.md")
    flow = path.with_name(f"{path.stem}_prisma_flow.png")
    ctx.goal.record("report_written", kind="sr_draft", question_id=question.id,
                    path=workspace_relative(ctx.cfg, path))  # fmt: skip
    return ToolEffect({"question_id": question.id, "PRISMA_compliant": result.compliance, **result.as_dict(),
                       "judged_by": result.judged_by, "source": "draft", "missing_first_check": first_missing,
                       "draft": path.name, "checklist": checklist.name, "flow_diagram": flow.name})  # fmt: skip


def propose_alternative_pico(ctx: ToolContext, question_id: str) -> ToolEffect:
    """Pivot from a covered question. First to a narrower in-scope question of the same set that its covering
    review leaves open (a gap, or too few trials for a review: the goal's focus moves there); else a new theme from
    the question's reports that the covering reviews could not include (`evidence.sr.alternative`), written as a
    new handbook and started as a goal, unless a goal of the workspace already has that theme or already asks the
    topic's question the new handbook would ask (one goal per review question). The covered question's dossier is
    written first; a failed attempt is recorded too, so the agent does not repeat it."""
    from ra_agent.agent.spawn import draft_handbook
    from ra_agent.evidence.sr.alternative import propose_alternative_pico as propose

    qset, question = _question(ctx, question_id)
    _covered_dossier(ctx, qset, question)
    open_below = [q for q in qset.questions if q.parent == question_id and q.in_scope and q.verdict == "gap"
                  and q.id not in ctx.goal.questions_done]  # fmt: skip
    if open_below:
        target = open_below[0]
        ctx.goal.questions_done = list(dict.fromkeys([*ctx.goal.questions_done, question_id]))
        ctx.goal.question_id = target.id
        ctx.goal.record("question_pivoted", question_id=question_id, to=target.id, question=target.in_words)
        return ToolEffect({"question_id": question_id, "pivot": "narrower question", "to": target.id,
                           "question": target.in_words, "verdict": target.verdict})  # fmt: skip
    limit = ctx.cfg.goal.max_spawn_depth
    if ctx.goal.spawn_depth >= limit:  # guard against endless spawning: goals of goals of goals...
        message = f"spawn depth {ctx.goal.spawn_depth} reached [goal] max_spawn_depth = {limit}"
        ctx.goal.record("alternative_failed", question_id=question_id, message=message)
        return ToolEffect({"error": "max_spawn_depth", "question_id": question_id, "message": message})
    covered = {p for r in question.reviews if r.pmid in covering_pmids(ctx.cfg, question) for p in r.trials_covered}
    excluded = sorted({p for reports in question.studies.values() if reports[0] in covered for p in reports}
                      | set(covering_pmids(ctx.cfg, question)))  # fmt: skip
    try:
        alt = propose(ctx.cfg, ctx.store, ctx.brain, excluded, cluster_id=question_id, pool=sorted(question.trials),
                      label=question.in_words)  # fmt: skip
    except ValueError as exc:
        ctx.goal.record("alternative_failed", question_id=question_id, message=str(exc)[:300])
        return ToolEffect({"error": "no_alternative", "question_id": question_id, "message": str(exc)[:300]})
    from ra_agent.evidence.questions.topic import keep_to_topic

    decision = keep_to_topic(ctx.handbook.seed_query, alt.seed_query, ctx.handbook.prose)
    if decision.seed_query is None:  # it would broaden the intervention or drop the comparator
        message = f"skipped: outside the goal's topic ({decision.skipped})"
        ctx.goal.record("alternative_skipped", question_id=question_id, seed_query=alt.seed_query, message=message)
        return ToolEffect({"error": "outside_topic", "question_id": question_id, "seed_query": alt.seed_query,
                           "message": message})  # fmt: skip
    if decision.note:  # a spawned goal narrows the parent's question, never another condition
        alt = replace(alt, seed_query=decision.seed_query)
        ctx.goal.record("alternative_narrowed", question_id=question_id, seed_query=decision.seed_query,
                        note=decision.note)  # fmt: skip
    earlier = _goal_on_theme(ctx.goals, alt.seed_query)
    if earlier is not None:  # one spawned goal per theme, whichever goal proposed it first
        message = f"theme {alt.seed_query!r} already has goal {earlier}"
        ctx.goal.record("alternative_failed", question_id=question_id, message=message, existing_goal=earlier)
        return ToolEffect({"error": "theme_has_a_goal", "question_id": question_id, "existing_goal": earlier,
                           "seed_query": alt.seed_query})  # fmt: skip
    draft = draft_handbook(ctx.cfg, ctx.handbook.path, alt.seed_query, Workspace.of(ctx.cfg).root / "handbooks",
                           new_pico=alt.new_PICO)  # fmt: skip
    asked = _goal_asking(ctx, draft.handbook)
    if asked is not None:  # one goal per review question: the new handbook would ask one a goal already asks
        earlier, asks = asked
        message = f"question {asks.id} ({asks.in_words}) is already asked by goal {earlier}"
        ctx.goal.record("alternative_failed", question_id=question_id, message=message, existing_goal=earlier,
                        asks=asks.id)  # fmt: skip
        return ToolEffect({"error": "question_has_a_goal", "question_id": question_id, "existing_goal": earlier,
                           "asks": asks.id, "seed_query": alt.seed_query, "message": message})  # fmt: skip
    handbook_path = draft.write()
    child = ctx.goals.create(str(handbook_path), draft.handbook.primary_goal, alt.new_PICO, brain=ctx.brain.name)
    child.parent_goal, child.spawn_depth = ctx.goal.goal_id, ctx.goal.spawn_depth + 1
    child.record("spawned_from", parent_goal=ctx.goal.goal_id, new_PICO=alt.new_PICO, seed_query=alt.seed_query,
                 depth=child.spawn_depth, question_id=question_id)  # fmt: skip
    ctx.goals.save(child)
    ctx.goal.questions_done = list(dict.fromkeys([*ctx.goal.questions_done, question_id]))
    ctx.goal.record("alternative_proposed", question_id=question_id, new_goal=child.goal_id,
                    new_PICO=alt.new_PICO, handbook=handbook_path.name)  # fmt: skip
    log.info("goal %s spawned goal %s on %r (seed query %r, handbook %s)", ctx.goal.goal_id, child.goal_id,
             alt.new_PICO, alt.seed_query, handbook_path)  # fmt: skip
    return ToolEffect({"question_id": question_id, "new_PICO": alt.new_PICO, "seed_query": alt.seed_query,
                       "new_goal": child.goal_id, "judged_by": alt.judged_by})  # fmt: skip


def _goal_on_theme(goals: GoalStore, seed_query: str) -> str | None:
    """The goal already spawned on this seed query (compared case- and space-insensitively), if any."""
    wanted = " ".join(seed_query.lower().split())
    for state in goals.states():
        for h in state.events("spawned_from"):
            if " ".join(str(h.get("seed_query", "")).lower().split()) == wanted:
                return state.goal_id
    return None


def _goal_asking(ctx: ToolContext, handbook: Handbook) -> tuple[str, ReviewQuestion] | None:
    """(the goal of the workspace whose handbook asks the topic's question `handbook` would ask, that question),
    this goal first, compared by question id (`handbook_question`: the same population, intervention and comparator);
    None when no goal asks it, or when `handbook`'s topic cannot be read (it asks no question)."""
    from ra_agent.agent.questions import handbook_question

    try:
        asks = handbook_question(handbook)
    except HandbookError:
        return None
    others = [(s.goal_id, s.handbook_path) for s in ctx.goals.states() if s.goal_id != ctx.goal.goal_id]
    for goal_id, path in [(ctx.goal.goal_id, ctx.handbook.path), *others]:
        try:
            if handbook_question(recorded_handbook(ctx.cfg, path)).id == asks.id:
                return goal_id, asks
        except HandbookError:  # its handbook is gone or has no readable topic: it asks no question
            continue
    return None


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

    children = split(ctx.store, cluster_id, _features(ctx), ctx.cfg)
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
    """Run a validated action (embed_text arrives split into ≤ max_items calls, merged here). A review-question tool
    that ran without error on a question puts it in the goal's focus (`question_id`) unless the tool moved it."""
    focus = ctx.goal.question_id
    effects = [TOOLS[action.tool](ctx, **call) for call in action.calls()]
    if len(effects) == 1:
        effect = effects[0]
        asked = action.args.get("question_id")
        if asked and asked != focus and ctx.goal.question_id == focus and "error" not in effect.result:
            ctx.goal.question_id = asked
            ctx.goal.record("question_selected", field="question_id", old=focus, new=asked, by="executor")
        return effect
    return ToolEffect({"calls": [e.result for e in effects]}, [r for e in effects for r in e.requests])
