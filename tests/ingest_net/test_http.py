"""HTTP plumbing: the rate limiter on its own, Retry-After parsing and secret redaction."""

from __future__ import annotations

import email.utils
import threading
import time

from ra_agent.ingest.http import RateLimiter, redact, retry_after_seconds


def test_rate_limiter_spaces_callers_across_threads():
    limiter = RateLimiter(20.0)
    stamps: list[float] = []
    lock = threading.Lock()

    def worker():
        for _ in range(5):
            limiter.acquire()
            with lock:
                stamps.append(time.monotonic())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stamps.sort()
    assert len(stamps) == 20
    # 20 calls at 20/s span at least 19 intervals; and no 0.25 s window holds more than its share
    # (+1 for a window edge). Windows, not single gaps: thread scheduling may delay one stamp.
    assert stamps[-1] - stamps[0] >= 19 / 20 * 0.9
    assert max(sum(1 for t in stamps if s <= t < s + 0.25) for s in stamps) <= 0.25 * 20 + 1


def test_retry_after_forms():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after_seconds(later) <= 31


def test_redact_masks_secret_parameters_and_mailto():
    text = "GET /esearch.fcgi?db=pubmed&api_key=abc123&email=a%40b.org&tool=ra (ra/0.1; mailto:a@b.org)"
    masked = redact(text)
    assert "abc123" not in masked and "a%40b.org" not in masked and "a@b.org" not in masked
    assert "tool=ra" in masked and "api_key=***" in masked
