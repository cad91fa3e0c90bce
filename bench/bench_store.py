"""Benchmark: the store's insert and lookup throughput, SQLite (the baseline) vs PostgreSQL, on the same records.

The bundled Cohen PPI export (real PubMed records) is repeated with shifted PMIDs up to --records
(default 100 k), each record citing the next three of its copy. Both backends get the same records
through the same `Store` calls, in one run:

- insert: `upsert_papers` of every record (new rows, `insert_commit_every` rows per transaction);
- re-upsert: the same records again (all unchanged: one key lookup and hash compare per record);
- point lookup: `paper(pmid)` for random PMIDs;
- batch lookup: `papers(500 random PMIDs)`;
- full-text: `search(title words, limit 100)` (FTS5 bm25 / tsvector + GIN, ts_rank_cd).

PostgreSQL is a local server started for the run (tests/pg_server.py, durable defaults: fsync and
synchronous_commit on) over loopback TCP; SQLite is the embedded file in WAL mode (synchronous=NORMAL).

    python bench/bench_store.py [--records 100000] [--lookups 5000]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from demo_corpus import demo_papers  # noqa: E402
from pg_server import PgServer, missing_binaries  # noqa: E402

from ra_agent.config import Config  # noqa: E402
from ra_agent.models import Paper, Reference  # noqa: E402
from ra_agent.store.db import Store  # noqa: E402

PMID_SHIFT = 40_000_000  # copy k of the export gets PMIDs + k * PMID_SHIFT
CITED = 3  # each record cites the next CITED records of its copy
BATCH = 500


def synthesise(n: int) -> list[Paper]:
    base = [p for p in demo_papers() if p.title.strip()]
    out: list[Paper] = []
    for k in range(n // len(base) + 1):
        shift = k * PMID_SHIFT
        for i, p in enumerate(base):
            refs = [Reference(pmid=base[(i + j) % len(base)].pmid + shift) for j in range(1, CITED + 1)]
            out.append(dataclasses.replace(p, pmid=p.pmid + shift, references=refs))
    return out[:n]


def rate(n: int, run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return n / (time.perf_counter() - started)


def measure(target: str | Path, papers: list[Paper], lookups: int, commit_every: int) -> dict[str, float]:
    rng = random.Random(7)
    pmids = [p.pmid for p in papers]
    point = rng.sample(pmids, min(lookups, len(pmids)))
    batches = [rng.sample(pmids, BATCH) for _ in range(max(1, lookups // BATCH))]
    queries = [" ".join(p.title.split()[:3]) for p in rng.sample(papers, 200)]
    with Store(target, commit_every=commit_every) as store:
        out = {
            "insert (records/s)": rate(len(papers), lambda: store.upsert_papers(papers, source="bench")),
            "re-upsert unchanged (records/s)": rate(len(papers), lambda: store.upsert_papers(papers, source="bench")),
            "point lookup (lookups/s)": rate(len(point), lambda: [store.paper(p) for p in point]),
            f"batch lookup {BATCH} (records/s)": rate(BATCH * len(batches), lambda: [store.papers(b) for b in batches]),
            "full-text search (queries/s)": rate(len(queries), lambda: [store.search(q, 100) for q in queries]),
        }
        assert store.counts()["paper"] == len(papers)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--lookups", type=int, default=5000)
    args = ap.parse_args()
    if reason := missing_binaries():
        sys.exit(f"bench_store: {reason}")
    commit_every = Config().ingest.insert_commit_every
    papers = synthesise(args.records)
    print(f"{len(papers)} records ({len(papers) * CITED} citation edges), {commit_every} rows per transaction")
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = measure(Path(tmp) / "ra.sqlite", papers, args.lookups, commit_every)
        size_mb = (Path(tmp) / "ra.sqlite").stat().st_size / 1e6
    with PgServer(durable=True) as server:
        postgres = measure(server.new_database("bench"), papers, args.lookups, commit_every)
    print(f"\n{'operation':36} {'SQLite (baseline)':>18} {'PostgreSQL':>12} {'PG / SQLite':>12}")
    for name, base in sqlite.items():
        print(f"{name:36} {base:18,.0f} {postgres[name]:12,.0f} {postgres[name] / base:11.2f}x")
    print(f"\nSQLite file: {size_mb:.0f} MB")


if __name__ == "__main__":
    main()
