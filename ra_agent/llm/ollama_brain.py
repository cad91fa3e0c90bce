"""OllamaBrain: the LLM brain over the official `ollama` client, and the choice between it and the rules."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import ollama

from ra_agent.config import Config
from ra_agent.llm.base import Brain, BrainError, Message

log = logging.getLogger(__name__)

_CLIENT_ERRORS = (ollama.ResponseError, ConnectionError, httpx.HTTPError, ValueError)
_STATS = ("done_reason", "total_duration", "load_duration", "prompt_eval_count", "eval_count", "eval_duration")


def _model_key(name: str) -> str:
    """Ollama's canonical model name: a missing tag means ':latest'."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class OllamaBrain:
    """Chat with `cfg.llm.model` on the Ollama server at `cfg.llm.ollama_host` (whole replies, or streamed)."""

    def __init__(self, cfg: Config, client: ollama.Client | None = None):
        self.host = cfg.llm.ollama_host
        self.model = cfg.llm.model
        self.options = {"temperature": cfg.llm.temperature, "num_ctx": cfg.llm.num_ctx}
        self.probe_timeout_s = cfg.llm.probe_timeout_s
        self.name = f"ollama:{self.model}"
        self._client = client or ollama.Client(host=self.host, timeout=cfg.llm.timeout_s)
        self.last_stats: dict[str, Any] = {}  # timings, token counts and thinking text of the last reply

    def label(self) -> str:
        return f"{self.name} (LLM served by Ollama at {self.host})"

    def chat(self, messages: list[Message]) -> str:
        try:
            response = self._client.chat(model=self.model, messages=messages, options=self.options, stream=False)
        except _CLIENT_ERRORS as exc:
            raise BrainError(f"Ollama at {self.host} ({self.model}): {exc}") from exc
        self.last_stats = {key: getattr(response, key, None) for key in _STATS}
        self.last_stats["thinking"] = response.message.thinking
        return response.message.content or ""

    def chat_stream(self, messages: list[Message]) -> Iterator[str]:
        """The reply in pieces as Ollama generates it (stream=True); `ra ask` streams its final answer so."""
        try:
            for part in self._client.chat(model=self.model, messages=messages, options=self.options, stream=True):
                yield part.message.content or ""
        except _CLIENT_ERRORS as exc:
            raise BrainError(f"Ollama at {self.host} ({self.model}): {exc}") from exc

    def installed_models(self) -> list[str] | None:
        """Model names the server lists (GET /api/tags, short timeout); None when no server answers."""
        try:
            with ollama.Client(host=self.host, timeout=self.probe_timeout_s) as probe:
                listing = probe.list()
        except _CLIENT_ERRORS as exc:
            log.debug("Ollama probe at %s failed: %s", self.host, exc)
            return None
        return [m.model for m in listing.models if m.model]

    def has_model(self, models: list[str]) -> bool:
        return _model_key(self.model) in {_model_key(m) for m in models}

    def available(self) -> bool:
        """True when the server answers and has the configured model."""
        models = self.installed_models()
        return models is not None and self.has_model(models)


def select_brain(cfg: Config, rules_factory: Callable[[], Brain], client: ollama.Client | None = None) -> Brain:
    """The brain for this run: Ollama when [llm] brain is "ollama" or "auto" and the server has the model,
    otherwise the deterministic rule-based brain from `rules_factory` (the reason is logged)."""
    if cfg.llm.brain == "rules":
        brain = rules_factory()
        log.info('brain: %s ([llm] brain = "rules")', brain.label())
        return brain
    ollama_brain = OllamaBrain(cfg, client)
    models = ollama_brain.installed_models()
    if models is None:
        reason = f"no Ollama server at {cfg.llm.ollama_host}"
    elif not ollama_brain.has_model(models):
        reason = f"Ollama at {cfg.llm.ollama_host} has no model {cfg.llm.model!r} (run: ollama pull {cfg.llm.model})"
    else:
        log.info("brain: %s", ollama_brain.label())
        return ollama_brain
    brain = rules_factory()
    log.warning("%s: using the deterministic rule-based brain %s", reason, brain.name)
    return brain


__all__ = ["OllamaBrain", "select_brain"]
