"""Goal mechanics on the real demo workspace (offline, rules brain): owned clusters, per-goal reports, loop guards,
spawned goals, PAUSE, crash and the goal lock (issue 11)."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ra_agent.agent.goal import GoalStore
from ra_agent.agent.guards import PAUSE_FILE, request_control
from ra_agent.agent.loopguard import LOCK_FILE
from ra_agent.agent.reporting import report_verdict
from ra_agent.agent.runner import run_goal, run_with_spawned, start_goal
from ra_agent.agent.stages import StageRequest
from ra_agent.cli import main
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import open_store

from .conftest import write_config

GERD = "handbooks/seek_gap_ppi_gerd.md"
KD = "handbooks/gap_kd_epilepsy.md"
SR = "handbooks/conduct_sr_ppi.md"


class QuietBrain:
    """A brain that only thinks (no Action): each cycle ends without side effects."""

    name = "test:quiet"

    def label(self) -> str:
        return self.name

    def chat(self, messages) -> str:
        return "Reading the clusters; nothing to do yet."


def run(cfg, project: Path, handbook: str, brain=None, **kwargs):
    brain = brain or RulesBrain()
    with open_store(cfg) as store:
        goal = start_goal(cfg, store, project / handbook, brain.name)
        return run_goal(cfg, store, goal.goal_id, brain, **kwargs)


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_three_handbooks_in_a_row(demo, demo_project):
    """Acceptance (issue 11): reflux goal reports into its own folder; the KD goal stops on "no papers" within two
    cycles and leaves that report byte for byte; conduct_SR never repeats a no-op and stops well before max_cycles."""
    demo = demo.with_overrides(sr={"sr_overlap_pivot": 0.95})  # the gap path (see test_runner)
    gerd = run(demo, demo_project, GERD)
    assert gerd.status == "stopped" and gerd.stop_reason().startswith("success: ")
    written = gerd.events("report_written")  # the success dossier
    assert written and all(h["path"].startswith(f"reports/{gerd.goal_id}/") for h in written)
    assert set(gerd.success_questions) == {h["question_id"] for h in written}
    reports = demo.data_dir / "reports"
    before = digests(reports)

    kd = run(demo, demo_project, KD)
    assert kd.status == "stopped" and kd.cycle <= 2
    assert kd.stop_reason().startswith("no papers match 'ketogenic diet AND epilepsy': offline by configuration")
    assert "ra import" in kd.stop_reason()
    assert kd.owned_clusters == [] and kd.success_questions == [] and kd.events("report_written") == []
    assert [h["tool"] for h in kd.events("tool_call")] == ["search_pubmed"]
    assert digests(reports) == before  # the reflux goal's dossier is untouched, and nothing else was written
    assert not (reports / kd.goal_id).exists()

    sr = run(demo, demo_project, SR)
    calls = [(h["tool"], h["args"]) for h in sr.events("tool_call")]
    assert all(a != b for a, b in zip(calls, calls[1:], strict=False))  # never the same call twice in a row
    assert sr.status == "stopped" and sr.cycle < demo.goal.max_cycles
    assert digests(reports / gerd.goal_id) == before and set(sr.owned_clusters) & set(gerd.owned_clusters)


def test_no_papers_online_says_pubmed_is_unreachable(demo, demo_project):
    """Online by configuration, E-utilities refusing connections: the reason names the outage, not the config."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: every request fails at once
    cfg = demo.with_overrides(ingest={"offline": False, "eutils_base_url": f"http://127.0.0.1:{port}/eutils",
                                      "retry_attempts": 1, "backoff_factor": 0.01, "request_timeout_s": 2.0})  # fmt: skip
    kd = run(cfg, demo_project, KD)
    assert kd.status == "stopped" and kd.cycle <= 2
    assert kd.stop_reason() == (
        "no papers match 'ketogenic diet AND epilepsy': PubMed unreachable and 0 local matches; "
        "import a search export with `ra import` or go online"
    )


def test_max_cycles_stops_the_goal_with_its_reason(demo, demo_project):
    cfg = demo.with_overrides(goal={"max_cycles": 2})
    state = run(cfg, demo_project, GERD)
    assert state.status == "stopped" and state.cycle == 2
    assert state.stop_reason() == "max_cycles reached (2 cycles)"


def test_the_same_call_from_the_same_state_stops_the_goal(demo, demo_project, ollama_server):
    from ra_agent.llm.ollama_brain import OllamaBrain

    cfg = demo.with_overrides(llm={"ollama_host": ollama_server.host, "brain": "ollama", "timeout_s": 30.0})
    action = 'Look at the noise.\nAction: {"tool": "show_noise", "args": {"limit": 3}}'
    ollama_server.script(action, action, action)
    state = run(cfg, demo_project, GERD, OllamaBrain(cfg), max_cycles=5)
    assert [h["tool"] for h in state.events("tool_call")] == ["show_noise"]  # the repeat was not executed
    assert state.status == "stopped" and state.cycle == 2
    assert state.stop_reason() == "repeated show_noise with the same arguments and no state change"


