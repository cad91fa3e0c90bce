"""An LLM that fails under a running goal. Issue 40 §3: under [llm] brain = "auto" a reply that is not the protocol's
hands the cycles to the rules, saying why. Issue 40 §7: the local LLM server `ra llm serve` started dies mid-reply (llama.cpp built for another CPU: "trap
invalid opcode"). `ra run --max-cycles 3` logged "brain_unavailable: peer closed connection", then twice "Connection
refused", and ended "in_progress after 3 cycles": nothing said the server had died or where its log was. Now the
goal stops at once, in error, saying so once with the end of the server's log."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from flow.conftest import write_config

from ra_agent.agent.goal import GoalStore
from ra_agent.cli import main
from ra_agent.config import load_config
from ra_agent.llm import serve
from ra_agent.workspace import open_store

DYING_SERVER = Path(__file__).resolve().parents[1] / "replay" / "dying_server.py"


def test_a_served_model_that_dies_mid_reply_stops_the_goal_once_with_its_log(demo_project, capsys):
    config = write_config(demo_project)
    data = demo_project / "data"
    log = data / "logs" / "llm_server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, str(DYING_SERVER)], stdout=subprocess.PIPE, stderr=out, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        info = serve.ServerInfo(server.pid, port, "gemma-3-270m-it-Q4_K_M.gguf", 4096, str(log))
        serve.state_path(data).write_text(json.dumps(dataclasses.asdict(info)))  # as `ra llm serve` leaves it
        settings = f'[llm]\nbrain = "openai"\nopenai_base_url = "{info.base_url}"\nmodel = "gemma3-270m"\n'
        config.write_text(config.read_text().replace('[llm]\nbrain = "rules"\n', settings))
        code = main(["--config", str(config), "run", "seek_gap_ppi_gerd", "--max-cycles", "3"])
        out = capsys.readouterr().out
        assert server.wait(timeout=30) == -9  # it killed itself mid-reply
    finally:
        server.kill()
        server.wait()
    assert code == 0, out
    cycles = [line.strip() for line in out.splitlines() if line.startswith("  cycle ")]
    assert cycles == ["cycle 1: error -> error"], out  # no cycle burnt on a server that is gone
    (end,) = [line for line in out.splitlines() if line.startswith("goal ") and " after " in line]
    assert " error after 1 cycles: OpenAI-compatible server at " in end, end
    assert f"the llama.cpp server `ra llm serve` started (pid {server.pid}, {info.base_url}) has died; its log " in end
    assert f"{log} ends: INFO: Started server process | INFO: Uvicorn running on" in end
    assert "llama_decode: failed to decode, ret = -1" in end and "start it again with `ra llm serve`" in end
    assert out.count("has died") == 1
    cfg = load_config(config)
    with open_store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        (goal_id,) = goals.goal_ids()
        state = goals.load(goal_id)
    assert state.status == "error" and "has died" in state.stop_reason()
    # one failed call (the status change to "error" is an `error` event too, with the reason)
    assert [h.get("error") for h in state.events("error")] == ["brain_unavailable", None]


def test_under_auto_a_server_answering_invalid_json_hands_the_cycles_to_the_rules_saying_why(
    demo_project, capsys, caplog
):
    """It used to log no_action cycles (the empty reply read as "no action")."""
    from replay import Fault
    from replay.openai_server import OpenAIReplayServer

    from ra_agent.llm.rules_brain import RULES_BRAIN_NAME

    config = write_config(demo_project)
    with OpenAIReplayServer() as server:
        server.inject_always("/v1/chat/completions", Fault.http(200, b'{"choices": [{"mess', "application/json"))
        settings = f'[llm]\nbrain = "auto"\nbackend = "openai"\nopenai_base_url = "{server.base_url}"\nprobe_timeout_s = 60\n'  # a loaded machine
        config.write_text(config.read_text().replace('[llm]\nbrain = "rules"\n', settings))
        assert main(["--config", str(config), "run", "seek_gap_ppi_gerd", "--max-cycles", "2"]) == 0
    out = capsys.readouterr().out
    cycles = [line.strip() for line in out.splitlines() if line.startswith("  cycle ")]
    assert cycles == ["cycle 1: tool_call search_pubmed -> in_progress", "cycle 2: tool_call run_pico -> in_progress"]
    (warning,) = [r.getMessage() for r in caplog.records if "the rules answer from now on" in r.getMessage()]
    assert "HTTP 200 but the body is not JSON" in warning and warning.endswith(RULES_BRAIN_NAME)
    cfg = load_config(config)
    with open_store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        (goal_id,) = goals.goal_ids()
        state = goals.load(goal_id)
    (changed,) = state.events("brain_changed")
    assert (changed["old"], changed["new"]) == ("openai:gemma3n:e4b", RULES_BRAIN_NAME)
    assert "HTTP 200 but the body is not JSON" in changed["reason"] and changed["cycle"] == 1
    assert [h["brain"] for h in state.events("tool_call")] == [RULES_BRAIN_NAME] * 2
    assert not state.events("no_action") and not state.events("error")
