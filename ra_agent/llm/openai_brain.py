"""OpenAIBrain: any OpenAI-compatible /v1/chat/completions server (Ollama /v1, llama.cpp server, vLLM, LM Studio)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from ra_agent.config import Config
from ra_agent.llm.base import BrainError, BrainReplyError, Message, ReplySchema, ServerDiedError, one_line
from ra_agent.llm.server_state import died
from ra_agent.llm.structured import finish_stats

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 8 << 20  # a whole chat completion (reply_tokens of text and its JSON): far below this
MAX_EVENT_BYTES = 1 << 20  # one server-sent event line (a chunk of a few tokens)
SSE_FIELDS = ("data:", "event:", "id:", "retry:", ":")  # the lines of a server-sent event stream


class StreamCutError(BrainReplyError):
    """The reply stream ended before `data: [DONE]`: the connection closed mid-reply."""


def _error_text(response: httpx.Response) -> str:
    """The server's error message: OpenAI's {"error": {"message": ...}}, llama.cpp's and vLLM's variants, or the body."""
    try:
        doc = response.json()
    except ValueError:
        return one_line(response.text)
    error = doc.get("error", doc) if isinstance(doc, dict) else doc
    if isinstance(error, dict):
        return one_line(error.get("message") or error)
    return one_line(error)


def _read_capped(response: httpx.Response, what: str = "a chat completion", cap: int = MAX_REPLY_BYTES) -> bytes:
    """The body of a streamed response, or BrainReplyError past `cap` bytes (read no further)."""
    body = bytearray()
    for piece in response.iter_bytes():
        body += piece
        if len(body) > cap:
            raise BrainReplyError(f"HTTP 200 with a body of more than {cap >> 20} MB ({_begins(body)}): not {what}")
    return bytes(body)


def _begins(body: bytes | bytearray | str) -> str:
    """How a body begins, for a message: its first 60 characters on one line."""
    text = body[:240].decode("utf-8", errors="replace") if isinstance(body, bytes | bytearray) else body[:240]
    flat = " ".join(text.split())
    return f"it begins {flat[:60]!r}" + ("..." if len(flat) > 60 else "")


def completion_content(body: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the completion, its first choice) of a chat.completion body; BrainReplyError when the body is not one."""
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise BrainReplyError(f"HTTP 200 but the body is not JSON ({exc}; {_begins(body)})") from None
    choices = doc.get("choices") if isinstance(doc, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content") or "", str):
        raise BrainReplyError(f"HTTP 200 but the body is not a chat completion (no choices[0].message.content; "
                              f"{_begins(body)})")  # fmt: skip
    assert isinstance(doc, dict) and isinstance(choice, dict)
    return doc, choice


def _lines(response: httpx.Response) -> Iterator[str]:
    """The lines of a streamed body, or BrainReplyError at a line longer than MAX_EVENT_BYTES."""
    pending = bytearray()
    for piece in response.iter_bytes():
        pending += piece
        *whole, rest = pending.split(b"\n")
        for line in whole:
            yield line.decode("utf-8", errors="replace").rstrip("\r")
        pending = bytearray(rest)
        if len(pending) > MAX_EVENT_BYTES:
            raise BrainReplyError(f"HTTP 200 with a line of more than {MAX_EVENT_BYTES >> 20} MB ({_begins(pending)}): "
                                  "not server-sent chat events")  # fmt: skip
    if pending.strip():
        yield pending.decode("utf-8", errors="replace").rstrip("\r")


def stream_chunks(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed reply (server-sent events, `data: {...}` lines to
    `data: [DONE]`). A server that ignored `stream` and sent one JSON completion gives it as one chunk. Anything
    else (a line that is not an event, data that is not a chunk, a stream without a chunk or cut short before
    `data: [DONE]`) is BrainReplyError."""
    content_type = response.headers.get("content-type", "")
    if "json" in content_type and "event-stream" not in content_type:
        doc, choice = completion_content(_read_capped(response))
        yield {**doc, "choices": [{**choice, "delta": choice["message"]}]}
        return
    chunks, done = 0, False
    for line in _lines(response):
        if not line.strip():
            continue
        if not line.startswith(SSE_FIELDS):
            raise BrainReplyError(f"HTTP 200 but the body is not server-sent chat events ({_begins(line)})")
        data = line[5:].strip() if line.startswith("data:") else None
        if data is None:
            continue
        if data == "[DONE]":
            done = True
            break
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise BrainReplyError(f"HTTP 200 but an event's data is not JSON ({exc}; {_begins(data)})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("choices", []), list):
            raise BrainReplyError(f"HTTP 200 but an event is not a chat completion chunk ({_begins(data)})")
        chunks += 1
        yield doc
    if not chunks:
        raise BrainReplyError("HTTP 200 but the stream held no chat completion chunk")
    if not done:  # the connection closed mid-reply: what came is part of a reply, never a whole one
        raise StreamCutError(f"HTTP 200 but the stream ended after {chunks} chunks without `data: [DONE]` (cut short)")


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
        self.data_dir = cfg.data_dir  # where `ra llm serve` keeps its state file (serve.died)
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

    @property
    def _where(self) -> str:
        return f"OpenAI-compatible server at {self.base_url} ({self.model})"

    def _failure(self, exc: BaseException | str) -> BrainError:
        """A BrainError naming the server and model (the server's text on one short line); a ServerDiedError when the
        server `ra llm serve` started there has died."""
        # a connection that failed or closed mid-reply: the server may be dying (its process still exiting)
        dying = isinstance(exc, httpx.TransportError | StreamCutError)
        if why := self._died(grace_s=1.0 if dying else 0.0):  # whatever the symptom, the cause is its death
            return ServerDiedError(f"{self._where}: {one_line(exc, 120)}: {why}")
        error = BrainReplyError if isinstance(exc, BrainReplyError) else BrainError
        return error(f"{self._where}: {one_line(exc)}")

    def _died(self, grace_s: float = 0.0) -> str | None:
        return died(self.data_dir, self.base_url, grace_s=grace_s)

    @contextmanager
    def _stream(self, body: dict[str, Any]) -> Iterator[httpx.Response]:
        """POST /chat/completions with the reply body still to read: a transport failure, and a body that is not the
        protocol's (BrainReplyError from the readers inside the block), become BrainErrors naming the server."""
        try:
            with self._client.stream("POST", f"{self.base_url}/chat/completions", json=body) as response:
                yield response
        except BrainError as exc:
            if str(exc).startswith(self._where):
                raise
            raise self._failure(exc) from exc
        except httpx.HTTPError as exc:
            raise self._failure(exc) from exc

    def _refused(self, response: httpx.Response) -> BrainError:
        response.read()
        return self._failure(f"HTTP {response.status_code}: {_error_text(response)}")

    def chat(self, messages: list[Message], *, json_mode: bool = False) -> str:
        body = self._body(messages, False, json_mode)
        with self._stream(body) as response:
            if not (response.status_code == 400 and "response_format" in body):
                if response.status_code != 200:
                    raise self._refused(response)
                doc, choice = completion_content(_read_capped(response))
                message = choice["message"]
                self.last_stats = {"done_reason": choice.get("finish_reason"), **(doc.get("usage") or {}),
                                   "thinking": message.get("reasoning_content") or message.get("reasoning")}  # fmt: skip
                return message.get("content") or ""
            response.read()  # a server without JSON mode: ask again without it, and never send it again
            log.info("%s refused response_format (%s); asking without it", self.base_url, _error_text(response))
            self._json_refused = True
        return self.chat(messages, json_mode=json_mode)  # _body leaves response_format out from now on

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
        start, first, chunks, usage, finish = time.monotonic(), None, 0, {}, None
        pieces: list[str] = []
        with self._stream(body) as response:
            if response.status_code in (400, 422, 500) and "response_format" in body:
                response.read()
                refusal = _error_text(response)  # llama-cpp-python answers its validation error with a 500
                if response.status_code != 500 or "response_format" in refusal:
                    return "", refusal
            if response.status_code != 200:
                raise self._refused(response)
            for doc in stream_chunks(response):
                usage = doc.get("usage") or usage
                for choice in doc["choices"]:
                    text = ((choice.get("delta") or {}) if isinstance(choice, dict) else {}).get("content") or ""
                    finish = (choice.get("finish_reason") if isinstance(choice, dict) else None) or finish
                    if text:
                        first = first or time.monotonic()
                        chunks += 1
                        pieces.append(str(text))
        mode = "text_fallback" if form == "text_fallback" else "json_schema"
        stats: dict[str, Any] = {"mode": mode, "response_format": None if mode == "text_fallback" else form,
                                 "done_reason": finish, "prompt_tokens": usage.get("prompt_tokens"),
                                 "completion_tokens": usage.get("completion_tokens") or chunks or None,
                                 "tokens_counted": "usage" if usage.get("completion_tokens") else "stream chunks"}  # fmt: skip
        self.last_stats = finish_stats(stats, start, first)
        return "".join(pieces), None

    def chat_stream(self, messages: list[Message]) -> Iterator[str]:
        """The reply in pieces (server-sent events, `data: {...}` lines ending with `data: [DONE]`)."""
        with self._stream(self._body(messages, True, False)) as response:
            if response.status_code != 200:
                raise self._refused(response)
            for doc in stream_chunks(response):
                for choice in doc["choices"]:
                    delta = (choice.get("delta") or {}) if isinstance(choice, dict) else {}
                    yield str(delta.get("content") or "")

    def installed_models(self) -> list[str] | None:
        """Model ids the server lists (GET /models, short timeout); None when it lists none (see model_listing)."""
        listing = self.model_listing()
        return listing if isinstance(listing, list) else None

    def model_listing(self) -> list[str] | str:
        """The model ids the server lists (GET /models, short timeout), or why there are none: no server answers,
        it answered with an HTTP error (named as such: a 500 is a server fault, not an absent server), or its body
        is not a model list."""
        url = f"{self.base_url}/models"
        try:
            with self._client.stream("GET", url, timeout=self.probe_timeout_s) as response:
                if response.status_code != 200:
                    response.read()
                    return f"the server at {self.base_url} answered GET /models with HTTP {response.status_code}: " + (
                        _error_text(response)
                    )
                body = _read_capped(response, "a model list")
        except httpx.HTTPError as exc:
            log.debug("probe of %s failed: %s", url, exc)
            return self._died() or f"no OpenAI-compatible server answers at {self.base_url}"
        except BrainReplyError as exc:
            return f"the server at {self.base_url} answered GET /models {one_line(exc).removeprefix('HTTP 200 ')}"
        try:
            data = json.loads(body).get("data")
            return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
        except (ValueError, TypeError, AttributeError):
            return f"the server at {self.base_url} answered GET /models with no model list ({_begins(body)})"

    def unavailable_reason(self) -> str | None:
        """Why this brain cannot answer now, else None: no model list (model_listing), or no `[llm] model` in it."""
        listing = self.model_listing()
        if isinstance(listing, str):
            return listing
        if self.model in listing:
            return None
        shown = ", ".join(repr(one_line(m, 80)) for m in listing[:10]) + (" ..." if len(listing) > 10 else "")
        return (f"the server at {self.base_url} does not list model {self.model!r} (it lists: {shown or 'none'}); "
                "set [llm] model to one of them")  # fmt: skip

    def available(self) -> bool:
        return self.unavailable_reason() is None


__all__ = ["OpenAIBrain"]
