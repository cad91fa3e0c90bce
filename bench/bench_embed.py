"""Benchmark: ra's embedder (token truncation, length-sorted OOM-safe batches) vs a bare SentenceTransformer.encode.

Same model object, same demo abstracts, same batch size; runs alternate (and alternate who
goes first) and best and median are reported, since a shared machine's load swings run times.
Prints; never asserts. Target: overhead ratio <= 1.1x.

    python bench/bench_embed.py [--n 500] [--repeats 2]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from ra_agent.config import Config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.embed.tokens import encoding_name

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"


def demo_texts(n: int) -> list[str]:
    with DEMO.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["abstract"]]
    return [f"{r['title']} · {r['abstract']}" for r in rows[:n]]


def timed(fn) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    cfg = Config()
    texts = demo_texts(args.n)
    embedder = SentenceTransformerEmbedder(cfg)
    t_load, _ = timed(lambda: embedder.model)
    model = embedder.model
    batch = cfg.embedding.batch_size

    def bare() -> np.ndarray:
        return model.encode(texts, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)

    def ra() -> np.ndarray:
        return embedder.embed(texts).vectors

    embedder.embed(texts[:batch])  # warm-up both paths (allocator, tokenizer caches)
    times: dict[str, list[float]] = {"bare": [], "ra": []}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(args.repeats):
        order = [("bare", bare), ("ra", ra)]
        for name, fn in order if round_ % 2 == 0 else order[::-1]:  # alternate who runs first
            t, vectors[name] = timed(fn)
            times[name].append(round(t, 2))
    bare_times, ra_times = times["bare"], times["ra"]
    t_prepare, _ = timed(lambda: embedder.prepare(texts))

    best_bare, best_ra = min(bare_times), min(ra_times)
    median_ratio = float(np.median(ra_times) / np.median(bare_times))
    agreement = float(np.mean(np.sum(vectors["bare"] * vectors["ra"], axis=1)))
    print(f"{len(texts)} demo abstracts, batch {batch}, model {embedder.model_id} (loaded in {t_load:.1f}s)")
    print(f"  tokenizer for truncation: {encoding_name(cfg)}, max_input_tokens={embedder.max_input_tokens}")
    print(
        f"  bare SentenceTransformer.encode: {best_bare:.2f}s ({len(texts) / best_bare:.1f} texts/s)  runs {bare_times}"
    )
    print(f"  ra SentenceTransformerEmbedder : {best_ra:.2f}s ({len(texts) / best_ra:.1f} texts/s)  runs {ra_times}")
    print(f"    of which tiktoken truncation : {t_prepare:.3f}s")
    print(f"  overhead ratio ra / bare: best {best_ra / best_bare:.2f}x, median {median_ratio:.2f}x (target <= 1.1x)")
    print(f"  mean cosine(ra, bare) per text: {agreement:.4f} (below 1 only where truncation differs)")


if __name__ == "__main__":
    main()
