"""store/ann.py: an IVF index over real demo MiniLM vectors finds the exact neighbours, and is bypassed when stale."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ra_agent.config import AnnConfig
from ra_agent.store.ann import ann_state, build_ann, remove_ann, search
from ra_agent.store.vectors import VectorStore

K = 10


@pytest.fixture
def split(tmp_path, demo_many) -> tuple[VectorStore, np.ndarray, np.ndarray]:
    """A store of 400 demo abstracts; the other 40 are the queries (never stored)."""
    pmids, vectors = demo_many
    store = VectorStore.create(tmp_path / "emb" / "minilm@1", model="minilm", version="1", dim=vectors.shape[1])
    store.append(pmids[:400], vectors[:400])
    return store, vectors[400:], pmids[400:]


def small(**knobs) -> AnnConfig:
    """[ann] for a 400-row store: 8 lists (400 rows train them), 3 searched per query."""
    return AnnConfig(**{"min_rows": 300, "nlist": 8, "nprobe": 3, "recall_queries": 30, **knobs})


def test_ivf_index_finds_the_exact_neighbours_of_most_queries(split, caplog):
    store, queries, _ = split
    built = build_ann(store, small())
    assert built.action == "built" and built.count == 400 and built.nlist == 8 and built.nprobe == 3
    assert built.recall_queries == 30 and built.recall_at_10 is not None and built.recall_at_10 >= 0.8
    assert ann_state(store).current

    recall, identical = [], 0
    with caplog.at_level(logging.INFO, logger="ra_agent.store.ann"):
        for q in queries:
            approx, exact = search(store, q, K, small()), store.topk(q, K)
            assert approx.method == "ann" and exact.method == "exact"
            recall.append(len(set(approx.pmids.tolist()) & set(exact.pmids.tolist())) / K)
            identical += approx.pmids.tolist() == exact.pmids.tolist()
            found = np.isin(approx.pmids, exact.pmids)  # a neighbour both found carries the same fp16 score
            np.testing.assert_allclose(
                approx.scores[found], exact.scores[np.isin(exact.pmids, approx.pmids)], atol=1e-6
            )
    assert np.mean(recall) >= 0.9 and identical >= 0.7 * len(queries)
    assert "ANN index" in caplog.text

    # 3 of 8 lists is an approximation: searching all 8 is exhaustive and gives the exact answer
    for q in queries[:10]:
        assert search(store, q, K, small(nprobe=8)).pmids.tolist() == store.topk(q, K).pmids.tolist()


def test_a_stale_index_is_bypassed_until_rebuilt(split, demo_many, caplog):
    store, queries, query_pmids = split
    build_ann(store, small())
    assert build_ann(store, small()).action == "current"  # nothing new: kept as is
    store.append(query_pmids[:5], queries[:5])  # the folder grows past what the index covers

    state = ann_state(store)
    assert not state.current and "stale" in state.reason
    with caplog.at_level(logging.INFO, logger="ra_agent.store.ann"):
        found = search(store, queries[0], K, small())
    assert found.method == "exact" and "exact scan" in caplog.text and "stale" in caplog.text
    assert found.pmids[0] == query_pmids[0]  # the new row is found: it is its own best match
    np.testing.assert_array_equal(found.pmids, store.topk(queries[0], K).pmids)

    rebuilt = build_ann(store, small())
    assert rebuilt.action == "built" and rebuilt.count == 405 and ann_state(store).current
    assert search(store, queries[0], K, small()).method == "ann"

    assert remove_ann(store) and not ann_state(store).current
    assert search(store, queries[0], K, small()).method == "exact"


def test_below_min_rows_nothing_is_built(split):
    store, queries, _ = split
    skipped = build_ann(store, small(min_rows=401))
    assert skipped.action == "skipped" and "min_rows" in skipped.reason
    assert not (store.root / "ann").exists() and search(store, queries[0], K, small()).method == "exact"
