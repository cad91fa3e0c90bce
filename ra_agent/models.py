"""Plain record types shared by ingest, store and the later stages."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# Publication types ranked most specific first: `article_type` is the first of
# these a record carries, else its first publication type.
ARTICLE_TYPE_PRIORITY = (
    "Retracted Publication",
    "Systematic Review",
    "Meta-Analysis",
    "Practice Guideline",
    "Guideline",
    "Randomized Controlled Trial",
    "Pragmatic Clinical Trial",
    "Controlled Clinical Trial",
    "Clinical Trial, Phase IV",
    "Clinical Trial, Phase III",
    "Clinical Trial, Phase II",
    "Clinical Trial, Phase I",
    "Clinical Trial",
    "Multicenter Study",
    "Observational Study",
    "Comparative Study",
    "Case Reports",
    "Review",
    "Editorial",
    "Letter",
    "Comment",
    "Journal Article",
)


ENGLISH = "eng"  # PubMed's language code for English (Paper.language)
UNDETERMINED_LANGUAGE = "und"  # PubMed's code for a record whose language NLM could not tell


@dataclass(frozen=True)
class Reference:
    """One cited work: a PMID when known, else a DOI (dst=0 in `ref` until mapped)."""

    pmid: int | None = None
    doi: str | None = None
    citation: str = ""


@dataclass(frozen=True)
class AbstractSection:
    label: str  # "" for unlabelled abstracts; NlmCategory when present, else Label
    text: str


@dataclass
class Paper:
    """A PubMed record as ra stores it (`paper` row plus its detail columns)."""

    pmid: int
    title: str
    abstract: str = ""
    doi: str | None = None
    journal: str = ""
    year: int | None = None
    pub_types: list[str] = field(default_factory=list)
    mesh: list[str] = field(default_factory=list)  # MeSH descriptors ("Venous Thrombosis")
    # the same headings as indexed, MEDLINE-style: "Venous Thrombosis/diagnostic imaging/*etiology" ("*" marks a
    # major topic, "/" a subheading); empty when the source gave descriptors only
    mesh_terms: list[str] = field(default_factory=list)
    sections: list[AbstractSection] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)
    other_ids: dict[str, str] = field(default_factory=dict)
    references: list[Reference] = field(default_factory=list)
    source: str = ""  # "efetch", "baseline:<file>", "import:<file>", ...
    # the languages of publication as PubMed codes ("eng", "ger"; ingest/languages.py); empty when the source does
    # not say
    language: list[str] = field(default_factory=list)

    @property
    def article_type(self) -> str:
        for wanted in ARTICLE_TYPE_PRIORITY:
            if wanted in self.pub_types:
                return wanted
        return self.pub_types[0] if self.pub_types else ""

    @property
    def text(self) -> str:
        """Title and abstract as the embedder reads them."""
        return f"{self.title} · {self.abstract}" if self.abstract else self.title


def normalise_doi(doi: str | None) -> str | None:
    """Lower-case a DOI and strip URL/`doi:` prefixes; None for empty input."""
    if not doi:
        return None
    d = doi.strip().lower()
    for prefix in ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:"):
        if d.startswith(prefix):
            d = d[len(prefix) :]
    return d.strip() or None


# Records without a PMID (a RIS/CSV export of Embase, a preprint) get a DOI-hash id (docs/operations.md) in
# [DOI_ID_BASE, 2 * DOI_ID_BASE): 16 digits, so never a PMID (at most 9 digits), and below 2**53, so exact
# in JSON and float64. Collisions between two DOIs: about n**2 / 2e15 (1e-4 for a million DOIs).
DOI_ID_BASE = 10**15


def doi_id(doi: str) -> int:
    """The stable paper id of a record known only by its DOI (sha256 of the normalised DOI)."""
    key = normalise_doi(doi) or ""
    return DOI_ID_BASE + int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % DOI_ID_BASE


def is_doi_id(paper_id: int) -> bool:
    """True for an id made by doi_id (no PubMed record behind it)."""
    return DOI_ID_BASE <= paper_id < 2 * DOI_ID_BASE


@dataclass(frozen=True)
class Deletion:
    """A <DeleteCitation> block of an update file: these PMIDs leave PubMed."""

    pmids: tuple[int, ...]
    source: str = ""


@dataclass(frozen=True)
class ParseProblem:
    """A record the parser skipped: which one (PMID when known), why, and in which file."""

    pmid: int | None
    reason: str
    source: str = ""
