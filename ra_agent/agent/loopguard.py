"""Loop guards (issue 11 §5): a goal never repeats a no-op, never outlives max_cycles, never runs twice at once.

- `state_digest`: what "the state changed" means between two cycles: the goal's own fields, the
  clusters it owns, those clusters' latest metrics and the store's row counts.
- `repeated_noop`: the same action with the same arguments as the goal's last tool call, chosen
  from the same state digest that call was chosen from (so that call changed nothing).
- `rejections` / `ended_line`: how often one action form (tool and arguments) was rejected or failed; at
  [goal] max_same_rejections that line of action is ended (a `line_ended` event the prompt shows), and
  proposing it again stops the goal with the stated reason.
- `error_streak`: how many cycles in a row ended in an error (rejected action, failed tool, brain down);
  at [goal] max_error_cycles the goal stops.
- `GoalLock`: one process per goal, a `RUNNING.lock` file holding the owner's pid (and its start time) under the
  goal's folder; a lock left by a dead pid is taken over. `goal_activity`: running, or interrupted (its process
  died or was interrupted), as `ra status` shows it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import psutil

from ra_agent.agent.goal import LLM_MUTABLE_FIELDS, GoalState
from ra_agent.store.db import Store

log = logging.getLogger(__name__)

LOCK_FILE = "RUNNING.lock"
METRIC_COLUMNS = ("size", "cvgr", "ers", "het_numeric", "dispersion", "sr_overlap", "eligible_trials",
                  "prisma_compliant", "mean_year")  # fmt: skip


def state_digest(store: Store, state: GoalState) -> str:
    """sha1 of the goal fields the brain may change, the owned clusters, their latest metrics and the store counts."""
    metrics = {}
    for cluster_id in state.owned_clusters:
        row = store.conn.execute(
            f"SELECT {', '.join(METRIC_COLUMNS)} FROM cluster_metrics WHERE cluster_id=? "
            "ORDER BY computed_ts DESC LIMIT 1",
            (cluster_id,),
        ).fetchone()
        metrics[cluster_id] = list(row) if row else None
    counts = store.counts()
    for table in ("candidate_papers", "search_run", "cluster_member"):
        counts[table] = store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    snapshot = {
        "goal": {name: getattr(state, name) for name in LLM_MUTABLE_FIELDS},
        "owned": state.owned_clusters,
        "metrics": metrics,
        "counts": counts,
    }
    return hashlib.sha1(json.dumps(snapshot, sort_keys=True, default=str).encode()).hexdigest()[:16]


def repeated_noop(state: GoalState, tool: str, args: dict[str, Any], digest: str) -> bool:
    """True when the goal's last tool call was this tool with these arguments, chosen from this same digest."""
    calls = state.events("tool_call")
    if not calls:
        return False
    last = calls[-1]
    same_action = last["tool"] == tool and json.dumps(last.get("args"), sort_keys=True, default=str) == json.dumps(
        args, sort_keys=True, default=str
    )
    return same_action and last.get("state_digest") == digest


ERROR_EVENTS = ("error", "json_error")  # a cycle whose action was rejected, failed, or never came


def rejections(state: GoalState, form: str) -> int:
    """How many error events of the goal carry this action form."""
    return sum(1 for h in state.history if h["event"] in ERROR_EVENTS and h.get("form") == form)


def ended_line(state: GoalState, form: str) -> dict[str, Any] | None:
    """The `line_ended` event of this action form, if the loop guard ended it."""
    return next((h for h in state.events("line_ended") if h.get("form") == form), None)


def error_streak(state: GoalState) -> int:
    """How many cycles in a row, up to the latest, ended in an error (a tool call or stage result breaks it)."""
    cycles: set[int] = set()
    for h in reversed(state.history):
        if h["event"] in ("tool_call", "tool_result"):
            break
        if h["event"] in ERROR_EVENTS:
            cycles.add(h.get("cycle", -1))
    return len(cycles)


class GoalLocked(RuntimeError):
    """Another live process runs this goal."""

    def __init__(self, goal_id: str, pid: int):
        super().__init__(f"goal {goal_id} is running (pid {pid})")
        self.goal_id, self.pid = goal_id, pid


def _process_started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _holder(path: Path) -> int | None:
    holder = lock_holder(path.parent)
    return holder[0] if holder else None


def lock_holder(goal_dir: Path) -> tuple[int, bool] | None:
    """(pid, alive) of the process named by the goal's RUNNING.lock, None when there is no lock. A pid that now runs
    another process (its start time differs from the one the lock recorded) counts as dead: the holder is gone."""
    try:
        fields = (Path(goal_dir) / LOCK_FILE).read_text(encoding="utf-8").split()
        pid = int(fields[0])
        started = float(fields[1]) if len(fields) > 1 else None
    except (FileNotFoundError, ValueError, IndexError):
        return None
    return pid, _alive(pid) and (started is None or abs((_process_started(pid) or 0.0) - started) < 1.0)


def _alive(pid: int) -> bool:
    try:
        return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def live_holder(goal_dir: Path) -> str | None:
    """The holder of the goal's lock while it lives, as "pid N (its command line)"; None otherwise."""
    holder = lock_holder(goal_dir)
    if holder is None or not holder[1]:
        return None
    try:
        command = " ".join(psutil.Process(holder[0]).cmdline())
    except psutil.Error:
        command = ""
    shown = " ".join(command.split())
    return f"pid {holder[0]}" + (f" ({shown[:100]}{'...' if len(shown) > 100 else ''})" if shown else "")


def goal_activity(goal_dir: Path, state: GoalState) -> str:
    """What runs an in_progress goal now: "running (pid N)" while a live process holds its lock, "interrupted" when
    the process that ran it died (killed: its lock names a dead process) or was interrupted (Ctrl-C: the last event
    says so), "" otherwise (nothing runs it now, or the goal is not in progress). `ra status` shows it; `ra resume`
    and `ra run NAME` continue an interrupted goal from its last complete cycle."""
    if state.status != "in_progress":
        return ""
    holder = lock_holder(goal_dir)
    if holder is not None and holder[1]:
        return f"running (pid {holder[0]})"
    if holder is not None or (state.history and state.history[-1]["event"] == "interrupted"):
        return "interrupted"
    return ""


class GoalLock:
    """`with GoalLock(goal_dir, goal_id):` holds the goal for this process; raises GoalLocked when a live
    process holds it. Re-entrant within one process (the same pid may take it again). The lock file holds the
    pid and its start time (a pid reused by another process does not hold the goal)."""

    def __init__(self, goal_dir: Path, goal_id: str):
        self.path = Path(goal_dir) / LOCK_FILE
        self.goal_id = goal_id
        self.taken = False

    def acquire(self) -> GoalLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = lock_holder(self.path.parent)
                pid = holder[0] if holder else None
                if pid == os.getpid():
                    return self  # this process already holds it (nested use)
                if holder is not None and holder[1]:
                    raise GoalLocked(self.goal_id, holder[0]) from None
                log.warning("goal %s: taking over the lock of pid %s, which is gone (%s)", self.goal_id, pid, self.path)
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(f"{os.getpid()} {_process_started(os.getpid()) or 0.0:.3f}\n")
            self.taken = True
            return self
        raise GoalLocked(self.goal_id, _holder(self.path) or -1)

    def release(self) -> None:
        if self.taken and _holder(self.path) == os.getpid():
            self.path.unlink(missing_ok=True)
        self.taken = False

    def __enter__(self) -> GoalLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
