"""Benchmark: ANN search (ra's faiss IVF index, and HNSW candidates) vs the exact chunked scan: recall@10 and speed-up.

The store holds N x 384 fp16 rows made from the demo corpus' MiniLM vectors plus noise shaped like
their covariance (bench/corpus_vectors.py: random Gaussian vectors would be the worst case, not what
ra stores). The queries are fresh rows of the same kind, never stored ones. Ground truth is a
float32 brute force over the same fp16 rows. Each search path runs in its own subprocess
(its peak RSS is its own); every query is searched alone, as ra searches.

- exact: `VectorStore.topk` (the chunked scan; the baseline of the speed-up);
- ivf: ra's index (`store/ann.build_ann` with config.toml's [ann], searched by `store/ann.search`),
  then the same index at other nprobe values;
- hnsw-faiss: faiss IndexHNSWSQ (fp16, M 32, efConstruction 80, efSearch 64), 2 threads;
- usearch: usearch HNSW (f16, connectivity 16, expansion_add 128, expansion_search 64), 2 threads
  (only where usearch is installed: it was measured and not chosen, so ra does not depend on it).

HNSW candidates index the first --hnsw-rows rows, in a store of their own, and are compared with
the exact scan of that store (their build time grows ~ n log n; pass --hnsw-rows equal to --rows
to build them over everything). Prints; never asserts.
Targets: recall@10 >= 0.95 and >= 20x faster than the exact scan.

    python bench/bench_ann.py [--rows 1000000] [--queries 200] [--hnsw-rows 200000] [--candidates ivf,hnsw-faiss]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from corpus_vectors import config, demo_vectors, fill_store, peak_rss, synthetic

from ra_agent.store.vectors import VectorStore

K = 10
QUERY_SEED = 12345
TRUTH_ROWS = 65536  # rows per brute-force step
NPROBES = (8, 16, 32, 64, 128)


def brute_force(root: Path, qs: np.ndarray) -> np.ndarray:
    """Row numbers of each query's K best rows in the store at `root` (float32 products of the fp16 rows)."""
    matrix = VectorStore(root).matrix("E")
    rows = len(matrix)
    best_rows = np.zeros((len(qs), 0), dtype=np.int64)
    best_scores = np.zeros((len(qs), 0), dtype=np.float32)
    for start in range(0, rows, TRUTH_ROWS):
        scores = qs @ np.asarray(matrix[start : min(rows, start + TRUTH_ROWS)], dtype=np.float32).T
        top = np.argpartition(-scores, K - 1, axis=1)[:, :K] if scores.shape[1] > K else np.argsort(-scores, axis=1)
        best_rows = np.hstack([best_rows, top + start])
        best_scores = np.hstack([best_scores, np.take_along_axis(scores, top, axis=1)])
        keep = np.argsort(-best_scores, axis=1, kind="stable")[:, :K]
        best_rows, best_scores = np.take_along_axis(best_rows, keep, 1), np.take_along_axis(best_scores, keep, 1)
    return best_rows


def recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t.tolist())) / K for f, t in zip(found, truth, strict=True)]))


def timed(search, qs: np.ndarray) -> tuple[float, list[list[int]]]:
    search(qs[0])  # warm-up (page cache, lazy load)
    t0 = time.perf_counter()
    found = [search(q) for q in qs]
    return (time.perf_counter() - t0) / len(qs), found


