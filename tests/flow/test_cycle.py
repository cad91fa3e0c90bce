"""One agent cycle on the real demo workspace, driven through Ollama's /api/chat by scripted replies."""

from __future__ import annotations

import pytest

from flow.conftest import HANDBOOK, action
from ra_agent.agent import tools
from ra_agent.agent.cycle import run_cycle
from ra_agent.agent.goal import GoalStore
from ra_agent.agent.guards import PAUSE_FILE, STOP_FILE, clear_control, request_control
from ra_agent.agent.runner import start_goal
from ra_agent.llm.ollama_brain import OllamaBrain
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import open_store


def cycle(cfg, goal_id, brain):
    with open_store(cfg) as store:
        outcome = run_cycle(cfg, store, goal_id, brain)
        state = GoalStore(cfg.data_dir, store).load(goal_id)
        calls = store.conn.execute("SELECT tool, status FROM tool_call WHERE goal_id=?", (goal_id,)).fetchall()
    return outcome, state, [tuple(c) for c in calls]


def largest_cluster(cfg) -> tuple[str, int]:
    with open_store(cfg) as store:
        row = store.conn.execute(
            "SELECT cluster_id, COUNT(*) FROM cluster_member JOIN cluster_manifest USING (cluster_id) "
            "WHERE status='active' GROUP BY cluster_id ORDER BY COUNT(*) DESC LIMIT 1"
        ).fetchone()
    return row[0], row[1]


def test_good_action_requests_exactly_the_stages_it_touches(llm, goal, ollama_server):
    cfg, brain = llm
    ollama_server.script(action("search_pubmed", query="omeprazole AND oesophagitis"))
    outcome, state, calls = cycle(cfg, goal, brain)
    assert outcome.event == "tool_call" and outcome.tool == "search_pubmed"
    assert [r.stage for r in outcome.requests] == ["search", "embed", "organise", "questions"]
    assert state.pending_asset_requests == [r.to_dict() for r in outcome.requests]
    assert calls == [("search_pubmed", "finished")]
    (entry,) = state.events("tool_call")
    assert entry["brain"] == "ollama:gemma3n:e4b" and entry["args"]["retmax"] == cfg.ingest.default_retmax
    # the prompt carried the handbook's questions, the cluster blocks, the success rule and the state block
    prompt = ollama_server.chat_requests[0]["messages"][-1]["content"]
    assert "# Review questions of the handbook" in prompt and "# Cluster " in prompt
    assert "Success requires, of one review question" in prompt and "<state>" in prompt


def test_malformed_json_gets_exactly_one_repair_turn(llm, goal, ollama_server):
    cfg, brain = llm
    cid, _ = largest_cluster(cfg)
    ollama_server.script(
        'Thinking.\nAction: {"tool": "run_pico", "args": {"cluster_id": "' + cid + '"',
        '{"tool": "run_pico", "args": {"cluster_id": "' + cid + '"}}',
    )
    outcome, state, calls = cycle(cfg, goal, brain)
    assert outcome.tool == "run_pico" and [r.stage for r in outcome.requests] == ["pico"]
    assert len(ollama_server.chat_requests) == 2
    assert "FIX JSON ONLY" in ollama_server.chat_requests[1]["messages"][-1]["content"]
    assert state.events("tool_call")[0]["repaired"] is True


def test_garbage_twice_is_a_json_error_without_side_effects(llm, goal, ollama_server):
    cfg, brain = llm
    ollama_server.script("Action: {tool: run_pico, args: {", "still {{ not json")
    outcome, state, calls = cycle(cfg, goal, brain)
    assert outcome.event == "json_error" and calls == [] and outcome.requests == []
    assert state.status == "in_progress"


@pytest.mark.parametrize(
    ("reply", "event", "status"),
    [
        # issue 13: each slip gets one repair turn (here answered with the same slip), then is logged and
        # the goal goes on
        (action("delete_everything"), "error", "in_progress"),  # unknown tool
        (action("prisma_check"), "error", "in_progress"),  # missing arg
        (action("search_pubmed", query="/etc/passwd"), "error", "in_progress"),  # a file path
        (action("search_pubmed", query="see https://evil.example.com/x"), "error", "in_progress"),  # foreign URL
        ("I think we should wait and read more.", "no_action", "in_progress"),
    ],
)
def test_rejected_replies_follow_the_memo_tables(llm, goal, ollama_server, reply, event, status):
    cfg, brain = llm
    ollama_server.script(reply, reply)
    outcome, state, calls = cycle(cfg, goal, brain)
    assert (outcome.event, state.status) == (event, status)
    assert calls == [] and outcome.requests == [] and state.pending_asset_requests == []
    assert state.history[-1]["event"] in (event, "error")


def test_stop_file_ends_the_goal_before_the_llm_is_asked(llm, goal, ollama_server):
    cfg, brain = llm
    with open_store(cfg) as store:
        request_control(cfg, STOP_FILE, GoalStore(cfg.data_dir, store).goal_dir(goal))
    outcome, state, _ = cycle(cfg, goal, brain)
    assert state.status == "stopped_manual" and ollama_server.chat_requests == []


