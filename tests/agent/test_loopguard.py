"""Loop guards: the per-goal lock (live, stale, re-entrant), the no-op repeat test, the rules brain's no-op guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ra_agent.agent.goal import GoalStore
from ra_agent.agent.loopguard import (
    LOCK_FILE,
    GoalLock,
    GoalLocked,
    goal_activity,
    lock_holder,
    repeated_noop,
    state_digest,
)
from ra_agent.llm.rules_brain import Decision, without_noop
from ra_agent.workspace import open_store

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"


@pytest.fixture
def goal(cfg):
    with open_store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        state = goals.create(HANDBOOK, "seek_gap", "proton pump inhibitors AND gastroesophageal reflux")
    return goals, state


def test_lock_holds_the_pid_and_goes_on_release(goal):
    goals, state = goal
    lock = GoalLock(goals.goal_dir(state.goal_id), state.goal_id)
    with lock:
        assert (goals.goal_dir(state.goal_id) / LOCK_FILE).read_text().split()[0] == str(os.getpid())
        with GoalLock(goals.goal_dir(state.goal_id), state.goal_id):  # same process: re-entrant
            pass
        assert lock.path.exists()  # the nested use did not release the outer one
    assert not lock.path.exists()


def test_a_live_holder_refuses_a_second_process(goal):
    goals, state = goal
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path = goals.goal_dir(state.goal_id) / LOCK_FILE
        path.write_text(f"{holder.pid}\n")
        with pytest.raises(GoalLocked, match=rf"goal {state.goal_id} is running \(pid {holder.pid}\)"):
            GoalLock(goals.goal_dir(state.goal_id), state.goal_id).acquire()
        assert path.read_text().split() == [str(holder.pid)]  # untouched
    finally:
        holder.kill()
        holder.wait()


def test_a_stale_lock_of_a_dead_pid_is_taken_over(goal):
    goals, state = goal
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = goals.goal_dir(state.goal_id) / LOCK_FILE
    path.write_text(f"{dead.pid}\n")
    with GoalLock(goals.goal_dir(state.goal_id), state.goal_id):
        assert path.read_text().split()[0] == str(os.getpid())
    assert not path.exists()


def test_a_lock_whose_pid_now_runs_another_process_is_not_held(goal):
    """The lock records its holder's start time: after a reboot or pid wrap-around the same pid in another process
    does not hold the goal (it would have looked alive, and the goal stuck as running)."""
    goals, state = goal
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path = goals.goal_dir(state.goal_id) / LOCK_FILE
        path.write_text(f"{other.pid} 1000.000\n")  # the pid, with the start time of a process long gone
        assert lock_holder(goals.goal_dir(state.goal_id)) == (other.pid, False)
        assert goal_activity(goals.goal_dir(state.goal_id), state) == "interrupted"
        with GoalLock(goals.goal_dir(state.goal_id), state.goal_id):
            assert path.read_text().split()[0] == str(os.getpid())
        assert other.poll() is None  # left alone
    finally:
        other.kill()
        other.wait()


def test_a_repeat_is_a_noop_only_from_the_same_state(cfg, goal):
    goals, state = goal
    with open_store(cfg) as store:
        before = state_digest(store, state)
        state.record("tool_call", tool="show_noise", args={"limit": 3}, result={}, state_digest=before)
        assert repeated_noop(state, "show_noise", {"limit": 3}, state_digest(store, state))
        assert not repeated_noop(state, "show_noise", {"limit": 4}, before)  # other arguments
        state.cluster_id = "c1"  # a goal field changed since the call
        assert not repeated_noop(state, "show_noise", {"limit": 3}, state_digest(store, state))
        state.cluster_id = None
        store.conn.execute("INSERT INTO search_run(query_key, query, count, fetched, offline, ran_ts) "
                           "VALUES ('k', 'q', 0, 0, 1, 0)")  # fmt: skip
        assert not repeated_noop(state, "show_noise", {"limit": 3}, state_digest(store, state))  # store changed


def rules_state(goal: dict, last_results: list[dict]) -> dict:
    return {"goal": goal, "last_results": last_results}


def test_rules_brain_turns_a_noop_update_goal_into_a_stop():
    noop = Decision(["All checks ran."], "update_goal", {"changes": {"cluster_id": "c1"}})
    state = rules_state({"cluster_id": "c1", "status": "in_progress"}, [])
    guarded = without_noop(state, noop)
    assert (guarded.tool, guarded.args) == ("update_goal", {"changes": {"status": "stopped"}})
    assert "would change nothing" in guarded.reply() and "never repeat a no-op" in guarded.reply()
    first = rules_state({"cluster_id": None, "status": "in_progress"}, [])
    assert without_noop(first, noop) is noop  # a real change goes through


def test_rules_brain_never_repeats_its_last_call_with_nothing_new():
    call = {"event": "tool_call", "tool": "prisma_check", "args": {"cluster_id": "c1"}}
    decision = Decision(["Check PRISMA."], "prisma_check", {"cluster_id": "c1"})
    goal = {"cluster_id": "c1"}
    assert without_noop(rules_state(goal, [call]), decision).args == {"changes": {"status": "stopped"}}
    reported = [call, {"event": "tool_result", "stage": "sr_overlap"}]  # a stage reported back since
    assert without_noop(rules_state(goal, reported), decision) is decision
    assert json.loads(decision.reply().rsplit("Action:", 1)[1])["tool"] == "prisma_check"


def test_a_stop_by_the_brain_keeps_its_last_reasons():
    from ra_agent.agent.tools import reasoning_tail

    reply = Decision(["Cluster c1 is covered.", "No open cluster is left."], "update_goal",
                     {"changes": {"status": "stopped"}}).reply()  # fmt: skip
    assert reasoning_tail(reply) == "Cluster c1 is covered. No open cluster is left."
    assert reasoning_tail("Nothing more to search.\nAction: {}") == "Nothing more to search."
    assert reasoning_tail('Action: {"tool": "update_goal"}') == "no reasoning given"
