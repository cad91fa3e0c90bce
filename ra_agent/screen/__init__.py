"""Screening prioritisation: active learning over a project's records, decisions and models in the store, simulation."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below load on first use: `ra` builds its parser without importing scikit-learn
    from ra_agent.screen.commands import add_screen_parser
    from ra_agent.screen.model import MODEL_NAME
    from ra_agent.screen.project import decide, decisions, projects, records
    from ra_agent.screen.session import discovery_curve, step
    from ra_agent.screen.simulate import metrics, plot_recall

_HOME = {
    "MODEL_NAME": "model",
    "add_screen_parser": "commands",
    "decide": "project",
    "decisions": "project",
    "projects": "project",
    "records": "project",
    "discovery_curve": "session",
    "step": "session",
    "metrics": "simulate",
    "plot_recall": "simulate",
}

__all__ = ["MODEL_NAME", "add_screen_parser", "decide", "decisions", "discovery_curve", "metrics", "plot_recall", "projects",
           "records", "step"]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"ra_agent.screen.{_HOME[name]}"), name)
    raise AttributeError(f"module 'ra_agent.screen' has no attribute {name!r}")
