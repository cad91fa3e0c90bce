"""LLM brains (Ollama, rules) and the Action protocol every reply follows."""

from ra_agent.llm.select import brain_for

__all__ = ["brain_for"]
