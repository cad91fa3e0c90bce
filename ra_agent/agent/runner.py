"""The local runner: start a goal from a handbook and run its cycles without Dagster.

It performs each cycle's stage requests with `stages.perform`, the same core calls the
Dagster assets make, so both paths write the same goal history on the same data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from ra_agent.agent.cycle import CycleOutcome, run_cycle
from ra_agent.agent.goal import GoalState, GoalStore
from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.stages import StageRequest, perform
from ra_agent.config import Config
from ra_agent.embed.index import embed_all
from ra_agent.store.db import Store
from ra_agent.topics.organise import organise

log = logging.getLogger(__name__)


def handbook_ref(cfg: Config, handbook: str | Path) -> str:
    """The handbook path as goals record it: relative to the project root when inside it."""
    path = Path(handbook).resolve()
    try:
        return path.relative_to(Path(cfg.root).resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def start_goal(cfg: Config, store: Store, handbook: str | Path, brain_name: str = "") -> GoalState:
    """Validate a handbook and create its goal (`goal_state.json` + the goal row)."""
    parsed = load_handbook(handbook)
    topic = parsed.seed_query or parsed.name
    return GoalStore(cfg.data_dir, store).create(handbook_ref(cfg, handbook), parsed.primary_goal, topic,
                                                 brain=brain_name)  # fmt: skip


def perform_requests(cfg: Config, store: Store, outcome: CycleOutcome, brain, embedder_factory) -> None:
    for request in outcome.requests:
        perform(cfg, store, request, brain=brain, embedder=embedder_factory(), goal_id=outcome.goal_id)


def run_goal(
    cfg: Config,
    store: Store,
    goal_id: str,
    brain,
    *,
    max_cycles: int | None = None,
    embedder_factory: Callable | None = None,
    on_cycle: Callable[[CycleOutcome], None] | None = None,
) -> GoalState:
    """Cycle until the goal is no longer in progress (or the cycle cap), doing the requested stages in between."""
    from ra_agent.agent.cycle import _default_embedder

    embedder_factory = embedder_factory or _default_embedder(cfg)
    goals = GoalStore(cfg.data_dir, store)
    state = goals.load(goal_id)
    if state.pending_asset_requests:  # a previous run stopped between a cycle and its stages
        pending = CycleOutcome(goal_id, state.cycle, state.status, "pending", brain.name,
                               requests=[StageRequest.from_dict(r) for r in state.pending_asset_requests])  # fmt: skip
        perform_requests(cfg, store, pending, brain, embedder_factory)
    for _ in range(max_cycles or cfg.goal.max_cycles):
        outcome = run_cycle(cfg, store, goal_id, brain, embedder_factory=embedder_factory)
        perform_requests(cfg, store, outcome, brain, embedder_factory)
        if on_cycle:
            on_cycle(outcome)
        if outcome.status != "in_progress":
            break
        if any(r.stage == "search" for r in outcome.requests) and not _offline(store):
            time.sleep(cfg.goal.loop_delay_s)  # memo 60 §4: do not hammer the APIs
    else:
        log.warning("goal %s: local runner stopped at the cycle cap (%d)", goal_id, max_cycles or cfg.goal.max_cycles)
    return goals.load(goal_id)


def _offline(store: Store) -> bool:
    return bool(store.api_state("eutils")["offline"])


def run_demo(cfg: Config, store: Store, handbook, progress_factory) -> list[str]:
    """The main job: import the bundled corpus, embed, cluster, then run the handbook's goal to its end.

    Returns the paths the goal wrote (reports), or its goal_state.json when it wrote none.
    """
    from ra_agent.agent.goal import GoalStore
    from ra_agent.ingest.corpus import import_pending
    from ra_agent.llm.select import brain_for

    imported = import_pending(cfg, store)
    log.info("demo: imported %s (%d new papers)", ", ".join(imported.files) or "nothing new", imported.inserted)
    with progress_factory("embed", unit="paper") as bar:
        embed_all(cfg, store, progress=bar)
    organised = organise(cfg, store)
    log.info("demo: %d active clusters", organised.active_clusters)
    brain = brain_for(cfg, store)
    state = start_goal(cfg, store, handbook, brain.name)
    state = run_goal(cfg, store, state.goal_id, brain)
    written = [h["path"] for h in state.events("report_written")]
    log.info("demo: goal %s %s after %d cycles (%s)", state.goal_id, state.status, state.cycle, brain.label())
    return written or [str(GoalStore(cfg.data_dir, store).state_path(state.goal_id))]
