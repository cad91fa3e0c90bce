"""OpenAIBrain: any OpenAI-compatible /v1/chat/completions server (Ollama /v1, llama.cpp server, vLLM, LM Studio)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx

from ra_agent.config import Config
from ra_agent.llm.base import BrainError, Message, ReplySchema
from ra_agent.llm.structured import finish_stats

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


# How a JSON schema travels in response_format: OpenAI's form (vLLM, llama.cpp's llama-server, LM Studio), then
# llama-cpp-python's server form ({"type": "json_object", "schema": ...}); that server refuses the first with a 500.
SCHEMA_FORMS = ("json_schema", "json_object+schema")


def response_format(form: str, schema: ReplySchema) -> dict[str, Any]:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema.name, "strict": True, "schema": schema.schema}}
    return {"type": "json_object", "schema": schema.schema}


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
        self._schema_forms: list[str] = list(SCHEMA_FORMS)  # response_format forms not refused yet, in order

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

    def chat_structured(self, messages: list[Message], schema: ReplySchema) -> str:
        """A reply constrained to `schema` (response_format with the JSON schema), streamed to time the first token.

        Each form of SCHEMA_FORMS is tried until one is accepted (a refusal, HTTP 400 or 422 or a 500 naming
        response_format, is remembered); when every form is refused the call goes out as plain text and
        `last_stats["mode"]` says "text_fallback"."""
        body = self._body(messages, True, False)
        body["stream_options"] = {"include_usage": True}
        while self._schema_forms:
            form = self._schema_forms[0]
            text, refused = self._stream_structured({**body, "response_format": response_format(form, schema)}, form)
            if refused is None:
                return text
            log.info(
                "%s refused response_format %s for %s (%s)",
                self.base_url,
                form,
                schema.name,
                " ".join(refused.split())[:200],
            )
            self._schema_forms.pop(0)
        return self._stream_structured(body, "text_fallback")[0]

    def _stream_structured(self, body: dict[str, Any], form: str) -> tuple[str, str | None]:
        """(the streamed reply, None) with its figures in self.last_stats, or ("", the server's refusal text)."""
        url = f"{self.base_url}/chat/completions"
        start, first, chunks, usage, finish = time.monotonic(), None, 0, {}, None
        pieces: list[str] = []
        try:
            with self._client.stream("POST", url, json=body) as response:
                if response.status_code in (400, 422, 500) and "response_format" in body:
                    response.read()
                    refusal = _error_text(response)  # llama-cpp-python answers its validation error with a 500
                    if response.status_code != 500 or "response_format" in refusal:
                        return "", refusal
                if response.status_code != 200:
                    response.read()
                    raise BrainError(f"OpenAI-compatible server at {self.base_url} ({self.model}): HTTP "
                                     f"{response.status_code}: {_error_text(response)}")  # fmt: skip
                for line in response.iter_lines():
                    data = line[5:].strip() if line.startswith("data:") else ""
                    if not data or data == "[DONE]":
                        continue
                    doc = json.loads(data)
                    usage = doc.get("usage") or usage
                    for choice in doc.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content") or ""
                        finish = choice.get("finish_reason") or finish
                        if text:
                            first = first or time.monotonic()
                            chunks += 1
                            pieces.append(text)
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BrainError(f"OpenAI-compatible server at {self.base_url} ({self.model}): {exc}") from exc
        mode = "text_fallback" if form == "text_fallback" else "json_schema"
        stats: dict[str, Any] = {"mode": mode, "response_format": None if mode == "text_fallback" else form,
                                 "done_reason": finish, "prompt_tokens": usage.get("prompt_tokens"),
                                 "completion_tokens": usage.get("completion_tokens") or chunks or None,
                                 "tokens_counted": "usage" if usage.get("completion_tokens") else "stream chunks"}  # fmt: skip
        self.last_stats = finish_stats(stats, start, first)
        return "".join(pieces), None

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
