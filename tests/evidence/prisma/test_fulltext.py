"""PRISMA status of a prior review from its PMC full text (JATS), its abstract, or nothing: true / false / undetermined."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from replay import Fault

from ra_agent.evidence.prisma.check import review_statuses, rule_evidence
from ra_agent.evidence.prisma.fulltext import FullTextError, cache_path, full_text, parse_jats, pmcid_of
from ra_agent.ingest.eutils import EutilsClient
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.models import Paper

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
JATS = FIXTURES / "pmc_oa" / "mds526.nxml"  # PMID 23149571, PMC3574550: a cohort study, not a review
PMC_SET = FIXTURES / "eutils" / "efetch_pmc.xml"  # efetch db=pmc answer (<pmc-articleset>)


def record_of(path: Path, with_pmc: bool = True) -> Paper:
    """The PubMed-like record of a JATS article: its title and abstract, and its PMC id when asked."""
    article = parse_jats(path.read_bytes(), str(path))
    title, *rest = article.text.split("\n")
    assert article.pmid is not None
    return Paper(article.pmid, title, abstract=rest[0], other_ids={"pmc": f"PMC{article.pmcid}"} if with_pmc else {})


def test_parse_jats_reads_a_bare_article_and_an_efetch_pmc_set():
    article = parse_jats(JATS.read_bytes())
    assert (article.pmid, article.pmcid) == (23149571, "3574550")
    assert article.sections[:4] == ["introduction", "methods", "results", "discussion"]
    assert len(article.references) == 30 and all(p > 0 for p in article.references)  # the refs with a PMID
    assert "## methods" in article.text
    wrapped = parse_jats(PMC_SET.read_bytes())
    assert (wrapped.pmid, wrapped.pmcid) == (34527728, "8435807") and wrapped.text
    with pytest.raises(FullTextError, match="no <article>"):
        parse_jats(b"<pmc-articleset/>", "empty.xml")


def test_pmcid_of_reads_the_record_ids():
    assert pmcid_of(Paper(1, "t", other_ids={"pmc": "PMC3574550"})) == "3574550"
    assert pmcid_of(Paper(1, "t", other_ids={"doi": "10.1/x"})) is None


def test_a_review_read_in_full_text_is_true_or_false(demo):
    paper = record_of(JATS)
    demo.store.upsert_papers([paper], source="test:pmc_oa")
    cache = cache_path(demo.cfg, "3574550")
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(JATS, cache)  # what an online efetch db=pmc would have cached
    found, why = full_text(demo.cfg, demo.store, paper)
    assert found is not None and why == "PMC3574550 full text"
    result = review_statuses(demo.cfg, demo.store, [paper.pmid], RulesBrain())
    (review,) = result.reviews
    expected = rule_evidence(f"{paper.title}\n{found.text}", [4, 5, 6, 7, 8], "x").missing
    assert expected  # a cohort study does not report a review's eligibility, sources and search
    assert review.status == "false" and review.full_text and review.missing == expected
    assert not result.compliant and result.undetermined == [] and result.missing_items == expected


def test_offline_without_full_text_a_review_is_undetermined(demo):
    paper = record_of(JATS)
    demo.store.upsert_papers([paper], source="test:pmc_oa")
    result = review_statuses(demo.cfg, demo.store, [paper.pmid], RulesBrain())
    (review,) = result.reviews
    assert review.text == "abstract only: PMC3574550 not fetched (offline)"
    assert review.status == "undetermined" and result.undetermined == [paper.pmid] and not result.compliant
    assert any("undetermined" in note for note in result.notes)
    bare = record_of(JATS, with_pmc=False)
    assert full_text(demo.cfg, demo.store, bare) == (None, "no PMC id in the record")


def test_online_the_full_text_is_fetched_with_efetch_db_pmc_and_cached(demo, eutils_server):
    # the server answers efetch with NCBI's recorded efetch db=pmc reply for PMC8435807 (PMID 34527728)
    eutils_server.inject("/entrez/eutils/efetch.fcgi", Fault.recorded(PMC_SET, 200, "text/xml; charset=UTF-8"))
    cfg = demo.cfg.with_overrides(ingest={"eutils_base_url": eutils_server.base_url, "retry_attempts": 1,
                                          "request_timeout_s": 2.0})  # fmt: skip
    paper = Paper(34527728, "a record naming its PMC id", other_ids={"pmc": "PMC8435807"})
    found, why = full_text(cfg, demo.store, paper, EutilsClient(cfg))
    assert found is not None and found.pmid == 34527728 and why == "PMC8435807 full text"
    (sent,) = [r for r in eutils_server.requests if r.path.endswith("efetch.fcgi")]
    assert sent.params["db"] == ["pmc"] and sent.params["id"] == ["8435807"]
    assert cache_path(cfg, "8435807").read_bytes() == PMC_SET.read_bytes()
    again, _ = full_text(cfg, demo.store, paper, EutilsClient(cfg))  # from the cache: no second request
    assert again == found and len([r for r in eutils_server.requests if r.path.endswith("efetch.fcgi")]) == 1
