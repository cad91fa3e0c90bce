"""scripts/supervise.py (ui.sh's launcher) passes its command's output through, less the daemon's idle sensor ticks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the Dagster daemon's lines as `dagster dev` prints them (colour codes included), one idle tick and one action
CHILD = r"""
import sys
for _ in range(3):
    print("2026-11-25 04:47:50 +0000 - dagster.daemon.SensorDaemon - \x1b[34mINFO\x1b[0m - Checking for new runs for sensor: agent_sensor")
    print("2026-11-25 04:47:50 +0000 - dagster.daemon.SensorDaemon - \x1b[34mINFO\x1b[0m - Sensor agent_sensor skipped: no goal to run (2 stopped)")
print("2026-11-25 04:47:55 +0000 - dagster.daemon.SensorDaemon - \x1b[34mINFO\x1b[0m - Sensor agent_sensor requested 1 run")
print("2026-11-25 04:46:47 +0000 - dagster-webserver - INFO - Serving dagster-webserver on http://127.0.0.1:3000", file=sys.stderr)
"""


def supervise(env_extra: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "supervise.py"), sys.executable, "-c", CHILD],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **env_extra})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_idle_sensor_ticks_are_left_out_and_what_a_sensor_does_stays():
    lines = supervise({})
    assert len(lines) == 2  # the stdout and stderr lines may come in either order (two pipes, merged as they arrive)
    assert any("Sensor agent_sensor requested 1 run" in line for line in lines)
    assert any("Serving dagster-webserver" in line for line in lines)
    assert len(supervise({"RA_UI_SENSOR_TICKS": "1"})) == 8  # kept on request
