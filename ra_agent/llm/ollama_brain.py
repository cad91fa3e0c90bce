"""OllamaBrain: the LLM brain over the official `ollama` client (native /api/chat)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import ollama

from ra_agent.config import Config
from ra_agent.llm.base import BrainError, BrainReplyError, Message, ReplySchema, one_line
from ra_agent.llm.structured import finish_stats

log = logging.getLogger(__name__)

_CLIENT_ERRORS = (ollama.ResponseError, ConnectionError, httpx.HTTPError, ValueError)
_STATS = ("done_reason", "total_duration", "load_duration", "prompt_eval_count", "eval_count", "eval_duration")


def _model_key(name: str) -> str:
    """Ollama's canonical model name: a missing tag means ':latest'."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def llm_options(cfg: Config) -> dict[str, Any]:
    """Sampling options from [llm]: temperature, num_ctx and the seed when one is set (seed = -1: none)."""
    options: dict[str, Any] = {"temperature": cfg.llm.temperature, "num_ctx": cfg.llm.num_ctx}
    if cfg.llm.seed >= 0:
        options["seed"] = cfg.llm.seed
    return options


class OllamaBrain:
    """Chat with `cfg.llm.model` on the Ollama server at `cfg.llm.ollama_host` (whole replies, or streamed)."""

    def __init__(self, cfg: Config, client: ollama.Client | None = None):
        self.host = cfg.llm.ollama_host
        self.model = cfg.llm.model
        self.options = llm_options(cfg)
        self.keep_alive = cfg.llm.keep_alive or None
        self.json_mode = cfg.llm.json_mode
        self.probe_timeout_s = cfg.llm.probe_timeout_s
        self.name = f"ollama:{self.model}"
        self._client = client or ollama.Client(host=self.host, timeout=cfg.llm.timeout_s)
        self.last_stats: dict[str, Any] = {}  # timings, token counts and thinking text of the last reply
        self._schema_refused = False  # the server refused a JSON-schema `format` once: send plain text since

    def label(self) -> str:
        return f"{self.name} (LLM served by Ollama at {self.host})"

    def _failure(self, exc: Exception) -> BrainError:
        """A BrainError naming the server and model; a reply that does not parse (not JSON, not a chat response:
        the client raises ValueError) is a BrainReplyError, as on the OpenAI-compatible backend."""
        where = f"Ollama at {self.host} ({self.model})"
        if isinstance(exc, ValueError):
            return BrainReplyError(f"{where}: HTTP 200 but the body is not an Ollama chat reply ({one_line(exc)})")
        return BrainError(f"{where}: {one_line(exc)}")

    def how_to_start(self) -> str:
        return f"start it with: ollama serve; ollama pull {self.model}"

    def chat(self, messages: list[Message], *, json_mode: bool = False) -> str:
        fmt = "json" if json_mode and self.json_mode else None
        try:
            response = self._client.chat(model=self.model, messages=messages, options=self.options, stream=False,
                                         format=fmt, keep_alive=self.keep_alive)  # fmt: skip
        except _CLIENT_ERRORS as exc:
            raise self._failure(exc) from exc
        self.last_stats = {key: getattr(response, key, None) for key in _STATS}
        self.last_stats["thinking"] = response.message.thinking
        return response.message.content or ""

    def chat_json(self, messages: list[Message]) -> str:
        """A reply that must be bare JSON (repair turns): Ollama's `format: "json"` when [llm] json_mode."""
        return self.chat(messages, json_mode=True)

    def chat_structured(self, messages: list[Message], schema: ReplySchema) -> str:
        """A reply constrained to `schema` (Ollama's `format` = the JSON schema), streamed to time the first token.

        A server that refuses the schema (HTTP 4xx: an Ollama before 0.5) is asked again without it and
        `last_stats["mode"]` says "text_fallback"; the caller's text protocol and repair turn apply then."""
        mode = "text_fallback" if self._schema_refused else "json_schema"
        try:
            return self._stream_structured(messages, None if self._schema_refused else schema.schema, mode)
        except BrainError as exc:
            cause = exc.__cause__
            if (
                mode != "json_schema"
                or not isinstance(cause, ollama.ResponseError)
                or cause.status_code not in (400, 422)
            ):
                raise
            log.info("Ollama at %s refused the %s JSON schema (%s); asking in the text protocol", self.host,
                     schema.name, cause.error)  # fmt: skip
            self._schema_refused = True
            return self._stream_structured(messages, None, "text_fallback")

    def _stream_structured(self, messages: list[Message], fmt: dict[str, Any] | None, mode: str) -> str:
        start, first, pieces, last = time.monotonic(), None, [], None
        try:
            for part in self._client.chat(model=self.model, messages=messages, options=self.options, stream=True,
                                          format=fmt, keep_alive=self.keep_alive):  # fmt: skip
                text = part.message.content or ""
                if text and first is None:
                    first = time.monotonic()
                pieces.append(text)
                last = part
        except _CLIENT_ERRORS as exc:
            raise self._failure(exc) from exc
        stats: dict[str, Any] = {key: getattr(last, key, None) for key in _STATS}
        stats.update(mode=mode, prompt_tokens=stats.get("prompt_eval_count"), completion_tokens=stats.get("eval_count"))
        self.last_stats = finish_stats(stats, start, first)
        return "".join(pieces)

    def chat_stream(self, messages: list[Message]) -> Iterator[str]:
        """The reply in pieces as Ollama generates it (stream=True); `ra ask` streams its final answer so."""
        try:
            for part in self._client.chat(model=self.model, messages=messages, options=self.options, stream=True,
                                          keep_alive=self.keep_alive):  # fmt: skip
                yield part.message.content or ""
        except _CLIENT_ERRORS as exc:
            raise self._failure(exc) from exc

    def installed_models(self) -> list[str] | None:
        """Model names the server lists (GET /api/tags, short timeout); None when it lists none (see model_listing)."""
        listing = self.model_listing()
        return listing if isinstance(listing, list) else None

    def model_listing(self) -> list[str] | str:
        """The model names the server lists (GET /api/tags, short timeout), or why there are none: no server answers,
        or it answered with an HTTP error or a body that is not a model list."""
        try:
            with ollama.Client(host=self.host, timeout=self.probe_timeout_s) as probe:
                listing = probe.list()
        except ollama.ResponseError as exc:
            return f"Ollama at {self.host} answered GET /api/tags with HTTP {exc.status_code}: {one_line(exc.error)}"
        except ValueError as exc:
            return f"Ollama at {self.host} answered GET /api/tags with no model list ({one_line(exc)})"
        except _CLIENT_ERRORS as exc:
            log.debug("Ollama probe at %s failed: %s", self.host, exc)
            return f"no Ollama server answers at {self.host}"
        return [m.model for m in listing.models if m.model]

    def has_model(self, models: list[str]) -> bool:
        return _model_key(self.model) in {_model_key(m) for m in models}

    def unavailable_reason(self) -> str | None:
        """Why this brain cannot answer now (no server, no model), else None."""
        models = self.model_listing()
        if isinstance(models, str):
            return models
        if not self.has_model(models):
            return f"Ollama at {self.host} has no model {self.model!r} (run: ollama pull {self.model})"
        return None

    def available(self) -> bool:
        """True when the server answers and has the configured model."""
        return self.unavailable_reason() is None


__all__ = ["OllamaBrain", "llm_options"]
