"""Benchmark: ra's cluster formation (reduction, then HDBSCAN) vs a direct hdbscan.HDBSCAN call: time and memory.

Two inputs: the demo corpus' all-MiniLM-L6-v2 vectors (papers with a title or abstract), and a
synthetic set of --n vectors made of demo vectors plus gaussian noise of expected norm --noise
(shaped like the demo covariance), re-normalised (384-d). Both sides get the same unit-row matrix and the same HDBSCAN parameters
from config.toml; each run happens in its own subprocess so peak RSS is its own. Prints; never
asserts.

    python bench/bench_cluster.py [--n 20000] [--noise 0.2] [--vectors CACHE.npy]
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
from corpus_vectors import config, demo_vectors, synthetic


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark (VmHWM: per address space, so not inherited across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # no /proc: Linux ru_maxrss is KiB


def run_worker(method: str, path: Path) -> dict:
    """Cluster the matrix at `path` one way; report seconds, clusters, noise and this process's peak RSS."""
    import hdbscan

    from ra_agent.topics.features import Features
    from ra_agent.topics.formation import form_clusters

    cfg = config()
    matrix = np.load(path)
    rss_before = peak_rss_mb()
    start = time.perf_counter()
    if method == "ra":
        features = Features.build(np.arange(len(matrix)), {"E": matrix}, "abstract")
        formation = form_clusters(features, cfg)
        labels, dims = formation.labels, formation.reduction
    else:
        ccfg = cfg.clustering
        model = hdbscan.HDBSCAN(
            min_samples=ccfg.min_samples,
            min_cluster_size=ccfg.min_cluster_size,
            metric="euclidean",
            cluster_selection_method=ccfg.cluster_selection_method,
        )
        labels, dims = model.fit_predict(matrix), f"raw {matrix.shape[1]}"
    seconds = time.perf_counter() - start
    return {
        "method": method,
        "dims": str(dims),
        "seconds": seconds,
        "clusters": int(labels.max()) + 1,
        "noise": int((labels == -1).sum()),
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak_rss_mb(),
    }


def measure(method: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", method, str(path)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="rows of the synthetic set (default 20000)")
    ap.add_argument("--noise", type=float, default=0.2, help="expected norm of the added noise (default 0.2)")
    ap.add_argument("--vectors", type=Path, default=Path(tempfile.gettempdir()) / "ra_bench_cluster" / "demo_E.npy",
                    help="cache of the demo vectors")  # fmt: skip
    ap.add_argument("--worker", nargs=2, metavar=("METHOD", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker[0], Path(args.worker[1]))))
        return 0

    ccfg = config().clustering
    print(
        f"HDBSCAN min_samples={ccfg.min_samples} min_cluster_size={ccfg.min_cluster_size} "
        f"selection={ccfg.cluster_selection_method}; ra reduces with {ccfg.reduce_method} at every size "
        f"(sizes scale with n: {ccfg.size_scaling}), PCA to {ccfg.reduce_dims} dims first above {ccfg.reduce_above} rows"
    )
    demo = demo_vectors(args.vectors)
    inputs = {"demo": demo, f"synthetic-{args.n // 1000}k": synthetic(demo, args.n, args.noise)}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, matrix in inputs.items():
            path = Path(tmp) / f"{name}.npy"
            np.save(path, matrix.astype(np.float32))
            for method in ("ra", "hdbscan"):
                results.append({"input": name, "rows": len(matrix), **measure(method, path)})
                print(f"  {name} / {method}: {results[-1]['seconds']:.1f} s", flush=True)

    print(
        f"\n{'input':<16}{'rows':>7}{'method':>9}{'reduction':>12}{'seconds':>9}{'clusters':>10}{'noise':>7}{'peak RSS MB':>13}"
    )
    for r in results:
        print(f"{r['input']:<16}{r['rows']:>7}{r['method']:>9}{r['dims']:>12}{r['seconds']:>9.1f}"
              f"{r['clusters']:>10}{r['noise']:>7}{r['peak_rss_mb']:>13.0f}")  # fmt: skip
    for name in inputs:
        ra, direct = (next(r for r in results if r["input"] == name and r["method"] == m) for m in ("ra", "hdbscan"))
        print(
            f"{name}: hdbscan / ra time {direct['seconds'] / ra['seconds']:.2f}x, "
            f"peak RSS ra {ra['peak_rss_mb']:.0f} MB vs hdbscan {direct['peak_rss_mb']:.0f} MB "
            f"(after imports + load: {ra['rss_before_mb']:.0f} / {direct['rss_before_mb']:.0f} MB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
