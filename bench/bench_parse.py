"""Benchmark: ra's PubMed XML parser against pubmed_parser.parse_medline_xml on the same .xml.gz input.

Real records from tests/fixtures/medline/*.xml.gz are repeated into one gzipped PubmedArticleSet of
about --size-mb uncompressed megabytes; each parser runs in its own subprocess (so peak RSS is its
own) --repeat times, and the best wall time is reported.

    python bench/bench_parse.py [--size-mb 50] [--repeat 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lxml.etree as etree

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "medline"
TARGET = 1.5  # ra should parse at least this many times as fast as pubmed_parser


def real_records() -> list[bytes]:
    """Every PubmedArticle of the fixture baseline/update files, serialised."""
    records = []
    for path in sorted(FIXTURES.glob("*.xml.gz")):
        with gzip.open(path, "rb") as fh:
            for _, elem in etree.iterparse(fh, tag="PubmedArticle"):
                records.append(etree.tostring(elem, encoding="utf-8"))
                elem.clear()
    return records


def build_input(path: Path, size_mb: float) -> int:
    """Write a gzipped PubmedArticleSet of repeated real records; return the record count."""
    records = real_records()
    target, written, count = size_mb * 1e6, 0, 0
    with gzip.open(path, "wb", compresslevel=6) as out:
        out.write(b'<?xml version="1.0" encoding="utf-8"?>\n<PubmedArticleSet>\n')
        while written < target:
            for record in records:
                out.write(record)
                written += len(record)
                count += 1
        out.write(b"</PubmedArticleSet>\n")
    return count


def run_worker(parser: str, path: Path) -> dict:
    """Parse `path` with one parser and report records, seconds and this process's peak RSS."""
    if parser == "ra":
        from ra_agent.ingest.medline import iter_pubmed_xml
        from ra_agent.models import Paper

        start = time.perf_counter()
        records = sum(isinstance(item, Paper) for item in iter_pubmed_xml(path))
    else:
        import pubmed_parser

        start = time.perf_counter()
        articles = pubmed_parser.parse_medline_xml(str(path), nlm_category=True, author_list=True, reference_list=True)
        records = sum(1 for _ in articles)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    return {"parser": parser, "records": records, "seconds": seconds, "peak_rss_mb": peak_mb}


def measure(parser: str, path: Path, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", parser, str(path)], check=True, capture_output=True, text=True
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["seconds"])
    best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=50.0, help="uncompressed input size (default 50)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per parser; the best time counts (default 2)")
    ap.add_argument("--worker", nargs=2, metavar=("PARSER", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker[0], Path(args.worker[1]))))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_pubmed.xml.gz"
        count = build_input(path, args.size_mb)
        print(f"input: {count} PubmedArticle records, {args.size_mb:.0f} MB XML, {path.stat().st_size / 1e6:.1f} MB gz")
        print("pubmed_parser options: nlm_category, author_list, reference_list (fields comparable to ra's Paper)")
        results = [measure(name, path, args.repeat) for name in ("ra", "pubmed_parser")]

    print(f"\n{'parser':<15}{'records':>10}{'seconds':>10}{'records/s':>12}{'peak RSS MB':>13}")
    for r in results:
        rate = r["records"] / r["seconds"]
        print(f"{r['parser']:<15}{r['records']:>10}{r['seconds']:>10.2f}{rate:>12.0f}{r['peak_rss_mb']:>13.0f}")
    ra, other = results
    ratio = other["seconds"] / ra["seconds"]
    verdict = "meets" if ratio >= TARGET else "MISSES"
    print(f"\nspeed-up ra / pubmed_parser: {ratio:.2f}x ({verdict} the {TARGET}x target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
