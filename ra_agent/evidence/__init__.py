"""Evidence: PICO extraction (LLM and rules), study design, SR search and overlap, PRISMA check, dossiers and SR drafts."""

from ra_agent.evidence.pico.design import publication_kinds
from ra_agent.evidence.pico.extract import PicoFileError, read_pico

__all__ = ["PicoFileError", "publication_kinds", "read_pico"]
