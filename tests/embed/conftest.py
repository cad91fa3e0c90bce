"""Fixtures of the embedding tests: the demo corpus, one loaded model per session, and its demo vectors."""

from __future__ import annotations

import demo_corpus
import numpy as np
import pytest
from embed_support import SAMPLE_SIZE
from recorded_vectors import RecordedEmbedder

from ra_agent.config import Config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.models import Paper


@pytest.fixture(scope="session")
def demo_papers() -> list[Paper]:
    """All 1,333 demo records, read straight from the CSV."""
    return demo_corpus.demo_papers()


@pytest.fixture(scope="session")
def demo_sample(demo_papers) -> list[Paper]:
    """The first demo records that have an abstract."""
    return [p for p in demo_papers if p.abstract][:SAMPLE_SIZE]


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The default embedder (bundled all-MiniLM-L6-v2), model loaded once for the whole session."""
    embedder = SentenceTransformerEmbedder(Config())
    assert embedder.dim == 384
    return embedder


@pytest.fixture(scope="session")
def demo_vectors(embedder, demo_sample) -> np.ndarray:
    """E vectors of `demo_sample`, in its order."""
    encoded = embedder.embed([p.text for p in demo_sample])
    assert len(encoded.skipped) == 0
    return encoded.vectors


@pytest.fixture(scope="session")
def demo_many(embedder, demo_papers, demo_vectors) -> tuple[np.ndarray, np.ndarray]:
    """(PMIDs, E vectors) of the first 440 demo records with an abstract: enough rows to train a few IVF lists."""
    papers = [p for p in demo_papers if p.abstract][:440]
    encoded = RecordedEmbedder(embedder).embed([p.text for p in papers[len(demo_vectors) :]])  # recorded vectors
    assert len(encoded.skipped) == 0
    return np.array([p.pmid for p in papers], dtype=np.int64), np.concatenate([demo_vectors, encoded.vectors])
