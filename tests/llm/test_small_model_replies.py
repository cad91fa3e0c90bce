"""Replies shaped like real small models' output, through a real cycle on the demo workspace and both wire protocols.

Each case scripts the server's answers (the first reply, then what the repair turn gets), runs one
agent cycle, and checks the documented end state: the event, the goal status (a slip never ends the
goal), the number of chat requests, and what the cycle log shows (the reply, the repair turn).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from replay import Fault

from ra_agent.agent.cycle import run_cycle
from ra_agent.agent.goal import GoalStore
from ra_agent.agent.runner import start_goal
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.llm.select import select_brain
from ra_agent.workspace import open_store

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"
THOUGHT = (
    "Let me think step by step. The largest cluster has few trial candidates and no SR overlap yet, "
    "so a more specific search should bring in the missing randomised trials.\n\n"
)


def search(query: str, **extra) -> str:
    return json.dumps({"tool": "search_pubmed", "args": {"query": query, **extra}})


def deep(levels: int) -> str:
    return '{"tool": "search_pubmed", "args": {"query": ' + '{"a": ' * levels + '"x"' + "}" * levels + "}}"


HUGE = THOUGHT + "x" * 5_000_000 + "\nAction: " + search("huge")  # received whole, refused unread, then repaired


@dataclass(frozen=True)
class Case:
    name: str
    replies: tuple[str, ...]  # the cycle's reply, then the repair turn's
    event: str
    chats: int  # chat requests the cycle made (1, or 2 with the repair turn)
    log: tuple[str, ...] = ()  # fragments the cycle log must show
    faults: tuple[Fault, ...] = ()  # faults for the chat requests, in order


CASES = [
    Case("reasoning then Action", (THOUGHT + "Action: " + search("omeprazole reflux oesophagitis"),), "tool_call", 1,
         ("step by step", "json_status: ok")),
    Case("code fence", (THOUGHT + "```json\nAction: " + search("esomeprazole healing") + "\n```",), "tool_call", 1),
    Case("trailing commas", (THOUGHT + 'Action: {"tool": "search_pubmed", "args": {"query": "lansoprazole",},}',),
         "tool_call", 1),
    Case("single quotes", (THOUGHT + "Action: {'tool': 'search_pubmed', 'args': {'query': 'rabeprazole GERD'}}",),
         "tool_call", 1),
    Case("two Actions, repaired", (THOUGHT + "Action: " + search("a") + "\nor maybe\nAction: " + search("b"),
                                   search("pantoprazole maintenance")),
         "tool_call", 2, ("FIX THE ACTION ONLY", "only one 'Action:' per reply", "json_status: repaired")),
    Case("extra argument, repaired", (THOUGHT + "Action: " + search("PPI on-demand", reason="gap"),
                                      search("PPI on-demand therapy")),
         "tool_call", 2, ("FIX THE ACTION ONLY", "takes no argument(s) ['reason']", "json_status: repaired")),
    Case("extra argument twice", (THOUGHT + "Action: " + search("PPI GERD", reason="gap"),
                                  search("PPI GERD", reason="gap again")),
         "error", 2, ("extra_arg after one repair turn",)),
    Case("wrong types", (THOUGHT + 'Action: {"tool": "search_pubmed", "args": {"query": ["GERD"], "retmax": "50"}}',
                         search("GERD maintenance", retmax=50)),
         "tool_call", 2, ("search_pubmed.query must be a non-empty string",)),
    Case("5 MB reply", (HUGE, search("omeprazole dose")), "tool_call", 2,
         (f"the reply is {len(HUGE):,} characters, over the 200,000 the agent reads", "characters omitted")),
    Case("repair turn answers HTTP 500", (THOUGHT + "Action: {tool: search_pubmed, args: {", "unused"),
         "json_error", 2, ("the repair turn failed",), (Fault.passthrough(), Fault.http(500, b'{"error": "boom"}'))),
    Case("a '/' inside a query", (THOUGHT + "Action: " + search("HbA1c 7% / 53 mmol/mol"),), "tool_call", 1),
    # last: the slow answer arrives after the client gave up and must not eat a later case's reply
    Case("5,000-deep JSON, repair times out", (THOUGHT + "Action: " + deep(5000), search("late")),
         "json_error", 2, ("nests deeper than 32 levels", "the repair turn failed", "(no reply: BrainError"),
         (Fault.passthrough(), Fault.slow(4.0))),
]  # fmt: skip


def test_small_model_replies_end_in_the_documented_state(demo, demo_project, loopback):
    cfg = loopback.configure(demo, timeout_s=2.0)
    brain = select_brain(cfg, RulesBrain)
    assert brain.name == f"{loopback.backend}:gemma3n:e4b"
    with open_store(cfg) as store:
        goal_id = start_goal(cfg, store, demo_project / HANDBOOK, brain.name).goal_id
    for case in CASES:
        before = len(loopback.chat_requests)
        loopback.script(*case.replies)
        if case.faults:
            loopback.fail_chat(*case.faults)
        with open_store(cfg) as store:
            outcome = run_cycle(cfg, store, goal_id, brain)
            state = GoalStore(cfg.data_dir, store).load(goal_id)
        loopback.server.clear_faults()
        while loopback.server.unused_replies:  # drop what the case did not consume
            loopback.server._replies.popleft()
        where = f"{loopback.backend}: {case.name}"
        assert outcome.event == case.event, where
        assert state.status == "in_progress", where
        sent = len(loopback.server.requests_to(loopback.chat_path)) - before
        assert len(loopback.chat_requests) - before in (case.chats, case.chats - 1) and sent >= case.chats, where
        text = open(outcome.log_path, encoding="utf-8").read()
        for fragment in case.log:
            assert fragment in text, f"{where}: {fragment!r} not in the cycle log"
        if case.chats == 2:
            assert "### Repair Turn" in text, where
        assert len(text) < 120_000, f"{where}: cycle log of {len(text):,} characters"
