"""The brain interface: whatever turns chat messages into a reply, an LLM or the deterministic rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ra_agent.config import ConfigError

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}


class BrainError(RuntimeError):
    """The brain could not answer (server unreachable, timeout, model missing, HTTP error)."""


class BrainReplyError(BrainError):
    """The server answered (HTTP 200) with a body that is not its protocol's reply: not JSON, not a chat completion,
    far too large. An error of that backend like an unreachable server, never an empty answer."""


class ServerDiedError(BrainError):
    """The LLM server `ra llm serve` started has died (its process is gone): the message says so, with the end of
    its log. Not worth another try: a goal stops on it with that reason."""


SERVER_TEXT_CHARS = 300  # a server's text (error body, model id, reply excerpt) in a message or a log line


def one_line(text: object, limit: int = SERVER_TEXT_CHARS) -> str:
    """A server's text as one short line: whitespace collapsed, cut to `limit` characters (with the size cut)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else f"{flat[:limit]}... ({len(flat):,} characters)"


class BrainUnavailableError(BrainError, ConfigError):
    """An explicitly configured LLM brain does not answer; the message says how to start it.

    A ConfigError too, so `ra` prints it as one line (the setting is the user's to fix).
    """


@dataclass(frozen=True)
class ReplySchema:
    """The JSON schema a structured reply must follow, named for logs ("agent_action", "cluster_audit", ...).

    Any structured call (the cycle's Action, an audit, a judge, PICO, a review-question judgement) names its
    schema so; brains that can constrain decoding send it (Ollama `format`, OpenAI `response_format`).
    """

    name: str
    schema: dict[str, Any]


@runtime_checkable
class Brain(Protocol):
    """A planner the cycle can ask; `name` (e.g. "ollama:gemma3n:e4b") goes into every log and history entry."""

    name: str

    def chat(self, messages: list[Message]) -> str:
        """The reply text to a conversation (non-streaming); raises BrainError when no answer comes."""
        ...

    def label(self) -> str:
        """A human-readable description for logs and reports (says plainly whether an LLM is used)."""
        ...


__all__ = [
    "Brain",
    "BrainError",
    "BrainReplyError",
    "BrainUnavailableError",
    "Message",
    "ReplySchema",
    "ServerDiedError",
    "one_line",
]
