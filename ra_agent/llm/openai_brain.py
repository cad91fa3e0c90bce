"""OpenAIBrain: any OpenAI-compatible /v1/chat/completions server (Ollama /v1, llama.cpp server, vLLM, LM Studio)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import httpx

from ra_agent.config import Config
from ra_agent.llm.base import BrainError, Message

log = logging.getLogger(__name__)


def _error_text(response: httpx.Response) -> str:
    """The server's error message: OpenAI's {"error": {"message": ...}}, llama.cpp's and vLLM's variants, or the body."""
    try:
        doc = response.json()
    except ValueError:
        return response.text[:300]
    error = doc.get("error", doc) if isinstance(doc, dict) else doc
    if isinstance(error, dict):
        return str(error.get("message") or error)[:300]
    return str(error)[:300]


class OpenAIBrain:
    """Chat with `cfg.llm.model` at `cfg.llm.openai_base_url` over the OpenAI chat-completions protocol."""

    def __init__(self, cfg: Config, transport: httpx.BaseTransport | None = None):
        self.base_url = cfg.llm.openai_base_url.rstrip("/")
        self.model = cfg.llm.model
        self.temperature = cfg.llm.temperature
        self.seed = cfg.llm.seed if cfg.llm.seed >= 0 else None
        self.json_mode = cfg.llm.json_mode
        self.max_tokens = cfg.llm.reply_tokens
        self.timeout_s = cfg.llm.timeout_s
        self.probe_timeout_s = cfg.llm.probe_timeout_s
        self.name = f"openai:{self.model}"
        key = os.environ.get(cfg.llm.openai_api_key_env, "") if cfg.llm.openai_api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=self.timeout_s, headers=headers, transport=transport)
        self._json_refused = False  # the server answered 400 to response_format once: do not send it again
        self.last_stats: dict[str, Any] = {}

    def label(self) -> str:
        return f"{self.name} (LLM served by an OpenAI-compatible server at {self.base_url})"

    def how_to_start(self) -> str:
        return (f"start an OpenAI-compatible server there, e.g. llama-server -m <model.gguf> --port 8080, "
                f"or ollama serve; ollama pull {self.model} with openai_base_url = \"http://127.0.0.1:11434/v1\"")  # fmt: skip

    def _body(self, messages: list[Message], stream: bool, json_mode: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.max_tokens, "stream": stream}  # fmt: skip
        if self.seed is not None:
            body["seed"] = self.seed
        if json_mode and self.json_mode and not self._json_refused:
            body["response_format"] = {"type": "json_object"}
        return body

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        url = f"{self.base_url}/chat/completions"
        try:
            response = self._client.post(url, json=body)
            if response.status_code == 400 and "response_format" in body:  # a server without JSON mode
                log.info("%s refused response_format (%s); asking without it", url, _error_text(response))
                self._json_refused = True
                response = self._client.post(url, json={k: v for k, v in body.items() if k != "response_format"})
        except httpx.HTTPError as exc:
            raise BrainError(f"OpenAI-compatible server at {self.base_url} ({self.model}): {exc}") from exc
        if response.status_code != 200:
            raise BrainError(f"OpenAI-compatible server at {self.base_url} ({self.model}): HTTP "
                             f"{response.status_code}: {_error_text(response)}")  # fmt: skip
        return response

    def chat(self, messages: list[Message], *, json_mode: bool = False) -> str:
        response = self._post(self._body(messages, False, json_mode))
        try:
            doc = response.json()
            choice = doc["choices"][0]
            content = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BrainError(f"OpenAI-compatible server at {self.base_url}: malformed answer ({exc})") from exc
        message = choice["message"]
        self.last_stats = {"done_reason": choice.get("finish_reason"), **(doc.get("usage") or {}),
                           "thinking": message.get("reasoning_content") or message.get("reasoning")}  # fmt: skip
        return content

    def chat_json(self, messages: list[Message]) -> str:
        """A reply that must be bare JSON (repair turns): response_format json_object when [llm] json_mode."""
        return self.chat(messages, json_mode=True)

    def chat_stream(self, messages: list[Message]) -> Iterator[str]:
        """The reply in pieces (server-sent events, `data: {...}` lines ending with `data: [DONE]`)."""
        url = f"{self.base_url}/chat/completions"
        try:
            with self._client.stream("POST", url, json=self._body(messages, True, False)) as response:
                if response.status_code != 200:
                    response.read()
                    raise BrainError(f"OpenAI-compatible server at {self.base_url}: HTTP {response.status_code}: "
                                     f"{_error_text(response)}")  # fmt: skip
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    delta = json.loads(data)["choices"][0].get("delta") or {}
                    yield delta.get("content") or ""
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
            raise BrainError(f"OpenAI-compatible server at {self.base_url} ({self.model}): {exc}") from exc

    def installed_models(self) -> list[str] | None:
        """Model ids the server lists (GET /models, short timeout); None when no server answers."""
        try:
            response = self._client.get(f"{self.base_url}/models", timeout=self.probe_timeout_s)
            response.raise_for_status()
            return [m["id"] for m in response.json().get("data", []) if m.get("id")]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.debug("probe of %s/models failed: %s", self.base_url, exc)
            return None

    def unavailable_reason(self) -> str | None:
        """Why this brain cannot answer now, else None. A single-model server (llama.cpp) serves whatever it
        loaded under any name, so one listed model is accepted with a note."""
        models = self.installed_models()
        if models is None:
            return f"no OpenAI-compatible server answers at {self.base_url}"
        if self.model in models:
            return None
        if len(models) == 1:
            log.info("%s serves one model (%s); using it for %r", self.base_url, models[0], self.model)
            return None
        return (
            f"the server at {self.base_url} has no model {self.model!r} (it lists: {', '.join(models[:10]) or 'none'})"
        )

    def available(self) -> bool:
        return self.unavailable_reason() is None


__all__ = ["OpenAIBrain"]