def test_pause_makes_the_local_runner_wait_then_resume(demo, demo_project):
    with open_store(demo) as store:
        goal = start_goal(demo, store, demo_project / GERD, QuietBrain.name)
        goal_dir = GoalStore(demo.data_dir, store).goal_dir(goal.goal_id)
    pause = request_control(demo, PAUSE_FILE, goal_dir)
    threading.Timer(1.0, pause.unlink).start()
    started = time.monotonic()
    with open_store(demo) as store:
        state = run_goal(demo, store, goal.goal_id, QuietBrain(), max_cycles=1)
    assert time.monotonic() - started >= 1.0
    events = [h["event"] for h in state.history]
    assert events[:3] == ["created", "paused", "resumed"] and events[-1] == "no_action"
    assert state.status == "in_progress" and state.cycle == 1


def test_a_stage_that_dies_marks_the_goal_crashed_and_ra_resume_retries_it(demo, demo_project, capsys):
    config = write_config(demo_project)
    with open_store(demo) as store:
        goals = GoalStore(demo.data_dir, store)
        goal = start_goal(demo, store, demo_project / GERD, RulesBrain.name)
        goal.pending_asset_requests = [StageRequest("pico", "no_such_cluster", "test").to_dict()]
        goals.save(goal)
        state = run_goal(demo, store, goal.goal_id, RulesBrain(), max_cycles=1)
    assert state.status == "crashed" and "stage pico[no_such_cluster]: KeyError" in state.stop_reason()
    assert not (goals.goal_dir(goal.goal_id) / LOCK_FILE).exists()  # released on the way out

    with open_store(demo) as store:  # drop the bad request: the retry then runs the goal
        goals = GoalStore(demo.data_dir, store)
        state = goals.load(goal.goal_id)
        state.pending_asset_requests = []
        goals.save(state)
    config.write_text(config.read_text().replace("[goal]\n", "[goal]\nmax_cycles = 1\n"))  # one cycle is enough
    assert main(["--config", str(config), "resume", goal.goal_id]) == 0
    out = capsys.readouterr().out
    assert f"goal {goal.goal_id}: crashed -> in_progress" in out and "retrying now" in out
    assert "  cycle 1: tool_call search_pubmed -> in_progress" in out
    with open_store(demo) as store:
        retried = GoalStore(demo.data_dir, store).load(goal.goal_id)
    resumed = retried.events("resumed")[-1]
    assert "was crashed: stage pico[no_such_cluster]" in resumed["reason"]
    assert retried.cycle == 1 and retried.stop_reason() == "max_cycles reached (1 cycles)"


def test_a_second_ra_run_of_a_running_goal_exits_2(demo, demo_project, capsys):
    config = write_config(demo_project)
    with open_store(demo) as store:
        goal = start_goal(demo, store, demo_project / GERD, RulesBrain.name)
        lock = GoalStore(demo.data_dir, store).goal_dir(goal.goal_id) / LOCK_FILE
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(f"{holder.pid}\n")
        code = main(["--config", str(config), "run", str(demo_project / GERD), "--goal", goal.goal_id])
        assert code == 2
        assert f"goal {goal.goal_id} is running (pid {holder.pid})" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    with open_store(demo) as store:
        assert GoalStore(demo.data_dir, store).load(goal.goal_id).cycle == 0  # nothing ran


@pytest.mark.parametrize("depth", [0, 1])
def test_spawned_goals_are_announced_and_run_after_the_parent(demo, demo_project, depth):
    cfg = demo.with_overrides(sr={"sr_overlap_pivot": 0.0}, goal={"max_spawn_depth": depth})
    brain = RulesBrain()
    announced = []
    with open_store(cfg) as store:
        parent = start_goal(cfg, store, demo_project / GERD, brain.name)
        states = run_with_spawned(cfg, store, parent.goal_id, brain, on_goal=lambda s, p: announced.append(s.goal_id))
    first = states[0]
    spawned = [h["new_goal"] for h in first.events("alternative_proposed")]
    if depth == 0:
        assert spawned == [] and len(states) == 1
        assert "max_spawn_depth" in first.events("alternative_failed")[0]["message"]
        return
    assert spawned and announced == spawned == [s.goal_id for s in states[1:]]
    for child in states[1:]:
        assert child.parent_goal == first.goal_id and child.spawn_depth == 1 and child.cycle >= 1
        assert child.status != "in_progress" and child.events("alternative_proposed") == []  # depth 1 is the limit
        parents = {(r["question_id"], r["kind"]): r["path"] for r in first.events("report_written")}
        for r in child.events("report_written"):  # its own report, or the parent's when the verdict is the same
            own = cfg.data_dir / r["path"]
            if r.get("same_question"):  # the same verdict on the same review question: the existing dossier
                assert r["path"] == parents[(r["question_id"], r["kind"])]
                assert f"- Question id: {r['question_id']}" in own.read_text(encoding="utf-8")
            else:
                assert r["path"].startswith(f"reports/{child.goal_id}/") and own.exists()
                if (r["question_id"], r["kind"]) in parents:  # never a copy of the parent's verdict
                    assert report_verdict(own) != report_verdict(cfg.data_dir / parents[(r["question_id"], r["kind"])])
    themes = [h["seed_query"] for s in states[1:] for h in s.events("spawned_from")]
    assert len(themes) == len(set(themes))  # one goal per theme


