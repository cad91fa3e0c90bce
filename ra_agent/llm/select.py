"""Choose the agent's brain: the configured LLM backend (Ollama or OpenAI-compatible) or the labelled rules."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ra_agent.config import Config
from ra_agent.llm.base import Brain, BrainUnavailableError
from ra_agent.llm.ollama_brain import OllamaBrain
from ra_agent.llm.openai_brain import OpenAIBrain
from ra_agent.llm.rules_brain import RulesBrain

log = logging.getLogger(__name__)


def backend_of(cfg: Config) -> str:
    """The LLM backend: brain = "ollama" / "openai" name it directly, otherwise [llm] backend."""
    return cfg.llm.brain if cfg.llm.brain in ("ollama", "openai") else cfg.llm.backend


def llm_brain(cfg: Config) -> OllamaBrain | OpenAIBrain:
    """The configured LLM brain (not probed)."""
    return OpenAIBrain(cfg) if backend_of(cfg) == "openai" else OllamaBrain(cfg)


def select_brain(cfg: Config, rules_factory: Callable[[], Brain]) -> Brain:
    """The brain for this run ([llm] brain):

    - "rules": the deterministic rule-based brain from `rules_factory`, no probe;
    - "auto": the configured LLM backend when it answers with the model, else the rules with a warning;
    - "llm", "ollama", "openai": the LLM or BrainUnavailableError saying how to start it (never a silent fallback).
    """
    if cfg.llm.brain == "rules":
        brain = rules_factory()
        log.info('brain: %s ([llm] brain = "rules")', brain.label())
        return brain
    llm = llm_brain(cfg)
    reason = llm.unavailable_reason()
    if reason is None:
        log.info("brain: %s", llm.label())
        return llm
    if cfg.llm.brain != "auto":
        raise BrainUnavailableError(f'[llm] brain = "{cfg.llm.brain}" but {reason}; {llm.how_to_start()} '
                                    f'(or set brain = "auto" to fall back to the rules)')  # fmt: skip
    brain = rules_factory()
    log.warning("%s: using the deterministic rule-based brain %s", reason, brain.name)
    return brain


def brain_for(cfg: Config, store=None) -> Brain:
    """The configured brain for agent cycles; `store` is accepted for symmetry."""
    return select_brain(cfg, RulesBrain)


__all__ = ["backend_of", "brain_for", "llm_brain", "select_brain"]
