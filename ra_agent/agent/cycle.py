"""One agent cycle: load goal → apply finished work → prompt → brain → action → effects → success → persist → log.

The cycle never does heavy work itself: it returns the stage requests its action asked
for (the local runner performs them, or the Dagster agent sensor materialises them)
and applies their outcome at the start of the next cycle.

Crash recovery: the chosen action is recorded in `tool_call` (key `goal:cycle`) before
its effects run. A cycle killed after that point is resumed with the recorded action,
without asking the brain again; a finished call is never executed twice.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from ra_agent.agent.actions import cycle_schema, interpret_reply, validate_action
from ra_agent.agent.cyclelog import CycleLog, CycleRecord, truncate_middle
from ra_agent.agent.goal import GoalState, GoalStore
from ra_agent.agent.goal_questions import questions_request, seed_searched, successful_questions
from ra_agent.agent.guards import check_guards
from ra_agent.agent.handbook import load_handbook, recorded_handbook
from ra_agent.agent.loopguard import ERROR_EVENTS, ended_line, error_streak, rejections, repeated_noop, state_digest
from ra_agent.agent.ownership import no_papers_reason, refresh_owned
from ra_agent.agent.prompt import build_messages, observe, playbooks_for
from ra_agent.agent.registry import REGISTRY_SPECS
from ra_agent.agent.stages import StageRequest
from ra_agent.agent.tools import ToolContext, execute
from ra_agent.config import Config
from ra_agent.llm.base import BrainError, ServerDiedError
from ra_agent.llm.protocol import (
    ActionError,
    NoAction,
    ParsedAction,
    RepairTurn,
    ValidAction,
    action_form,
    parse_action,
    repair_asker,
)
from ra_agent.llm.structured import StructuredReply, action_reply_text, ask_structured
from ra_agent.store.db import Store

log = logging.getLogger(__name__)


@dataclass
class CycleOutcome:
    goal_id: str
    cycle: int
    status: str
    event: str
    brain: str
    tool: str | None = None
    requests: list[StageRequest] = field(default_factory=list)
    log_path: str | None = None
    brain_call: dict[str, Any] | None = None  # mode (json_schema / text_fallback / text), tokens, ttft_s, total_s


def _tool_calls(store: Store, goal_id: str) -> int:
    return store.conn.execute("SELECT COUNT(*) FROM tool_call WHERE goal_id=?", (goal_id,)).fetchone()[0]


def _recorded_call(store: Store, key: str):
    return store.conn.execute("SELECT * FROM tool_call WHERE idempotency_key=?", (key,)).fetchone()


def _record_call(store: Store, state: GoalState, key: str, action: ValidAction, reply: str) -> None:
    with store.transaction():
        store.conn.execute(
            "INSERT OR IGNORE INTO tool_call(goal_id, cycle, tool, args, status, result, idempotency_key, started_ts) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (state.goal_id, state.cycle, action.tool, action.args_json, "started",
             json.dumps({"reply": reply}), key, int(time.time())),
        )  # fmt: skip


def _finish_call(store: Store, key: str, status: str, result: dict[str, Any], requests: list[StageRequest]) -> None:
    with store.transaction():
        store.conn.execute(
            "UPDATE tool_call SET status=?, result=?, finished_ts=? WHERE idempotency_key=?",
            (status, json.dumps({"result": result, "requests": [r.to_dict() for r in requests]}, default=str),
             int(time.time()), key),
        )  # fmt: skip


def apply_finished_requests(state: GoalState, store: Store) -> None:
    """The stages asked for last cycle have run (runner or sensor guarantees it): note what they produced."""
    for raw in state.pending_asset_requests:
        request = StageRequest.from_dict(raw)
        state.record("tool_result", stage=request.stage, partition=request.partition,
                     **stage_observation(store, request))  # fmt: skip
    state.pending_asset_requests = []


def stage_observation(store: Store, request: StageRequest) -> dict[str, Any]:
    """A small, deterministic summary of what a finished stage left in the store."""
    if request.stage == "search":
        row = store.conn.execute("SELECT count, fetched, offline FROM search_run WHERE query_key=?",
                                 (request.partition,)).fetchone()  # fmt: skip
        return dict(row) if row else {"missing": True}
    if request.stage == "pico":
        row = store.conn.execute(
            "SELECT eligible_trials, sr_overlap FROM cluster_metrics WHERE cluster_id=? ORDER BY computed_ts DESC LIMIT 1",
            (request.partition,),
        ).fetchone()
        return dict(row) if row else {"missing": True}
    if request.stage == "organise":
        n = store.conn.execute("SELECT COUNT(*) FROM cluster_manifest WHERE status='active'").fetchone()[0]
        return {"active_clusters": n}
    return {}


def _check_success(cfg: Config, store: Store, state: GoalState, handbook, observation=None) -> list[StageRequest]:
    """Stop the goal once `Stop_after` of its handbook's questions meet `Success` (`successful_questions`); ask for
    the reports then. Without an `observation` the store is observed afresh."""
    if observation is None:
        refresh_owned(store, state)
        observation = observe(cfg, store, state, handbook)
    winners = successful_questions(handbook, observation.get("questions") or [], cfg.sr.min_eligible_trials)
    if len(winners) < handbook.stop_after:
        return []
    state.success_questions = winners[: max(handbook.stop_after, 1)]
    state.set_status("stopped", reason="success", questions=state.success_questions, success=handbook.success_text)
    return [StageRequest("reports", reason=f"success of {', '.join(state.success_questions)}")]


def _guard(cfg: Config, store: Store, goals: GoalStore, state: GoalState) -> str | None:
    """Apply STOP/PAUSE/paused_api before the cycle; returns the event that ends this cycle early, if any."""
    report = check_guards(cfg, goals.goal_dir(state.goal_id), [store.api_state("eutils")])
    if report.verdict == "stop":
        state.set_status("stopped_manual", reason=report.reason)
        return "stopped_manual"
    if report.verdict == "pause":
        state.set_status("paused", reason=report.reason)
        return "paused"
    if report.verdict == "paused_api":
        state.set_status("paused_api", reason=report.reason)
        return "paused_api"
    if state.status in ("paused", "crashed", "paused_api"):
        state.set_status("in_progress", reason=f"resumed after {state.status}")
    if state.is_active and state.cycle >= cfg.goal.max_cycles:  # binds the local runner and the sensor alike
        state.set_status("stopped", reason=f"max_cycles reached ({cfg.goal.max_cycles} cycles)")
        return "stopped"
    return None


def run_cycle(
    cfg: Config,
    store: Store,
    goal_id: str,
    brain,
    *,
    embedder_factory: Callable[[], Any] | None = None,
) -> CycleOutcome:
    """Run exactly one cycle of a goal and persist it; never raises for LLM or tool errors."""
    goals = GoalStore(cfg.data_dir, store)
    state = goals.load(goal_id)
    early = _guard(cfg, store, goals, state)
    if early or not state.is_active:
        goals.save(state)
        return CycleOutcome(goal_id, state.cycle, state.status, early or "inactive", brain.name)
    try:
        return _cycle(cfg, store, goals, state, brain, embedder_factory)
    except Exception as exc:  # crash: keep the last persisted state, mark it, let the next launch resume
        log.exception("cycle %d of goal %s crashed", state.cycle, goal_id)
        fresh = goals.load(goal_id)
        fresh.set_status("crashed", error=f"{type(exc).__name__}: {exc}"[:500])
        goals.save(fresh)
        return CycleOutcome(goal_id, fresh.cycle, fresh.status, "crashed", brain.name)


def _cycle(cfg, store, goals, state, brain, embedder_factory) -> CycleOutcome:
    apply_finished_requests(state, store)
    cycle = state.begin_cycle(brain.name, getattr(brain, "fallback_reason", ""))
    handbook = load_handbook(recorded_handbook(cfg, state.handbook_path))
    papers_before = store.counts()["paper"]
    refresh_owned(store, state)
    observation = observe(cfg, store, state, handbook)
    requests = _check_success(cfg, store, state, handbook, observation)
    digest = state_digest(store, state)
    messages: list[dict[str, str]] = []
    reply, event, tool, notes, json_status = "", "success", None, [], "n/a"
    repairs: list[RepairTurn] = []
    asked: StructuredReply | None = None
    no_papers = None if requests else no_papers_reason(cfg, store, state)
    if no_papers:
        state.set_status("stopped", reason=no_papers)
        event = "stopped"
    elif not requests and observation.get("questions_note") == "stale" and seed_searched(state, handbook):
        # the brain decides on the questions as they stand: judged again first when the corpus changed since
        requests = questions_request(cfg, handbook, "the corpus, the handbook or the [sr] knobs changed since the "
                                     "questions were judged")  # fmt: skip
        event = "waiting_questions"
        notes.append("the handbook's review questions are judged again first (review_questions asset)")
    elif not requests and _tool_calls(store, state.goal_id) >= cfg.goal.max_tool_calls:
        state.set_status("stopped", reason=f"max_tool_calls ({cfg.goal.max_tool_calls}) reached")
        event = "stopped"
    elif not requests:
        key = f"{state.goal_id}:{cycle}"
        recorded = _recorded_call(store, key)
        if recorded is not None and recorded["status"] == "finished":
            event, tool = "replayed", recorded["tool"]
            saved = json.loads(recorded["result"])
            requests = [StageRequest.from_dict(r) for r in saved.get("requests", [])]
            notes.append(f"cycle {cycle} already executed {tool}: effects not repeated")
        else:
            embedder_factory = embedder_factory or _default_embedder(cfg)
            playbooks = playbooks_for(cfg, store, observation, embedder_factory, brain.name)
            messages = build_messages(cfg, store, handbook, observation, playbooks)
            if recorded is not None:  # killed mid-tool: run the recorded action again, do not re-ask
                reply = json.loads(recorded["result"])["reply"]
                outcome = validate_action(ParsedAction(recorded["tool"], json.loads(recorded["args"]), reply),
                                          cfg=cfg, handbook=handbook)  # fmt: skip
                notes.append("resumed the action recorded before a crash")
            else:
                try:
                    asked = ask_structured(brain, messages, _schema(cfg, handbook, observation))
                except BrainError as exc:
                    state.record("error", error="brain_unavailable", message=str(exc)[:300])
                    reply, outcome = "", None
                    if isinstance(exc, ServerDiedError):  # no use asking it again: the goal stops, saying why once
                        state.set_status("error", reason=str(exc))
                        notes.append(f"brain: {exc}")
                else:
                    state.note_brain(brain.name, getattr(brain, "fallback_reason", ""))  # the rules took over
                    reply = _reply_text(asked)
                    notes.append(f"brain call: {asked.note()}")
                    asker = repair_asker(brain, messages, reply)
                    outcome = interpret_reply(reply, asker, cfg=cfg, handbook=handbook)
                    repairs = asker.turns
            event, tool, json_status, requests = _act(cfg, store, goals, state, handbook, brain, outcome, reply,
                                                      key, embedder_factory, notes, digest)  # fmt: skip
        if state.is_active:
            requests += _check_success(cfg, store, state, handbook)
    state.pending_asset_requests = [r.to_dict() for r in requests]
    if state.question_id:  # the cycle log says which question the cycle worked on
        notes.insert(0, f"question: {state.question_id}")
    goals.save(state)
    record = CycleRecord(
        cycle=cycle, goal_id=state.goal_id, primary_goal=state.primary_goal, topic=state.topic, brain=brain.name,
        prompt=messages or "(no prompt: decided by the executor)", response=reply or "(none)",
        notes=[f"event={event}", *(f"request: {r.label()} ({r.reason})" for r in requests), *notes],
        json_status=json_status, delta_papers=store.counts()["paper"] - papers_before,
        ram_used_bytes=psutil.Process().memory_info().rss,
        repair_prompt=repairs[0].prompt if repairs else None,
        repair_response=(repairs[0].reply if repairs[0].error is None else f"(no reply: {repairs[0].error})")
        if repairs else None,
    )  # fmt: skip
    log_path = CycleLog(cfg).write(record)
    mode = f", {asked.mode}" if asked else ""
    log.info("goal %s cycle %d: %s%s%s (%s%s)", state.goal_id, cycle, event, f" {tool}" if tool else "",
             f" on {state.question_id}" if state.question_id else "", brain.name, mode)  # fmt: skip
    return CycleOutcome(state.goal_id, cycle, state.status, event, brain.name, tool, requests, str(log_path),
                        asked.figures() if asked else None)  # fmt: skip


def _schema(cfg: Config, handbook, observation: dict[str, Any]):
    """The cycle's reply schema; cluster ids are the clusters the prompt shows, rejected ones included (they
    may be named again, e.g. to merge), question ids the questions of the handbook's set."""
    return cycle_schema(cfg, handbook, [c["cluster_id"] for c in observation["clusters"]],
                        [q["question_id"] for q in observation.get("questions") or []])  # fmt: skip


