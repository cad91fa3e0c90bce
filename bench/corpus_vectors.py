"""Realistic vectors for the search benchmarks: the demo corpus' MiniLM embeddings as centres plus shaped noise.

Random Gaussian vectors are the worst case for nearest-neighbour search and not what ra stores.
Here every synthetic row is one of the demo papers' all-MiniLM-L6-v2 vectors (1,289 papers with
a title or an abstract, embedded once and cached) plus Gaussian noise shaped like the demo
corpus' own covariance (so it moves along the directions real abstracts vary in), re-normalised.
`noise` is the expected norm of that noise: 0.2 keeps copies at cosine ~0.98 of their centre, 0.6
at ~0.86, near the top-1 cosine between real abstracts on one topic.
"""

from __future__ import annotations

import csv
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
CACHE = Path(tempfile.gettempdir()) / "ra_bench_cluster" / "demo_E.npy"
BATCH = 100_000  # rows generated per step


def config():
    from ra_agent.config import load_config

    return load_config(ROOT / "config.toml", environ={})


def demo_vectors(cache: Path = CACHE) -> np.ndarray:
    """E vectors of the demo papers that have a title or an abstract, embedded once and cached."""
    if cache.exists():
        return np.load(cache)
    from ra_agent.embed.embedder import SentenceTransformerEmbedder

    with DEMO.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["title"].strip() or r["abstract"].strip()]
    texts = [f"{r['title']} · {r['abstract']}" if r["abstract"] else r["title"] for r in rows]
    started = time.perf_counter()
    vectors = SentenceTransformerEmbedder(config()).encode(texts)
    print(f"embedded {len(texts)} demo papers in {time.perf_counter() - started:.0f} s -> {cache}")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors.astype(np.float32))
    return vectors


def synthetic_batches(vectors: np.ndarray, n: int, noise: float, seed: int = 0) -> Iterator[np.ndarray]:
    """n float32 unit rows, BATCH at a time: demo vectors drawn with replacement plus noise shaped like their covariance.

    Noise along the directions the corpus itself varies in (expected norm `noise`) keeps the copies
    of one paper from collapsing into a tight blob once PCA drops the minor directions, which
    isotropic noise would do.
    """
    rng = np.random.default_rng(seed)
    variances, axes = np.linalg.eigh(np.cov(vectors, rowvar=False))
    variances = variances.clip(0, None)
    shape = (axes * np.sqrt(variances)).T * (noise / np.sqrt(variances.sum()))
    for start in range(0, n, BATCH):
        m = min(BATCH, n - start)
        out = vectors[rng.integers(0, len(vectors), m)].astype(np.float64)
        out += rng.standard_normal((m, vectors.shape[1])) @ shape
        yield (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def synthetic(vectors: np.ndarray, n: int, noise: float, seed: int = 0) -> np.ndarray:
    """`synthetic_batches` as one (n, dim) array."""
    return np.concatenate(list(synthetic_batches(vectors, n, noise, seed)))


def fill_store(root: Path, vectors: np.ndarray, n: int, noise: float, seed: int = 0):
    """A fresh fp16 VectorStore at `root` holding n synthetic rows (PMIDs 1,000,000 + row)."""
    from ra_agent.store.vectors import VectorStore

    store = VectorStore.create(root, model="demo-minilm-synthetic", version="1", dim=vectors.shape[1])
    done = 0
    for batch in synthetic_batches(vectors, n, noise, seed):
        store.append(np.arange(done, done + len(batch)) + 1_000_000, batch)
        done += len(batch)
    return store


def peak_rss() -> int:
    """Peak RSS of this process in bytes: VmHWM (reset by exec, unlike ru_maxrss, which a forked child inherits)."""
    import resource

    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux; an upper bound
