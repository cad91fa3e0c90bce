"""search_and_ingest / harvest_references end to end against the replay servers: storage, offline mode, crashes."""

from __future__ import annotations

import json
import logging
from datetime import date, timedelta

import pytest
from replay import Fault, load_index
from replay.crossref_server import CROSSREF_DIR
from replay.eutils_server import evaluate_term

from ra_agent.ingest.pipeline import harvest_references, search_and_ingest
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.store.schema import PROV_CROSSREF, PROV_PUBMED
from ra_agent.workspace import query_key

EFETCH = "/entrez/eutils/efetch.fcgi"
ESEARCH = "/entrez/eutils/esearch.fcgi"


@pytest.fixture
def open_store(tmp_path):
    stores = []

    def make(cfg):
        store = Store(tmp_path / "ra.sqlite", commit_every=cfg.ingest.insert_commit_every)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


def assert_consistent(store: Store) -> None:
    """Every ingest batch's n_papers equals its paper rows, and no paper lacks a registered batch."""
    registered = {b["batch_id"]: b["n_papers"] for b in store.batches()}
    counted = dict(store.conn.execute("SELECT batch_id, COUNT(*) FROM paper GROUP BY batch_id").fetchall())
    assert registered == counted


def test_search_and_ingest_roundtrip(tmp_path, eutils_server, cfg_for, open_store):
    cfg = cfg_for(tmp_path, eutils_server, pubmed_batch=10, insert_commit_every=7)
    cfg = cfg.with_overrides(embedding={"refresh_threshold": 8})
    store = open_store(cfg)
    ticks = []
    result = search_and_ingest(cfg, store, "cell", progress=lambda done, total: ticks.append((done, total)))
    assert result.count == result.fetched == result.inserted == 25
    assert result.pmids == evaluate_term("cell", load_index())  # esearch rank order
    assert ticks == [(10, 25), (20, 25), (25, 25)] and result.efetch_requests == 3
    assert len(result.batches) == 4 and not result.offline and not result.api_offline
    assert len(result.sample_titles) == 5 and all(result.sample_titles)
    assert_consistent(store)
    key = query_key("cell")
    run = store.conn.execute("SELECT * FROM search_run WHERE query_key=?", (key,)).fetchone()
    assert (run["query"], run["count"], run["fetched"], run["offline"]) == ("cell", 25, 25, 0)
    ranked = [
        r[0] for r in store.conn.execute("SELECT pmid FROM candidate_papers WHERE query_key=? ORDER BY rank", (key,))
    ]
    assert ranked == result.pmids
    # the same search again: nothing new, nothing duplicated
    again = search_and_ingest(cfg, store, "  CELL ")
    assert (again.query_key, again.inserted, again.unchanged, again.batches) == (key, 0, 25, [])
    assert store.counts()["paper"] == 25 and store.counts()["ingest_batch"] == 4


def test_since_is_an_entrez_date_range(tmp_path, eutils_server, cfg_for, open_store):
    cfg = cfg_for(tmp_path, eutils_server)
    result = search_and_ingest(cfg, open_store(cfg), "patients", since="2026-01-01", retmax=50)
    index = load_index()
    hits = evaluate_term("patients", index)
    expected = [p for p in hits if index.records[p].entrez and index.records[p].entrez >= date(2026, 1, 1)]
    assert 0 < result.count == len(expected) < 20
    req = eutils_server.requests_to("esearch.fcgi")[0]
    assert (req.param("datetype"), req.param("mindate")) == ("edat", "2026/01/01")
    assert req.param("maxdate") == (date.today() + timedelta(days=1)).strftime("%Y/%m/%d")
    assert req.param("usehistory") == "y" and req.param("retmax") == "50"


def test_ref_dedup(tmp_path):
    """Re-inserting the same edges changes no row count; provenance OR-merges (1 | 2 = 3)."""
    with Store(tmp_path / "ra.sqlite") as store:
        edges = [(29768149, 11748933, PROV_PUBMED), (29768149, 11700088, PROV_PUBMED)]
        store.add_refs(edges)
        before = store.counts()
        store.add_refs(edges)
        store.add_doi_refs(29768149, {"10.1006/cryo.2001.2328": 11748933, "10.9999/unmapped": None}, PROV_CROSSREF)
        store.add_doi_refs(29768149, {"10.1006/cryo.2001.2328": 11748933, "10.9999/unmapped": None}, PROV_CROSSREF)
        after = store.counts()
        assert after["ref"] == before["ref"]  # the unmapped DOI is no reference: it stays in ref_doi only
        assert after["ref_doi"] == 2 and after["ref_unmapped"] == 1
        assert store.conn.execute("SELECT COUNT(*) FROM ref WHERE dst = 0").fetchone()[0] == 0
        prov = store.conn.execute("SELECT prov FROM ref WHERE src=29768149 AND dst=11748933").fetchone()[0]
        assert prov == PROV_PUBMED | PROV_CROSSREF == 3


