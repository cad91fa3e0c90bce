"""Benchmark: peak memory of `ra import` on a large CSV and RIS export (streamed) against reading the file whole.

The bundled Cohen PPI export (real PubMed records) is repeated with shifted PMIDs into a CSV of about
--size-mb megabytes, and the same records are written as RIS. Each measurement runs in its own
subprocess and reports that process's VmHWM (peak resident memory):

- baseline: `Path.read_text()` of the file, the floor of any whole-file reader (what `ra import` did);
- ra import: `import_file` into a fresh store, streaming line by line.

    python bench/bench_import_memory.py [--size-mb 50]

Target: ra import stays under 100 MB for a 50 MB export, whatever the file size.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
TARGET_MB = 100
PMID_SHIFT = 40_000_000  # each copy of the export gets PMIDs shifted by this (all stay under 10**9)

PROBE = r"""
import json, re, sys, time
from pathlib import Path
mode, path, db = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
started = time.perf_counter()
if mode == "baseline":
    records = len(path.read_text(encoding="utf-8-sig").splitlines())
else:
    from ra_agent.config import Config
    from ra_agent.ingest.importers import import_file
    from ra_agent.store.db import Store
    with Store(db) as store:
        summary = import_file(store, path, Config())
    records = summary.inserted + summary.updated + summary.unchanged
hwm = int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"records": records, "max_rss_mb": round(hwm / 1024, 1), "s": round(time.perf_counter() - started, 1)}))
"""


def demo_rows() -> tuple[list[str], list[list[str]]]:
    with DEMO.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], [r for r in rows[1:] if r[1].strip()]


def write_exports(folder: Path, size_mb: float) -> tuple[Path, Path, int]:
    """A CSV of about size_mb MB and a RIS file of the same records; returns (csv, ris, records)."""
    header, rows = demo_rows()
    copies = max(1, int(size_mb * 1e6 // DEMO.stat().st_size) + 1)
    big_csv, big_ris = folder / "big.csv", folder / "big.ris"
    records = 0
    with big_csv.open("w", encoding="utf-8", newline="") as out_csv, big_ris.open("w", encoding="utf-8") as out_ris:
        writer = csv.writer(out_csv)
        writer.writerow(header)
        for copy in range(copies):
            for row in rows:
                pmid = str(int(row[1]) + copy * PMID_SHIFT)
                writer.writerow([row[0], pmid, *row[2:]])
                authors = "".join(f"AU  - {a.strip()}\n" for a in row[3].split(";") if a.strip())
                out_ris.write(f"TY  - JOUR\nAN  - {pmid}\nTI  - {row[2]}\n{authors}AB  - {row[4]}\nPY  - {row[5]}\n"
                              "ER  - \n\n")  # fmt: skip
                records += 1
    return big_csv, big_ris, records


def probe(mode: str, path: Path, db: Path) -> dict:
    run = subprocess.run([sys.executable, "-c", PROBE, mode, str(path), str(db)], capture_output=True, text=True,
                         check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        big_csv, big_ris, records = write_exports(folder, args.size_mb)
        print(f"inputs: {records} records; CSV {big_csv.stat().st_size / 1e6:.1f} MB, "
              f"RIS {big_ris.stat().st_size / 1e6:.1f} MB (written in {time.perf_counter() - started:.0f} s)")  # fmt: skip
        ok = True
        for path in (big_csv, big_ris):
            base = probe("baseline", path, folder / "unused.sqlite")
            ra = probe("import", path, folder / f"{path.suffix[1:]}.sqlite")
            ok &= ra["max_rss_mb"] <= TARGET_MB and ra["records"] == records
            print(f"{path.suffix[1:]:>4}: baseline read_text peak {base['max_rss_mb']} MB | ra import peak "
                  f"{ra['max_rss_mb']} MB, {ra['records']} records in {ra['s']} s | target <= {TARGET_MB} MB: "
                  f"{'met' if ra['max_rss_mb'] <= TARGET_MB else 'MISSED'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
