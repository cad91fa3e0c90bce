"""Benchmark: exact chunked top-k over an on-disk fp16 store vs numpy in RAM (float32 copy = the baseline).

Fills a temporary VectorStore with N x 384 fp16 rows made from the demo corpus' MiniLM vectors
plus shaped noise (bench/corpus_vectors.py; the queries are fresh rows of the same kind, never
stored ones), then runs each search path in its own subprocess, so each peak RSS is that path's own:

- chunked: `VectorStore.topk`, reading `chunk_rows` rows at a time (one run per --chunk-rows value);
- numpy fp16: the whole fp16 matrix in RAM, `matrix.astype(float32) @ q` per query;
- numpy float32 (baseline): a float32 copy of the matrix in RAM (2x the memory), `matrix @ q`.

Prints; never asserts. Targets: chunked <= 1.3x the float32 baseline, peak RSS < 1 GiB.

    python bench/bench_topk.py [--rows 1000000] [--k 100] [--queries 5] [--rounds 2] [--chunk-rows 2048,65536]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from corpus_vectors import demo_vectors, fill_store, peak_rss, synthetic

from ra_agent.config import Config
from ra_agent.store.vectors import VectorStore

QUERY_SEED = 12345  # queries: synthetic rows from another seed than the stored ones
TIE = 2e-6  # float32 sums in another order differ by < 1e-6: closer scores are ties


def search_chunked(root: Path, qs: np.ndarray, k: int, chunk_rows: int) -> tuple[float, list]:
    store = VectorStore(root, chunk_rows=chunk_rows)
    store.topk(qs[0], k)  # warm-up (page cache, allocator)
    t0 = time.perf_counter()
    found = [store.topk(q, k) for q in qs]
    return (time.perf_counter() - t0) / len(qs), [[f.pmids.tolist(), f.scores.tolist()] for f in found]


def search_in_ram(root: Path, qs: np.ndarray, k: int, as_float32: bool) -> tuple[float, list]:
    """Plain numpy: the whole matrix in RAM (fp16 as stored, or converted once to float32), one product per query."""
    store = VectorStore(root)
    matrix = np.fromfile(store.path("E"), dtype=store.dtype, count=len(store) * store.dim).reshape(-1, store.dim)
    if as_float32:
        matrix = matrix.astype(np.float32)
    pmids = np.array(store.row_pmids)

    def topk(q: np.ndarray) -> list:
        scores = matrix.astype(np.float32, copy=False) @ q
        best = np.argpartition(scores, len(scores) - k)[len(scores) - k :]
        best = best[np.lexsort((best, -scores[best]))]
        return [pmids[best].tolist(), scores[best].tolist()]

    topk(qs[0])
    t0 = time.perf_counter()
    found = [topk(q) for q in qs]
    return (time.perf_counter() - t0) / len(qs), found


def child(mode: str, root: Path, args: argparse.Namespace) -> None:
    """One search path in this process; prints a JSON line with time per query, peak RSS and the results."""
    qs = synthetic(demo_vectors(), args.queries, args.noise, QUERY_SEED)
    if mode.startswith("chunked"):
        seconds, found = search_chunked(root, qs, args.k, int(mode.split(":")[1]))
    else:
        seconds, found = search_in_ram(root, qs, args.k, as_float32=mode == "ram-f32")
    print(json.dumps({"mode": mode, "seconds_per_query": seconds, "peak_rss": peak_rss(), "found": found}))


def run_child(mode: str, root: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--root", str(root), "--k", str(args.k)]
    cmd += ["--queries", str(args.queries), "--noise", str(args.noise)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(runs: list[dict], mode: str) -> dict:
    """The fastest run of a mode (the machine may be busy with other work); peak RSS is the largest seen."""
    mine = [r for r in runs if r["mode"] == mode]
    return {**min(mine, key=lambda r: r["seconds_per_query"]), "peak_rss": max(r["peak_rss"] for r in mine)}


def agreement(a: list, b: list) -> tuple[int, float]:
    """Queries whose ranked PMIDs are identical, and the largest score gap where they differ (ties if < TIE)."""
    identical, gap = 0, 0.0
    for (ids_a, sc_a), (ids_b, sc_b) in zip(a, b, strict=True):
        if ids_a == ids_b:
            identical += 1
        gap = max(gap, float(np.max(np.abs(np.array(sc_a) - np.array(sc_b)))))
    return identical, gap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--noise", type=float, default=0.6, help="expected norm of the noise around demo vectors")
    parser.add_argument("--chunk-rows", default=str(Config().embedding.topk_chunk_rows),
                        help="comma-separated chunk sizes to run (default: config.toml's topk_chunk_rows)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2, help="runs of each path, alternating; the fastest counts")
    parser.add_argument("--child")
    parser.add_argument("--root", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args)
        return

    modes = [f"chunked:{int(c)}" for c in args.chunk_rows.split(",")] + ["ram", "ram-f32"]
    with tempfile.TemporaryDirectory(prefix="ra-bench-topk-") as tmp:
        root = Path(tmp) / "emb" / "synthetic@1"
        t0 = time.perf_counter()
        fill_store(root, demo_vectors(), args.rows, args.noise)
        size = (root / "E.f16").stat().st_size
        print(f"wrote {args.rows:,} x 384 fp16 rows ({size / 2**20:,.0f} MiB) in {time.perf_counter() - t0:.1f}s: "
              f"demo MiniLM vectors + shaped noise of norm {args.noise}")  # fmt: skip
        runs = [run_child(mode, root, args) for _ in range(args.rounds) for mode in modes]
    results = {mode: best(runs, mode) for mode in modes}
    base, fp16 = results["ram-f32"], results["ram"]
    gib = 2**30
    print(f"top-{args.k}, {args.queries} queries x {args.rounds} rounds (fastest round counts)")
    print(f"  baseline, numpy in RAM float32 copy: {base['seconds_per_query']:.3f} s/query, "
          f"peak RSS {base['peak_rss'] / gib:.2f} GiB")  # fmt: skip
    print(f"  numpy in RAM fp16 (as stored)      : {fp16['seconds_per_query']:.3f} s/query, "
          f"peak RSS {fp16['peak_rss'] / gib:.2f} GiB")  # fmt: skip
    for mode in modes[:-2]:
        r = results[mode]
        same, gap = agreement(r["found"], base["found"])
        print(
            f"  chunked store scan, chunk_rows={int(mode.split(':')[1]):>6,}: {r['seconds_per_query']:.3f} s/query, "
            f"{r['seconds_per_query'] / base['seconds_per_query']:.2f}x the float32 baseline (target <= 1.3x), "
            f"{r['seconds_per_query'] / fp16['seconds_per_query']:.2f}x numpy fp16, "
            f"peak RSS {r['peak_rss'] / gib:.2f} GiB (< 1 GiB: {r['peak_rss'] < gib}), "
            f"same ranking as the baseline in {same}/{args.queries} queries, max score gap {gap:.1e} (tie < {TIE:.0e})"
        )


if __name__ == "__main__":
    main()
