"""The state `ra llm serve` leaves for its server (<data_dir>/llm_server.json) and what a client reads from it:
whether the server's process still runs, and why it no longer answers when it died (its log's end)."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

STATE_FILE = "llm_server.json"


@dataclass
class ServerInfo:
    """A running server as `ra llm stop` finds it (the state file in the workspace)."""

    pid: int
    port: int
    model: str
    n_ctx: int
    log: str
    threads: int = 0  # llama.cpp's threads (0 in a state file written before ra recorded them)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


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


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def read_state(path: Path) -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        log.warning("%s is unreadable (%s): ignored", path, exc)
        return None


def log_tail(path: str | Path, lines: int = 5, max_bytes: int = 4096) -> str:
    """The last `lines` non-blank lines of a log (read from its last `max_bytes`), joined with " | "."""
    try:
        with Path(path).open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - max_bytes))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(its log {path} cannot be read: {exc.strerror or exc})"
    kept = [" ".join(line.split())[:300] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(its log is empty)"


def died(data_dir: Path, base_url: str, *, grace_s: float = 0.0) -> str | None:
    """Why the server `ra llm serve` started for this workspace at `base_url` no longer answers, when its process
    has died (its state file is left: it did not stop on request); None when ra did not start a server there or
    it still runs. Said once by whoever calls it: the pid, where its log is and how that log ends.

    `grace_s`: how long a process still alive may take to finish dying (its connections close before it is gone)."""
    path = state_path(data_dir)
    info = read_state(path) if path.exists() else None
    if info is None or info.base_url.rstrip("/") != base_url.rstrip("/"):
        return None
    end = time.monotonic() + grace_s
    while alive(info.pid):
        if time.monotonic() >= end:
            return None
        time.sleep(0.02)
    return (f"the llama.cpp server `ra llm serve` started (pid {info.pid}, {info.base_url}) has died; its log "
            f"{info.log} ends: {log_tail(info.log)}; start it again with `ra llm serve`")  # fmt: skip


__all__ = ["STATE_FILE", "ServerInfo", "alive", "died", "log_tail", "read_state", "state_path"]
