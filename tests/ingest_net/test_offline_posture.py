"""One network posture: a host that cannot be resolved or refuses the connection sends the client offline at once
(one notice, no retries); timeouts stay transient and are retried."""

from __future__ import annotations

import logging
import socket
import time

import pytest
import requests
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError

from ra_agent.ingest.http import ApiUnreachable, HttpClient, RateLimiter, RetryPolicy, unreachable


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_what_counts_as_unreachable():
    url = closed_port_url()
    with pytest.raises(requests.ConnectionError) as refused:
        requests.get(url, timeout=5)
    assert unreachable(refused.value)
    dns = requests.ConnectionError(
        NameResolutionError("nohost.invalid", None, socket.gaierror(-2, "Name or service not known"))
    )  # type: ignore[arg-type]
    assert unreachable(dns)
    assert not unreachable(requests.ConnectTimeout(ConnectTimeoutError(None, "timed out")))
    assert not unreachable(requests.ReadTimeout("read timed out"))
    assert not unreachable(requests.ConnectionError("Connection aborted: RemoteDisconnected"))


def test_a_refused_connection_goes_offline_at_once_and_says_so_once(caplog):
    results: list[tuple[bool, str]] = []
    client = HttpClient("eutils", limiter=RateLimiter(100.0), policy=RetryPolicy(3, 2.0), timeout_s=5,
                        headers={}, on_result=lambda ok, error: results.append((ok, error)))  # fmt: skip
    url = closed_port_url() + "/esearch.fcgi"
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="ra_agent.ingest.http"), pytest.raises(ApiUnreachable) as first:
        client.request("GET", url, lambda r: r.text)
    assert first.value.attempts == 1 and time.monotonic() - started < 2.0  # no back-off (2 + 4 + 8 s)
    with pytest.raises(ApiUnreachable) as second:
        client.request("GET", url, lambda r: r.text)
    assert second.value.attempts == 0 and "not sent: offline" in str(second.value)
    assert client.offline and results == [(False, results[0][1])] and "unreachable" in results[0][1]
    notices = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(notices) == 1 and "cannot be reached (connection refused)" in notices[0].getMessage()
    assert "provisional: offline" in notices[0].getMessage()
