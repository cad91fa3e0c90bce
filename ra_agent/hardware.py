"""Hardware guards (docs/operations.md, Logs, guards, recovery): free RAM against `[hardware] ram_reserve_bytes`."""

from __future__ import annotations

import logging
from collections.abc import Callable

import psutil

from ra_agent.config import Config

log = logging.getLogger(__name__)


def system_available_bytes() -> int:
    return psutil.virtual_memory().available


def ram_low(cfg: Config, available_bytes: Callable[[], int] = system_available_bytes) -> bool:
    """True when free RAM is below cfg.hardware.ram_reserve_bytes (expansion stops)."""
    return available_bytes() < cfg.hardware.ram_reserve_bytes
