"""Screening prioritisation: active learning over a project's records, decisions and models in the store, simulation."""

from ra_agent.screen.commands import add_screen_parser
from ra_agent.screen.project import decide, decisions, projects, records
from ra_agent.screen.session import discovery_curve, step
from ra_agent.screen.simulate import metrics, plot_recall

__all__ = [
    "add_screen_parser",
    "decide",
    "decisions",
    "discovery_curve",
    "metrics",
    "plot_recall",
    "projects",
    "records",
    "step",
]
