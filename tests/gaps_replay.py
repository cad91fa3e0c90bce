"""Real records replayed in time order: the rows published up to a year written as a CSV of their own, to import
step by step. CD006468's catheter records (tests/fixtures/gaps, real PubMed records of a Cochrane review's search)
with their benchmark handbook, and the bundled demo corpus (data/demo, Cohen 2006's proton-pump-inhibitor records)
with the demo's handbook.

The rows are read with the csv module, independent of ra's importers, so expectations drawn from them (a record's
year and title, the review's earlier versions) do not come from the code under test."""

from __future__ import annotations

import csv
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GAPS = ROOT / "tests" / "fixtures" / "gaps"
SUBSET = GAPS / "CD006468_catheter_subset.csv"
HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
DEMO_HANDBOOK = ROOT / "handbooks" / "seek_gap_ppi_gerd.md"


def gaps_rows(source: Path = SUBSET) -> list[dict[str, str]]:
    with source.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def row_year(row: dict[str, str]) -> int:
    """The row's publication year ("2001" or "2001.0"); 0 when it has none."""
    return int(float(row["year"] or 0))


def year_of(source: Path = SUBSET) -> dict[int, int]:
    """PMID -> publication year, as the CSV gives it."""
    return {int(r["pubmedID"]): row_year(r) for r in gaps_rows(source)}


def review_versions() -> dict[int, int]:
    """The earlier versions of review CD006468 among the records: PMID -> year (CD006468_review.json)."""
    review = json.loads((GAPS / "CD006468_review.json").read_text(encoding="utf-8"))
    return {int(v["pmid"]): int(v["year"]) for v in review["earlier_versions_in_candidates"]}


def write_years(path: Path, after: int, upto: int, source: Path = SUBSET) -> Path:
    """The rows published in (after, upto] as a CSV at `path` (same columns as the source; `after` -1 takes the
    rows without a year too)."""
    rows = gaps_rows(source)
    part = [r for r in rows if after < row_year(r) <= upto]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(part)
    return path
