"""Benchmark: chunked top-k over an on-disk fp16 store vs numpy brute force in RAM (time ratio, peak RSS).

Writes N x DIM random unit vectors (fp16) to a temporary VectorStore, then runs each search
path in its own subprocess so the peak RSS of one does not hide in the other's. Prints;
never asserts. Targets: time ratio <= 1.5x, peak RSS of the chunked path < 1 GiB.

    python bench/bench_topk.py [--rows 1000000] [--dim 384] [--k 100] [--queries 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ra_agent.store.vectors import DEFAULT_CHUNK_ROWS, VectorStore

WRITE_ROWS = 100_000  # rows generated and appended per step


def unit_rows(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    rows = rng.standard_normal((n, dim), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def queries(n: int, dim: int) -> np.ndarray:
    return unit_rows(n, dim, np.random.default_rng(12345))


def build(root: Path, rows: int, dim: int) -> float:
    """Fill a fresh store with `rows` random unit vectors; returns seconds."""
    t0 = time.perf_counter()
    store = VectorStore.create(root, model="random", version="1", dim=dim)
    rng = np.random.default_rng(0)
    for start in range(0, rows, WRITE_ROWS):
        n = min(WRITE_ROWS, rows - start)
        store.append(np.arange(start, start + n) + 1_000_000, unit_rows(n, dim, rng))
    return time.perf_counter() - t0


def search_chunked(root: Path, qs: np.ndarray, k: int, chunk_rows: int) -> tuple[float, list[list[int]]]:
    store = VectorStore(root, chunk_rows=chunk_rows)
    store.topk(qs[0], k)  # warm-up (page cache, allocator)
    t0 = time.perf_counter()
    found = [store.topk(q, k).pmids.tolist() for q in qs]
    return (time.perf_counter() - t0) / len(qs), found


def search_in_ram(root: Path, qs: np.ndarray, k: int, as_float32: bool) -> tuple[float, list[list[int]]]:
    """Plain numpy: the whole matrix in RAM (fp16 as stored, or converted once to float32), one product per query."""
    store = VectorStore(root)
    matrix = np.fromfile(store.path("E"), dtype=store.dtype, count=len(store) * store.dim).reshape(-1, store.dim)
    if as_float32:
        matrix = matrix.astype(np.float32)
    pmids = np.array(store.row_pmids)

    def topk(q: np.ndarray) -> list[int]:
        scores = matrix.astype(np.float32, copy=False) @ q
        best = np.argpartition(scores, len(scores) - k)[len(scores) - k :]
        return pmids[best[np.lexsort((best, -scores[best]))]].tolist()

    topk(qs[0])
    t0 = time.perf_counter()
    found = [topk(q) for q in qs]
    return (time.perf_counter() - t0) / len(qs), found


def child(mode: str, root: Path, k: int, n_queries: int, chunk_rows: int) -> None:
    """One search path in this process; prints a JSON line with time per query and peak RSS."""
    meta = json.loads((root / "meta.json").read_text())
    qs = queries(n_queries, meta["dim"])
    if mode == "chunked":
        seconds, found = search_chunked(root, qs, k, chunk_rows)
    else:
        seconds, found = search_in_ram(root, qs, k, as_float32=mode == "ram-f32")
    print(json.dumps({"mode": mode, "seconds_per_query": seconds, "peak_rss": peak_rss(), "found": found}))


def peak_rss() -> int:
    """Peak RSS of this process in bytes: VmHWM (reset by exec, unlike ru_maxrss, which a forked child inherits)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux; an upper bound


def run_child(mode: str, root: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--root", str(root), "--k", str(args.k)]
    cmd += ["--queries", str(args.queries), "--chunk-rows", str(args.chunk_rows)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(runs: list[dict], mode: str) -> dict:
    """The fastest run of a mode (the machine may be busy with other work); peak RSS is the largest seen."""
    mine = [r for r in runs if r["mode"] == mode]
    return {**min(mine, key=lambda r: r["seconds_per_query"]), "peak_rss": max(r["peak_rss"] for r in mine)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each path, alternating; the fastest counts")
    parser.add_argument("--child", choices=("chunked", "ram", "ram-f32"))
    parser.add_argument("--root", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args.k, args.queries, args.chunk_rows)
        return

    with tempfile.TemporaryDirectory(prefix="ra-bench-topk-") as tmp:
        root = Path(tmp) / "emb" / "random@1"
        seconds = build(root, args.rows, args.dim)
        size = (root / "E.f16").stat().st_size
        print(f"wrote {args.rows:,} x {args.dim} fp16 vectors ({size / 2**20:,.0f} MiB) in {seconds:.1f}s")
        runs = [run_child(mode, root, args) for _ in range(args.rounds) for mode in ("chunked", "ram", "ram-f32")]
    chunked, ram, ram32 = (best(runs, mode) for mode in ("chunked", "ram", "ram-f32"))
    gib = 2**30
    print(f"top-{args.k}, {args.queries} queries x {args.rounds} rounds, chunk_rows={args.chunk_rows:,}")
    print(
        f"  chunked store scan: {chunked['seconds_per_query']:.3f} s/query, peak RSS {chunked['peak_rss'] / gib:.2f} GiB"
    )
    print(f"  numpy in RAM, fp16: {ram['seconds_per_query']:.3f} s/query, peak RSS {ram['peak_rss'] / gib:.2f} GiB")
    print(f"  numpy in RAM, f32 : {ram32['seconds_per_query']:.3f} s/query, peak RSS {ram32['peak_rss'] / gib:.2f} GiB")
    ratio = chunked["seconds_per_query"] / ram["seconds_per_query"]
    print(f"  time ratio chunked / RAM (same fp16 data): {ratio:.2f}x (target <= 1.5x)")
    ratio32 = chunked["seconds_per_query"] / ram32["seconds_per_query"]
    print(f"  time ratio chunked / RAM float32 copy (2x the memory): {ratio32:.2f}x (for reference)")
    print(f"  chunked peak RSS < 1 GiB: {chunked['peak_rss'] < gib}")
    print(f"  same results: {chunked['found'] == ram['found'] == ram32['found']}")


if __name__ == "__main__":
    main()