def child(name: str, args: argparse.Namespace) -> dict:
    """One search path in this process: build (if any), search every query alone, score against the truth."""
    qs, truth = np.load(args.root / "queries.npy"), np.load(args.root / f"truth-{args.child_rows}.npy")
    store = VectorStore(args.root / f"store-{args.child_rows}")
    rows = store.rows_of  # PMID -> row
    out: dict = {"name": name, "rows": args.child_rows}
    if name == "exact":
        n = min(len(qs), args.exact_queries)
        seconds, found = timed(lambda q: rows(store.topk(q, K).pmids).tolist(), qs[:n])
        return {**out, "per_query": seconds, "recall": recall(found, truth[:n]), "peak_rss": peak_rss()}
    t0 = time.perf_counter()
    if name == "ivf":
        from ra_agent.store.ann import ann_state, build_ann, search

        ann = replace(config().ann, min_rows=0)  # [ann] as configured, whatever the bench's size
        built = build_ann(store, ann)
        assert ann_state(store).current, built.reason
        out.update(build_s=time.perf_counter() - t0, nlist=built.nlist, build_recall=built.recall_at_10)
        out["index_mb"] = built.index_bytes / 2**20
        sweep = {}
        for nprobe in sorted({ann.nprobe, *NPROBES}):
            cfg = replace(ann, nprobe=nprobe)
            seconds, found = timed(lambda q, c=cfg: rows(search(store, q, K, c).pmids).tolist(), qs)
            sweep[nprobe] = (seconds, recall(found, truth))
        out.update(per_query=sweep[ann.nprobe][0], recall=sweep[ann.nprobe][1], setting=f"nprobe {ann.nprobe}")
        out["sweep"] = {f"nprobe {p}": v for p, v in sweep.items()}
    elif name == "hnsw-faiss":
        import faiss

        matrix = store.matrix("E")
        index = faiss.IndexHNSWSQ(store.dim, faiss.ScalarQuantizer.QT_fp16, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        index.train(np.asarray(matrix[:1000], dtype=np.float32))
        for start in range(0, len(store), 65536):
            index.add(np.asarray(matrix[start : start + 65536], dtype=np.float32))
        out["build_s"] = time.perf_counter() - t0
        index.hnsw.efSearch = 64
        faiss.omp_set_num_threads(1)
        seconds, found = timed(lambda q: index.search(q[None], K)[1][0].tolist(), qs)
        out.update(per_query=seconds, recall=recall(found, truth), setting="M 32, efC 80, efS 64")
    elif name == "usearch":
        try:
            from usearch.index import Index
        except ImportError:
            return {**out, "skipped": "usearch is not installed (pip install usearch; not a dependency of ra)"}

        matrix = store.matrix("E")
        index = Index(ndim=store.dim, metric="ip", dtype="f16", connectivity=16, expansion_add=128, expansion_search=64)
        for start in range(0, len(store), 65536):
            block = np.asarray(matrix[start : start + 65536], dtype=np.float32)
            index.add(np.arange(start, start + len(block)), block, threads=2)
        out["build_s"] = time.perf_counter() - t0
        seconds, found = timed(lambda q: index.search(q, K, threads=1).keys.tolist(), qs)
        out.update(per_query=seconds, recall=recall(found, truth), setting="M 16, efC 128, efS 64")
    return {**out, "peak_rss": peak_rss()}


def run_child(name: str, rows: int, args: argparse.Namespace, root: Path) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--child-rows", str(rows), "--root", str(root)]
    cmd += ["--exact-queries", str(args.exact_queries)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--exact-queries", type=int, default=10, help="queries timed on the (slow) exact scan")
    parser.add_argument("--noise", type=float, default=0.6, help="expected norm of the noise around demo vectors")
    parser.add_argument("--hnsw-rows", type=int, default=200_000)
    parser.add_argument("--candidates", default="ivf,hnsw-faiss", help="ivf, hnsw-faiss, usearch")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return

    demo = demo_vectors()
    names = args.candidates.split(",")
    hnsw_rows = min(args.hnsw_rows, args.rows) if set(names) - {"ivf"} else args.rows
    with tempfile.TemporaryDirectory(prefix="ra-bench-ann-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        store = fill_store(root / f"store-{args.rows}", demo, args.rows, args.noise)
        if hnsw_rows != args.rows:  # the same first rows in a store of their own, for the candidates built on fewer
            first = store.row_pmids[:hnsw_rows]
            sub = VectorStore.create(root / f"store-{hnsw_rows}", model=store.model, version="1", dim=store.dim)
            for start in range(0, hnsw_rows, TRUTH_ROWS):
                sub.append(first[start : start + TRUTH_ROWS], store.get(first[start : start + TRUTH_ROWS]))
        qs = synthetic(demo, args.queries, args.noise, QUERY_SEED)
        np.save(root / "queries.npy", qs)
        for rows in {args.rows, hnsw_rows}:
            np.save(root / f"truth-{rows}.npy", brute_force(root / f"store-{rows}", qs))
        nearest = store.matrix("E")[np.load(root / f"truth-{args.rows}.npy")[:, 0]]
        top1 = float(np.mean(np.sum(qs * nearest.astype(np.float32), axis=1)))
        print(f"{args.rows:,} x 384 fp16 rows (demo MiniLM vectors + shaped noise of norm {args.noise}), "
              f"{args.queries} fresh queries, truth by float32 brute force: {time.perf_counter() - t0:.0f} s "
              f"(mean cosine of a query to its nearest row {top1:.2f})", flush=True)  # fmt: skip
        results = {"exact": run_child("exact", args.rows, args, root)}
        if hnsw_rows != args.rows:
            results["exact-sub"] = run_child("exact", hnsw_rows, args, root)
        for name in names:
            results[name] = run_child(name, hnsw_rows if name != "ivf" else args.rows, args, root)
            print(f"  {name}: done", flush=True)
    print(f"\nrecall@{K} against exact search; speed-up = exact scan time per query / ANN time per query")
    print(
        f"{'index':<12}{'rows':>10}{'setting':>24}{'build s':>9}{'ms/query':>10}{'recall@10':>11}{'speed-up':>10}{'peak RSS GiB':>14}"
    )
    for name, r in list(results.items()):
        if "skipped" in r:
            print(f"{name:<12} skipped: {r['skipped']}")
            continue
        exact = results["exact" if r["rows"] == args.rows else "exact-sub"]
        build = f"{r['build_s']:.0f}" if "build_s" in r else "-"
        print(f"{name:<12}{r['rows']:>10,}{r.get('setting', 'chunked scan'):>24}{build:>9}{r['per_query'] * 1e3:>10.2f}"
              f"{r['recall']:>11.3f}{exact['per_query'] / r['per_query']:>9.1f}x{r['peak_rss'] / 2**30:>14.2f}")  # fmt: skip
    if "ivf" in results:
        r = results["ivf"]
        print(f"ivf: {r['nlist']} lists, index {r['index_mb']:.0f} MiB, recall@10 measured at build "
              f"(stored rows as queries): {r['build_recall']}")  # fmt: skip
        for setting, (seconds, rec) in r["sweep"].items():
            print(f"  ivf {setting:<12} {seconds * 1e3:7.2f} ms/query  recall@10 {rec:.3f}  "
                  f"speed-up {results['exact']['per_query'] / seconds:6.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
