"""Servers and workers the suite and the benches start (Redis, Celery workers, PostgreSQL): they die with the process
that started them, and the session checks at its end that none is left.

Each one is registered with a watchdog: a small process that holds the read end of a pipe whose write end only the
starting process has. When that process ends, however it ends (SIGKILL, a crash, an interpreter that never runs its
`finally`), the kernel closes the pipe and the watchdog stops every registered process group and PostgreSQL
postmaster (SIGTERM, then SIGKILL) and removes their temp folders. A parent-death signal (prctl PR_SET_PDEATHSIG)
would reach only the direct child: `dagster-celery worker start` runs `celery worker` as its own child, and
`pg_ctl` leaves the postmaster running on its own.

Every process the suite starts also carries PYTEST_RA_SESSION=<id> in its environment (set here at import), so the
session's end can list any such process still running (`leftovers`), registered or not.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

SESSION_ENV = "PYTEST_RA_SESSION"  # not RA_*: the tests strip those from the env of what they start
os.environ[SESSION_ENV] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # this process's own (a nested session its own)
# what the session-end check looks for: the servers and workers this module's users start
WATCHED = re.compile(r"redis-server|celery|postgres|pg_ctl")

_WATCHDOG = r"""
import os, shutil, signal, sys, time
groups, pids, dirs = {}, {}, {}
for line in sys.stdin:
    verb, kind, value = line.split(" ", 2)
    value = value.rstrip("\n")
    table = {"group": groups, "pid": pids, "dir": dirs}[kind]
    if verb == "add":
        table[value] = True
    else:
        table.pop(value, None)
# the starting process is gone (or unregistered everything and closed the pipe): stop what it left
def send(group_signal, pid_signal):
    for g in groups:
        try: os.killpg(int(g), group_signal)
        except OSError: pass
    for p in pids:  # a postmaster: SIGQUIT is PostgreSQL's immediate shutdown (its backends go with it)
        try: os.kill(int(p), pid_signal)
        except OSError: pass
if groups or pids:
    send(signal.SIGTERM, signal.SIGQUIT)
    time.sleep(3)
    send(signal.SIGKILL, signal.SIGKILL)
for d in dirs:
    shutil.rmtree(d, ignore_errors=True)
"""


class _Watchdog:
    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._owner = 0
        self.registered: set[tuple[str, int]] = set()  # ("group", pgid) and ("pid", pid) not released yet

    def _pipe(self):
        if self._process is None or self._process.poll() is not None or self._owner != os.getpid():
            # its own session: a Ctrl-C to the terminal's foreground group does not stop it before it has reaped
            self._process = subprocess.Popen([sys.executable, "-c", _WATCHDOG], stdin=subprocess.PIPE, text=True,
                                             start_new_session=True)  # fmt: skip
            self._owner = os.getpid()
        assert self._process.stdin is not None
        return self._process.stdin

    def _say(self, verb: str, kind: str, value: object) -> None:
        pipe = self._pipe()
        pipe.write(f"{verb} {kind} {value}\n")
        pipe.flush()

    def add(self, kind: str, value: object) -> None:
        self._say("add", kind, value)
        if kind != "dir":
            self.registered.add((kind, int(str(value))))

    def drop(self, kind: str, value: object) -> None:
        if self._process is not None and self._process.poll() is None and self._owner == os.getpid():
            self._say("drop", kind, value)
        if kind != "dir":
            self.registered.discard((kind, int(str(value))))

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None


watchdog = _Watchdog()


def guard_group(process: subprocess.Popen, folder: Path | None = None) -> None:
    """`process` (started with start_new_session=True) and its whole group die with this process."""
    watchdog.add("group", process.pid)
    if folder is not None:
        watchdog.add("dir", folder)


def release_group(process: subprocess.Popen, folder: Path | None = None) -> None:
    """`process`'s group was stopped by its owner: the watchdog forgets it."""
    watchdog.drop("group", process.pid)
    if folder is not None:
        watchdog.drop("dir", folder)


def guard_pid(pid: int, folder: Path | None = None) -> None:
    """One process that runs on its own (PostgreSQL's postmaster, started by pg_ctl) dies with this process."""
    watchdog.add("pid", pid)
    if folder is not None:
        watchdog.add("dir", folder)


def release_pid(pid: int, folder: Path | None = None) -> None:
    watchdog.drop("pid", pid)
    if folder is not None:
        watchdog.drop("dir", folder)


def leftovers() -> list[str]:
    """ "pid: command line" of each process this process started that still runs: a member of a registered group
    not released (a server or worker never stopped), a registered postmaster or its backends, or a broker, worker
    or database server with this session's PYTEST_RA_SESSION in its environment. Zombies excluded. (The
    environment alone does not do: redis-server and PostgreSQL write their process titles over it.)"""
    groups = {value for kind, value in watchdog.registered if kind == "group"}
    pids = {value for kind, value in watchdog.registered if kind == "pid"}
    marker = f"{SESSION_ENV}={os.environ[SESSION_ENV]}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in (os.getpid(), watchdog.pid):
            continue
        with contextlib.suppress(OSError):
            state, ppid, pgid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            if state == "Z":
                continue
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            registered = int(pgid) in groups or int(proc.name) in pids or int(ppid) in pids
            if registered or (WATCHED.search(command) and marker in _environ(proc)):
                found.append(f"{proc.name}: {command[:200]}")
    return found


def _environ(proc: Path) -> list[bytes]:
    try:
        return (proc / "environ").read_bytes().split(b"\0")
    except OSError:  # another user's process
        return []


def kill_leftovers() -> None:
    """SIGKILL to every process `leftovers` lists (the session-end check's clean-up after reporting them)."""
    for line in leftovers():
        with contextlib.suppress(OSError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)


def unavailable(reason: str) -> None:
    """What a test does when a server it needs cannot start here: fail under CI (the install step must have
    provided it), skip elsewhere saying why."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"under CI: {reason}")
    pytest.skip(reason)
