"""Export a project's screening decisions as CSV or RIS (both read back by ra's own importers)."""

from __future__ import annotations

import csv
import time
from pathlib import Path

from ra_agent.fileio import atomic_write
from ra_agent.screen.project import ScreenError, decisions, records
from ra_agent.store.db import Store

CSV_HEADER = ("pmid", "title", "abstract", "year", "label_included", "decision", "reason", "origin", "decided_at",
              "sequence")  # fmt: skip


def export_decisions(store: Store, project: str, out: str | Path) -> tuple[Path, int]:
    """Write every current decision of `project` (in decision order) to `out` (.csv or .ris); returns (path, count)."""
    path = Path(out)
    kind = path.suffix.lower()
    if kind not in (".csv", ".ris"):
        raise ScreenError(path, f"unknown export format {kind or '(none)'!r} (use .csv or .ris)", field="out")
    by_pmid = {r.pmid: r for r in records(store, project)}
    rows = []
    for d in decisions(store, project):
        r = by_pmid[d.pmid]
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(d.decided_ts))
        rows.append((r, d, when))
    if kind == ".csv":
        text = _csv(rows)
    else:
        text = _ris(rows, project)
    atomic_write(path, text)
    return path, len(rows)


def _csv(rows) -> str:
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for r, d, when in rows:
        writer.writerow([r.pmid, r.title, r.abstract, r.year or "", d.label, "include" if d.label else "exclude",
                         d.reason, d.origin, when, d.seq])  # fmt: skip
    return buf.getvalue()


def _ris(rows, project: str) -> str:
    lines = []
    for r, d, when in rows:
        lines += ["TY  - JOUR", f"AN  - {r.pmid}"]
        if r.title:
            lines.append(f"TI  - {_one_line(r.title)}")
        if r.abstract:
            lines.append(f"AB  - {_one_line(r.abstract)}")
        if r.year:
            lines.append(f"PY  - {r.year}")
        lines.append(f"KW  - ra-screen: {'include' if d.label else 'exclude'}")
        note = f"ra screen {project}: {'include' if d.label else 'exclude'} at {when} ({d.origin})"
        lines.append(f"N1  - {_one_line(note + (': ' + d.reason if d.reason else ''))}")
        lines += [f"N1  - PMID: {r.pmid}", "ER  - ", ""]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())
