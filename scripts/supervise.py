"""Run a command in its own process group and stop the whole group on SIGINT, SIGTERM or SIGHUP.

usage: python scripts/supervise.py COMMAND [ARG...]      (scripts/ui.sh: `dagster dev -w workspace.yaml ...`)

Why: bash starts a background job of a non-interactive shell with SIGINT (and SIGQUIT) ignored, and a signal
ignored at entry can be neither trapped nor reset by bash, so `dagster dev` started that way ignored Ctrl-C;
SIGTERM reached `dagster dev` alone and could leave the webserver, the daemon or a code server behind.
Python can install a handler over an inherited SIG_IGN: this launcher does, starts COMMAND in a new session
(its handlers reset to the default there), and on a signal sends SIGINT to the whole group (what Ctrl-C in a
terminal does: `dagster dev` shuts its webserver and daemon down), then SIGTERM after `RA_STOP_GRACE_S`
(default 20 s) and SIGKILL 10 s later. Once COMMAND has exited, whatever is left of its group is stopped
the same way. Exit status: COMMAND's, or 128 + the signal number when a signal stopped it.

COMMAND's output passes through line by line, less the Dagster daemon's lines about a sensor tick that did nothing
("Checking for new runs for sensor: X", "Sensor X skipped: ..."): the agent sensor ticks every 5 s, so these
buried everything else. RA_UI_SENSOR_TICKS=1 keeps them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import psutil

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
IDLE_TICK = re.compile(rb"SensorDaemon - \S*INFO\S* - (?:Checking for new runs for sensor: |Sensor \S+ skipped: )")


def relay(source, sink, drop: re.Pattern[bytes] | None) -> None:
    """Copy `source` to `sink` line by line until EOF, leaving out lines `drop` matches."""
    for line in iter(source.readline, b""):
        if drop is None or not drop.search(line):
            sink.write(line)
            sink.flush()


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (not zombie) processes of process group `pgid`."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def stop_group(child: subprocess.Popen, grace_s: float) -> None:
    """SIGINT the group, then SIGTERM after `grace_s`, then SIGKILL; return once no member is left."""
    pgid = child.pid
    for signum, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not group_members(pgid):
            return
        signal_group(pgid, signum)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            child.poll()  # reap our own child so it does not count as a member
            if not group_members(pgid):
                return
            time.sleep(0.2)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    received: list[int] = []
    for signum in STOP_SIGNALS:  # also over a SIG_IGN inherited from a non-interactive shell
        signal.signal(signum, lambda s, _frame: received.append(s))
    child = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    drop = None if os.environ.get("RA_UI_SENSOR_TICKS") == "1" else IDLE_TICK
    relaying = threading.Thread(target=relay, args=(child.stdout, sys.stdout.buffer, drop), daemon=True)
    relaying.start()
    grace_s = float(os.environ.get("RA_STOP_GRACE_S", "20"))
    while child.poll() is None and not received:
        time.sleep(0.2)
    if received:
        print(f"supervise: {signal.Signals(received[0]).name}: stopping {argv[0]} and its processes", file=sys.stderr)
    stop_group(child, grace_s)
    child.wait()
    relaying.join(timeout=5)
    return 128 + received[0] if received else child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
