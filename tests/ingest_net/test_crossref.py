"""Crossref client against the loopback replay server: references, cache, and the real error answers."""

from __future__ import annotations

import json
import logging

import pytest
from replay import Fault
from replay.crossref_server import CROSSREF_DIR

from ra_agent.ingest.crossref import CrossrefClient, cache_name
from ra_agent.ingest.http import ApiRequestError, ApiUnavailable

PLOS = "10.1371/journal.pone.0033693"


def _recorded_refs(name: str) -> list[str]:
    message = json.loads((CROSSREF_DIR / "works" / name).read_bytes())["message"]
    return list(dict.fromkeys(r["DOI"].lower() for r in message["reference"] if "DOI" in r))


def test_reference_dois_and_cache(tmp_path, crossref_server, cfg_for):
    cfg = cfg_for(tmp_path, crossref_server, mailto="dev@example.org")
    client = CrossrefClient(cfg, tmp_path / "cache")
    refs = client.reference_dois(PLOS.upper())
    assert refs == _recorded_refs("10.1371_journal.pone.0033693.json")
    assert len(refs) == 65 and all(r == r.lower() for r in refs)
    cached = tmp_path / "cache" / "crossref_json" / cache_name(PLOS)
    assert cached.read_bytes() == (CROSSREF_DIR / "works" / "10.1371_journal.pone.0033693.json").read_bytes()
    assert not list(cached.parent.glob("*.tmp"))
    assert CrossrefClient(cfg, tmp_path / "cache").reference_dois(PLOS) == refs  # from the cache
    (req,) = crossref_server.requests
    assert req.path == f"/works/{PLOS}" and req.param("mailto") == "dev@example.org"
    assert req.headers["User-Agent"].startswith("ra/") and "mailto:dev@example.org" in req.headers["User-Agent"]


def test_doi_with_parentheses_roundtrips(tmp_path, crossref_server, cfg_for):
    client = CrossrefClient(cfg_for(tmp_path, crossref_server), tmp_path / "cache")
    work = client.work("https://doi.org/10.1111/(ISSN)1442-9993")
    assert work["DOI"].lower() == "10.1111/(issn)1442-9993"
    assert client.reference_dois("10.1111/(issn)1442-9993") == []  # a journal record: no references
    assert crossref_server.requests[0].params == {}  # no mailto configured -> no parameters


@pytest.mark.parametrize("doi", ["10.1371/notarealdoi", "blblbl"])
def test_not_found_is_empty_and_not_retried(doi, tmp_path, crossref_server, cfg_for, caplog):
    """Crossref's 404 bodies are the plain text "Resource not found." (even under a JSON content type)."""
    client = CrossrefClient(cfg_for(tmp_path, crossref_server), tmp_path / "cache")
    with caplog.at_level(logging.INFO, logger="ra_agent.ingest.crossref"):
        assert client.work(doi) is None
        assert client.reference_dois(doi) == []
    assert len(crossref_server.requests) == 2  # one per call, no retries, nothing cached
    assert "no record for DOI" in caplog.text
    assert not (tmp_path / "cache" / "crossref_json").exists()


def test_validation_failure_400_is_a_request_error(tmp_path, crossref_server, cfg_for):
    """The recorded 400 validation-failure JSON: the request is wrong, so it is not retried."""
    recorded = CROSSREF_DIR / "errors" / "works_10.1371_journal.pone.0033693_query.author_carl_boettiger.400.json"
    crossref_server.inject("/works/", Fault.recorded(recorded, 400, "application/json;charset=utf-8"))
    client = CrossrefClient(cfg_for(tmp_path, crossref_server), tmp_path / "cache")
    with pytest.raises(ApiRequestError) as err:
        client.work(PLOS)
    assert err.value.status == 400 and "validation-failure" in err.value.body
    assert len(crossref_server.requests) == 1


def test_exception_500_is_retried(tmp_path, crossref_server, cfg_for):
    recorded = CROSSREF_DIR / "errors" / "works_cursor_5.500.json"
    crossref_server.inject("/works/", Fault.recorded(recorded, 500, "application/json"), Fault.truncated(0.5))
    client = CrossrefClient(cfg_for(tmp_path, crossref_server), tmp_path / "cache")
    assert len(client.reference_dois(PLOS)) == 65
    assert [r.fault for r in crossref_server.requests] == ["status", "truncate", None]


def test_down_after_retries_is_api_unavailable(tmp_path, crossref_server, cfg_for):
    recorded = CROSSREF_DIR / "errors" / "works_cursor_5.500.json"
    crossref_server.inject_always("/works/", Fault.recorded(recorded, 500, "application/json"))
    cfg = cfg_for(tmp_path, crossref_server, crossref_retry=2)
    with pytest.raises(ApiUnavailable) as err:
        CrossrefClient(cfg, tmp_path / "cache").work(PLOS)
    assert err.value.api == "crossref" and err.value.attempts == 3
    assert len(crossref_server.requests) == 3
    assert not (tmp_path / "cache" / "crossref_json").exists()


def test_rate_limited_429_honours_retry_after(tmp_path, crossref_server, cfg_for):
    crossref_server.inject("/works/", Fault.rate_limited(retry_after=1))
    client = CrossrefClient(cfg_for(tmp_path, crossref_server), tmp_path / "cache")
    assert client.work(PLOS) is not None
    first, second = crossref_server.requests
    assert second.t - first.t >= 0.9
