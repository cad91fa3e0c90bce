"""Shared plumbing of the loopback chat servers (Ollama, OpenAI-compatible): scripted replies, raw JSON bodies."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Self

from .base import ReplayServer


class ScriptedChatServer(ReplayServer):
    """Serves scripted assistant replies in order (`script()` queues more) and records every chat request."""

    def __init__(self, models: Iterable[str], replies: Iterable[str] = ()):
        super().__init__()
        self.models = list(models)
        self._replies: deque[str] = deque(replies)
        self.chat_requests: list[dict] = []
        self._body = threading.local()

    def __enter__(self) -> Self:
        self.start()
        return self

    def script(self, *replies: str) -> None:
        """Queue assistant replies, served one per chat request in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def unused_replies(self) -> int:
        with self._lock:
            return len(self._replies)

    def _dispatch(self, handler, method: str) -> None:
        # the base class reads POST bodies as forms: keep the JSON body for respond() and let it read none
        length = int(handler.headers.get("Content-Length") or 0)
        self._body.raw = handler.rfile.read(length) if length else b""
        del handler.headers["Content-Length"]
        super()._dispatch(handler, method)