def _reply_text(asked: StructuredReply) -> str:
    """The reply in the text protocol. A constrained reply that is a JSON object but not the schema's (cut by the
    reply budget) goes to the parser as a broken Action, so it gets the JSON repair turn; a server that ignored
    the schema and answered in prose is read as prose."""
    if asked.mode != "json_schema":
        return asked.text
    text = action_reply_text(asked.text)
    if text is asked.text and asked.text.lstrip().startswith("{"):
        return f"Action: {asked.text}"
    return text


def _act(cfg, store, goals, state, handbook, brain, outcome, reply, key, embedder_factory, notes, digest):
    """Apply the interpreted reply; returns (event, tool, json_status, requests)."""
    if outcome is None:  # no reply: the brain failed (a goal stopped on a dead server stays in error)
        stop = state.is_active and _guard_errors(cfg, state, notes)
        return "stopped" if stop else "error", None, "brain_unavailable", []
    if isinstance(outcome, NoAction | ActionError):
        result = outcome.outcome
        details = {k: v for k, v in result.log.items()}
        form = None
        if isinstance(outcome, ActionError):
            form = _rejected_form(outcome)
            details.update(kind=outcome.kind, message=outcome.message[:300], tool=outcome.tool,
                           repaired=outcome.repaired, form=form)  # fmt: skip
            notes.append(
                f"{outcome.kind}{' after one repair turn' if outcome.repaired else ''}: {outcome.message[:300]}"
            )
        state.record(result.event, **details)
        if result.status:
            state.set_status(result.status, reason=details.get("kind", result.event))
        notes.append(json.dumps(result.log))
        json_status = "no_action" if isinstance(outcome, NoAction) else "error"
        if isinstance(outcome, ActionError) and outcome.kind == "json_error":
            json_status = "json_error"
        tool = outcome.tool if isinstance(outcome, ActionError) else None
        if isinstance(outcome, ActionError) and form is not None:
            if _guard_rejection(cfg, state, tool, form, outcome.message, notes):
                return "stopped", tool, json_status, []
        if result.event in ERROR_EVENTS and _guard_errors(cfg, state, notes):
            return "stopped", tool, json_status, []
        return result.event, tool, json_status, []
    form = action_form(outcome.tool, _form_args(outcome.tool, outcome.args))
    if (ended := ended_line(state, form)) is not None:  # proposed again after its line was ended: stop here
        state.set_status("stopped", reason=f"{outcome.tool} proposed again after the loop guard ended it: "
                         f"{ended.get('reason', '')}", tool=outcome.tool, form=form)  # fmt: skip
        notes.append(f"loop guard: {outcome.tool} {outcome.args_json} was ended: {ended.get('reason', '')}")
        return "stopped", outcome.tool, "ok", []
    if repeated_noop(state, outcome.tool, outcome.args, digest):  # the last identical call changed nothing
        state.set_status("stopped", reason=f"repeated {outcome.tool} with the same arguments and no state change",
                         tool=outcome.tool, args=outcome.args)  # fmt: skip
        notes.append(f"loop guard: {outcome.tool} {outcome.args_json} repeats a call that changed nothing")
        return "stopped", outcome.tool, "ok", []
    _record_call(store, state, key, outcome, truncate_middle(reply, cfg.logging.response_log_chars))
    ctx = ToolContext(cfg, store, state, goals, handbook, brain, embedder_factory or _default_embedder(cfg), reply)
    try:
        effect = execute(ctx, outcome)
    except (KeyError, ValueError, LookupError) as exc:  # a tool refusing its input is the LLM's error, not a crash
        _finish_call(store, key, "failed", {"error": str(exc)}, [])
        state.record("error", error="tool_failed", tool=outcome.tool, message=str(exc)[:300], form=form)
        if _guard_rejection(cfg, state, outcome.tool, form, f"{outcome.tool} failed: {exc}", notes) or _guard_errors(
            cfg, state, notes
        ):
            return "stopped", outcome.tool, "ok", []
        return "error", outcome.tool, "ok", []
    _finish_call(store, key, "finished", effect.result, effect.requests)
    state.record("tool_call", tool=outcome.tool, args=outcome.args, result=_short(effect.result),
                 requests=[r.label() for r in effect.requests], repaired=outcome.repaired,
                 state_digest=digest)  # fmt: skip
    return "tool_call", outcome.tool, "repaired" if outcome.repaired else "ok", effect.requests


