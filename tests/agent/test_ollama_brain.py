"""OllamaBrain over the official client against a loopback Ollama, driven through the Action protocol."""

from __future__ import annotations

import logging

import pytest
from replay import Fault
from replay.ollama_server import OllamaReplayServer

from ra_agent.agent.actions import interpret_reply
from ra_agent.agent.handbook import parse_handbook
from ra_agent.config import ConfigError
from ra_agent.llm.base import Brain, BrainError
from ra_agent.llm.ollama_brain import OllamaBrain
from ra_agent.llm.protocol import REPAIR_PROMPT, ActionError, NoAction, ValidAction, repair_asker
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.llm.select import FallbackBrain, select_brain

PROMPT = [
    {"role": "system", "content": "You are the planner of a literature-review agent."},
    {"role": "user", "content": "Cluster 07e3a1dca9b4 - KD vs AED paediatric. Size: 146. End with Action."},
]
HANDBOOK = parse_handbook(
    "---\nPrimary_goal: seek_gap\n"
    "Tools_allowed: [search_pubmed, run_pico, find_existing_sr, propose_alternative_pico, prisma_check]\n---\n"
)
THOUGHT = "Thought: the cluster has 5 eligible trials; one more search should find the sixth.\n"


def cycle_turn(cfg, server: OllamaReplayServer, *replies: str):
    """One cycle's brain work: ask, then interpret the reply with at most one repair turn."""
    server.script(*replies)
    brain = OllamaBrain(cfg)
    reply = brain.chat(PROMPT)
    return interpret_reply(reply, repair_asker(brain, PROMPT, reply), cfg=cfg, handbook=HANDBOOK)


def test_good_action(ollama_cfg, ollama_server):
    reply = THOUGHT + 'Action: {"tool": "search_pubmed", "args": {"query": "adult refractory ketone ester epilepsy"}}'
    result = cycle_turn(ollama_cfg, ollama_server, reply)
    assert isinstance(result, ValidAction)
    assert result.args == {"query": "adult refractory ketone ester epilepsy", "retmax": 2000, "expand_mode": "semantic"}
    (request,) = ollama_server.chat_requests
    assert request["model"] == "gemma3n:e4b" and request["stream"] is False
    assert request["options"] == {"temperature": 0.2, "num_ctx": 10240}
    assert request["messages"] == PROMPT


def test_malformed_then_repaired(ollama_cfg, ollama_server):
    broken = THOUGHT + 'Action: {"tool": "run_pico", "args": {"cluster_id": "07e3a1dca9b4",}'
    fixed = '{"tool": "run_pico", "args": {"cluster_id": "07e3a1dca9b4"}}'
    result = cycle_turn(ollama_cfg, ollama_server, broken, fixed)
    assert isinstance(result, ValidAction) and result.repaired
    assert result.args == {"cluster_id": "07e3a1dca9b4"}
    first, repair = ollama_server.chat_requests
    assert first["messages"] == PROMPT
    assert repair["messages"][:-2] == PROMPT
    assert repair["messages"][-2] == {"role": "assistant", "content": broken}
    assert repair["messages"][-1]["content"].startswith(REPAIR_PROMPT) and "FIX JSON ONLY" in REPAIR_PROMPT
    assert sum("FIX JSON ONLY" in m["content"] for r in ollama_server.chat_requests for m in r["messages"]) == 1


def test_malformed_twice_is_json_error(ollama_cfg, ollama_server):
    result = cycle_turn(ollama_cfg, ollama_server, "Action: {tool: run_pico, args: {", "{still not json")
    assert isinstance(result, ActionError) and result.kind == "json_error"
    assert result.outcome.log == {"json_error": True} and result.outcome.status is None
    assert len(ollama_server.chat_requests) == 2  # the prompt and exactly one repair turn


def test_unknown_tool(ollama_cfg, ollama_server):
    bad = THOUGHT + 'Action: {"tool": "score_candidates", "args": {}}'
    result = cycle_turn(ollama_cfg, ollama_server, bad, bad)
    assert isinstance(result, ActionError) and result.kind == "unknown_tool" and result.repaired
    assert (result.outcome.event, result.outcome.status, dict(result.outcome.log)) == (
        "error", None, {"error": "unknown_tool"},
    )  # fmt: skip
    assert len(ollama_server.chat_requests) == 2  # one repair turn naming the unknown tool
    assert "unknown tool 'score_candidates'" in ollama_server.chat_requests[1]["messages"][-1]["content"]


def test_missing_arg(ollama_cfg, ollama_server):
    bad = THOUGHT + 'Action: {"tool": "find_existing_sr", "args": {}}'
    result = cycle_turn(ollama_cfg, ollama_server, bad, bad)
    assert isinstance(result, ActionError) and result.kind == "missing_arg"
    assert result.outcome.status is None and "question_id" in result.message


def test_no_action(ollama_cfg, ollama_server):
    result = cycle_turn(ollama_cfg, ollama_server, "Thought: I need to look at the clusters again next cycle.")
    assert isinstance(result, NoAction) and result.outcome.event == "no_action"
    assert len(ollama_server.chat_requests) == 1


