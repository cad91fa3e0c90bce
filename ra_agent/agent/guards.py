"""Goal guards (docs/operations.md, Logs, guards, recovery): STOP/PAUSE files, API outage pause, crash resume."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ra_agent.config import Config
from ra_agent.hardware import ram_low, system_available_bytes

log = logging.getLogger(__name__)

STOP_FILE = "STOP"
PAUSE_FILE = "PAUSE"


def control_paths(cfg: Config, name: str, goal_dir: Path | None = None) -> list[Path]:
    """Where a STOP or PAUSE file counts: the project root (cfg.root) and, for one goal, its goal folder."""
    paths = [Path(cfg.root) / name]
    if goal_dir is not None:
        paths.append(Path(goal_dir) / name)
    return paths


def _found(cfg: Config, name: str, goal_dir: Path | None) -> Path | None:
    return next((p for p in control_paths(cfg, name, goal_dir) if p.exists()), None)


def stop_requested(cfg: Config, goal_dir: Path | None = None) -> Path | None:
    """The STOP file that is present (root or goal folder), else None."""
    return _found(cfg, STOP_FILE, goal_dir)


def pause_requested(cfg: Config, goal_dir: Path | None = None) -> Path | None:
    """The PAUSE file that is present (root or goal folder), else None; removing it resumes."""
    return _found(cfg, PAUSE_FILE, goal_dir)


def request_control(cfg: Config, name: str, goal_dir: Path | None = None) -> Path:
    """Create a STOP or PAUSE file (for one goal when goal_dir is given, else for every goal)."""
    if name not in (STOP_FILE, PAUSE_FILE):
        raise ValueError(f"control file must be {STOP_FILE} or {PAUSE_FILE}, not {name!r}")
    path = control_paths(cfg, name, goal_dir)[-1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


def clear_control(cfg: Config, name: str, goal_dir: Path | None = None) -> list[Path]:
    """Remove a STOP or PAUSE file wherever it counts; returns the files removed."""
    removed = [p for p in control_paths(cfg, name, goal_dir) if p.exists()]
    for path in removed:
        path.unlink()
    return removed


def api_failing_too_long(cfg: Config, first_error_ts: float | None, now: float | None = None) -> bool:
    """True when an API has failed without a success since first_error_ts for > cfg.goal.paused_api_after_h."""
    if first_error_ts is None:
        return False
    now = time.time() if now is None else now
    return now - first_error_ts > cfg.goal.paused_api_after_h * 3600


@dataclass(frozen=True)
class GuardReport:
    """The guards before a cycle; `verdict` is what the executor does, `status` the goal status to set."""

    stop: Path | None = None
    pause: Path | None = None
    api_down: tuple[str, ...] = ()
    ram_low: bool = False
    available_bytes: int = 0

    @property
    def verdict(self) -> str:
        """One of stop > pause > paused_api > run (low RAM does not block a cycle; heavy tools must check it)."""
        if self.stop:
            return "stop"
        if self.pause:
            return "pause"
        if self.api_down:
            return "paused_api"
        return "run"

    @property
    def status(self) -> str | None:
        return {"stop": "stopped_manual", "pause": "paused", "paused_api": "paused_api"}.get(self.verdict)

    @property
    def reason(self) -> str:
        if self.stop:
            return f"STOP file {self.stop}"
        if self.pause:
            return f"PAUSE file {self.pause}"
        if self.api_down:
            return f"API unreachable for more than the paused_api limit: {', '.join(self.api_down)}"
        return "ram_low" if self.ram_low else "ok"


def check_guards(
    cfg: Config,
    goal_dir: Path | None = None,
    api_states: Iterable[Mapping[str, Any]] = (),
    *,
    now: float | None = None,
    available_bytes: Callable[[], int] = system_available_bytes,
) -> GuardReport:
    """All guards at once; `api_states` are Store.api_state() rows (api, first_error_ts, ...)."""
    free = available_bytes()
    report = GuardReport(
        stop=stop_requested(cfg, goal_dir),
        pause=pause_requested(cfg, goal_dir),
        api_down=tuple(s["api"] for s in api_states if api_failing_too_long(cfg, s.get("first_error_ts"), now)),
        ram_low=ram_low(cfg, lambda: free),
        available_bytes=free,
    )
    if report.verdict != "run" or report.ram_low:
        log.info("guards: %s (%s)", report.verdict, report.reason)
    return report