def _form_args(tool: str | None, args: dict[str, Any] | None) -> dict[str, Any] | None:
    """The arguments that make an action's form: those given, less any equal to the tool's default."""
    spec = REGISTRY_SPECS.get(tool or "")
    if args is None or spec is None:
        return args
    return {k: v for k, v in args.items() if k not in spec.args or v != spec.args[k].default}


def _rejected_form(error: ActionError) -> str:
    """The form of a rejected action: its tool and arguments as the reply gave them, else the rejection."""
    parsed = parse_action(error.raw or "") if error.raw else None
    args = parsed.args if isinstance(parsed, ParsedAction) and parsed.tool == error.tool else None
    return action_form(error.tool, _form_args(error.tool, args), f"{error.kind}: {error.message}")


def _guard_rejection(
    cfg: Config, state: GoalState, tool: str | None, form: str, message: str, notes: list[str]
) -> bool:
    """Count a rejection (or failure) of this action form; at [goal] max_same_rejections end that line of action
    with a stated reason (the prompt shows it; the rules never propose it again). True when the goal stopped:
    the form was ended already and the brain proposed it once more."""
    if (ended := ended_line(state, form)) is not None:
        state.set_status("stopped", reason=f"{tool} proposed again after the loop guard ended it: {ended['reason']}",
                         tool=tool, form=form)  # fmt: skip
        notes.append(f"loop guard: {tool} ended earlier, proposed again: goal stopped")
        return True
    count = rejections(state, form)
    if count >= cfg.goal.max_same_rejections:
        reason = f"rejected {count} times in the same form: {message[:400]}"
        state.record("line_ended", tool=tool, form=form, reason=reason)
        notes.append(f"loop guard: line of action ended: {tool} {reason}")
        log.warning("goal %s: %s %s; that line of action is ended", state.goal_id, tool, reason)
    return False


