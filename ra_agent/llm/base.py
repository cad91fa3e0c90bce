"""The brain interface: whatever turns chat messages into a reply, an LLM or the deterministic rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ra_agent.config import ConfigError

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}


class BrainError(RuntimeError):
    """The brain could not answer (server unreachable, timeout, model missing, HTTP error)."""


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


__all__ = ["Brain", "BrainError", "BrainUnavailableError", "Message", "ReplySchema"]
