"""Registered searches through `ra ingest` / `ra queries` / `python -m ingest` against the replay E-utilities:
a failing query is recorded and reported, and the refresh goes on with the others."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from replay import Fault

from ra_agent.cli import main
from ra_agent.workspace import query_key

ROOT = Path(__file__).resolve().parents[2]
ESEARCH = "/entrez/eutils/esearch.fcgi"
EFETCH = "/entrez/eutils/efetch.fcgi"
NCBI_ERROR = ROOT / "tests" / "fixtures" / "eutils" / "klortho_esearch.baderror.xml"  # <ERROR>Invalid db name…


@pytest.fixture
def cfg_path(tmp_path, eutils_server) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[workspace]\ndata_dir = "ws"\ndemo_corpus = ""\n[ingest]\neutils_base_url = "{eutils_server.base_url}"\n'
        "retry_attempts = 2\nbackoff_factor = 0.01\nrequest_timeout_s = 2.0\nmax_qps = 100.0\npubmed_batch = 10\n"
        "retry_after_cap_s = 0.3\n"
    )
    return path


def ra(capsys, cfg_path: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--config", str(cfg_path), *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def runs(cfg_path: Path) -> dict[str, tuple]:
    with sqlite3.connect(cfg_path.parent / "ws" / "ra.sqlite") as db:
        rows = db.execute("SELECT query, count, fetched, status, error FROM search_run").fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def papers(cfg_path: Path) -> int:
    with sqlite3.connect(cfg_path.parent / "ws" / "ra.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM paper").fetchone()[0]


def test_a_rejected_query_is_not_registered_and_later_refreshes_exit_0(capsys, cfg_path, eutils_server):
    """Issue 28: after `ra ingest --query <a query NCBI rejects>` failed (NCBI's real ERROR document), every
    later refresh exited 2 although the other searches refreshed fine. The rejected query is not registered."""
    eutils_server.inject(ESEARCH, Fault.recorded(NCBI_ERROR, 200, "text/xml"))
    code, out, err = ra(capsys, cfg_path, "ingest", "--query", "fleegle")
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1] == (
        "ra: error: 'fleegle': search: rejected: eutils: Invalid db name specified: fleegle; not registered"
    )
    assert runs(cfg_path) == {"fleegle": (0, 0, "failed", "eutils: Invalid db name specified: fleegle")}
    assert ra(capsys, cfg_path, "queries")[1] == "no registered searches (ra ingest --query '...')\n"
    for query in ("cell", "asthma"):
        assert ra(capsys, cfg_path, "ingest", "--query", query)[0] == 0
    before = papers(cfg_path)
    assert before == 25 + 2

    code, out, err = ra(capsys, cfg_path, "ingest")  # the refresh: both searches, exit 0
    assert code == 0 and "ra: error:" not in err
    assert "'cell': 25 hits, 25 fetched, 0 new, 0 updated [online] ok" in out
    assert "'asthma': 2 hits, 2 fetched, 0 new, 0 updated [online] ok" in out
    assert [line.split()[1] for line in ra(capsys, cfg_path, "queries")[1].splitlines()] == ["ok", "ok"]


def test_a_registered_search_rejected_again_is_reported_but_only_a_new_rejection_fails_the_refresh(
    capsys, cfg_path, eutils_server
):
    """A search registered while NCBI took it (a user's, or a goal's) and rejected at a refresh: that refresh
    exits 2 (a new failure); the next refresh, rejected the same way, lists it in its summary, runs the others
    and exits 0. `ra queries` shows the error and `ra queries remove` drops it."""
    for query in ("fleegle", "cell", "asthma"):
        assert ra(capsys, cfg_path, "ingest", "--query", query)[0] == 0
    before = papers(cfg_path)
    eutils_server.inject(ESEARCH, Fault.recorded(NCBI_ERROR, 200, "text/xml"))
    code, out, err = ra(capsys, cfg_path, "ingest")
    assert code == 2 and "'cell': 25 hits" in out and "'asthma': 2 hits" in out
    assert [line for line in err.splitlines() if line.startswith("ra: error:")] == [
        "ra: error: 'fleegle': search: rejected: eutils: Invalid db name specified: fleegle"
    ]
    assert runs(cfg_path)["fleegle"][2:] == ("failed", "eutils: Invalid db name specified: fleegle")

    eutils_server.inject(ESEARCH, Fault.recorded(NCBI_ERROR, 200, "text/xml"))
    code, out, err = ra(capsys, cfg_path, "ingest")
    assert code == 0 and "ra: error:" not in err
    assert out.splitlines()[0] == (
        "'fleegle': rejected again, as at its last run: eutils: Invalid db name specified: fleegle "
        f"(not a new failure; ra queries remove {query_key('fleegle')} drops it)"
    )
    assert "'cell': 25 hits, 25 fetched, 0 new, 0 updated [online] ok" in out and "'asthma': 2 hits" in out
    assert runs(cfg_path)["cell"] == (25, 25, "ok", "") and papers(cfg_path) == before

    code, out, _ = ra(capsys, cfg_path, "queries")
    listed = out.splitlines()
    assert code == 0 and len(listed) == 4  # three searches and fleegle's error line
    assert listed[0].startswith(f"{query_key('fleegle')} failed") and listed[0].endswith("'fleegle'")
    assert listed[1] == "    error: eutils: Invalid db name specified: fleegle"
    code, out, _ = ra(capsys, cfg_path, "queries", "remove", "fleegle")
    assert code == 0 and out == f"removed {query_key('fleegle')} 'fleegle'; its papers stay in the corpus\n"
    assert ra(capsys, cfg_path, "ingest")[0] == 0


def test_python_m_ingest_refresh_goes_on_past_a_failing_query(capsys, cfg_path, eutils_server):
    """`python -m ingest` (the memo's command) as a cron job runs it: the refresh that first meets the
    rejection exits 2 and goes on with the other search; the next one, rejected the same way, says
    "rejected again" in its summary and exits 0."""
    for query in ("fleegle", "asthma"):
        ra(capsys, cfg_path, "ingest", "--query", query)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}

    def python_m_ingest() -> subprocess.CompletedProcess:
        eutils_server.inject(ESEARCH, Fault.recorded(NCBI_ERROR, 200, "text/xml"))
        return subprocess.run([sys.executable, "-m", "ingest", "--config", str(cfg_path)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    proc = python_m_ingest()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "ra: error: 'fleegle': search: rejected: eutils: Invalid db name specified: fleegle" in proc.stderr
    assert "'asthma': 2 hits" in proc.stdout

    proc = python_m_ingest()
    assert proc.returncode == 0 and "ra: error:" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "'fleegle': rejected again, as at its last run: eutils: Invalid db name specified: fleegle "
        f"(not a new failure; ra queries remove {query_key('fleegle')} drops it)"
    )
    assert "'asthma': 2 hits, 2 fetched, 0 new, 0 updated [online] ok" in proc.stdout
    assert runs(cfg_path)["fleegle"][2:] == ("failed", "eutils: Invalid db name specified: fleegle")


@pytest.mark.parametrize(
    ("fault", "line", "message", "row", "stored"),
    [
        ("esearch 502s", "'cell': 0 hits, 0 fetched, 0 new, 0 updated [online] failed",
         "search failed: eutils: GET /entrez/eutils/esearch.fcgi failed after 3 attempt(s): BadResponse: HTTP 502",
         (25, 25, "failed"), 25),  # the last good run's counts are kept
        ("efetch cut", "'cell': 25 hits, 10 fetched, 10 new, 0 updated [online] partial",
         "search cut short after 10 records: eutils: GET /entrez/eutils/efetch.fcgi failed after 3 attempt(s): "
         "BadResponse: not well-formed XML", (25, 10, "partial"), 10),
    ],
)  # fmt: skip
def test_a_failed_or_cut_short_search_is_never_an_empty_success(
    capsys, cfg_path, eutils_server, fault, line, message, row, stored
):
    if fault == "esearch 502s":  # a good run first
        assert ra(capsys, cfg_path, "ingest", "--query", "cell")[0] == 0
        assert runs(cfg_path)["cell"] == (25, 25, "ok", "")
        eutils_server.inject_always(ESEARCH, Fault.http(502))
    else:
        eutils_server.inject(EFETCH, Fault.passthrough(), *[Fault.truncated(0.6)] * 3)
    code, out, err = ra(capsys, cfg_path, "ingest", "--query", "cell")
    assert code == 1 and line in out
    assert f"ra: error: 'cell': search: {message}" in err
    *counts, error = runs(cfg_path)["cell"]
    assert tuple(counts) == row and message.split("BadResponse: ")[1] in error
    assert papers(cfg_path) == stored
    if fault == "esearch 502s":
        assert len(eutils_server.requests_to("esearch.fcgi")) == 1 + 3


def test_retry_after_above_the_cap_waits_the_cap_and_retries(capsys, cfg_path, eutils_server):
    eutils_server.inject(ESEARCH, Fault.rate_limited(retry_after=3600))
    code, out, _ = ra(capsys, cfg_path, "ingest", "--query", "asthma")
    assert code == 0 and "'asthma': 2 hits, 2 fetched, 2 new" in out
    first, second = eutils_server.requests_to("esearch.fcgi")
    assert first.fault == "status" and second.fault is None
    assert 0.3 <= second.t - first.t < 5  # the 0.3 s cap, not the hour asked for


def test_dagster_pubmed_search_fails_or_flags_an_incomplete_search(cfg_path, eutils_server):
    from ra_agent.config import load_config
    from ra_agent.workspace import open_store, register_query
    from ra_assets.defs.ingest.assets import pubmed_search
    from ra_assets.partitions import partition_name, search_query_partitions
    from ra_assets.resources import build_resources

    cfg = load_config(cfg_path)
    with open_store(cfg) as store:
        key = register_query(store, "cell")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(partition_name(search_query_partitions), [key])
    resources = build_resources(str(cfg_path))

    eutils_server.inject(EFETCH, Fault.passthrough(), *[Fault.truncated(0.6)] * 3)
    partial = dg.materialize([pubmed_search], partition_key=key, resources=resources, instance=instance,
                             raise_on_error=False)  # fmt: skip
    (check,) = partial.get_asset_check_evaluations()  # blocking: the run stops before anything downstream
    assert not partial.success and not check.passed and check.metadata["status"].value == "partial"

    eutils_server.inject_always(ESEARCH, Fault.http(502))
    failed = dg.materialize([pubmed_search], partition_key=key, resources=resources, instance=instance,
                            raise_on_error=False)  # fmt: skip
    assert not failed.success
    assert runs(cfg_path)["cell"][:3] == (25, 10, "failed")
    eutils_server.clear_faults()
    done = dg.materialize([pubmed_search], partition_key=key, resources=resources, instance=instance)
    assert done.success and done.get_asset_check_evaluations()[0].passed
