"""Benchmark: do the clusters keep the evidence? ra's clustering vs memo 40's raw-vector HDBSCAN, on the demo review.

For the demo corpus (Cohen 2006 PPI, papers with a title or abstract), random subsets of it and a subset
keeping the review's final inclusions, each method clusters the papers through ra's own pipeline
(`cluster_corpus` into a scratch store: formation, rule-based audit, freeze, tau_assign intake of the
noise) and reports:

* final / abstract: share of the review's final (label_included) and abstract-screening inclusions
  that sit in an active cluster;
* noise: share of papers in no cluster; k: active clusters;
* top: share of the final inclusions in the single cluster holding most of them (a "one giant
  cluster" answer shows here);
* read80: share of the corpus a reviewer reads to reach 80 % of the final inclusions when taking
  clusters in order of inclusion density, unassigned last (a blob gives ~100 %);
* ARI: adjusted Rand index between two runs in different processes (PYTHONHASHSEED 1 and 2), and,
  for information, against a run with another [clustering] reduce_seed (ra only).

The baseline is memo 40 as first implemented: raw 384-d vectors, min_cluster_size 30 / min_samples 8
at every size, eom, no intake of noise. Prints; never asserts. Issue 12 targets on the demo corpus:
>= 90 % of final inclusions clustered, noise <= 20 %, ARI >= 0.95.

    python bench/bench_cluster_quality.py [--subsets 3] [--subset-size 300] [--vectors CACHE.npy]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from bench_cluster import DEMO, config, demo_vectors

# memo 40 §2.2 as first implemented (no reduction, fixed sizes, eom) and without the tau_assign intake
BASELINE = {"reduce_method": "none", "size_scaling": "fixed", "cluster_selection_method": "eom"}
READ_COVER = 0.8


def demo_rows() -> list[dict[str, str]]:
    with DEMO.open(encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["title"].strip() or r["abstract"].strip()]


def shapes(final: np.ndarray, subsets: int, size: int) -> dict[str, list[int]]:
    """Row sets to cluster: the whole corpus, `subsets` random subsets of `size` rows (seeds 0..), and the final
    inclusions with `size` - their number other rows (a search that found every study the review kept)."""
    n = len(final)
    out = {"demo": list(range(n))}
    for seed in range(subsets):
        out[f"random{size}/s{seed}"] = sorted(np.random.default_rng(seed).choice(n, size, replace=False).tolist())
    rest = np.flatnonzero(~final)
    others = np.random.default_rng(0).choice(rest, max(size - int(final.sum()), 0), replace=False)
    out[f"incl+{len(others)}"] = sorted([*np.flatnonzero(final).tolist(), *others.tolist()])
    return out


def run_worker(method: str, seed: int, vectors_path: Path, shapes_path: Path) -> dict[str, list[int]]:
    """Cluster every shape with `method` ("ra" or "baseline"); labels per row, -1 = in no active cluster."""
    from ra_agent.models import Paper
    from ra_agent.store.db import Store
    from ra_agent.topics.features import Features
    from ra_agent.topics.lifecycle import cluster_corpus

    overrides = dict(BASELINE) if method == "baseline" else {}
    cfg = config().with_overrides(clustering={**overrides, "reduce_seed": seed})
    vectors = np.load(vectors_path)
    rows = demo_rows()
    papers = [Paper(int(r["pubmedID"]), r["title"], r["abstract"], year=int(float(r["year"])) if r["year"] else None)
              for r in rows]  # fmt: skip
    out = {}
    for name, idx in json.loads(shapes_path.read_text()).items():
        chosen = [papers[i] for i in idx]
        pmids = [p.pmid for p in chosen]
        features = Features.build(pmids, {"E": vectors[idx]}, "abstract")
        with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "ra.sqlite") as store:
            store.upsert_papers(chosen, source="import:bench")
            result = cluster_corpus(store, features, cfg)
            labels = result.formation.labels.copy()
            if method == "ra":  # the frozen clusters after the intake
                index = {cid: k for k, cid in enumerate(result.cluster_ids)}
                member = dict(store.conn.execute("SELECT pmid, cluster_id FROM cluster_member"))
                labels = np.array([index.get(member.get(p, ""), -1) for p in pmids])
        out[name] = labels.tolist()
    return out


def measure(method: str, seed: int, hashseed: int, vectors: Path, shape_file: Path) -> dict[str, np.ndarray]:
    env = {**os.environ, "PYTHONHASHSEED": str(hashseed)}
    cmd = [sys.executable, __file__, "--worker", method, str(seed), str(vectors), str(shape_file)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return {k: np.array(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}


def read_share(labels: np.ndarray, wanted: np.ndarray) -> float:
    """Share of rows read to reach READ_COVER of `wanted`, clusters by descending density of `wanted`, noise last."""
    ks = sorted(range(int(labels.max()) + 1), key=lambda k: -wanted[labels == k].mean())
    got = read = 0
    for k in [*ks, -1]:
        got += int(wanted[labels == k].sum())
        read += int((labels == k).sum())
        if got >= READ_COVER * wanted.sum():
            break
    return read / len(labels)


def figures(labels: np.ndarray, final: np.ndarray, abstract: np.ndarray) -> dict[str, float]:
    clustered = labels >= 0
    top = np.bincount(labels[final & clustered]).max() / final.sum() if (final & clustered).any() else 0.0
    return {
        "final": clustered[final].mean(),
        "abstract": clustered[abstract].mean(),
        "noise": 1 - clustered.mean(),
        "k": int(labels.max()) + 1,
        "top": top,
        "read80": read_share(labels, final),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subsets", type=int, default=3, help="random subsets besides the whole corpus (default 3)")
    ap.add_argument("--subset-size", type=int, default=300, help="records per random subset (default 300)")
    ap.add_argument("--vectors", type=Path, default=Path(tempfile.gettempdir()) / "ra_bench_cluster" / "demo_E.npy",
                    help="cache of the demo vectors")  # fmt: skip
    ap.add_argument("--worker", nargs=4, metavar=("METHOD", "SEED", "VECTORS", "SHAPES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        method, seed, vectors, shape_file = args.worker
        print(json.dumps(run_worker(method, int(seed), Path(vectors), Path(shape_file))))
        return 0

    ccfg = config().clustering
    print(f"ra: reduce {ccfg.reduce_method} ({ccfg.umap_components} dims, n_neighbors {ccfg.umap_neighbors}, "
          f"seed {ccfg.reduce_seed}), sizes {ccfg.size_scaling} (cap {ccfg.min_cluster_size}/{ccfg.min_samples}), "
          f"{ccfg.cluster_selection_method}, tau_assign intake of noise")  # fmt: skip
    print("baseline: memo 40 raw vectors, 30/8 fixed, eom, no intake")
    vectors = demo_vectors(args.vectors)
    rows = demo_rows()
    final = np.array([r["label_included"] == "1" for r in rows])
    abstract = np.array([r["label_abstract_screening"] == "1" for r in rows])
    sets = shapes(final, args.subsets, args.subset_size)
    with tempfile.TemporaryDirectory() as tmp:
        shape_file = Path(tmp) / "shapes.json"
        shape_file.write_text(json.dumps(sets))
        runs = {}
        for method, seed, hashseed in [
            ("ra", 0, 1),
            ("ra", 0, 2),
            ("ra", 1, 1),
            ("baseline", 0, 1),
            ("baseline", 0, 2),
        ]:
            runs[method, seed, hashseed] = measure(method, seed, hashseed, args.vectors, shape_file)
            print(f"  ran {method} (reduce_seed {seed}, PYTHONHASHSEED {hashseed})", flush=True)

    from sklearn.metrics import adjusted_rand_score

    head = f"{'input':<14}{'n':>6}{'fin':>5}{'method':>10}{'final':>8}{'abstract':>10}{'noise':>8}{'k':>4}"
    print(f"\n{head}{'top':>7}{'read80':>8}{'ARI proc':>10}{'ARI seed':>10}")
    for name, idx in sets.items():
        f, a = final[idx], abstract[idx]
        for method in ("ra", "baseline"):
            labels = runs[method, 0, 1][name]
            m = figures(labels, f, a)
            ari = adjusted_rand_score(labels, runs[method, 0, 2][name])
            seed_ari = (
                f"{adjusted_rand_score(labels, runs['ra', 1, 1][name]):>10.2f}" if method == "ra" else f"{'':>10}"
            )
            print(f"{name:<14}{len(idx):>6}{int(f.sum()):>5}{method:>10}{m['final']:>8.0%}{m['abstract']:>10.0%}"
                  f"{m['noise']:>8.0%}{m['k']:>4}{m['top']:>7.0%}{m['read80']:>8.0%}{ari:>10.2f}{seed_ari}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
