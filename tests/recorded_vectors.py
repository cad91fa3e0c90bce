"""Vectors recorded from the bundled all-MiniLM-L6-v2 for the texts the suite's workspaces embed again and again (the
demo corpus, the shared key's catheter records): tests/fixtures/vectors, how they were made in PROVENANCE.md there.

A fresh clone has no pytest cache, so without them every run embedded the demo's 1,289 texts once per fixture that
builds a workspace from them (about 90 s each on 2 cores). `RecordedEmbedder` is the real embedder whose `encode`
returns the recorded vector of a text it has one for and asks the model for the others; the fixtures that build
workspaces use it, the tests of the embedder use the model itself, and tests/embed/test_recorded_vectors.py embeds a
sample of the recorded texts again and compares.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ra_agent.embed.embedder import SentenceTransformerEmbedder

RECORDED = Path(__file__).resolve().parent / "fixtures" / "vectors" / "minilm_demo_and_cd006468.npz"


def text_key(slug: str, max_input_tokens: int, text: str) -> str:
    """What a recorded vector is found by: the model, its input limit and the text."""
    return hashlib.sha1(f"{slug}\n{max_input_tokens}\n{text}".encode()).hexdigest()[:24]


@functools.cache
def recorded() -> tuple[dict[str, int], np.ndarray]:
    """(key -> row, the rows) of the recorded file."""
    with np.load(RECORDED) as data:
        keys, vectors = data["keys"], data["vectors"]
    return {str(k): i for i, k in enumerate(keys)}, vectors


class RecordedEmbedder:
    """`embedder` with the recorded vectors: the same slug, model and settings; `encode` reads a recorded vector where
    there is one for the text (the model's input limit included) and asks the model for the rest."""

    def __init__(self, embedder: SentenceTransformerEmbedder):
        self._real = embedder
        self.recorded_rows = 0  # how many vectors came from the recording (what a test may check)

    def __getattr__(self, name: str):
        return getattr(self._real, name)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        index, vectors = recorded()
        keys = [text_key(self._real.slug, self._real.max_input_tokens, t) for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in index]
        out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        known = [i for i, k in enumerate(keys) if k in index]
        if known:
            out[known] = vectors[[index[keys[i]] for i in known]]
        if todo:
            out[todo] = self._real.encode([texts[i] for i in todo])
        self.recorded_rows += len(known)
        return out

    embed = SentenceTransformerEmbedder.embed  # the real one, batching through this `encode`