def test_file_path_argument(ollama_cfg, ollama_server):
    reply = THOUGHT + 'Action: {"tool": "search_pubmed", "args": {"query": "../../data/ra.sqlite"}}'
    result = cycle_turn(ollama_cfg, ollama_server, reply, reply)
    assert isinstance(result, ActionError) and result.kind == "bad_arg"
    assert "file paths are not accepted" in result.message and result.outcome.status is None


def test_foreign_url_argument(ollama_cfg, ollama_server):
    reply = THOUGHT + 'Action: {"tool": "search_pubmed", "args": {"query": "http://169.254.169.254/latest/meta-data"}}'
    result = cycle_turn(ollama_cfg, ollama_server, reply, reply)
    assert isinstance(result, ActionError) and result.kind == "bad_arg"
    assert "host '169.254.169.254' is not allowed" in result.message


# ---------------------------------------------------------------------------- the brain itself


def test_brain_identity_and_stats(ollama_cfg, ollama_server):
    ollama_server.script("Hello.")
    brain = OllamaBrain(ollama_cfg)
    assert isinstance(brain, Brain)
    assert brain.name == "ollama:gemma3n:e4b" and ollama_server.host in brain.label()
    assert brain.chat(PROMPT) == "Hello."
    assert brain.last_stats["done_reason"] == "stop" and brain.last_stats["eval_count"] >= 1
    assert brain.installed_models() == ["gemma3n:e4b"] and brain.available()


def test_missing_model_and_server_errors_raise_brain_error(ollama_cfg, ollama_server):
    other = ollama_cfg.with_overrides(llm={"model": "llama3.2"})
    with pytest.raises(BrainError, match="not found, try pulling it first"):
        OllamaBrain(other).chat(PROMPT)
    ollama_server.inject(
        "/api/chat", Fault.http(500, b'{"error":"llama runner process has terminated"}', "application/json")
    )
    ollama_server.script("unused")
    with pytest.raises(BrainError, match="llama runner process has terminated"):
        OllamaBrain(ollama_cfg).chat(PROMPT)


def test_timeout_raises_brain_error(ollama_cfg, ollama_server):
    ollama_server.inject("/api/chat", Fault.slow(3.0))
    ollama_server.script("too late")
    with pytest.raises(BrainError):
        OllamaBrain(ollama_cfg.with_overrides(llm={"timeout_s": 0.3})).chat(PROMPT)


# ---------------------------------------------------------------------------- choosing the brain


def test_select_ollama_when_the_server_has_the_model(ollama_cfg, ollama_server):
    brain = select_brain(ollama_cfg, RulesBrain)  # brain = "auto": the rules stand by in case it fails later
    assert (
        isinstance(brain, FallbackBrain) and isinstance(brain.llm, OllamaBrain) and brain.name == "ollama:gemma3n:e4b"
    )
    assert [r.path for r in ollama_server.requests] == ["/api/tags"]
    explicit = select_brain(ollama_cfg.with_overrides(llm={"brain": "ollama"}), RulesBrain)
    assert isinstance(explicit, OllamaBrain)


def test_select_rules_when_no_server_answers(cfg, caplog):
    offline = cfg.with_overrides(llm={"ollama_host": "http://127.0.0.1:9", "probe_timeout_s": 0.5})
    with caplog.at_level(logging.WARNING, logger="ra_agent.llm.select"):
        brain = select_brain(offline, RulesBrain)
    assert brain.name == RulesBrain.name
    assert "no Ollama server answers at http://127.0.0.1:9: using the deterministic rule-based brain" in caplog.text


def test_select_rules_when_the_model_is_missing(ollama_cfg, caplog):
    with caplog.at_level(logging.WARNING, logger="ra_agent.llm.select"):
        brain = select_brain(ollama_cfg.with_overrides(llm={"model": "gemma3:27b"}), RulesBrain)
    assert brain.name == RulesBrain.name and "ollama pull gemma3:27b" in caplog.text


def test_select_rules_when_configured_never_probes(ollama_cfg, ollama_server):
    brain = select_brain(ollama_cfg.with_overrides(llm={"brain": "rules"}), RulesBrain)
    assert brain.name == RulesBrain.name and ollama_server.requests == []


def test_explicit_ollama_that_does_not_answer_is_an_error_saying_how_to_start_it(cfg):
    offline = cfg.with_overrides(llm={"brain": "ollama", "ollama_host": "http://127.0.0.1:9", "probe_timeout_s": 0.5})
    with pytest.raises(ConfigError, match=r"no Ollama server answers at http://127.0.0.1:9; start it with: ollama "
                       r"serve; ollama pull gemma3n:e4b"):  # fmt: skip
        select_brain(offline, RulesBrain)


def test_untagged_model_name_means_latest(ollama_cfg):
    with OllamaReplayServer(models=["gemma3n:latest"]) as server:
        brain = OllamaBrain(ollama_cfg.with_overrides(llm={"ollama_host": server.host, "model": "gemma3n"}))
        assert brain.available()
