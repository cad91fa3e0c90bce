"""Benchmark: what computing a handbook's questions costs as the corpus grows, through the store's indexes (the
candidates: `evidence.questions.candidates`, what `load_question_set` does) against today's read of every record
(`all_papers` then `questions_for_topic` over them, what `load_question_set` did before), in the same run.

Stores (SQLite, as ra migrates them; the big ones cached under ~/.cache/ra/bench, keyed by the inputs' digest):
- the shared key: ../shared/data/gaps/ (CD006468's 3,874 search results, imported by ra's CSV importer, MeSH kept),
  with bench/handbooks/seek_gap_cd006468.md;
- the key among filler, --sizes records in all (default 100 k and 1 M): the key's rows copied as imported, then the
  demo corpus's 1,333 real records (PPI and reflux, no MeSH) repeated with PMIDs shifted past 10^9, so that no
  filler record is a candidate of the key's topic (they name neither cancer nor a central venous catheter),
  inserted with executemany in one transaction (the full-text and MeSH indexes kept by the store's triggers).

Each measurement runs in its own process (its peak resident memory is its own): the seconds from the open store to
the questions, the records read, the peak RSS, and a digest of the questions (ids, studies, verdicts, reasons).
Today's path on a store larger than --old-max (default 100 k) is not run: it reads every record into memory and
judges each (at ~3 ms a record, 1 M records would take about an hour); its figure at --old-max is printed instead.
Where both paths ran on a store, "identical" says whether their questions are the same.

Prints; never asserts.

    python bench/bench_question_scale.py [--sizes 100000,1000000] [--old-max 100000] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEY_CSV = next((p for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared", Path("/work/shared"))
                if (p / "data" / "gaps").is_dir()), ROOT.parent / "shared") / "data" / "gaps" / \
    "CD006468_anticoagulation_cancer_cvc.csv"  # fmt: skip
HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
DEMO_CSV = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
FILLER_PMID = 1_000_000_000  # filler record i has PMID FILLER_PMID + i (past every real PMID)
ROWS_PER_CALL = 10_000


def config(data_dir: Path):
    from ra_agent.config import load_config

    return load_config(ROOT / "config.toml", environ={}).with_overrides(workspace={"data_dir": str(data_dir)})


# ============================================================================ stores


def import_csv(path: Path, target: Path) -> None:
    """`path` imported into a new store at `target` by ra's own importer."""
    from ra_agent.ingest.importers import import_file
    from ra_agent.store.db import Store

    with Store(target) as store:
        import_file(store, path, config(target.parent))


def key_store(workdir: Path) -> Path:
    target = workdir / "key.sqlite"
    if not target.exists():
        import_csv(KEY_CSV, target)
    return target


def big_store(size: int, key: Path, cache: Path) -> Path:
    """The key's records among filler, `size` records in all (module text); built once per inputs' digest."""
    from ra_agent.store.db import Store
    from ra_agent.store.schema import MIGRATIONS

    digest = hashlib.sha1()
    for path in (KEY_CSV, DEMO_CSV):
        digest.update(path.read_bytes())
    digest.update(str(len(MIGRATIONS)).encode())
    target = cache / f"question_scale_{size}_{digest.hexdigest()[:10]}.sqlite"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        demo = Path(tmp) / "demo.sqlite"
        import_csv(DEMO_CSV, demo)
        building = Path(tmp) / "big.sqlite"
        Store(building).close()  # migrated: tables, full-text and MeSH triggers
        started = time.monotonic()
        con = sqlite3.connect(building, isolation_level=None)
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute(f"ATTACH DATABASE '{key}' AS key")
        con.execute(f"ATTACH DATABASE '{demo}' AS demo")
        columns = [r[1] for r in con.execute("PRAGMA main.table_info(paper)")]
        listed = ", ".join(columns)
        con.execute("BEGIN")
        con.execute(f"INSERT INTO main.paper ({listed}) SELECT {listed} FROM key.paper")
        con.execute("INSERT INTO main.ref SELECT * FROM key.ref")
        filler = [list(r) for r in con.execute(f"SELECT {listed} FROM demo.paper ORDER BY pmid")]
        at = columns.index("pmid")
        needed = size - con.execute("SELECT COUNT(*) FROM main.paper").fetchone()[0]
        insert = f"INSERT INTO main.paper ({listed}) VALUES ({', '.join('?' * len(columns))})"
        done = 0
        while done < needed:
            rows = []
            for i in range(done, min(done + ROWS_PER_CALL, needed)):
                row = list(filler[i % len(filler)])
                row[at] = FILLER_PMID + i
                rows.append(row)
            con.executemany(insert, rows)
            done += len(rows)
            print(f"\r  building {size:,} records: {done:,}/{needed:,} filler", end="", file=sys.stderr, flush=True)
        con.execute("COMMIT")
        con.execute("DETACH DATABASE key")
        con.execute("DETACH DATABASE demo")
        con.execute("ANALYZE")
        con.close()
        print(f"\r  built {size:,} records in {time.monotonic() - started:.0f} s" + " " * 20, file=sys.stderr)
        building.rename(target)
    return target


