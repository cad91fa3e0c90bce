"""Benchmark: the embedding shards on dagster-celery with 1 worker (the baseline) and 2 workers, the same shards.

Per worker count, in one run: a fresh copy of the same imported project (--shards ingest batches of --per-shard
real demo abstracts, nothing embedded), a fresh Dagster database on a local PostgreSQL server, a Redis broker,
N workers started with `dagster-celery worker start` (one step at a time each, --threads torch threads each),
the `embedding` pool at N slots, then every shard launched as its own run at once (tests/flow/celery_runs.py
embed_celery, as the ingest-batch sensor or a multi-run backfill launches them). Measured:

- wall: from the first shard run's start to the last one's end (run processes, orchestration and steps);
- span: from the first shard step's start on a worker to the last one's end (the work the workers share);
- texts/s = embedded texts / span; speed-up = span with 1 worker / span with N; ideal = N.

The in-process run (every shard then the index in one process, no broker) is printed beside them as the cost
Celery adds. Every worker count must give the same vectors per PMID as the in-process run (checked).

On one machine the workers share its cores: with 2 cores and --threads 1 two workers can at best double one
worker's rate (ideal 2.0); with --threads 2 one worker already uses both cores and a second one mostly adds
contention. On a shared machine the other jobs take cores too, so the figures are lower than an idle machine's.

    python bench/bench_celery.py [--shards 4] [--per-shard 50] [--workers 1,2] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "flow"))

from celery_cluster import CeleryWorker, RedisServer, missing  # noqa: E402
from demo_corpus import demo_rows, write_demo_subset  # noqa: E402
from pg_server import PgServer, missing_binaries  # noqa: E402

RUNS = ROOT / "tests" / "flow" / "celery_runs.py"


def run_step(env: dict[str, str], cwd: Path, *args: str) -> dict:
    import json
    import subprocess

    from celery_cluster import start_group, stop_group

    process = start_group([sys.executable, str(RUNS), *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out, err = process.communicate(timeout=3600)
    finally:
        stop_group(process, grace=5)
    if process.returncode != 0:
        raise SystemExit(f"celery_runs.py {' '.join(args)} exited {process.returncode}:\n{err[-3000:]}")
    return json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])


def make_project(root: Path, shards: int, per_shard: int) -> Path:
    from ra_agent.config import load_config
    from ra_agent.ingest.importers import import_file
    from ra_agent.workspace import open_store

    project = root / "template"
    project.mkdir()
    rows = [r for r in demo_rows() if r["abstract"].strip()][: shards * per_shard]
    if len(rows) < shards * per_shard:
        raise SystemExit(f"the demo corpus has {len(rows)} abstracts, fewer than {shards} x {per_shard}")
    (project / "config.toml").write_text('[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = true\n'
                                         f"[embedding]\nrefresh_threshold = {per_shard}\n")  # fmt: skip
    cfg = load_config(project / "config.toml")
    with open_store(cfg) as store:
        import_file(store, write_demo_subset(root / "subset.csv", rows), cfg)
        assert len(store.batches()) == shards
    return project


def vectors_of(project: Path):
    from ra_agent.store.vectors import VectorStore, active_index, emb_root

    folder = VectorStore(emb_root(project / "data") / str(active_index(project / "data")))
    return folder.pmids.copy(), folder.get(folder.pmids)


def base_env(threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RA_", "DAGSTER_"))}
    pythonpath = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": str(threads)}


def in_process(root: Path, template: Path, threads: int) -> tuple[float, tuple]:
    project = root / "in_process"
    shutil.copytree(template, project)
    (root / "in_process_home").mkdir()
    env = {
        **base_env(threads),
        "RA_CONFIG": str(project / "config.toml"),
        "DAGSTER_HOME": str(root / "in_process_home"),
    }
    done = run_step(env, project, "embed_in_process")
    return done["seconds"], vectors_of(project)


def on_workers(n: int, root: Path, template: Path, pg: PgServer, redis: RedisServer, threads: int) -> dict:
    project = root / f"workers_{n}"
    shutil.copytree(template, project)
    home = root / f"home_{n}"
    home.mkdir()
    shutil.copy(ROOT / "scripts" / "dagster-postgres.yaml", home / "dagster.yaml")
    url = urlparse(pg.new_database("dagster"))
    env = {**base_env(threads), "RA_CONFIG": str(project / "config.toml"), "DAGSTER_HOME": str(home),
           "DAGSTER_PG_HOST": str(url.hostname), "DAGSTER_PG_PORT": str(url.port), "DAGSTER_PG_DB": url.path[1:],
           "DAGSTER_PG_USERNAME": str(url.username), "DAGSTER_PG_PASSWORD": "",
           "RA_CELERY_BROKER": redis.url(2 * n), "RA_CELERY_BACKEND": redis.url(2 * n + 1),
           "RA_CELERY_YAML": str(ROOT / "scripts" / "dagster-celery.yaml")}  # fmt: skip
    workers = [CeleryWorker(f"bench{i}", env, Path(env["RA_CELERY_YAML"]), root / f"w{n}_{i}.log") for i in range(n)]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready(300)
        done = run_step(env, project, "embed_celery", str(n))
    finally:
        for worker in workers:
            worker.stop()
    if not all(r["success"] for r in done["shards"]):
        raise SystemExit(f"{n} workers: a shard run failed: {[r['failure'] for r in done['shards'] if r['failure']]}")
    steps = [s for r in done["shards"] for s in r["steps"] if s["step"] == "embedding_shards"]
    texts = sum(m["embedded"] for r in done["shards"] for m in r["materialized"] if m["asset"] == "embedding_shards")
    span = max(s["end"] for s in steps) - min(s["start"] for s in steps)
    return {
        "workers": n,
        "wall": done["shard_seconds"],
        "span": span,
        "busy": sum(s["end"] - s["start"] for s in steps),
        "texts": texts,
        "by_worker": sorted({s["worker"] for s in steps}),
        "vectors": vectors_of(project),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--per-shard", type=int, default=50)
    parser.add_argument("--workers", default="1,2", help="worker counts; the first is the baseline")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (OMP_NUM_THREADS)")
    args = parser.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    if reason := missing_binaries() or missing():
        raise SystemExit(f"bench_celery: {reason}")
    # SIGTERM stops the servers and workers through the `finally` below; a SIGKILL through tests/spawned.py's watchdog
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import numpy as np

    root = Path(tempfile.mkdtemp(prefix="ra-bench-celery-"))
    pg = redis = None
    try:
        pg = PgServer().start()  # one at a time: a Redis that fails to start must not leave PostgreSQL running
        redis = RedisServer().start()
        template = make_project(root, args.shards, args.per_shard)
        print(f"{args.shards} shards x {args.per_shard} demo abstracts, {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f}, {args.threads} torch thread(s) per worker", flush=True)  # fmt: skip
        seconds, (ref_pmids, ref_vectors) = in_process(root, template, args.threads)
        n_texts = args.shards * args.per_shard
        print(f"in process (no broker): {seconds:.1f} s for {n_texts} texts and the index "
              f"({n_texts / seconds:.2f} texts/s)", flush=True)  # fmt: skip
        results = []
        for n in counts:
            result = on_workers(n, root, template, pg, redis, args.threads)
            pmids, vectors = result.pop("vectors")
            assert np.array_equal(pmids, ref_pmids) and np.array_equal(vectors, ref_vectors), f"{n} workers differ"
            results.append(result)
            print(f"{n} worker(s): wall {result['wall']:.1f} s, span {result['span']:.1f} s, "
                  f"steps on {', '.join(result['by_worker'])}", flush=True)  # fmt: skip
        base = results[0]
        print(f"\n| workers | wall s | step span s | texts/s (span) | speed-up vs {base['workers']} worker | ideal |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in results:
            speedup = base["span"] / r["span"]
            print(f"| {r['workers']} | {r['wall']:.1f} | {r['span']:.1f} | {r['texts'] / r['span']:.2f} | "
                  f"{speedup:.2f}x | {r['workers'] / base['workers']:.1f}x |")  # fmt: skip
        print(f"\nload average after: {os.getloadavg()[0]:.1f} (2-core machine shared with other jobs)")
        print("vectors: every worker count equals the in-process run, PMID for PMID")
    finally:
        for server in (redis, pg):
            if server is not None:
                server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
