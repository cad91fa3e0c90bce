"""Fixtures for the PICO tests: real records from the demo corpus and the PubMed XML fixtures, the gold set."""

from __future__ import annotations

import pytest
from pico_records import DEMO, GOLD, ROOT, XML_FIXTURES

from ra_agent.evidence.pico.quality import GoldRecord, PicoQuality, evaluate, gold_papers, load_gold, load_papers
from ra_agent.models import Paper


@pytest.fixture(scope="session")
def demo_papers() -> dict[int, Paper]:
    """The 1,333 demo-corpus records through ra's CSV importer (no publication types, no section labels)."""
    return {p.pmid: p for p in load_papers(DEMO)}


@pytest.fixture(scope="session")
def xml_papers() -> dict[int, Paper]:
    """Every record of the PubMed XML fixtures through ra's XML parser."""
    papers: dict[int, Paper] = {}
    for path in XML_FIXTURES:
        papers.update({p.pmid: p for p in load_papers(path)})
    return papers


@pytest.fixture(scope="session")
def gold() -> list[GoldRecord]:
    return load_gold(GOLD)


@pytest.fixture(scope="session")
def gold_paper_map(gold) -> dict[int, Paper]:
    return gold_papers(gold, ROOT)


@pytest.fixture(scope="session")
def quality() -> PicoQuality:
    """The rule extractor scored on the demo corpus and the gold set (the numbers bench/eval_pico.py prints)."""
    return evaluate(DEMO, GOLD, ROOT)