def _ra_until_a_cycle_then_kill(project: Path, config: Path, *argv: str) -> tuple[str, list[str]]:
    """Start `ra <argv>` and SIGKILL it once it has printed a complete cycle; (goal id, the lines it printed)."""
    import os
    import signal

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RA_")}, "PYTHONUNBUFFERED": "1",
           "HF_HUB_OFFLINE": "1"}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "ra_agent.cli", "--config", str(config), *argv], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("  cycle "):  # a cycle is complete; its stages run now
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, lines
    started = next((line.split()[1] for line in lines if line.startswith("goal ")), "")
    return started, lines


def test_a_sigkilled_goal_is_interrupted_and_ra_run_and_ra_resume_continue_it_to_its_end(demo, demo_project, capsys):
    """Issue 40 §4: a goal whose process was killed stayed in_progress; `ra resume` said "nothing to resume" and
    `ra run NAME` started a second goal beside it. Now `ra status` shows it interrupted, and `ra run NAME` and `ra
    resume G` continue it from its last complete cycle: it ends as an uninterrupted run does, each action once."""
    config = write_config(demo_project)
    goal_id, printed = _ra_until_a_cycle_then_kill(demo_project, config, "run", "seek_gap_ppi_gerd")
    assert goal_id and printed[-1] == "  cycle 1: tool_call search_pubmed -> in_progress", printed

    assert main(["--config", str(config), "status"]) == 0
    out = capsys.readouterr().out
    assert f"  {goal_id} seek_gap   interrupted    cycle 1 " in out
    assert f"its process stopped after cycle 1; ra resume {goal_id} continues it" in out

    assert main(["--config", str(config), "run", "seek_gap_ppi_gerd", "--max-cycles", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"goal {goal_id} of seek_gap_ppi_gerd.md was interrupted after cycle 1: continuing it"), out
    assert "  cycle 2: tool_call run_pico -> in_progress" in out

    assert main(["--config", str(config), "resume", goal_id]) == 0
    out = capsys.readouterr().out
    assert f"goal {goal_id}: in_progress, run by no process; continuing it from its last complete cycle (2)" in out
    with open_store(demo) as store:
        goals = GoalStore(demo.data_dir, store)
        assert goals.goal_ids() == [goal_id]  # no second goal beside it
        state = goals.load(goal_id)
        calls = store.conn.execute("SELECT tool, status FROM tool_call WHERE goal_id=? ORDER BY cycle",
                                   (goal_id,)).fetchall()  # fmt: skip
    assert state.status == "stopped" and state.stop_reason().startswith("success"), state.stop_reason()
    tools = [h["tool"] for h in state.events("tool_call")]
    assert tools == ["search_pubmed", "run_pico", "find_existing_sr", "prisma_check"]  # as an uninterrupted run
    assert [tuple(c) for c in calls] == [(t, "finished") for t in tools]  # each action executed once
    assert [h["event"] for h in state.history].count("interrupted") == 0  # a kill leaves no event: only the lock
    assert f"wrote {demo.data_dir / state.events('report_written')[0]['path']}" in out


class InterruptedBrain(RulesBrain):
    """The rules brain, until the user presses Ctrl-C during its second reply."""

    def __init__(self):
        self.replies = 0

    def chat(self, messages):
        self.replies += 1
        if self.replies == 2:
            raise KeyboardInterrupt
        return super().chat(messages)


def test_ctrl_c_leaves_the_goal_interrupted_after_its_last_complete_cycle(demo, demo_project):
    with open_store(demo) as store:
        goals = GoalStore(demo.data_dir, store)
        goal = start_goal(demo, store, demo_project / GERD, RulesBrain.name)
        with pytest.raises(KeyboardInterrupt):
            run_goal(demo, store, goal.goal_id, InterruptedBrain())
        state = goals.load(goal.goal_id)
    from ra_agent.agent.loopguard import goal_activity

    assert state.status == "in_progress" and state.cycle == 1  # cycle 2 never completed: nothing of it is saved
    assert state.history[-1]["event"] == "interrupted" and state.history[-1]["reason"] == (
        "interrupted (Ctrl-C) after cycle 1"
    )
    assert not (goals.goal_dir(goal.goal_id) / LOCK_FILE).exists()
    assert goal_activity(goals.goal_dir(goal.goal_id), state) == "interrupted"