def test_pause_then_resume(llm, goal, ollama_server):
    cfg, brain = llm
    with open_store(cfg) as store:
        goal_dir = GoalStore(cfg.data_dir, store).goal_dir(goal)
    request_control(cfg, PAUSE_FILE, goal_dir)
    _, state, _ = cycle(cfg, goal, brain)
    assert state.status == "paused" and ollama_server.chat_requests == []
    clear_control(cfg, PAUSE_FILE, goal_dir)
    ollama_server.script("Nothing to do yet.")
    outcome, state, _ = cycle(cfg, goal, brain)
    assert [h["event"] for h in state.history[-2:]] == ["resumed", "no_action"]
    assert state.status == "in_progress"


@pytest.mark.parametrize(("answer", "requested"), [('{"answer": "yes"}', ["pico"]), ('{"answer": "no"}', []),
                                                 ("Yes, proceed.", ["pico"]), ("No, too costly.", [])])  # fmt: skip
def test_run_pico_above_the_guard_asks_are_you_sure(llm, goal, ollama_server, answer, requested):
    cfg, _ = llm
    cfg = cfg.with_overrides(sr={"pico_confirm_above": 50})
    cid, size = largest_cluster(cfg)
    assert size > 50
    ollama_server.script(action("run_pico", cluster_id=cid), answer)
    outcome, state, _ = cycle(cfg, goal, OllamaBrain(cfg))
    assert "Are you sure?" in ollama_server.chat_requests[1]["messages"][-1]["content"]
    assert ollama_server.chat_requests[1]["format"]["properties"]["answer"] == {"enum": ["yes", "no"]}  # constrained
    assert [r.stage for r in outcome.requests] == requested
    assert state.events("tool_call")[0]["result"].get("declined", False) is (not requested)


def test_max_tool_calls_stops_the_goal(llm, goal, ollama_server):
    cfg, brain = llm
    cfg = cfg.with_overrides(goal={"max_tool_calls": 1})
    ollama_server.script(action("show_noise", limit=3))
    cycle(cfg, goal, brain)
    outcome, state, _ = cycle(cfg, goal, brain)
    assert state.status == "stopped" and "max_tool_calls" in state.history[-1]["reason"]
    assert len(ollama_server.chat_requests) == 1


class KilledHere(BaseException):
    """Stands for SIGKILL: nothing after it runs, nothing is persisted by the cycle."""


def test_a_killed_cycle_resumes_without_asking_again_or_repeating_effects(demo, demo_project, monkeypatch):
    brain = RulesBrain()
    with open_store(demo) as store:
        goal_id = start_goal(demo, store, demo_project / HANDBOOK, brain.name).goal_id
    asked = []
    real_chat = brain.chat
    monkeypatch.setattr(brain, "chat", lambda messages: asked.append(1) or real_chat(messages))
    real_search = tools.TOOLS["search_pubmed"]

    def killed(ctx, **args):
        raise KilledHere()

    monkeypatch.setitem(tools.TOOLS, "search_pubmed", killed)
    with pytest.raises(KilledHere), open_store(demo) as store:
        run_cycle(demo, store, goal_id, brain)
    monkeypatch.setitem(tools.TOOLS, "search_pubmed", real_search)
    outcome, state, calls = cycle(demo, goal_id, brain)
    assert len(asked) == 1  # the recorded action was resumed, the brain was not asked again
    assert outcome.cycle == 1 and outcome.tool == "search_pubmed" and calls == [("search_pubmed", "finished")]
    assert len(state.events("tool_call")) == 1
    # the next cycle does not execute it again
    outcome, state, calls = cycle(demo, goal_id, brain)
    assert calls.count(("search_pubmed", "finished")) == 1 and outcome.cycle == 2


def test_search_with_a_focus_cluster_expands_it(llm, goal, ollama_server):
    from ra_agent.agent.stages import perform

    cfg, brain = llm
    cid, size = largest_cluster(cfg)
    ollama_server.script(
        action("update_goal", changes={"cluster_id": cid}),
        action("search_pubmed", query="omeprazole AND maintenance", expand_mode="semantic"),
    )
    cycle(cfg, goal, brain)
    outcome, state, _ = cycle(cfg, goal, brain)
    labels = [r.label() for r in outcome.requests]
    assert f"expand[{cid}.semantic]" in labels and labels[-1].startswith("questions[seek_gap_ppi_gerd-")
    with open_store(cfg) as store:  # the search, the index and the expansion (the questions are another test's)
        results = [perform(cfg, store, r, brain=RulesBrain()) for r in outcome.requests if r.stage != "questions"]
        accepted_new, members = store.conn.execute(
            "SELECT accepted_new, (SELECT COUNT(*) FROM cluster_member m WHERE m.cluster_id = c.cluster_id) "
            "FROM cluster_manifest c WHERE cluster_id=?", (cid,)
        ).fetchone()  # fmt: skip
    expansion = results[-1]
    assert expansion.thresholds == sorted(expansion.thresholds, reverse=True)
    assert len(set(expansion.thresholds)) == len(expansion.thresholds)
    assert expansion.halted_by in ("no_keep", "tau_floor", "empty_pool", "ram_guard")
    assert accepted_new == len(expansion.accepted) and members >= size
