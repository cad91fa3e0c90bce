"""`ra status`: embeddings, clusters, goals and their latest cycles, in a few lines each."""

from __future__ import annotations

from ra_agent.config import Config
from ra_agent.store.db import Store


def status_lines(cfg: Config, store: Store) -> list[str]:
    from ra_agent.agent.goal import GoalStore
    from ra_agent.store.vectors import active_index, open_active

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
    pool = store.conn.execute("SELECT COUNT(*) FROM unassigned_pool").fetchone()[0]
    lines.append(f"clusters: {counts.get('active', 0)} active, {sum(counts.values())} in all; {pool} unassigned")
    states = GoalStore(cfg.data_dir, store).states()
    lines.append(f"goals: {len(states)}")
    for state in states:
        last = state.history[-1] if state.history else {}
        lines.append(f"  {state.goal_id} {state.primary_goal:<10} {state.status:<14} cycle {state.cycle:<3} "
                     f"brain {state.brain or '-'} | last: {last.get('event', '-')} | {state.handbook_path}")  # fmt: skip
        for h in state.events("report_written"):
            lines.append(f"    report: {h['path']}")
    from ra_agent.ask_cli import ask_status_lines

    return lines + ask_status_lines(cfg, store)
