"""CD006468's catheter records (tests/fixtures/gaps, real PubMed records of a Cochrane review's search) replayed in
time order: the rows published up to a year written as a CSV of their own, to import step by step.

The rows are read with the csv module, independent of ra's importers, so expectations drawn from them (a record's
year, the review's earlier versions) do not come from the code under test."""

from __future__ import annotations

import csv
import json
from pathlib import Path

GAPS = Path(__file__).resolve().parent / "fixtures" / "gaps"
SUBSET = GAPS / "CD006468_catheter_subset.csv"
HANDBOOK = Path(__file__).resolve().parents[1] / "bench" / "handbooks" / "seek_gap_cd006468.md"


def gaps_rows() -> list[dict[str, str]]:
    with SUBSET.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def year_of() -> dict[int, int]:
    """PMID -> publication year, as the CSV gives it."""
    return {int(r["pubmedID"]): int(r["year"] or 0) for r in gaps_rows()}


def review_versions() -> dict[int, int]:
    """The earlier versions of review CD006468 among the records: PMID -> year (CD006468_review.json)."""
    review = json.loads((GAPS / "CD006468_review.json").read_text(encoding="utf-8"))
    return {int(v["pmid"]): int(v["year"]) for v in review["earlier_versions_in_candidates"]}


def write_years(path: Path, after: int, upto: int) -> Path:
    """The rows published in (after, upto] as a CSV at `path` (same columns as the fixture)."""
    rows = gaps_rows()
    part = [r for r in rows if after < int(r["year"] or 0) <= upto]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(part)
    return path
