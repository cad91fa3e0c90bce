"""store/vectors.py: fp16 family files, PMID offsets, append growth, crash safety, top-k, model folders."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from embed_support import embed_cfg, unit_rows

from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.embed.index import build_index, embed_missing, embed_shard
from ra_agent.store.db import Store
from ra_agent.store.vectors import (
    OFFSETS,
    PAUSE_AT_ENV,
    PAUSE_S_ENV,
    ROWS,
    VectorStore,
    VectorStoreError,
    active_index,
    open_active,
    switch_active,
)

HERE = Path(__file__).resolve().parent

# Appends `n` random unit vectors (PMIDs start.., seeded) to the store at argv[1], in `parts` appends.
APPENDER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from embed_support import unit_rows
    from ra_agent.store.vectors import VectorStore

    root, start, n, dim, seed, parts = sys.argv[1], *map(int, sys.argv[2:])
    pmids, rows = np.arange(start, start + n), unit_rows(n, dim, seed)
    store = VectorStore(root)
    for part in np.array_split(np.arange(n), parts):
        store.append(pmids[part], rows[part])
    """
)


def new_store(tmp_path: Path, dim: int = 384, **kwargs) -> VectorStore:
    return VectorStore.create(tmp_path / "emb" / "test@1", model="test", version="1", dim=dim, **kwargs)


def start_appender(root: Path, start: int, n: int, dim: int, seed: int, parts: int = 1, **env) -> subprocess.Popen:
    environ = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-c", APPENDER, str(root), *map(str, (start, n, dim, seed, parts))]
    return subprocess.Popen(args, env=environ)


