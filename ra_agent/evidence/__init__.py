"""Evidence: PICO extraction, study design, SR search and overlap, PRISMA check, dossiers, SR drafts, synthesis."""

from ra_agent.evidence.pico.design import publication_kinds
from ra_agent.evidence.pico.extract import PicoFileError, pico_code_version, read_pico
from ra_agent.evidence.synthesis import synthesis_code_version
from ra_agent.evidence.synthesis.report import drafts_synthesis

__all__ = ["PicoFileError", "drafts_synthesis", "pico_code_version", "publication_kinds", "read_pico",
           "synthesis_code_version"]  # fmt: skip
