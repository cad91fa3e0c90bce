"""Goals as the command line shows and controls them: the lines of `ra status`, the interrupted goal `ra run NAME`
continues, and what `ra resume` does with a goal left in_progress."""

from __future__ import annotations

from pathlib import Path

from ra_agent.agent.goal import GoalState, GoalStore
from ra_agent.agent.loopguard import goal_activity
from ra_agent.agent.runner import handbook_ref
from ra_agent.config import Config
from ra_agent.store.db import Store


def interrupted_goal(cfg: Config, store: Store, handbook: Path) -> GoalState | None:
    """The latest interrupted goal of this handbook (its process died or was interrupted mid-run), or None: `ra run
    NAME` continues it rather than start a second goal beside it."""
    goals = GoalStore(cfg.data_dir, store)
    ref = handbook_ref(cfg, handbook)
    stuck = [s for s in goals.states() if s.handbook_path == ref and goal_activity(goals.goal_dir(s.goal_id), s)
             == "interrupted"]  # fmt: skip
    return max(stuck, key=lambda s: s.updated_ts) if stuck else None


def in_progress_resume(goals: GoalStore, state: GoalState) -> tuple[bool, str]:
    """What `ra resume` does with an in_progress goal: (continue it here, what to say). A goal a live process runs is
    left to it; an interrupted one, or one no process runs, is continued from its last complete cycle."""
    activity = goal_activity(goals.goal_dir(state.goal_id), state)
    if activity.startswith("running"):
        return False, f"{activity}, nothing to resume"
    return (
        True,
        f"{activity or 'in_progress, run by no process'}; continuing it from its last complete cycle ({state.cycle})",
    )


def status_lines(cfg: Config, store: Store) -> list[str]:
    """The lines of `ra status` after the corpus: the embedding index, the clusters, each goal (an in_progress one
    running or interrupted), the ask runs."""
    from ra_agent.agent.goal_questions import goal_answer
    from ra_agent.store.vectors import active_index, open_active
    from ra_agent.topics.members import noise_share

    lines = []
    slug = active_index(cfg.data_dir)
    if slug:
        vectors = open_active(cfg)
        lines.append(
            f"embedding index: {slug} ({len(vectors)} vectors, dim {vectors.dim}, families {vectors.families})"
        )
    else:
        lines.append("embedding index: none yet (ra embed)")
    counts = dict(store.conn.execute("SELECT status, COUNT(*) FROM cluster_manifest GROUP BY status").fetchall())
    pool, clustered = noise_share(store)
    share = f" ({pool / clustered:.0%} of {clustered} clustered papers)" if clustered else ""
    lines.append(f"clusters: {counts.get('active', 0)} active, {sum(counts.values())} in all; {pool} unassigned{share}")
    goals = GoalStore(cfg.data_dir, store)
    states = goals.states()
    lines.append(f"goals: {len(states)}")
    for state in states:
        last = state.history[-1] if state.history else {}
        activity = goal_activity(goals.goal_dir(state.goal_id), state)  # an in_progress goal: running or interrupted
        shown = "interrupted" if activity == "interrupted" else state.status
        lines.append(f"  {state.goal_id} {state.primary_goal:<10} {shown:<14} cycle {state.cycle:<3} "
                     f"brain {state.brain or '-'} | last: {last.get('event', '-')} | {state.handbook_path}")  # fmt: skip
        if activity == "interrupted":
            lines.append(f"    its process stopped after cycle {state.cycle}; ra resume {state.goal_id} continues it")
        elif activity:
            lines.append(f"    {activity}")
        if state.question_id and state.is_active:
            lines.append(f"    working on question {state.question_id}")
        if not state.is_active:
            lines.append(f"    answer: {goal_answer(cfg, state)}")
            if state.stop_reason():
                lines.append(f"    reason: {state.stop_reason()}")
        if state.parent_goal:
            lines.append(f"    spawned by {state.parent_goal} (depth {state.spawn_depth})")
        for h in state.events("report_written"):
            lines.append(f"    report: {h['path']}")
    from ra_agent.ask.commands import ask_status_lines

    return lines + ask_status_lines(cfg, store)
