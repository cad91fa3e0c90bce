"""Helpers of the screening tests (a module of its own: test modules import it, conftest modules clash by name)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ra_agent.config import Config


def screen_cfg(data_dir: Path, **screen) -> Config:
    return Config().with_overrides(
        workspace={"data_dir": str(data_dir), "demo_corpus": ""}, ingest={"offline": True}, screen=screen
    )


def warm_cache(cfg: Config, cache_dir: Path) -> None:
    """Copy what a test computed into the session cache (so the next test or run does not embed again)."""
    for path in (cfg.data_dir / "cache" / "screen").glob("screen-*"):
        if not (cache_dir / path.name).exists():
            shutil.copy(path, cache_dir / path.name)
