"""The bundled demo corpus (Cohen 2006 PPI export, real PubMed records) as test inputs.

Tests read the CSV directly, independent of ra's importers, so their expectations do not
come from the code under test.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from ra_agent.models import Paper

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"


def demo_rows() -> list[dict[str, str]]:
    """Every row of the demo CSV, in file order."""
    with DEMO.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def demo_papers() -> list[Paper]:
    """Every demo row as a Paper (PMID, title, abstract, year), in file order."""
    return [
        Paper(
            pmid=int(r["pubmedID"]),
            title=r["title"],
            abstract=r["abstract"],
            year=int(float(r["year"])) if r["year"] else None,
        )
        for r in demo_rows()
    ]


def write_demo_subset(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    """`rows` of the demo CSV written as an import file with the demo's header."""
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(demo_rows()[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
