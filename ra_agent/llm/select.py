"""Choose the agent's brain: Ollama when a server with the model answers, else the labelled RulesBrain."""

from __future__ import annotations

from ra_agent.config import Config
from ra_agent.llm.ollama_brain import select_brain
from ra_agent.llm.rules_brain import RulesBrain


def brain_for(cfg: Config, store=None):
    """The configured brain ([llm] brain = auto | ollama | rules); `store` is accepted for symmetry."""
    return select_brain(cfg, RulesBrain)
