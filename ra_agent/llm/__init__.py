"""LLM brains (Ollama, rules) and the Action protocol every reply follows."""

from ra_agent.llm.select import brain_for, llm_brain

__all__ = ["brain_for", "llm_brain"]
