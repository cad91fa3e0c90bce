"""The loop guard on error cycles (issue 23): a goal whose brain keeps proposing a rejected action ends long
before max_cycles with a stated reason, on the real demo workspace through Ollama's /api/chat (replayed)."""

from __future__ import annotations

from flow.conftest import HANDBOOK, action
from ra_agent.agent.actions import validate_action
from ra_agent.agent.cycle import run_cycle
from ra_agent.agent.goal import GoalStore
from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.prompt import build_messages, observe
from ra_agent.agent.runner import start_goal
from ra_agent.llm.protocol import action_form, parse_action
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import open_store


def run_until_done(cfg, goal_id, brain) -> tuple[list[str], object]:
    events = []
    with open_store(cfg) as store:
        for _ in range(cfg.goal.max_cycles):
            outcome = run_cycle(cfg, store, goal_id, brain)
            events.append(outcome.event)
            state = GoalStore(cfg.data_dir, store).load(goal_id)
            if not state.is_active:
                return events, state
    return events, state


def test_an_action_rejected_twice_in_the_same_form_ends_that_line_and_the_goal_stops_with_the_reason(
    llm, goal, ollama_server
):
    """The shared review's max_cycles run: the brain proposed the same invalid action every cycle, the repair turn
    repeated it, 50 cycles ran. Now the second rejection ends that line (shown in the prompt), the third proposal
    stops the goal, and the reason names the bad argument."""
    cfg, brain = llm
    bad = action("propose_alternative_pico", question_id="q-+6")
    ollama_server.script(*[bad] * 2 * cfg.goal.max_cycles)
    events, state = run_until_done(cfg, goal, brain)
    assert events == ["error", "error", "stopped"]
    assert state.status == "stopped" and state.cycle == 3 < cfg.goal.max_cycles
    (why,) = [e["reason"] for e in state.events("line_ended")]
    assert why == ("rejected 2 times in the same form: propose_alternative_pico.question_id is not a valid id: 'q-+6' "
                   "is not a review question's id (q- and 10 hex digits) (^q-[0-9a-f]{10}$)")  # fmt: skip
    assert state.stop_reason().startswith("propose_alternative_pico proposed again after the loop guard ended it: ")
    assert state.stop_reason().endswith(why)
    # the brain was told: the third prompt names the ended line, and the state block carries it
    assert len(ollama_server.chat_requests) == 6  # per cycle: the prompt and one repair turn
    third = ollama_server.chat_requests[4]["messages"][-1]["content"]
    assert f"Ended (do not propose again): propose_alternative_pico: {why}" in third
    assert '"ended_lines": [{"tool": "propose_alternative_pico"' in third


def test_error_cycles_in_a_row_stop_the_goal(llm, goal, ollama_server):
    """Rejected actions of different forms (each new, so no line repeats) are error cycles: after
    [goal] max_error_cycles of them in a row the goal stops with the count and the last error."""
    cfg, brain = llm
    replies = [action("run_pico", pmid_list=[f"x{i}"]) for i in range(cfg.goal.max_error_cycles)]
    ollama_server.script(*[r for r in replies for _ in (0, 1)])  # each slip and its repair turn
    events, state = run_until_done(cfg, goal, brain)
    assert events == ["error"] * (cfg.goal.max_error_cycles - 1) + ["stopped"]
    assert state.stop_reason() == (f"{cfg.goal.max_error_cycles} cycles in a row ended in an error (last: "
                                   'run_pico.pmid_list must be a non-empty list of '
                                   f'integers, got a list of 1 whose item 0 is "x{cfg.goal.max_error_cycles - 1}")')  # fmt: skip
    assert not state.events("line_ended")


def test_the_rules_brain_names_a_question_of_the_set_and_stops_on_an_ended_line(demo, demo_project):
    """After the seed search the rules take the topic's question (its id from the handbook's set, as the prompt
    lists it): the action validates against the registry; once the loop guard ended that line, the rules stop."""
    brain = RulesBrain()
    with open_store(demo) as store:
        state = start_goal(demo, store, demo_project / HANDBOOK, brain.name)
        handbook = load_handbook(demo_project / HANDBOOK)
        observation = observe(demo, store, state, handbook)
        searched = [{"query": handbook.seed_query, "count": 1, "fetched": 1, "offline": True}]
        observation["searches"] = [*observation["searches"], *searched]
        topic = observation["questions"][0]
        messages = build_messages(demo, store, handbook, observation)
        assert f"- {topic['question_id']}: {topic['in_words']}: {topic['studies']} studies" in messages[-1]["content"]
        parsed = parse_action(brain.chat(messages))
        assert (parsed.tool, parsed.args) == ("run_pico", {"question_id": topic["question_id"]})
        assert validate_action(parsed, cfg=demo, handbook=handbook).tool == "run_pico"
        form = action_form("run_pico", {"question_id": topic["question_id"]})
        observation["ended_lines"] = [{"tool": "run_pico", "form": form, "reason": "rejected twice"}]
        after = parse_action(brain.chat(build_messages(demo, store, handbook, observation)))
    assert (after.tool, after.args) == ("update_goal", {"changes": {"status": "stopped"}})
