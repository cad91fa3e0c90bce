"""`ra ask` against an LLM server that answers HTTP 200 with a body that is not its protocol's reply (invalid JSON,
a 50 MB non-chat body), on Ollama and OpenAI-compatible loopback servers alike. It used to print "The local corpus
holds no support for this question." and exit 0 on the OpenAI-compatible server, recorded as answered: now it is an
error of that backend, and with [llm] brain = "auto" the rules answer and the output says why."""

from __future__ import annotations

import json
import sqlite3

import pytest
from replay import Fault
from replay.ollama_server import OllamaReplayServer
from replay.openai_server import OpenAIReplayServer

from ra_agent.ask.rules import RULES_ASK_NAME
from ra_agent.ask.tools import NO_SUPPORT
from ra_agent.cli import main

QUESTION = "Does omeprazole heal erosive oesophagitis better than ranitidine?"
BODIES = {
    "invalid_json": b'{"id": "chatcmpl-1", "choices": [{"message": {"content": "Omepra',
    "50MB": json.dumps({"object": "list", "data": "x" * 50_000_000}).encode(),
}
SAYS = {  # how each backend names the body
    ("openai", "invalid_json"): "HTTP 200 but the body is not JSON",
    ("openai", "50MB"): "HTTP 200 with a body of more than 8 MB",
    ("ollama", "invalid_json"): "HTTP 200 but the body is not an Ollama chat reply",
    ("ollama", "50MB"): "HTTP 200 but the body is not an Ollama chat reply",
}


def ra_ask(capsys, tmp_path, cfg, server, backend: str, brain: str) -> tuple[int, str, str]:
    where = (f'ollama_host = "{server.root_url}"' if backend == "ollama"
             else f'openai_base_url = "{server.root_url}/v1"')  # fmt: skip
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{cfg.data_dir}"\ndemo_corpus = ""\n[mindkb]\nenabled = false\n'
                      f'[llm]\nbrain = "{brain}"\nbackend = "{backend}"\n{where}\ntimeout_s = 20.0\n')  # fmt: skip
    code = main(["--config", str(config), "ask", QUESTION, "--max-tool-calls", "2"])
    out, err = capsys.readouterr()
    return code, out, err


def last_run(cfg) -> tuple[str, str, str | None]:
    with sqlite3.connect(cfg.data_dir / "ra.sqlite") as db:
        return db.execute("SELECT brain, stop_reason, error FROM ask_run ORDER BY id DESC LIMIT 1").fetchone()


@pytest.mark.parametrize("backend", ["openai", "ollama"])
@pytest.mark.parametrize("body", list(BODIES))
def test_a_reply_that_is_not_the_protocols_is_an_error_and_auto_lets_the_rules_answer(
    cfg, tmp_path, capsys, backend, body
):
    server = OllamaReplayServer() if backend == "ollama" else OpenAIReplayServer()
    path = "/api/chat" if backend == "ollama" else "/v1/chat/completions"
    with server:
        server.inject_always(path, Fault.http(200, BODIES[body], "application/json"))
        code, out, err = ra_ask(capsys, tmp_path, cfg, server, backend, backend)  # the LLM named explicitly
        assert code == 1 and NO_SUPPORT not in out, out[-500:]
        assert out.startswith("No answer: the language model did not answer") and SAYS[backend, body] in out, out
        brain, stop, error = last_run(cfg)
        assert (stop, brain.split(":")[0]) == ("brain_error", backend) and SAYS[backend, body] in (error or "")

        code, out, err = ra_ask(capsys, tmp_path, cfg, server, backend, "auto")
        assert code == 0 and out.startswith(f"Extractive answer ({RULES_ASK_NAME}, no LLM)"), out[-500:]
        assert "\nCitations:\n  [PMID:" in out
        fallback = next(line for line in err.splitlines() if line.startswith("[brain: ") and "in place of" in line)
        assert f"{RULES_ASK_NAME} (deterministic extractive planner, no LLM), in place of {backend}:" in fallback
        assert SAYS[backend, body] in fallback and len(fallback) < 800
        assert last_run(cfg)[:2] == (RULES_ASK_NAME, "answered")
