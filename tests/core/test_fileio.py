"""Atomic replacement: a failed write keeps the old file and leaves no temp file behind."""

from __future__ import annotations

import gzip

import pytest

from ra_agent.fileio import atomic_write, atomic_writer


def test_write_replaces_and_creates_folders(tmp_path):
    target = tmp_path / "a" / "b" / "goal_state.json"
    atomic_write(target, "first ✓")
    atomic_write(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["goal_state.json"]


def test_a_failure_mid_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "pico.jsonl"
    atomic_write(target, '{"pmid": 1}\n')
    with pytest.raises(RuntimeError), atomic_writer(target) as fh:
        fh.write(b'{"pmid": 2')
        raise RuntimeError("killed half way")
    assert target.read_text() == '{"pmid": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["pico.jsonl"]


def test_writer_takes_stream_encoders(tmp_path):
    target = tmp_path / "log.gz"
    with atomic_writer(target) as raw, gzip.GzipFile(fileobj=raw, mode="wb") as gz:
        gz.write(b"cycle 1\n")
    assert gzip.decompress(target.read_bytes()) == b"cycle 1\n"
