"""The local runner: start a goal from a handbook and run its cycles without Dagster.

It performs each cycle's stage requests with `stages.perform`, the same core calls the
Dagster assets make, so both paths write the same goal history on the same data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ra_agent.agent.cycle import CycleOutcome, run_cycle
from ra_agent.agent.goal import GoalState, GoalStore
from ra_agent.agent.guards import pause_requested, stop_requested
from ra_agent.agent.handbook import check_seed_query, load_handbook
from ra_agent.agent.loopguard import GoalLock, GoalLocked
from ra_agent.agent.reporting import relative_posix
from ra_agent.agent.stages import StageRequest, perform, pico_rebuilder
from ra_agent.config import Config
from ra_agent.embed.index import embed_all
from ra_agent.store.db import Store
from ra_agent.topics.organise import organise

log = logging.getLogger(__name__)

MIN_POLL_S = 0.05  # PAUSE polling never spins faster than this, even with loop_delay_s = 0


def handbook_ref(cfg: Config, handbook: str | Path) -> str:
    """The handbook path as goals record it: relative to the project root when inside it."""
    return relative_posix(handbook, cfg.root)


def start_goal(cfg: Config, store: Store, handbook: str | Path, brain_name: str = "") -> GoalState:
    """Validate a handbook and create its goal (`goal_state.json` + the goal row)."""
    parsed = load_handbook(handbook)
    check_seed_query(parsed, cfg.llm.max_arg_chars)
    topic = parsed.seed_query or parsed.name
    return GoalStore(cfg.data_dir, store).create(handbook_ref(cfg, handbook), parsed.primary_goal, topic,
                                                 brain=brain_name)  # fmt: skip


def perform_requests(cfg: Config, store: Store, outcome: CycleOutcome, brain, embedder_factory,
                     progress_factory=None) -> bool:  # fmt: skip
    """Run the stages a cycle asked for; a stage that raises marks the goal `crashed` (returns False)."""
    for request in outcome.requests:
        try:
            perform(cfg, store, request, brain=brain, embedder=embedder_factory(), goal_id=outcome.goal_id,
                    progress_factory=progress_factory)  # fmt: skip
        except Exception as exc:  # never leave the goal in_progress over a stage that died
            log.exception("goal %s: stage %s crashed", outcome.goal_id, request.label())
            mark_crashed(cfg, store, outcome.goal_id, f"stage {request.label()}: {type(exc).__name__}: {exc}")
            return False
    return True


def mark_crashed(cfg: Config, store: Store, goal_id: str, error: str) -> GoalState:
    """Set a goal `crashed` with its error (its pending stage requests stay for `ra resume`)."""
    goals = GoalStore(cfg.data_dir, store)
    state = goals.load(goal_id)
    state.set_status("crashed", error=error[:500])
    goals.save(state)
    return state


def wait_while_paused(cfg: Config, goal_dir: Path, *, poll_s: float | None = None) -> None:
    """Sleep (polling every loop_delay_s) while a PAUSE file is present and no STOP file is."""
    poll = poll_s if poll_s is not None else max(cfg.goal.loop_delay_s, MIN_POLL_S)
    announced = False
    while pause_requested(cfg, goal_dir) and not stop_requested(cfg, goal_dir):
        if not announced:
            log.info("goal %s paused (%s); waiting for the PAUSE file to go", goal_dir.name,
                     pause_requested(cfg, goal_dir))  # fmt: skip
            announced = True
        time.sleep(poll)


def run_goal(
    cfg: Config,
    store: Store,
    goal_id: str,
    brain,
    *,
    max_cycles: int | None = None,
    embedder_factory: Callable | None = None,
    on_cycle: Callable[[CycleOutcome], None] | None = None,
    progress_factory: Callable | None = None,
) -> GoalState:
    """Cycle until the goal is no longer in progress, doing the requested stages in between (their progress on
    `progress_factory`'s bars, as stages.perform takes it).

    The goal's [goal] max_cycles stops it (in run_cycle, as under Dagster); `max_cycles` here caps
    the cycles of this run only. A PAUSE file makes the runner wait; one process per goal (GoalLock).
    """
    from ra_agent.agent.cycle import _default_embedder

    embedder_factory = embedder_factory or _default_embedder(cfg)
    goals = GoalStore(cfg.data_dir, store)
    goal_dir = goals.goal_dir(goal_id)
    with GoalLock(goal_dir, goal_id):
        try:
            return _run_locked(cfg, store, goals, goal_id, brain, max_cycles, embedder_factory, on_cycle,
                               progress_factory)  # fmt: skip
        except KeyboardInterrupt:  # Ctrl-C: the goal shows as interrupted; `ra resume` or `ra run NAME` continues it
            note_interrupted(goals, goal_id, "interrupted (Ctrl-C)")
            raise


def note_interrupted(goals: GoalStore, goal_id: str, why: str) -> None:
    """Record that the process running an in_progress goal stopped mid-run (`interrupted`, after its last complete
    cycle); nothing when the goal is no longer in progress."""
    try:
        state = goals.load(goal_id)
        if state.is_active:
            state.record("interrupted", reason=f"{why} after cycle {state.cycle}")
            goals.save(state)
    except Exception:  # never hide the interruption behind a failure to note it
        log.exception("goal %s: could not record the interruption", goal_id)


def _run_locked(cfg, store, goals, goal_id, brain, max_cycles, embedder_factory, on_cycle, progress_factory):
    """run_goal's cycles, with the goal's lock held."""
    goal_dir = goals.goal_dir(goal_id)
    state = goals.load(goal_id)
    if state.pending_asset_requests:  # a previous run stopped between a cycle and its stages
        pending = CycleOutcome(goal_id, state.cycle, state.status, "pending", brain.name,
                               requests=[StageRequest.from_dict(r) for r in state.pending_asset_requests])  # fmt: skip
        if not perform_requests(cfg, store, pending, brain, embedder_factory, progress_factory):
            return goals.load(goal_id)
    cycles = 0
    while max_cycles is None or cycles < max_cycles:
        outcome = run_cycle(cfg, store, goal_id, brain, embedder_factory=embedder_factory)
        cycles += outcome.event not in ("paused", "inactive", "stopped_manual")
        ok = perform_requests(cfg, store, outcome, brain, embedder_factory, progress_factory)
        if on_cycle:
            on_cycle(outcome)
        if outcome.status == "paused":
            wait_while_paused(cfg, goal_dir)
            continue
        if not ok or outcome.status != "in_progress":
            break
        if any(r.stage == "search" for r in outcome.requests) and not _offline(store):
            time.sleep(cfg.goal.loop_delay_s)  # do not hammer the APIs
    else:
        log.warning("goal %s: this run stopped at its cycle cap (%d)", goal_id, max_cycles)
    return goals.load(goal_id)


def spawned_goals(state: GoalState) -> list[str]:
    """Goals spawned by this goal's propose_alternative_pico calls, in order."""
    return [h["new_goal"] for h in state.events("alternative_proposed") if h.get("new_goal")]


def written_reports(cfg: Config, state: GoalState) -> list[str]:
    """The paths of the reports this goal wrote (dossiers, SR drafts), in order."""
    return list(dict.fromkeys(str(cfg.data_dir / h["path"]) for h in state.events("report_written")))


def run_with_spawned(
    cfg: Config, store: Store, goal_id: str, brain, *, on_goal: Callable | None = None, **run_options: Any
) -> list[GoalState]:
    """Run a goal, then each goal it spawned (breadth first, each once); returns the final states in run order.

    `on_goal(state, parent)` is called before each spawned goal starts; `run_options` go to run_goal."""
    goals = GoalStore(cfg.data_dir, store)
    queue: list[tuple[str, GoalState | None]] = [(goal_id, None)]
    done: list[GoalState] = []
    seen: set[str] = set()
    held: dict[str, GoalLock] = {}  # spawned goals this process runs next: locked before their parent is released
    try:
        while queue:
            current, parent = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            if parent is not None:
                log.info("goal %s: running goal %s spawned by %s", parent.goal_id, current, parent.goal_id)
                if on_goal:
                    on_goal(goals.load(current), parent)
            state = run_goal(cfg, store, current, brain, **run_options)
            done.append(state)
            for child in spawned_goals(state):
                if child in seen or child in held or not goals.exists(child):
                    continue
                try:  # a Dagster agent sensor leaves a goal alone while a live process holds it (or its parent)
                    held[child] = GoalLock(goals.goal_dir(child), child).acquire()
                except GoalLocked as exc:
                    log.warning("goal %s: spawned goal %s is run by another process: %s", current, child, exc)
                    continue
                queue.append((child, state))
            if (lock := held.pop(current, None)) is not None:
                lock.release()
    finally:
        for lock in held.values():
            lock.release()
    return done


def _offline(store: Store) -> bool:
    return bool(store.api_state("eutils")["offline"])


def run_demo(cfg: Config, store: Store, handbook, progress_factory, found: list[str] | None = None) -> list[str]:
    """The main job: import the bundled corpus, embed, cluster, then run the handbook's goal to its end, and
    then the goals it spawned (propose_alternative_pico), as `ra run` does.

    Returns the paths the goals wrote (reports), or the first goal's goal_state.json when none wrote one;
    `found` collects each goal's outcome in one line (closing.goal_outcome).
    """
    from ra_agent.agent.closing import goal_outcome
    from ra_agent.agent.goal import GoalStore
    from ra_agent.ingest.corpus import import_pending
    from ra_agent.llm.select import brain_for

    imported = import_pending(cfg, store)
    log.info("demo: imported %s (%d new papers)", ", ".join(imported.files) or "nothing new", imported.inserted)
    with progress_factory("embed", unit="paper") as bar:
        embed_all(cfg, store, progress=bar, before_switch=pico_rebuilder(cfg))
    with progress_factory("cluster", unit="step") as bar:  # organise's stages (index, features, UMAP, HDBSCAN...)
        organised = organise(cfg, store, progress=lambda step, steps, what: bar(step, steps))
    log.info("demo: %d active clusters", organised.active_clusters)
    brain = brain_for(cfg, store)
    first = start_goal(cfg, store, handbook, brain.name)
    written: list[str] = []
    for state in run_with_spawned(cfg, store, first.goal_id, brain, progress_factory=progress_factory):
        written += written_reports(cfg, state)
        log.info("demo: goal %s %s after %d cycles (%s): %s", state.goal_id, state.status, state.cycle, brain.label(),
                 state.stop_reason() or "-")  # fmt: skip
        if found is not None:
            found.append(goal_outcome(cfg, state))
    return written or [str(GoalStore(cfg.data_dir, store).state_path(first.goal_id))]