def wait_for(condition, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"appender exited early with {proc.returncode}"
        assert time.monotonic() < deadline, "appender never reached the pause"
        time.sleep(0.05)


@pytest.fixture
def demo_store(tmp_path, demo_sample, demo_vectors) -> VectorStore:
    """The demo vectors appended in shuffled order, so row order differs from PMID order."""
    store = new_store(tmp_path)
    order = np.random.default_rng(7).permutation(len(demo_sample))
    store.append([demo_sample[i].pmid for i in order], demo_vectors[order])
    return store


def test_vector_norms(demo_store):
    """Memo 30 §7: stored fp16 rows have unit norm within 1e-3."""
    E = demo_store.matrix("E")
    assert E.dtype == np.float16 and E.shape == (len(demo_store), 384)
    assert np.allclose(np.linalg.norm(E[:100].astype(np.float32), axis=1), 1, atol=1e-3)
    assert demo_store.verify() == []


def test_offset_lookup(demo_store, demo_sample, demo_vectors, embedder):
    """Memo 30 §7: the row an offset lookup returns is the one whose vector matches that PMID's text."""
    pmids = [p.pmid for p in demo_sample]
    rows = demo_store.rows_of(pmids)
    assert sorted(rows.tolist()) == list(range(len(pmids))) and rows.tolist() != list(range(len(pmids)))
    np.testing.assert_allclose(demo_store.get(pmids), demo_vectors, atol=1e-3)

    sample = demo_sample[::15]
    again = embedder.encode([p.text for p in sample])
    for paper, vector in zip(sample, again, strict=True):
        best = demo_store.topk(vector, k=1)
        assert best.pmids.tolist() == [paper.pmid] and best.scores[0] > 0.99

    titles = embedder.encode([p.title for p in demo_sample])
    E = demo_store.matrix("E").astype(np.float32)
    similarity = titles @ E.T
    rank = (similarity > similarity[np.arange(len(pmids)), rows][:, None]).sum(axis=1)
    # A title alone is ambiguous among near-identical trial titles, so not every title ranks its
    # own row first; most do, and almost all within the top 5.
    assert (rank == 0).mean() >= 0.8 and (rank < 5).mean() >= 0.95


def test_append_grows_files_by_exactly_dim_n_2_bytes(tmp_path, demo_sample, demo_vectors):
    """Memo 20 §9 test_embed_append: each append grows E by dim × n × 2 bytes."""
    store = new_store(tmp_path)
    e_file, rows_file = store.path("E"), store.root / ROWS
    pmids = np.array([p.pmid for p in demo_sample])
    done = 0
    for n in (7, 50, len(pmids) - 57):
        e_before = e_file.stat().st_size if e_file.exists() else 0
        rows_before = rows_file.stat().st_size if rows_file.exists() else 0
        assert store.append(pmids[done : done + n], demo_vectors[done : done + n]) == n
        assert e_file.stat().st_size - e_before == 384 * n * 2
        assert rows_file.stat().st_size - rows_before == 8 * n
        done += n
    assert len(store) == len(pmids) and store.meta["count"] == len(pmids)
    size = e_file.stat().st_size
    assert store.append(pmids[:10], demo_vectors[:10]) == 0  # already stored: nothing appended
    assert e_file.stat().st_size == size


def test_append_rejects_bad_input(tmp_path):
    store = new_store(tmp_path, dim=8)
    with pytest.raises(ValueError, match="shape"):
        store.append([1, 2], unit_rows(3, 8))
    with pytest.raises(ValueError, match="duplicate"):
        store.append([1, 1], unit_rows(2, 8))
    bad = unit_rows(2, 8)
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        store.append([1, 2], bad)
    assert len(store) == 0 and not store.path("E").exists()


def test_lookup_of_unknown_pmids(tmp_path):
    store = new_store(tmp_path, dim=8)
    assert store.rows_of([5]).tolist() == [-1] and 5 not in store
    store.append([30, 10, 20], unit_rows(3, 8))
    assert store.pmids.tolist() == [10, 20, 30] and store.row_pmids.tolist() == [30, 10, 20]
    assert store.rows_of([20, 5, 30, 99]).tolist() == [2, -1, 0, -1]
    assert store.has([10, 11]).tolist() == [True, False]
    with pytest.raises(KeyError, match="1 PMIDs"):
        store.get([10, 11])


TIE = 2e-6  # float32 sums of 384 products in another order differ by < 1e-6: closer scores are ties


def assert_exact_ranking(found, pmids: np.ndarray, reference: np.ndarray, k: int) -> None:
    """`found` is the top k of `reference` (float64 scores of `pmids`), best first, up to ties closer than TIE."""
    best = np.argsort(-reference, kind="stable")[:k]
    assert len(found.pmids) == len(best) == len(set(found.pmids.tolist()))
    score_of = dict(zip(pmids.tolist(), reference.tolist(), strict=True))
    got = np.array([score_of[p] for p in found.pmids.tolist()])
    np.testing.assert_allclose(got, reference[best], rtol=0, atol=TIE)  # each rank holds a paper with that score
    np.testing.assert_allclose(found.scores, got, rtol=0, atol=TIE)  # and reports its score
    ranked = np.sort(reference)[::-1][: k + 1]
    gaps = np.abs(np.diff(ranked)) >= TIE
    alone = np.ones(len(best), dtype=bool)  # no other paper within TIE of its score: its rank is unambiguous
    alone[: len(gaps)] &= gaps[: len(best)]
    alone[1:] &= gaps[: len(best) - 1]
    np.testing.assert_array_equal(found.pmids[alone], pmids[best][alone])


@pytest.mark.parametrize("k", [1, 10, 500, 5000])
def test_topk_equals_brute_force(tmp_path, k):
    dim, n = 64, 3000
    store = new_store(tmp_path, dim=dim, chunk_rows=257)  # many chunks, a ragged last one
    pmids = np.random.default_rng(1).permutation(np.arange(10_000, 10_000 + n))
    store.append(pmids, unit_rows(n, dim, seed=3))
    matrix = store.get(pmids).astype(np.float64)
    for seed in range(3):
        query = unit_rows(1, dim, seed=100 + seed)[0]
        found = store.topk(3 * query, k)  # cosine: the query's length does not matter
        assert_exact_ranking(found, pmids, matrix @ query.astype(np.float64), k)
    with pytest.raises(ValueError, match="non-zero"):
        store.topk(np.zeros(dim), 3)


@pytest.mark.parametrize(("dtype", "chunk_rows"), [("float16", 16), ("float16", 4096), ("float32", 7)])
def test_topk_on_demo_vectors_matches_a_float64_brute_force(tmp_path, demo_sample, demo_vectors, dtype, chunk_rows):
    """Real MiniLM vectors of demo abstracts; the queries are other demo abstracts, never stored."""
    stored, queries = demo_vectors[:120], demo_vectors[120:]
    pmids = np.array([p.pmid for p in demo_sample[:120]])
    store = new_store(tmp_path, dtype=dtype, chunk_rows=chunk_rows)
    store.append(pmids, stored)
    matrix = store.get(pmids).astype(np.float64)  # the values as stored (fp16 rounding included)
    for query in queries:
        for k in (1, 10, 50):
            assert_exact_ranking(store.topk(query, k), pmids, matrix @ query.astype(np.float64), k)


def test_pico_families_cover_a_subset_of_rows(tmp_path):
    dim = 16
    store = new_store(tmp_path, dim=dim)
    pmids = np.arange(100, 140)
    store.append(pmids, unit_rows(40, dim, seed=1))
    e_size = store.path("E").stat().st_size

    with_pico = pmids[[3, 17, 18, 25]]
    p_vectors = unit_rows(4, dim, seed=2)
    assert store.put("p", with_pico, p_vectors) == 4
    assert store.families == ["E", "p"] and store.path("E").stat().st_size == e_size
    np.testing.assert_allclose(store.get(with_pico, "p"), p_vectors, atol=1e-3)
    assert not store.get(pmids[:3], "p").any()  # papers without PICO read as zero vectors
    assert store.has(pmids, "p").sum() == 4 and store.has(pmids, "i").sum() == 0
    assert set(store.topk(p_vectors[0], k=10, family="p").pmids) == set(with_pico)
    assert store.topk(p_vectors[0], k=10, family="i").pmids.size == 0

    store.put("p", with_pico[:1], p_vectors[:1])  # rewriting is idempotent
    assert VectorStore(store.root).verify() == []
    with pytest.raises(ValueError, match="append-only"):
        store.put("E", with_pico, p_vectors)
    with pytest.raises(KeyError):
        store.put("o", [999], p_vectors[:1])


@pytest.mark.parametrize("stage", ["after_data", "after_offsets"])
def test_killed_append_leaves_a_consistent_store(tmp_path, stage, caplog):
    dim = 32
    store = new_store(tmp_path, dim=dim)
    first = np.arange(2049, 1999, -1)
    store.append(first, unit_rows(50, dim, seed=1))

    proc = start_appender(store.root, 100, 100, dim, 2, **{PAUSE_AT_ENV: stage, PAUSE_S_ENV: "300"})
    try:
        if stage == "after_data":
            wait_for(lambda: (store.root / ROWS).stat().st_size == 150 * 8, proc)
        else:
            wait_for(lambda: np.load(store.root / OFFSETS).shape == (2, 150), proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    with caplog.at_level(logging.WARNING, logger="ra_agent.store.vectors"):
        reopened = VectorStore(store.root)
    assert ("rebuilding" in caplog.text) == (stage == "after_offsets")
    assert len(reopened) == 50 and store.path("E").stat().st_size == 150 * dim * 2  # the tail is ignored
    assert reopened.pmids.tolist() == list(range(2000, 2050)) and not reopened.has(range(100, 200)).any()
    np.testing.assert_allclose(reopened.get(first), unit_rows(50, dim, seed=1), atol=1e-3)
    assert reopened.verify() == []

    assert reopened.append(range(100, 200), unit_rows(100, dim, seed=2)) == 100  # the re-run completes
    assert store.path("E").stat().st_size == 150 * dim * 2 and (store.root / ROWS).stat().st_size == 150 * 8
    final = VectorStore(store.root)
    assert len(final) == 150 and final.verify() == []
    np.testing.assert_allclose(final.get(range(100, 200)), unit_rows(100, dim, seed=2), atol=1e-3)


def test_concurrent_appenders_are_serialised(tmp_path):
    dim = 32
    store = new_store(tmp_path, dim=dim)
    procs = [start_appender(store.root, start, 300, dim, seed, parts=6) for start, seed in ((0, 1), (5000, 2))]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    store.refresh()
    assert len(store) == 600 and store.verify() == []
    assert store.path("E").stat().st_size == 600 * dim * 2
    np.testing.assert_allclose(store.get(range(5000, 5300)), unit_rows(300, dim, seed=2), atol=1e-3)


def test_verify_reports_damage_and_offsets_are_rebuilt(tmp_path, caplog):
    dim = 8
    store = new_store(tmp_path, dim=dim)
    store.append(range(10), unit_rows(10, dim))
    raw = np.memmap(store.path("E"), dtype=np.float16, mode="r+", shape=(10, dim))
    raw[3] = 2.0
    raw[4, 0] = np.inf
    raw.flush()
    del raw
    assert VectorStore(store.root).verify() == ["E: 1 rows not finite", "E: 1 rows with |norm - 1| > 0.001"]

    (store.root / OFFSETS).unlink()
    with caplog.at_level(logging.WARNING, logger="ra_agent.store.vectors"):
        rebuilt = VectorStore(store.root)
    assert "rebuilding" in caplog.text and rebuilt.rows_of([7]).tolist() == [7]

    (store.root / ROWS).write_bytes(b"")
    with pytest.raises(VectorStoreError, match="count 10"):
        VectorStore(store.root)


def test_folder_of_another_model_is_refused(tmp_path):
    new_store(tmp_path, dim=8)
    with pytest.raises(VectorStoreError, match="dim"):
        VectorStore.create(tmp_path / "emb" / "test@1", model="test", version="1", dim=16)


def test_active_pointer(tmp_path):
    assert active_index(tmp_path) is None
    with pytest.raises(FileNotFoundError):
        switch_active(tmp_path, "nothing@1")
    store = new_store(tmp_path, dim=8)
    assert switch_active(tmp_path, store.root.name) is None
    assert active_index(tmp_path) == "test@1" and (tmp_path / "emb" / "ACTIVE").read_text() == "test@1\n"


def test_embed_shards_and_model_version_bump(tmp_path, embedder, demo_sample):
    """A model bump re-embeds into a new folder; the old one stays readable and active until the new one is complete."""
    pmids = [p.pmid for p in demo_sample[:40]]
    with Store(tmp_path / "ra.sqlite") as db:
        batches = db.upsert_papers(demo_sample[:40], source="import:demo", batch_size=20).batches
        assert len(batches) == 2
        cfg1 = embed_cfg(tmp_path, max_input_tokens=48)
        v1 = SentenceTransformerEmbedder(cfg1, model=embedder.model)
        seen = []
        first = embed_shard(cfg1, db, batches[0], v1, on_progress=lambda done, total: seen.append((done, total)))
        assert (first.embedded, first.requested, first.skipped, first.batch_id) == (20, 20, [], batches[0])
        assert seen[-1] == (20, 20) and first.model_id == "sentence-transformers/all-MiniLM-L6-v2"
        embed_shard(cfg1, db, batches[1], v1)
        index = build_index(cfg1, db)
        assert (index.active, index.previous, index.missing, index.problems) == (v1.slug, None, 0, [])
        old = open_active(cfg1)
        before, old_size = old.get(pmids), old.path().stat().st_size

        cfg2 = embed_cfg(tmp_path, max_input_tokens=48, model_version="2")
        v2 = SentenceTransformerEmbedder(cfg2, model=embedder.model)
        bumped = embed_shard(cfg2, db, batches[0], v2)
        assert bumped.slug == "sentence-transformers__all-MiniLM-L6-v2@2" and bumped.embedded == 20
        half = build_index(cfg2, db)
        assert half.missing == 20 and half.active == v1.slug  # incomplete: the old index stays active
        assert open_active(cfg2).slug == v1.slug
        np.testing.assert_array_equal(VectorStore(old.root).get(pmids), before)

        embed_shard(cfg2, db, batches[1], v2)
        done = build_index(cfg2, db)
        assert (done.active, done.previous, done.missing) == (v2.slug, v1.slug, 0)
        assert open_active(cfg2).root.name == v2.slug
        assert old.path().stat().st_size == old_size
        np.testing.assert_array_equal(VectorStore(old.root).get(pmids), before)

        again = embed_shard(cfg2, db, batches[0], v2)
        assert (again.embedded, again.already_present) == (0, 20)
        report = embed_missing(open_active(cfg2), v2, db, [pmids[0], 999_999_999], cfg2)
        assert (report.embedded, report.already_present, report.missing) == (0, 1, [999_999_999])
