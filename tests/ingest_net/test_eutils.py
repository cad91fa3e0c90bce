"""E-utilities client against the loopback replay server: fetch roundtrip, DOI mapping, elink, rates, retries."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from replay import Fault, load_index
from replay.eutils_server import EUTILS_DIR

from ra_agent.ingest.eutils import LINK_CITEDIN, LINK_REFS, EutilsClient, EutilsError
from ra_agent.ingest.http import ApiUnavailable
from ra_agent.models import Paper
from ra_agent.store.db import Store

CROSSREF_DIR = EUTILS_DIR.parent / "crossref"


def test_fetch_roundtrip(tmp_path, eutils_server, cfg_for):
    """Every recorded record comes back, in batches; ≥95% of those with an abstract keep a non-empty one."""
    index = load_index()
    pmids = sorted(index.records)
    client = EutilsClient(cfg_for(tmp_path, eutils_server, pubmed_batch=40))
    papers = {p.pmid: p for p in client.efetch(pmids)}
    assert set(papers) == set(pmids)
    with_abstract = [p for p in pmids if index.records[p].has_abstract]
    non_empty = [p for p in with_abstract if papers[p].abstract.strip()]
    assert len(with_abstract) >= 80
    assert len(non_empty) / len(with_abstract) >= 0.95
    fetches = eutils_server.requests_to("efetch.fcgi")
    assert len(fetches) == -(-len(pmids) // 40)
    assert all(r.param("db") == "pubmed" and r.param("retmode") == "xml" for r in fetches)


def test_unknown_ids_are_absent(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server))
    papers = client.efetch([29768149, 1, 41603352])
    assert [p.pmid for p in papers] == [29768149, 41603352]


def test_esearch_history_then_efetch(tmp_path, eutils_server, cfg_for):
    """usehistory=y gives WebEnv/query_key; efetch pages through the session with retstart/retmax."""
    client = EutilsClient(cfg_for(tmp_path, eutils_server, pubmed_batch=7, email="dev@example.org"))
    handle = client.esearch("cell", retmax=100)
    assert handle.count == 25 and len(handle.ids) == 25 and handle.has_history
    got = [item.pmid for chunk in client.efetch_history(handle) for item in chunk if isinstance(item, Paper)]
    assert got == handle.ids
    fetches = eutils_server.requests_to("efetch.fcgi")
    assert [r.param("retstart") for r in fetches] == ["0", "7", "14", "21"]
    assert all(r.param("WebEnv") == handle.webenv and r.param("query_key") == handle.query_key for r in fetches)
    for r in eutils_server.requests:
        assert r.param("tool") == "ra" and r.param("email") == "dev@example.org" and r.param("api_key") is None
        assert r.headers["User-Agent"].startswith("ra/")


def test_expired_history_falls_back_to_ids(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server))
    handle = client.esearch("patients", retmax=100)
    eutils_server.history.clear()  # the session expired on the server
    got = [item.pmid for chunk in client.efetch_history(handle) for item in chunk if isinstance(item, Paper)]
    assert got == handle.ids


def test_api_key_is_sent(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server, api_key="k-123", email="dev@example.org"))
    client.esearch("asthma")
    (req,) = eutils_server.requests
    assert (req.param("api_key"), req.param("email"), req.param("tool")) == ("k-123", "dev@example.org", "ra")


def test_recorded_searches_and_errors(tmp_path, eutils_server, cfg_for):
    """Recorded answers: a WebEnv search, a no-hit search (ErrorList), and an ERROR document."""
    client = EutilsClient(cfg_for(tmp_path, eutils_server))
    cancer = client.esearch("cancer", retmax=100)
    assert cancer.count == 42249 and len(cancer.ids) == 100 and cancer.webenv == "MCID_6927d6e7fee3e90f880ec190"
    none = client.esearch("abcXYZ", db="protein")
    assert none.count == 0 and none.ids == [] and none.errors == ["PhraseNotFound: abcXYZ"]
    partial = client.esearch("obstetrics[MeSH Terms] OR fleegle[MeSH Terms]", db="nlmcatalog")
    assert partial.count == 5163 and partial.errors == ["PhraseNotFound: fleegle[MeSH Terms]"]
    with pytest.raises(EutilsError, match="Invalid db name specified: fleegle"):
        client.esearch("cat", db="fleegle")
    assert len(eutils_server.requests) == 4  # an ERROR answer is not retried


def test_doi_mapping(tmp_path, eutils_server, cfg_for):
    """DOI→PMID via esearch `"<doi>"[doi] OR ...` batches, then efetch of the hits.

    None of the 4 054 DOIs cited in the recorded Crossref works/lists belongs to a recorded
    PubMed record (overlap 0), so the ≥85% criterion is measured on the recorded records' own
    DOIs (all that exist in the replay index); the Crossref-cited DOIs must come back unmapped.
    """
    index = load_index()
    own = {doi: pmids for doi, pmids in index.by_doi.items()}
    cited = []
    for path in sorted((CROSSREF_DIR / "works").glob("*.json")):
        message = json.loads(path.read_bytes())["message"]
        cited += [r["DOI"].lower() for r in message.get("reference", []) if "DOI" in r]
    cited = sorted(set(cited) - set(own))[:150]
    client = EutilsClient(cfg_for(tmp_path, eutils_server, elink_batch=50))
    mapping = client.doi_to_pmid([d.upper() for d in own] + cited)
    right = [d for d, pmids in own.items() if mapping.get(d) in pmids]
    assert len(own) >= 90
    assert len(right) / len(own) >= 0.85
    assert all(mapping[d] is None for d in cited)
    searches = eutils_server.requests_to("esearch.fcgi")
    assert len(searches) == -(-(len(own) + len(cited)) // 50)
    assert all(r.method == "POST" for r in searches)  # long OR terms go in the body
    assert all("[doi]" in r.param("term") for r in searches)


def test_elink_recorded_and_derived(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server))
    refs = client.references([9298984])
    assert len(refs[9298984]) > 0  # recorded elink1.xml pubmed_pubmed_refs
    index = load_index()
    citing = next(p for p, r in index.records.items() if r.refs)
    assert client.references([citing])[citing] == index.records[citing].refs
    cited = next(p for p in index.cited_by if p in index.records)
    assert client.cited_by([cited, 1])[cited] == sorted(index.cited_by[cited], reverse=True)
    req = eutils_server.requests_to("elink.fcgi")[-1]
    assert req.params["id"] == [str(cited), "1"]  # one-to-one: one id parameter per PMID
    assert req.param("linkname") == LINK_CITEDIN and LINK_REFS == "pubmed_pubmed_refs"


# ---------------------------------------------------------------------------- rate limits (server clock)
def _hammer(client: EutilsClient, n: int, threads: int) -> float:
    started = time.monotonic()
    jobs = list(range(n))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not jobs:
                    return
                jobs.pop()
            client.esearch("asthma", usehistory=False)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.monotonic() - started


def test_rate_limit_three_per_second_across_threads(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server, max_qps=3.0))
    elapsed = _hammer(client, 12, threads=4)
    assert len(eutils_server.requests) == 12
    assert eutils_server.max_per_window(1.0) <= 3
    assert elapsed >= 11 / 3  # and not a free-for-all


def test_rate_limit_ten_per_second_with_api_key(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server, max_qps=3.0, max_qps_with_key=10.0, api_key="k"))
    elapsed = _hammer(client, 30, threads=4)
    assert eutils_server.max_per_window(1.0) <= 10
    assert eutils_server.max_per_window(1.0) > 3  # the key's higher rate is used
    assert elapsed < 30 / 3


def test_rate_limit_shared_by_clients(tmp_path, eutils_server, cfg_for):
    """Two client instances to the same host share one limiter (NCBI counts per key/IP)."""
    cfg = cfg_for(tmp_path, eutils_server, max_qps=3.0)
    a, b = EutilsClient(cfg), EutilsClient(cfg)
    threads = [threading.Thread(target=c.esearch, args=("asthma",)) for c in (a, b, a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert eutils_server.max_per_window(1.0) <= 3


# ---------------------------------------------------------------------------- retries
FAULTS = {
    "502": Fault.http(502),
    "503": Fault.http(503),
    "429": Fault.rate_limited(retry_after=1),
    "timeout": Fault.slow(3.0),
    "truncated_xml": Fault.truncated(0.6),
    "short_read": Fault.short_read(0.5),
    "html_page": Fault.html_page(),
    "connection_reset": Fault.reset(),
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_retry_then_success(kind, tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server, request_timeout_s=0.5))
    eutils_server.inject("/entrez/eutils/efetch.fcgi", FAULTS[kind])
    papers = client.efetch([29768149, 11748933])
    assert sorted(p.pmid for p in papers) == [11748933, 29768149]
    fetches = eutils_server.requests_to("efetch.fcgi")
    assert [r.fault for r in fetches] == [FAULTS[kind].kind, None]
    if kind == "429":
        assert fetches[1].t - fetches[0].t >= 0.9  # Retry-After honoured


def test_backoff_grows(tmp_path, eutils_server, cfg_for):
    client = EutilsClient(cfg_for(tmp_path, eutils_server, backoff_factor=0.3, retry_attempts=2))
    eutils_server.inject("/entrez/eutils/esearch.fcgi", Fault.http(502), Fault.http(502))
    client.esearch("asthma")
    t = [r.t for r in eutils_server.requests]
    assert len(t) == 3
    assert t[1] - t[0] >= 0.28 and t[2] - t[1] >= 0.08  # 0.3**1 then 0.3**2


def test_final_failure_is_api_unavailable(tmp_path, eutils_server, cfg_for, caplog):
    cfg = cfg_for(tmp_path, eutils_server, api_key="SECRET-KEY", email="secret@example.org")
    eutils_server.inject_always("/entrez/eutils/", Fault.reset())
    client = EutilsClient(cfg)
    with caplog.at_level(logging.DEBUG), pytest.raises(ApiUnavailable) as err:
        client.esearch("asthma")
    assert len(eutils_server.requests) == cfg.ingest.retry_attempts + 1
    assert err.value.to_tool_result()["api_offline"] is True
    text = caplog.text + str(err.value) + repr(cfg)
    assert "SECRET-KEY" not in text and "secret@example.org" not in text


def test_api_health_recorded_in_store(tmp_path, eutils_server, cfg_for):
    cfg = cfg_for(tmp_path, eutils_server, retry_attempts=0)
    with Store(tmp_path / "ra.sqlite") as store:
        client = EutilsClient(cfg, store=store)
        eutils_server.inject("/entrez/eutils/", *[Fault.http(502)] * 5)
        for _ in range(5):
            with pytest.raises(ApiUnavailable):
                client.esearch("asthma")
        assert store.api_state("eutils")["offline"] == 1
        client.esearch("asthma")
        state = store.api_state("eutils")
        assert (state["offline"], state["consecutive_errors"]) == (0, 0)


def test_connection_refused_message_has_no_secrets(tmp_path, cfg_for, caplog):
    """urllib3 puts the whole URL (query string included) in connection errors: secrets must be masked."""
    from replay import EutilsReplayServer

    with EutilsReplayServer() as server:
        cfg = cfg_for(tmp_path, server, api_key="SECRET-KEY", email="secret@example.org", retry_attempts=1)
    client = EutilsClient(cfg)  # the server is gone: connection refused
    with caplog.at_level(logging.DEBUG), pytest.raises(ApiUnavailable) as err:
        client.esearch("asthma")
    assert "Max retries exceeded" in err.value.last_error and "api_key=***" in err.value.last_error
    text = caplog.text + str(err.value) + err.value.last_error
    assert not any(s in text for s in ("SECRET-KEY", "secret@example.org", "secret%40example.org"))
