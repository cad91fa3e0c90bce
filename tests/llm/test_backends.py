"""The LLM backends people run, over their real wire protocols: Ollama /api/chat and OpenAI /v1/chat/completions."""

from __future__ import annotations

import logging

import pytest
from replay import Fault
from replay.ollama_server import OllamaReplayServer
from replay.openai_server import OpenAIReplayServer

from ra_agent.config import ConfigError
from ra_agent.llm.base import BrainError, BrainReplyError, ReplySchema
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


def test_a_configured_model_the_server_does_not_list_is_a_one_line_error(cfg):
    """A server that does not list [llm] model is refused, also when it lists one model only (it was accepted
    without a word); a 5 MB model id is shown cut, a 52 MB listing is not read whole (it was logged whole)."""
    cases = {("/models/gemma-3n-E4B-it-Q4_K_M.gguf",): "(it lists: '/models/gemma-3n-E4B-it-Q4_K_M.gguf')",
             ("llama3.2:3b", "m" * 5_000_000): "(it lists: 'llama3.2:3b', 'mmmm",
             ("m" * 52_000_000,): "answered GET /models with a body of more than 8 MB"}  # fmt: skip
    for models, shown in cases.items():
        with OpenAIReplayServer(models=models) as server:
            base_url = server.base_url
            with pytest.raises(ConfigError) as refused:
                select_brain(cfg.with_overrides(llm={"brain": "openai", "openai_base_url": base_url}), RulesBrain)
        message = str(refused.value)
        assert "\n" not in message and len(message) < 600 and shown in message, message[:600]
        if len(models[-1]) < 52_000_000:
            assert f"the server at {base_url} does not list model 'gemma3n:e4b' {shown}" in message
            assert "; set [llm] model to one of them (or set brain" in message


def test_http_500_from_the_model_list_is_named_as_such(cfg):
    """A server that answers GET /v1/models with HTTP 500 is not "no server answers"."""
    with OpenAIReplayServer() as server:
        server.inject("/v1/models", Fault.http(500, b'{"error": {"message": "out of memory"}}', "application/json"))
        with pytest.raises(ConfigError, match=r"answered GET /models with HTTP 500: out of memory \(or set brain"):
            select_brain(cfg.with_overrides(llm={"brain": "openai", "openai_base_url": server.base_url}), RulesBrain)


NOT_A_REPLY = {  # HTTP 200 bodies that are not a chat reply of either protocol (content type, body)
    "invalid JSON": ("application/json", b'{"choices": [{"message": {"content": "Omepra'),
    "50 MB of another JSON": ("application/json", b'{"object": "list", "data": "' + b"x" * 50_000_000 + b'"}'),
    "an HTML page": ("text/html", b"<!DOCTYPE html><html><body><h1>Service unavailable</h1></body></html>\n"),
    "events without JSON": ("text/event-stream", b"data: Omeprazole heals\n\ndata: [DONE]\n\n"),
    "no events": ("text/event-stream", b"data: [DONE]\n\n"),
}


@pytest.mark.parametrize("what", list(NOT_A_REPLY))
def test_a_200_body_that_is_not_a_chat_reply_is_an_error_of_the_backend(cfg, loopback, what):
    """Every way of asking (whole, constrained, streamed) raises BrainReplyError, on both backends: never an empty
    answer (the OpenAI-compatible backend read such bodies as an empty reply)."""
    content_type, body = NOT_A_REPLY[what]
    brain = select_brain(loopback.configure(cfg), RulesBrain)
    schema = ReplySchema("agent_action", {"type": "object"})
    for call in (lambda: brain.chat(PROMPT), lambda: brain.chat_structured(PROMPT, schema),
                 lambda: "".join(brain.chat_stream(PROMPT))):  # fmt: skip
        loopback.fail_chat(Fault.http(200, body, content_type))
        with pytest.raises(BrainReplyError) as failed:
            call()
        message = str(failed.value)
        assert "HTTP 200" in message and "\n" not in message and len(message) < 600, message
