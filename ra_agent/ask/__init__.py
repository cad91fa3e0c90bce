"""ra ask (seed 001): the bounded question-answering flow over the local corpus, its CLI glue, and Mind-KB playbooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loads on first use: `ra` builds its parser (and refuses bad input) without the LLM clients
    from ra_agent.ask.mindkb import open_playbook_store

__all__ = ["open_playbook_store"]


def __getattr__(name: str) -> Any:
    if name == "open_playbook_store":
        from ra_agent.ask.mindkb import open_playbook_store

        return open_playbook_store
    raise AttributeError(f"module 'ra_agent.ask' has no attribute {name!r}")
