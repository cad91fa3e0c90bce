"""Loopback Ollama server: /api/chat, /api/tags and /api/version in Ollama's wire format, with scripted replies.

The bodies follow Ollama's REST API (docs/api.md of ollama/ollama): a non-streaming chat answer is one
JSON object with model, created_at, message{role, content}, done, done_reason and the timing/token
counters; a streaming answer is NDJSON chunks ending in a `done: true` chunk carrying the counters;
an unknown model is a 404 `{"error": "model \"x\" not found, try pulling it first"}`; `schemas=False` answers
a JSON-schema `format` with the 400 of an Ollama before 0.5. Replies come
from a queue the test scripts; every chat request body is recorded in `chat_requests`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime

from .base import Reply, in_batches
from .chat import ScriptedChatServer

OLLAMA_VERSION = "0.12.6"
JSON_TYPE = "application/json; charset=utf-8"
NDJSON_TYPE = "application/x-ndjson"
NOT_FOUND_PAGE = b"404 page not found"  # Ollama's router answer for unknown paths


def _canonical(model: str) -> str:
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


def _json(status: int, doc: object) -> Reply:
    return Reply(status, json.dumps(doc).encode("utf-8"), JSON_TYPE)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class OllamaReplayServer(ScriptedChatServer):
    """Serves scripted assistant replies for the installed `models`; `script()` queues more."""

    def __init__(self, models: Iterable[str] = ("gemma3n:e4b",), replies: Iterable[str] = (), schemas: bool = True):
        super().__init__([_canonical(m) for m in models], replies)
        self.schemas = schemas  # False: refuse a JSON-schema `format` with a 400, as Ollama before 0.5 did

    @property
    def host(self) -> str:
        return self.root_url

    def respond(self, method: str, path: str, params: dict[str, list[str]]) -> Reply:
        if method == "GET" and path == "/api/version":
            return _json(200, {"version": OLLAMA_VERSION})
        if method == "GET" and path == "/api/tags":
            return _json(200, {"models": [self._tag(m) for m in self.models]})
        if method == "POST" and path == "/api/chat":
            return self._chat(json.loads(self._body.raw or b"{}"))
        return Reply(404, NOT_FOUND_PAGE, "text/plain")

    def _chat(self, body: dict) -> Reply:
        with self._lock:
            self.chat_requests.append(body)
            model = body.get("model", "")
            if _canonical(model) not in self.models:
                return _json(404, {"error": f'model "{model}" not found, try pulling it first'})
            if isinstance(body.get("format"), dict) and not self.schemas:
                return _json(400, {"error": "json: cannot unmarshal object into Go struct field ChatRequest.format "
                                            "of type string"})  # fmt: skip
            if not self._replies:
                return _json(500, {"error": "replay server: no scripted reply left"})
            content = self._replies.popleft()
        prompt_chars = sum(len(m.get("content", "")) for m in body.get("messages", []))
        counters = {
            "done_reason": "stop",
            "total_duration": 1_500_000_000 + 2_000_000 * len(content),
            "load_duration": 61_000_000,
            "prompt_eval_count": max(1, prompt_chars // 4),
            "prompt_eval_duration": 250_000 * max(1, prompt_chars // 4),
            "eval_count": max(1, len(content) // 4),
            "eval_duration": 2_000_000 * len(content),
        }
        head = {"model": model, "created_at": _now()}
        if body.get("stream", True) is False:
            doc = {**head, "message": {"role": "assistant", "content": content}, "done": True, **counters}
            return _json(200, doc)
        pieces = (content[i : i + 64] for i in range(0, len(content), 64))
        chunks = [({**head, "message": {"role": "assistant", "content": p}, "done": False} for p in pieces),
                  [{**head, "message": {"role": "assistant", "content": ""}, "done": True, **counters}]]  # fmt: skip
        lines = (json.dumps(c).encode() + b"\n" for part in chunks for c in part)  # made as they are sent
        return Reply(200, b"", NDJSON_TYPE, stream=in_batches(lines))

    @staticmethod
    def _tag(model: str) -> dict:
        family = model.split(":")[0].split("/")[-1]
        return {
            "name": model,
            "model": model,
            "modified_at": "2025-07-01T09:30:12.482164Z",
            "size": 7_547_589_116,
            "digest": hashlib.sha256(model.encode()).hexdigest(),
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": family,
                "families": [family],
                "parameter_size": "6.9B",
                "quantization_level": "Q4_K_M",
            },
        }


__all__ = ["OLLAMA_VERSION", "OllamaReplayServer"]
