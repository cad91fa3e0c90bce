"""scripts/ui.sh stops cleanly: started in the background of a non-interactive shell (SIGINT ignored at entry, which
bash's `trap` cannot undo), it answers on a free loopback port, and SIGTERM or SIGINT to its pid ends dagster dev,
the webserver, the daemon and the code servers. Starts real `dagster dev` processes (e2e)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from .test_e2e_dagster_dev import ROOT, free_port, wait_for

pytestmark = pytest.mark.e2e


def ignored_signals(pid: int) -> int:
    """The SigIgn mask of a process (bit n-1 = signal n ignored)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn line for pid {pid}")


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_ui_sh_in_the_background_stops_with_every_child(signum, tmp_path):
    (tmp_path / "config.toml").write_text(f'[workspace]\ndata_dir = "{tmp_path / "data"}"\ndemo_corpus = ""\n')
    port, log = free_port(), tmp_path / "ui.log"
    env = {**os.environ, "RA_CONFIG": str(tmp_path / "config.toml"), "DAGSTER_HOME": str(tmp_path / "dagster_home"),
           "RA_STOP_GRACE_S": "20"}  # fmt: skip
    # what a user's `bash scripts/ui.sh -p PORT &` in a script does: the job starts with SIGINT ignored
    started = subprocess.run(
        ["bash", "-c", f'bash "{ROOT}/scripts/ui.sh" -p {port} -h 127.0.0.1 >"{log}" 2>&1 & echo $!'],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    pid = int(started.stdout.strip())
    root = psutil.Process(pid)
    try:
        assert ignored_signals(pid) & (1 << (signal.SIGINT - 1)), "the background job should start with SIGINT ignored"
        wait_for(lambda: answers(port) or (not root.is_running() and pytest.fail(log.read_text()[-3000:])), 240,
                 "the Dagster webserver")  # fmt: skip

        def all_started():  # dagster dev, its code server, the webserver's and the daemon's, webserver, daemon
            kids = root.children(recursive=True)
            cmds = " ".join(" ".join(k.cmdline()) for k in kids)
            return kids if "dagster_webserver" in cmds and "_daemon" in cmds and "grpc" in cmds else None

        processes = [root, *wait_for(all_started, 120, "the daemon and the code servers")]
        os.kill(pid, signum)
        gone, alive = psutil.wait_procs(processes, timeout=90)
        assert not alive, f"still running after {signum!r}: {[(p.pid, p.cmdline()) for p in alive]}"
        assert root.pid in {p.pid for p in gone}
    finally:
        for proc in [root, *(root.children(recursive=True) if root.is_running() else [])]:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
    assert "supervise: " + signal.Signals(signum).name in log.read_text()
    time.sleep(0.5)
    assert not answers(port)
