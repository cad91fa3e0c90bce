"""Evidence: PICO extraction (LLM and rules), study design, SR search and overlap, PRISMA check, dossiers and SR drafts."""

from ra_agent.evidence.pico.extract import PicoFileError, read_pico

__all__ = ["PicoFileError", "read_pico"]