def _guard_errors(cfg: Config, state: GoalState, notes: list[str]) -> bool:
    """Stop the goal when [goal] max_error_cycles cycles in a row ended in an error; True when it stopped."""
    streak = error_streak(state)
    if streak < cfg.goal.max_error_cycles:
        return False
    last = next(h for h in reversed(state.history) if h["event"] in ERROR_EVENTS)
    what = last.get("message") or last.get("error") or last.get("kind") or "error"
    state.set_status("stopped", reason=f"{streak} cycles in a row ended in an error (last: {str(what)[:300]})")
    notes.append(f"loop guard: {streak} error cycles in a row: goal stopped")
    return True


def _short(result: dict[str, Any], limit: int = 1500) -> dict[str, Any]:
    """Keep history entries readable: long lists are cut, the size is noted."""
    text = json.dumps(result, default=str)
    if len(text) <= limit:
        return result
    return {k: (v if len(json.dumps(v, default=str)) < 300 else f"<{type(v).__name__} of {len(v)}>")
            for k, v in result.items()}  # fmt: skip


def _default_embedder(cfg: Config) -> Callable[[], Any]:
    cache: dict[str, Any] = {}

    def factory():
        if "e" not in cache:
            from ra_agent.embed.embedder import SentenceTransformerEmbedder

            cache["e"] = SentenceTransformerEmbedder(cfg)
        return cache["e"]

    return factory
