"""Choose the agent's brain: the configured LLM backend (Ollama or OpenAI-compatible) or the labelled rules."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from ra_agent.config import Config
from ra_agent.llm.base import Brain, BrainError, BrainUnavailableError, Message, ReplySchema, one_line
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


class FallbackBrain:
    """[llm] brain = "auto": the LLM while it answers in its protocol; from its first failure on (unreachable, died,
    HTTP error, a reply that is not the protocol's) the rules brain, for the rest of this process, with the reason
    logged once (`fallback_reason`). `name` is the brain that answers now, so every log and history entry names it.

    A prompt the rules brain cannot read (an LLM-only step: an audit, a judge, PICO extraction) raises BrainError
    with the reason instead, and that step takes its own rules path, as it does when an LLM fails.
    """

    def __init__(self, llm: OllamaBrain | OpenAIBrain, rules_factory: Callable[[], Brain]):
        self.llm, self._rules_factory = llm, rules_factory
        self.rules: Brain | None = None
        self.fallback_reason = ""
        self.name = llm.name
        self.last_stats: dict[str, Any] = {}

    def label(self) -> str:
        if self.rules is None:
            return f'{self.llm.label()}; the rules answer if it fails ([llm] brain = "auto")'
        return f"{self.rules.label()}, in place of {self.llm.name}: {self.fallback_reason}"

    def _fall_back(self, exc: BrainError) -> Brain:
        self.rules = self._rules_factory()
        self.fallback_reason = one_line(exc)
        self.name = self.rules.name
        log.warning('%s; the rules answer from now on ([llm] brain = "auto"): %s', one_line(exc), self.rules.name)
        return self.rules

    def _ask(self, call: Callable[[Any], str], rules_call: Callable[[Brain], str] | None = None) -> str:
        if self.rules is None:
            try:
                text = call(self.llm)
                self.last_stats = dict(getattr(self.llm, "last_stats", {}) or {})
                return text
            except BrainError as exc:
                self._fall_back(exc)
        assert self.rules is not None
        start = time.monotonic()
        try:
            text = (rules_call or call)(self.rules)
        except ValueError as exc:  # a prompt only an LLM answers: that step's own rules take over
            raise BrainError(
                f"{self.fallback_reason} (and {self.rules.name} cannot answer this prompt: {exc})"
            ) from exc
        self.last_stats = {"mode": "text", "total_s": round(time.monotonic() - start, 3)}
        return text

    def chat(self, messages: list[Message], **options: Any) -> str:
        return self._ask(lambda b: b.chat(messages, **options) if b is self.llm else b.chat(messages))

    def chat_json(self, messages: list[Message]) -> str:
        return self._ask(lambda b: b.chat_json(messages) if b is self.llm else b.chat(messages))

    def chat_structured(self, messages: list[Message], schema: ReplySchema) -> str:
        """Constrained by the LLM; the rules answer in the text protocol (mode "text") after a fallback."""
        return self._ask(lambda b: b.chat_structured(messages, schema), lambda b: b.chat(messages))

    def chat_stream(self, messages: list[Message]) -> Iterator[str]:
        """The LLM's reply in pieces; one piece from the rules after a fallback (also when the LLM fails before
        its first piece; a failure mid-reply is raised: the pieces already given cannot be taken back)."""
        if self.rules is None:
            try:
                pieces = self.llm.chat_stream(messages)
                first = next(pieces, None)
            except BrainError as exc:
                self._fall_back(exc)
            else:
                if first is not None:
                    yield first
                yield from pieces
                return
        yield self._ask(lambda b: b.chat(messages))


def select_brain(cfg: Config, rules_factory: Callable[[], Brain]) -> Brain:
    """The brain for this run ([llm] brain):

    - "rules": the deterministic rule-based brain from `rules_factory`, no probe;
    - "auto": the configured LLM backend when it answers with the model (a FallbackBrain: the rules take over if
      it fails later), else the rules with a warning;
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
        return FallbackBrain(llm, rules_factory) if cfg.llm.brain == "auto" else llm
    if cfg.llm.brain != "auto":
        start = f"; {llm.how_to_start()}" if reason.startswith("no ") else ""  # no server at all: say how to start one
        raise BrainUnavailableError(f'[llm] brain = "{cfg.llm.brain}" but {reason}{start} '
                                    f'(or set brain = "auto" to fall back to the rules)')  # fmt: skip
    brain = rules_factory()
    log.warning("%s: using the deterministic rule-based brain %s", reason, brain.name)
    return brain


def brain_for(cfg: Config, store=None) -> Brain:
    """The configured brain for agent cycles; `store` is accepted for symmetry."""
    return select_brain(cfg, RulesBrain)


__all__ = ["FallbackBrain", "backend_of", "brain_for", "llm_brain", "select_brain"]