def test_harvest_references(tmp_path, eutils_server, crossref_server, cfg_for, open_store):
    """Crossref works → cited DOIs → DOI→PMID; unmapped kept as dst=0; a second run adds nothing.

    The stored papers are the recorded PubMed records of one search plus rows built from the
    recorded Crossref works (their DOI and title; the PMIDs of those rows are test placeholders,
    as the Crossref records carry none). No DOI they cite is in the replay index, so every
    Crossref edge here stays unmapped (dst=0); mapping itself is measured in test_doi_mapping.
    """
    cfg = cfg_for(tmp_path, eutils_server, crossref_server, elink_batch=100)
    store = open_store(cfg)
    search_and_ingest(cfg, store, "patients")
    works = {}
    for i, name in enumerate(["10.1371_journal.pone.0033693.json", "10.1038_srep16696.json"]):
        message = json.loads((CROSSREF_DIR / "works" / name).read_bytes())["message"]
        works[900_000_001 + i] = message
    store.upsert_papers([Paper(pmid=p, title=m["title"][0], doi=m["DOI"].lower()) for p, m in works.items()],
                        source="test")  # fmt: skip
    expected_dois = {p: {r["DOI"].lower() for r in m["reference"] if "DOI" in r} for p, m in works.items()}
    pmids = store.all_pmids()
    with_pubmed_refs = {p for p in pmids if store.references_of(p)}
    result = harvest_references(cfg, store, pmids)
    assert result.requested == len(pmids)
    assert result.candidates == sum(1 for p in store.papers(pmids) if p.doi and p.pmid not in with_pubmed_refs)
    assert result.harvested == 2 and result.not_found == result.candidates - 2
    assert result.ref_dois == sum(len(v) for v in expected_dois.values()) == result.unmapped
    assert result.mapped == 0 and not result.crossref_offline and not result.eutils_offline
    for pmid, dois in expected_dois.items():
        rows = store.conn.execute("SELECT doi, dst, prov FROM ref_doi WHERE src=?", (pmid,)).fetchall()
        assert {r[0] for r in rows} == dois and all(r[1] == 0 and r[2] == PROV_CROSSREF for r in rows)
    assert len(eutils_server.requests_to("esearch.fcgi")) == 1 + 2  # the search, then 2 DOI batches
    counts, crossref_calls = store.counts(), len(crossref_server.requests)
    again = harvest_references(cfg, store, pmids)
    assert store.counts() == counts and again.harvested == 0
    assert len(crossref_server.requests) - crossref_calls == again.not_found  # only the 404 DOIs are asked again


def test_harvest_with_crossref_down_skips(tmp_path, eutils_server, crossref_server, cfg_for, open_store, caplog):
    cfg = cfg_for(tmp_path, eutils_server, crossref_server, crossref_retry=1)
    store = open_store(cfg)
    search_and_ingest(cfg, store, "patients")
    crossref_server.inject_always("/works/", Fault.http(503))
    with caplog.at_level(logging.ERROR):
        result = harvest_references(cfg, store, store.all_pmids())
    assert result.crossref_offline and result.harvested == 0 and result.skipped == result.candidates > 0
    assert "crossref_offline" in caplog.text
    assert len(crossref_server.requests) == 2  # one paper tried (1 + 1 retry), the rest skipped
    assert store.counts()["ref_doi"] == 0 or all(
        r[0] & PROV_CROSSREF == 0 for r in store.conn.execute("SELECT prov FROM ref_doi")
    )
    assert store.api_state("crossref")["consecutive_errors"] == 1


def test_offline_switch_and_recovery(tmp_path, eutils_server, cfg_for, open_store, caplog):
    """5 consecutive failed searches switch to offline mode (answers from FTS5); a success clears it."""
    cfg = cfg_for(tmp_path, eutils_server, retry_attempts=1)
    store = open_store(cfg)
    search_and_ingest(cfg, store, "cancer OR asthma")  # a local corpus to fall back on
    eutils_server.inject_always(ESEARCH, Fault.http(502))
    for attempt in range(1, 5):
        result = search_and_ingest(cfg, store, "patients")
        assert result.api_offline and not result.offline and result.pmids == [], attempt
        assert result.to_tool_result()["api_offline"] is True
    with caplog.at_level(logging.ERROR):
        result = search_and_ingest(cfg, store, "patients")
    assert result.offline and result.api_offline
    assert result.pmids == store.search("patients", cfg.ingest.default_retmax) and result.pmids
    assert "OFFLINE" in caplog.text and store.api_state("eutils")["offline"] == 1
    run = store.conn.execute("SELECT offline, count FROM search_run WHERE query_key=?", (query_key("patients"),))
    assert tuple(run.fetchone()) == (1, len(result.pmids))
    assert len(eutils_server.requests_to("esearch.fcgi")) == 1 + 5 * 2
    # while offline a search probes the API once, without retries
    still = search_and_ingest(cfg, store, "patients")
    assert still.offline and len(eutils_server.requests_to("esearch.fcgi")) == 1 + 5 * 2 + 1
    eutils_server.clear_faults()
    back = search_and_ingest(cfg, store, "patients")
    assert not back.offline and not back.api_offline and back.count == 20 and back.fetched == 20
    state = store.api_state("eutils")
    assert (state["offline"], state["consecutive_errors"]) == (0, 0)


