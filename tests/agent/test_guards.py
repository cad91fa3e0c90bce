"""Guards: RAM reserve, STOP/PAUSE files (root and goal folder), paused_api after long API failure."""

from __future__ import annotations

import time

from ra_agent.agent.guards import (
    PAUSE_FILE,
    STOP_FILE,
    api_failing_too_long,
    check_guards,
    clear_control,
    pause_requested,
    request_control,
    stop_requested,
)
from ra_agent.hardware import ram_low
from ra_agent.store.db import Store

GIB = 1024**3
PLENTY = lambda: 16 * GIB  # noqa: E731


def test_ram_guard_uses_the_configured_reserve(cfg):
    assert ram_low(cfg, lambda: GIB) is True
    assert ram_low(cfg, lambda: 2 * GIB) is False  # reserve is 2 GiB: exactly the reserve is enough
    assert ram_low(cfg.with_overrides(hardware={"ram_reserve_bytes": 0}), lambda: 0) is False
    assert isinstance(ram_low(cfg), bool)  # the real psutil reading


def test_stop_and_pause_files_in_the_project_root(cfg, tmp_path):
    goal_dir = tmp_path / "data" / "goals" / "6a4f46a1b2e6"
    assert check_guards(cfg, goal_dir, available_bytes=PLENTY).verdict == "run"
    (tmp_path / PAUSE_FILE).touch()
    report = check_guards(cfg, goal_dir, available_bytes=PLENTY)
    assert (report.verdict, report.status) == ("pause", "paused") and report.pause == tmp_path / PAUSE_FILE
    (tmp_path / STOP_FILE).touch()
    report = check_guards(cfg, goal_dir, available_bytes=PLENTY)
    assert (report.verdict, report.status) == ("stop", "stopped_manual")  # STOP wins over PAUSE
    assert "STOP file" in report.reason


def test_control_files_per_goal(cfg, tmp_path):
    goal_a = tmp_path / "data" / "goals" / "aaaaaaaaaaaa"
    goal_b = tmp_path / "data" / "goals" / "bbbbbbbbbbbb"
    path = request_control(cfg, STOP_FILE, goal_a)
    assert path == goal_a / STOP_FILE and path.exists()
    assert stop_requested(cfg, goal_a) == path and stop_requested(cfg, goal_b) is None
    assert stop_requested(cfg) is None  # a goal's STOP does not stop the others
    request_control(cfg, PAUSE_FILE)
    assert pause_requested(cfg, goal_b) == tmp_path / PAUSE_FILE
    assert clear_control(cfg, PAUSE_FILE, goal_b) == [tmp_path / PAUSE_FILE]
    assert check_guards(cfg, goal_b, available_bytes=PLENTY).verdict == "run"  # removing PAUSE resumes


def test_paused_api_after_the_configured_hours(cfg):
    now = 1_754_317_323.0
    assert api_failing_too_long(cfg, None, now) is False
    assert api_failing_too_long(cfg, now - 23 * 3600, now) is False
    assert api_failing_too_long(cfg, now - 25 * 3600, now) is True
    short = cfg.with_overrides(goal={"paused_api_after_h": 1})
    assert api_failing_too_long(short, now - 2 * 3600, now) is True


def test_check_guards_reads_store_api_state(cfg, tmp_path):
    with Store(tmp_path / "ra.sqlite") as store:
        store.record_api_result("eutils", ok=False, error="502")
        store.record_api_result("crossref", ok=True)
        states = [store.api_state("eutils"), store.api_state("crossref")]
    later = time.time() + 25 * 3600
    report = check_guards(cfg, api_states=states, now=later, available_bytes=PLENTY)
    assert (report.verdict, report.status, report.api_down) == ("paused_api", "paused_api", ("eutils",))
    assert check_guards(cfg, api_states=states, available_bytes=PLENTY).verdict == "run"


def test_low_ram_is_reported_but_does_not_block_a_cycle(cfg):
    report = check_guards(cfg, available_bytes=lambda: GIB)
    assert report.ram_low and report.verdict == "run" and report.reason == "ram_low"
    assert report.available_bytes == GIB
