"""Turn SYNERGY dataset folders (labels.csv + OpenAlex works_*.zip) into labelled CSVs that ra and ASReview read.

usage: python bench/synergy_csv.py OUT_DIR DATASET_DIR [DATASET_DIR ...]

A SYNERGY v1 dataset folder (github.com/asreview/synergy-dataset, release 1.0) holds `labels.csv`
(openalex_id, doi, pmid, label_included) and `works_*.zip`: JSON lists of OpenAlex works, whose abstract is an
inverted index (word -> positions). Each folder becomes OUT_DIR/<folder name>.csv, in labels.csv's row order; a
labelled work missing from the zips is reported and left out. Columns: openalex_id, doi, pmid, title, abstract,
year, label_included and referenced_works (the OpenAlex ids each work cites, space-separated: ra's citation
links). Feed the CSVs to bench/bench_screening.py (--csv, repeated) to measure on held-out reviews.
"""

from __future__ import annotations

import csv
import json
import sys
import zipfile
from pathlib import Path

COLUMNS = ("openalex_id", "doi", "pmid", "title", "abstract", "year", "label_included", "referenced_works")


def abstract_text(inverted: dict[str, list[int]] | None) -> str:
    """The abstract from OpenAlex's inverted index (word -> positions), words in position order."""
    placed = sorted((pos, word) for word, positions in (inverted or {}).items() for pos in positions)
    return " ".join(word for _, word in placed)


def convert(folder: Path, out_dir: Path) -> Path:
    """One dataset folder -> OUT_DIR/<folder>.csv; raises SystemExit with a one-line message on bad input."""
    labels = folder / "labels.csv"
    zips = sorted(folder.glob("works_*.zip"))
    if not labels.exists() or not zips:
        raise SystemExit(f"{folder}: needs labels.csv and works_*.zip (a SYNERGY v1 dataset folder)")
    works: dict[str, dict] = {}
    for z in zips:
        with zipfile.ZipFile(z) as archive:
            for name in archive.namelist():
                try:
                    batch = json.loads(archive.read(name))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{z}:{name}: not JSON ({exc.msg}, line {exc.lineno})") from exc
                works.update({w["id"]: w for w in batch if isinstance(w, dict) and "id" in w})
    rows, missing = [], 0
    with labels.open(encoding="utf-8", newline="") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            if "openalex_id" not in row or row.get("label_included") not in ("0", "1"):
                raise SystemExit(f"{labels}:{line}: needs openalex_id and a 0/1 label_included")
            work = works.get(row["openalex_id"])
            if work is None:
                missing += 1
                continue
            rows.append({
                "openalex_id": row["openalex_id"],
                "doi": row.get("doi") or "",
                "pmid": (row.get("pmid") or "").rstrip("/").rsplit("/", 1)[-1],
                "title": work.get("title") or work.get("display_name") or "",
                "abstract": abstract_text(work.get("abstract_inverted_index")),
                "year": work.get("publication_year") or "",
                "label_included": row["label_included"],
                "referenced_works": " ".join(work.get("referenced_works") or []),
            })  # fmt: skip
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{folder.name}.csv"
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    included = sum(r["label_included"] == "1" for r in rows)
    print(
        f"{out}: {len(rows)} records, {included} includes"
        + (f" ({missing} labelled works not in the zips)" if missing else "")
    )
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print((__doc__ or "").splitlines()[2], file=sys.stderr)
        return 2
    out_dir = Path(argv[0])
    for folder in argv[1:]:
        convert(Path(folder), out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
