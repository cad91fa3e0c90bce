"""Loopback OpenAI-compatible server: /v1/models and /v1/chat/completions in the OpenAI wire format, scripted replies.

The bodies follow the OpenAI chat-completions API as llama.cpp's server, vLLM, LM Studio and Ollama's /v1
serve it: a non-streaming answer is a `chat.completion` object with choices[0].message and usage; a
streaming answer is server-sent events (`data: {chat.completion.chunk}` lines, then `data: [DONE]`);
errors are `{"error": {"message", "type", "code"}}`. `json_mode=False` makes the server refuse
`response_format` with a 400, as servers without JSON mode do; `llama_cpp_python=True` answers OpenAI's
`{"type": "json_schema"}` form with the 500 llama-cpp-python's server sends (its message as that server wrote it,
0.3.36, recorded from its log) and takes `{"type": "json_object", "schema": ...}`; like that server it sends no usage
in a stream (others send it last when `stream_options.include_usage` asks). Every chat request body is recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator

from .base import Reply, in_batches
from .chat import ScriptedChatServer

JSON_TYPE = "application/json"
# llama-cpp-python 0.3.36's answer to response_format {"type": "json_schema"}: HTTP 500, str() of the validation error
LLAMA_CPP_PYTHON_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input "
    "should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n"
)
SSE_TYPE = "text/event-stream"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    doc = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(status, json.dumps(doc).encode(), JSON_TYPE)


class OpenAIReplayServer(ScriptedChatServer):
    """Serves scripted assistant replies for `models` under /v1; `script()` queues more."""

    def __init__(self, models: Iterable[str] = ("gemma3n:e4b",), replies: Iterable[str] = (), json_mode: bool = True,
                 llama_cpp_python: bool = False):  # fmt: skip
        super().__init__(models, replies)
        self.json_mode = json_mode
        self.llama_cpp_python = llama_cpp_python

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def respond(self, method: str, path: str, params: dict[str, list[str]]) -> Reply:
        if method == "GET" and path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 1751362212, "owned_by": "library"} for m in self.models]
            return Reply(200, json.dumps({"object": "list", "data": data}).encode(), JSON_TYPE)
        if method == "POST" and path == "/v1/chat/completions":
            return self._chat(json.loads(self._body.raw or b"{}"))
        return _error(404, f"Unexpected endpoint or method. ({method} {path})")

    def _chat(self, body: dict) -> Reply:
        with self._lock:
            self.chat_requests.append(body)
            model = body.get("model", "")
            if model not in self.models:
                return _error(404, f"model '{model}' not found", "not_found_error")
            if "response_format" in body and not self.json_mode:
                return _error(400, "response_format is not supported by this server")
            if self.llama_cpp_python and (body.get("response_format") or {}).get("type") == "json_schema":
                return _error(500, LLAMA_CPP_PYTHON_REFUSAL, "internal_server_error")
            if not self._replies:
                return _error(500, "replay server: no scripted reply left", "server_error")
            content = self._replies.popleft()
        created = int(time.time())
        prompt_chars = sum(len(m.get("content", "")) for m in body.get("messages", []))
        usage = {"prompt_tokens": max(1, prompt_chars // 4), "completion_tokens": max(1, len(content) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        head = {"id": f"chatcmpl-{created}", "created": created, "model": model, "system_fingerprint": "b6123-replay"}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            doc = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            return Reply(200, json.dumps(doc).encode(), JSON_TYPE)
        with_usage = (body.get("stream_options") or {}).get("include_usage") and not self.llama_cpp_python
        return Reply(200, b"", SSE_TYPE, stream=in_batches(self._events(head, content, usage if with_usage else None)))

    @staticmethod
    def _events(head: dict, content: str, usage: dict | None) -> Iterator[bytes]:
        """The reply as server-sent events made one at a time (a 5 MB reply's first bytes leave at once, as a real
        server's first tokens do): 48 characters a chunk, the stop chunk, OpenAI's usage chunk when asked for, [DONE]."""

        def event(doc: dict) -> bytes:
            return b"data: " + json.dumps({**head, "object": "chat.completion.chunk", **doc}).encode() + b"\n\n"

        for i in range(0, len(content), 48):
            delta = {"content": content[i : i + 48]}
            yield event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        yield event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if usage is not None:
            yield event({"choices": [], "usage": usage})  # OpenAI's form
        yield b"data: [DONE]\n\n"


__all__ = ["OpenAIReplayServer"]
