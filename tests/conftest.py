"""Shared pytest fixtures; each section belongs to one area of the suite (append new sections below)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from replay import CrossrefReplayServer, EutilsReplayServer
from replay.ollama_server import OllamaReplayServer

from ra_agent.config import Config, Secrets

# ---------------------------------------------------------------------------- replay servers (ingest_net)
# Loopback E-utilities / Crossref serving real recorded responses; faults are injected per test.


@pytest.fixture
def eutils_server() -> Iterator[EutilsReplayServer]:
    with EutilsReplayServer() as server:
        yield server


@pytest.fixture
def crossref_server() -> Iterator[CrossrefReplayServer]:
    with CrossrefReplayServer() as server:
        yield server


@pytest.fixture
def ollama_server() -> Iterator[OllamaReplayServer]:
    """Loopback Ollama (/api/chat, /api/tags) answering with scripted replies; records every request."""
    with OllamaReplayServer() as server:
        yield server


# Fast retries for tests: back-off 0.01**n s, Crossref waits 0.01 s, short timeouts.
FAST_INGEST = {
    "retry_attempts": 3,
    "backoff_factor": 0.01,
    "request_timeout_s": 2.0,
    "crossref_retry": 3,
    "crossref_wait_s": 0.01,
    "crossref_timeout_s": 2.0,
    "max_qps": 100.0,
    "max_qps_with_key": 100.0,
    "crossref_max_qps": 100.0,
}


def cfg_for(
    tmp_path: Path,
    *servers: EutilsReplayServer | CrossrefReplayServer,
    api_key: str | None = None,
    email: str | None = None,
    mailto: str | None = None,
    **ingest,
) -> Config:
    """A Config whose base URLs point at the given replay servers and whose data_dir is `tmp_path`.

    Retries are fast and rate limits high unless `ingest` overrides them; secrets are set
    explicitly (never read from the environment).
    """
    values = dict(FAST_INGEST)
    for server in servers:
        if isinstance(server, EutilsReplayServer):
            values["eutils_base_url"] = server.base_url
        elif isinstance(server, CrossrefReplayServer):
            values["crossref_base_url"] = server.base_url
    values.update(ingest)
    cfg = Config().with_overrides(workspace={"data_dir": str(tmp_path), "demo_corpus": ""}, ingest=values)
    return dataclasses.replace(cfg, secrets=Secrets(ncbi_api_key=api_key, ncbi_email=email, crossref_mailto=mailto))


@pytest.fixture(name="cfg_for")
def cfg_for_fixture():
    """The `cfg_for(tmp_path, *servers, **ingest)` helper, for tests that prefer a fixture to an import."""
    return cfg_for


# ---------------------------------------------------------------------------- PostgreSQL (store, Dagster instance)
# One real server per session (tests/pg_server.py: initdb + pg_ctl on a free loopback port), stopped at
# the end; each test that wants one gets a fresh database. Where the binaries are absent it skips, saying
# why, except under CI, where it fails (as the celery tests' broker does).


@pytest.fixture(scope="session")
def pg_server():
    from pg_server import PgServer, missing_binaries
    from spawned import unavailable

    if reason := missing_binaries():
        unavailable(reason)
    server = PgServer().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request, tmp_path: Path) -> Path | str:
    """Where a Store opens, once per backend: a SQLite file in tmp_path, or a fresh PostgreSQL database URL."""
    if request.param == "sqlite":
        return tmp_path / "ra.sqlite"
    return request.getfixturevalue("pg_server").new_database()


# ---------------------------------------------------------------------------- processes the suite starts
# Servers and workers (Redis, Celery workers, PostgreSQL) die with the test process (tests/spawned.py); at the
# session's end none may be left running: the last teardown fails naming them (and then kills them).


@pytest.fixture(scope="session", autouse=True)
def no_server_outlives_the_session():
    import spawned

    yield
    if left := spawned.leftovers():
        spawned.kill_leftovers()
        pytest.fail("processes started by the suite are still running at its end:\n" + "\n".join(left))


# ---------------------------------------------------------------------------- two workers (pytest-xdist)
# scripts/test.sh runs the suite on both cores: `-n 2 --dist loadgroup --no-loadscope-reorder`. The tests that start
# the heaviest servers run as one group per kind on one worker (their module fixtures are built once, and two llama.cpp
# servers or two `dagster dev` never compete for the same two cores); the groups go first, the longest first, then the
# other tests marked `slow`, then the rest, one at a time to whichever worker is free (so the last to finish are short).
# Every server a test starts is on a free loopback port with its own temp folder, so the two workers cannot collide
# (tests/built_once.py: what both would build, one builds). The groups are the scheduler's, by file: pytest-xdist's
# own `xdist_group` mark renames node ids, which pytest 9 no longer lets a plugin do.

HEAVY_GROUPS = {  # group -> the test files whose tests run together on one worker, in file order
    "dagster_dev": ("ui/test_browser.py", "flow/test_e2e_dagster_dev.py", "flow/test_ui_signals.py"),
    "real_model": ("llm/test_real_model.py", "llm/test_llm_serve.py"),
    "celery": ("flow/test_celery.py",),
}
_TESTS = Path(__file__).resolve().parent


def heavy_group(path: Path) -> str | None:
    """The group of a test file, None when it has none."""
    where = path.resolve().relative_to(_TESTS).as_posix() if path.resolve().is_relative_to(_TESTS) else ""
    return next((group for group, files in HEAVY_GROUPS.items() if where in files), None)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own choice; a hook only xdist defines
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under `--dist loadgroup`: xdist's scope scheduling with the heavy groups as scopes (one worker each), every
    other test a scope of its own."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    rootdir = config.rootpath

    class HeavyGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return heavy_group(rootdir / nodeid.split("::", 1)[0]) or nodeid

    return HeavyGroupScheduling(config, log)


@pytest.hookimpl(trylast=True)  # the order the workers report is the order the scheduler hands out scopes
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the file order as it is
    rank: dict[pytest.Item, int] = {}
    order = list(HEAVY_GROUPS)
    for item in items:
        group = heavy_group(item.path)
        rank[item] = order.index(group) if group else len(order) + (item.get_closest_marker("slow") is None)
    items.sort(key=rank.__getitem__)  # stable: the file order within each rank


# ---------------------------------------------------------------------------- the "real model" summary
# The real-model tests (tests/llm) keep their figures (cycles, tokens per second, modes) as the user property
# "real_model" of their report (the `real_model_report` fixture); the summary shows them, also from xdist workers.


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "real_model"
    ]
    if lines:
        terminalreporter.section("real model")
        for line in lines:
            terminalreporter.write_line(line)