# ============================================================================ one measurement (its own process)


def measure(store_path: Path, path: str) -> dict:
    """Compute the key's questions on the store by `path` ("indexes" or "every record"); figures as a dict."""
    from ra_agent.agent.questions import handbook_scope, handbook_topic
    from ra_agent.evidence.questions.build import questions_for_topic
    from ra_agent.evidence.questions.candidates import IndexCounts
    from ra_agent.evidence.questions.corpus import references
    from ra_agent.evidence.questions.judge import RulesJudge
    from ra_agent.evidence.questions.reviews import is_review
    from ra_agent.store.db import Store

    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(Path(tmp))
    topic, scope = handbook_topic(HANDBOOK), handbook_scope(HANDBOOK)
    with Store(store_path) as store:
        records = store.conn.execute("SELECT COUNT(*) FROM paper").fetchone()[0]
        started = time.perf_counter()
        corpus = None
        if path == "indexes":
            corpus = IndexCounts(store)
            papers = corpus.candidates(topic.with_statistics(corpus))
        else:  # today's: every record (what corpus.all_papers read)
            pmids = [r[0] for r in store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
            papers = [p for start in range(0, len(pmids), 500) for p in store.papers(pmids[start : start + 500])]
        cited = references(store, [p for p in papers if is_review(p)])
        questions, judged, _ = questions_for_topic(
            topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
            min_trials=cfg.sr.min_eligible_trials, references=cited, judge=RulesJudge(), scope=scope, corpus=corpus,
        )  # fmt: skip
        seconds = time.perf_counter() - started
    answer = json.dumps([q.as_dict() for q in questions], sort_keys=True, default=str)
    return {
        "records": records, "read": len(papers), "seconds": seconds, "questions": len(questions),
        "topic_studies": len(questions[0].studies) if questions else 0,
        "verdict": questions[0].verdict if questions else "", "digest": hashlib.sha1(answer.encode()).hexdigest(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }  # fmt: skip


def measured(store_path: Path, path: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", str(store_path), "--path", path],
                         check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


# ============================================================================ the run


def row(name: str, path: str, m: dict | None, note: str = "") -> str:
    if m is None:
        return f"{name:<24} {path:<13} {'-':>10} {'-':>9} {'-':>9} {'-':>8}  {note}"
    return (f"{name:<24} {path:<13} {m['records']:>10,} {m['read']:>9,} {m['seconds']:>8.1f}s "
            f"{m['peak_rss_mb']:>6.0f}MB  q={m['questions']} topic studies={m['topic_studies']} "
            f"({m['verdict']}) {note}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="records in the stores of the key among filler")
    parser.add_argument("--old-max", type=int, default=100_000, help="largest store today's path is run on")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ra" / "bench")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--path", choices=("indexes", "every record"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.path)))
        return 0
    if not KEY_CSV.is_file():
        print(f"{KEY_CSV}: the shared key is missing", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"handbook {HANDBOOK.relative_to(ROOT)}; key {KEY_CSV.name}; filler: the demo corpus repeated "
          f"(PMIDs from {FILLER_PMID:,}); SQLite; each figure from its own process")  # fmt: skip
    print(f"{'store':<24} {'path':<13} {'records':>10} {'read':>9} {'time':>9} {'peak':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        key = key_store(Path(tmp))
        stores = [("shared key", key)] + [(f"key + filler ({n:,})", big_store(n, key, args.cache)) for n in sizes]
        for name, store in stores:
            new = measured(store, "indexes")
            records = new["records"]
            old = measured(store, "every record") if records <= args.old_max else None
            same = "" if old is None else f"identical: {'yes' if old['digest'] == new['digest'] else 'NO'}"
            print(row(name, "indexes", new, same), flush=True)
            note = "" if old else f"not run: more than --old-max {args.old_max:,} records (see the row above it)"
            print(row(name, "today's", old, note), flush=True)
            if old:
                print(f"{'':<24} {'':<13} speed-up {old['seconds'] / new['seconds']:.1f}x, records read "
                      f"{new['read']:,} of {records:,}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