def _crash_cfg(cfg_for, tmp_path, eutils_server):
    cfg = cfg_for(tmp_path, eutils_server, pubmed_batch=5, insert_commit_every=3, retry_attempts=0)
    return cfg.with_overrides(embedding={"refresh_threshold": 4})


def test_api_failure_mid_ingest_keeps_what_arrived(tmp_path, eutils_server, cfg_for, open_store):
    cfg = _crash_cfg(cfg_for, tmp_path, eutils_server)
    store = open_store(cfg)
    eutils_server.inject(EFETCH, Fault.passthrough(), Fault.http(502))
    partial = search_and_ingest(cfg, store, "cell")
    assert partial.api_offline and not partial.offline and "502" in partial.error
    assert partial.fetched == partial.inserted == store.counts()["paper"] == 5
    assert partial.pmids == evaluate_term("cell", load_index())[:5]
    assert_consistent(store)
    done = search_and_ingest(cfg, store, "cell")
    assert (done.inserted, done.unchanged, store.counts()["paper"]) == (20, 5, 25)
    assert len(done.pmids) == 25 and not done.api_offline
    assert_consistent(store)


def test_crash_mid_batch_leaves_store_consistent(tmp_path, eutils_server, cfg_for, open_store):
    """A crash while an ingest batch is half written: committed chunks stay whole, the rest rolls back."""
    cfg = _crash_cfg(cfg_for, tmp_path, eutils_server)
    store = open_store(cfg)

    def crash(done, total):
        if done >= 10:
            raise RuntimeError("killed mid-ingest")

    with pytest.raises(RuntimeError, match="killed"):
        search_and_ingest(cfg, store, "cell", progress=crash)
    assert store.counts()["paper"] == 9  # three whole commits of 3; the 10th paper's chunk rolled back
    assert_consistent(store)
    assert store.conn.execute("SELECT COUNT(*) FROM search_run").fetchone()[0] == 0
    done = search_and_ingest(cfg, store, "cell")
    assert (done.inserted, done.unchanged) == (16, 9)
    assert store.counts()["paper"] == 25 == len(set(store.all_pmids()))
    assert_consistent(store)
    ids = [b["batch_id"] for b in store.batches()]
    assert len(ids) == len(set(ids)) and sum(b["n_papers"] for b in store.batches()) == 25


def test_fetch_references_on_demand_fills_papers_without_a_reference_list(
    tmp_path, eutils_server, crossref_server, cfg_for, open_store
):
    """Ripple's lazy citation graph (memo 20/50): imported papers carry no references; elink fills them once."""
    from ra_agent.ingest.pipeline import fetch_references

    index = load_index()
    cited = {p: r.refs for p, r in index.records.items() if r.refs}
    cfg = cfg_for(tmp_path, eutils_server, crossref_server)
    store = open_store(cfg)
    store.upsert_papers([Paper(pmid=p, title=index.records[p].title) for p in cited], source="import:test.csv")
    assert store.counts()["ref"] == 0

    eutils_server.inject_always("/entrez/eutils/elink.fcgi", Fault.http(502))
    down = fetch_references(cfg, store, list(cited))
    assert down.offline and "502" in down.error and store.counts()["ref"] == 0  # no raise, nothing stored
    eutils_server.clear_faults()

    result = fetch_references(cfg, store, list(cited))
    expected = {(src, dst) for src, refs in cited.items() for dst in refs if dst != src}
    assert result.lacking == len(cited) and result.elink_edges == len(expected)
    assert {tuple(r) for r in store.conn.execute("SELECT src, dst FROM ref")} == expected
    assert all(prov == PROV_PUBMED for (prov,) in store.conn.execute("SELECT prov FROM ref"))
    requests = len(eutils_server.requests_to("elink.fcgi"))
    again = fetch_references(cfg, store, list(cited))
    assert again.lacking == 0 and len(eutils_server.requests_to("elink.fcgi")) == requests  # asked once only

    offline = cfg.with_overrides(ingest={"offline": True})
    store.conn.execute("DELETE FROM ref")
    store.conn.commit()
    skipped = fetch_references(offline, store, list(cited))
    assert skipped.offline and skipped.lacking == len(cited) and store.counts()["ref"] == 0
    assert len(eutils_server.requests_to("elink.fcgi")) == requests
