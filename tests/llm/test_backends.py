"""The LLM backends people run, over their real wire protocols: Ollama /api/chat and OpenAI /v1/chat/completions."""

from __future__ import annotations

import logging

import pytest
from replay.ollama_server import OllamaReplayServer
from replay.openai_server import OpenAIReplayServer

from ra_agent.config import ConfigError
from ra_agent.llm.base import BrainError
from ra_agent.llm.openai_brain import OpenAIBrain
from ra_agent.llm.protocol import ParsedAction, parse_with_repair, repair_asker
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.llm.select import select_brain

PROMPT = [{"role": "system", "content": "Plan."}, {"role": "user", "content": "Cluster c1. End with Action."}]
FIXED = '{"tool": "run_pico", "args": {"cluster_id": "c1"}}'


def test_settings_reach_the_server(cfg, loopback):
    brain = select_brain(loopback.configure(cfg, seed=7, temperature=0.1, keep_alive="5m"), RulesBrain)
    loopback.script("Thought.\nAction: {tool: run_pico, args: {cluster_id: c1", FIXED)
    reply = brain.chat(PROMPT)
    parsed = parse_with_repair(reply, repair_asker(brain, PROMPT, reply))
    assert isinstance(parsed, ParsedAction) and parsed.repaired and parsed.args == {"cluster_id": "c1"}
    first, repair = loopback.chat_requests
    assert first["messages"] == PROMPT and repair["messages"][-1]["content"].startswith("FIX JSON ONLY")
    if loopback.backend == "ollama":
        assert first["options"] == {"temperature": 0.1, "num_ctx": 10240, "seed": 7}
        assert first["keep_alive"] == "5m" and "format" not in first and repair["format"] == "json"
    else:
        assert (first["temperature"], first["seed"], first["max_tokens"], first["stream"]) == (0.1, 7, 700, False)
        assert "response_format" not in first and repair["response_format"] == {"type": "json_object"}


def test_streaming(cfg, loopback):
    brain = select_brain(loopback.configure(cfg), RulesBrain)
    answer = "Omeprazole healed more erosive oesophagitis than ranitidine [PMID:8425567]. " * 3
    loopback.script(answer)
    pieces = list(brain.chat_stream(PROMPT))
    assert len(pieces) > 1 and "".join(pieces) == answer


def test_server_errors_are_brain_errors(cfg, loopback):
    brain = select_brain(loopback.configure(cfg), RulesBrain)
    with pytest.raises(BrainError, match="no scripted reply left"):
        brain.chat(PROMPT)


def test_auto_falls_back_to_the_rules_with_a_warning(cfg, caplog):
    for settings in ({"backend": "ollama", "ollama_host": "http://127.0.0.1:9"},
                     {"backend": "openai", "openai_base_url": "http://127.0.0.1:9/v1"}):  # fmt: skip
        with caplog.at_level(logging.WARNING, logger="ra_agent.llm.select"):
            brain = select_brain(cfg.with_overrides(llm={"brain": "auto", "probe_timeout_s": 0.5, **settings}),
                                 RulesBrain)  # fmt: skip
        assert brain.name == RulesBrain.name
    assert "no Ollama server answers at http://127.0.0.1:9: using the deterministic rule-based brain" in caplog.text
    assert "no OpenAI-compatible server answers at http://127.0.0.1:9/v1: using the deterministic" in caplog.text


def test_an_explicit_brain_that_does_not_answer_says_how_to_start_it(cfg):
    llm = cfg.with_overrides(llm={"brain": "llm", "backend": "openai", "openai_base_url": "http://127.0.0.1:9/v1",
                                  "probe_timeout_s": 0.5})  # fmt: skip
    with pytest.raises(ConfigError, match="llama-server -m <model.gguf> --port 8080"):
        select_brain(llm, RulesBrain)
    with OllamaReplayServer(models=["llama3.2:3b"]) as server:
        ollama = cfg.with_overrides(llm={"brain": "ollama", "ollama_host": server.root_url})
        with pytest.raises(ConfigError, match="has no model 'gemma3n:e4b' .run: ollama pull gemma3n:e4b"):
            select_brain(ollama, RulesBrain)


def test_openai_server_without_json_mode_is_asked_again_without_it(cfg):
    with OpenAIReplayServer(json_mode=False) as server:
        brain = OpenAIBrain(cfg.with_overrides(llm={"openai_base_url": server.base_url}))
        server.script(FIXED, FIXED)
        assert brain.chat_json(PROMPT) == FIXED and brain.chat_json(PROMPT) == FIXED
        assert ["response_format" in r for r in server.chat_requests] == [True, False, False]


def test_single_model_server_serves_any_name(cfg, caplog):
    with OpenAIReplayServer(models=["/models/gemma-3n-E4B-it-Q4_K_M.gguf"]) as server:
        brain = select_brain(cfg.with_overrides(llm={"brain": "openai", "openai_base_url": server.base_url}),
                             RulesBrain)  # fmt: skip
        assert isinstance(brain, OpenAIBrain)
