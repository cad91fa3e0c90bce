"""Ingest: E-utilities, Crossref, MEDLINE/PubMed XML, baseline files and search-export imports, offline mode."""

from ra_agent.ingest.corpus import corpus_summary, import_pending
from ra_agent.ingest.crossref import CrossrefClient
from ra_agent.ingest.eutils import EutilsClient
from ra_agent.ingest.pipeline import harvest_references, search_and_ingest
from ra_agent.ingest.snapshot import weekly_snapshot

__all__ = [
    "CrossrefClient",
    "EutilsClient",
    "corpus_summary",
    "harvest_references",
    "import_pending",
    "search_and_ingest",
    "weekly_snapshot",
]
