"""The recorded vectors the workspace fixtures read (tests/recorded_vectors.py) are the bundled model's: a sample of
the demo's texts embedded again gives the same vectors, every demo text has one, and a text without one is embedded."""

from __future__ import annotations

import numpy as np
from recorded_vectors import RecordedEmbedder, recorded, text_key

from ra_agent.embed.embedder import SentenceTransformerEmbedder


def test_the_recorded_vectors_are_the_models_and_cover_every_demo_text(embedder: SentenceTransformerEmbedder,
                                                                       demo_papers) -> None:  # fmt: skip
    index, vectors = recorded()
    texts = [p.text for p in demo_papers if p.text.strip(" ·")]
    keys = [text_key(embedder.slug, embedder.max_input_tokens, t) for t in texts]
    missing = [t[:60] for t, k in zip(texts, keys, strict=True) if k not in index]
    assert not missing, f"demo texts with no recorded vector (re-run tests/fixtures/vectors/record.py): {missing[:3]}"
    sample = texts[:: len(texts) // 24][:24]  # spread over the corpus: short and long texts
    fresh = embedder.encode(sample)
    kept = vectors[[index[text_key(embedder.slug, embedder.max_input_tokens, t)] for t in sample]]
    assert np.abs(fresh - kept).max() < 1e-5


def test_a_text_without_a_recorded_vector_is_embedded_by_the_model(embedder: SentenceTransformerEmbedder,
                                                                   demo_papers) -> None:  # fmt: skip
    known = next(p.text for p in demo_papers if p.abstract)
    new = "A text written for this test: omeprazole and a placebo in a trial of heartburn."
    recorded_embedder = RecordedEmbedder(embedder)
    both = recorded_embedder.embed([known, new]).vectors
    assert recorded_embedder.recorded_rows == 1 and recorded_embedder.slug == embedder.slug
    assert np.abs(both - embedder.encode([known, new])).max() < 1e-5
