"""ra ask (seed 001): the bounded question-answering flow over the local corpus, its CLI glue, and Mind-KB playbooks."""

from ra_agent.ask.mindkb import open_playbook_store

__all__ = ["open_playbook_store"]
