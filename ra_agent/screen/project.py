"""Screening projects in the store: their record sets (a registered search or an imported export) and decisions."""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ra_agent.config import Config
from ra_agent.fileio import InputError
from ra_agent.screen.features import ScreenRecord
from ra_agent.store.db import Store

if TYPE_CHECKING:
    from ra_agent.ingest.pipeline import ParentFetch

INCLUDE, EXCLUDE = 1, 0
LABELS = {"include": INCLUDE, "exclude": EXCLUDE}


class ScreenError(InputError):
    """A screening request names no project, an unknown record or a bad label (one line, names what is wrong)."""


@dataclass(frozen=True)
class Decision:
    seq: int
    pmid: int
    label: int
    reason: str
    origin: str
    decided_ts: int


def projects(store: Store) -> dict[str, dict]:
    rows = store.conn.execute("SELECT project, source, ref, created_ts FROM screen_project ORDER BY project")
    return {r["project"]: dict(r) for r in rows}


def _register(store: Store, project: str, source: str, ref: str, pmids: list[int]) -> None:
    now = int(time.time())
    with store.transaction() as conn:
        conn.execute("INSERT INTO screen_project (project, source, ref, created_ts) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT (project) DO NOTHING", (project, source, ref, now))  # fmt: skip
        start = conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM screen_record WHERE project = ?",
                             (project,)).fetchone()[0]  # fmt: skip
        conn.executemany(
            "INSERT INTO screen_record (project, pmid, position) VALUES (?, ?, ?) ON CONFLICT (project, pmid) DO NOTHING",
            [(project, pmid, start + i) for i, pmid in enumerate(dict.fromkeys(pmids))],
        )


def project_from_search(store: Store, query_or_key: str) -> str:
    """The project of a registered search (its query text or key): the search's candidates, in PubMed's rank order."""
    from ra_agent.workspace import query_key, query_runs

    runs = query_runs(store)
    key = query_or_key if query_or_key in runs else query_key(query_or_key)
    if key not in runs:
        raise ScreenError(store.where, f"no registered search {query_or_key!r} (ra queries lists them)", field="search")
    pmids = [r[0] for r in store.conn.execute(
        "SELECT pmid FROM candidate_papers WHERE query_key = ? ORDER BY rank, pmid", (key,))]  # fmt: skip
    if not pmids:
        raise ScreenError(store.where, f"search {key} has no records yet (ra ingest)", field="search")
    project = f"search:{key}"
    _register(store, project, "search", key, pmids)
    return project


def project_from_import(cfg: Config, store: Store, path: str | Path, seed_labels: str | None = None) -> str:
    """Import an export (`ra import` rules) and make its records a project; with `seed_labels` (a CSV column of
    0/1, blanks undecided) the labels already in the file become decisions of origin 'seed:<column>'."""
    from ra_agent.ingest.importers import detect_format, import_file, iter_csv, iter_ris
    from ra_agent.ingest.medline import iter_pubmed_xml, parse_medline_text
    from ra_agent.models import Paper

    path = Path(path)
    import_file(store, path, cfg)
    fmt = detect_format(path)
    readers = {"csv": iter_csv, "ris": iter_ris, "medline": parse_medline_text, "xml": iter_pubmed_xml}
    pmids = [item.pmid for item in readers[fmt](path, source_name=f"import:{path.name}") if isinstance(item, Paper)]
    project = f"import:{path.name}"
    _register(store, project, "import", path.name, pmids)
    if seed_labels:
        if fmt != "csv":
            raise ScreenError(path, "labels can seed a project from a CSV export only", field=seed_labels)
        seeded = {pmid for pmid in pmids}
        known = {d.pmid for d in decisions(store, project)}
        for pmid, label in read_seed_labels(path, seed_labels).items():
            if pmid in seeded and pmid not in known:
                decide(store, project, pmid, label, origin=f"seed:{seed_labels}")
    return project


def read_seed_labels(path: Path, column: str) -> dict[int, int]:
    """{pmid: 0/1} from a CSV label column (blank = undecided); a missing column or another value is a ScreenError."""
    from ra_agent.ingest.importers import CSV_COLUMNS

    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        headers = list(reader.fieldnames or [])
        if column not in headers:
            raise ScreenError(path, f"no label column {column!r} (columns: {', '.join(headers)})", line=1,
                              field=column)  # fmt: skip
        keys = {h.strip().lower(): h for h in headers}
        pmid_col = next(keys[s] for s in CSV_COLUMNS["pmid"] if s in keys)
        out = {}
        for line, row in enumerate(reader, start=2):
            raw, pmid = (row.get(column) or "").strip(), (row.get(pmid_col) or "").strip()
            if not raw or not pmid.isdigit():
                continue
            if raw not in ("0", "1"):
                raise ScreenError(path, f"label {raw!r} is not 0, 1 or blank", line=line, field=column)
            out[int(pmid)] = int(raw)
    return out


def resolve(store: Store, project: str | None) -> str:
    """`project` when it exists; without a name, the only project of the workspace."""
    known = projects(store)
    if project:
        if project not in known:
            names = ", ".join(known) or "none yet (ra screen --search QUERY or --from FILE)"
            raise ScreenError(store.where, f"no screening project {project!r} (projects: {names})", field="project")
        return project
    if len(known) == 1:
        return next(iter(known))
    if not known:
        raise ScreenError(store.where, "no screening project yet: start one with --search QUERY or --from FILE",
                          field="project")  # fmt: skip
    raise ScreenError(store.where, f"several projects, name one with --project ({', '.join(known)})", field="project")


def fill_citation_links(cfg: Config, store: Store, project: str) -> tuple[int, int, ParentFetch]:
    """Fill the citation graph of a project's papers that have no references stored (online: PubMed's reference
    lists through elink, then Crossref for DOIs; offline: nothing is asked). Returns (records listing references,
    records, what the fetch did)."""
    from ra_agent.ingest.pipeline import fetch_references, lacking_references

    pmids = project_pmids(store, project)
    fetched = fetch_references(cfg, store, pmids)
    return len(pmids) - len(lacking_references(store, pmids)), len(pmids), fetched


def project_pmids(store: Store, project: str) -> list[int]:
    rows = store.conn.execute("SELECT pmid FROM screen_record WHERE project = ? ORDER BY position", (project,))
    return [r[0] for r in rows]


def records(store: Store, project: str) -> list[ScreenRecord]:
    """The project's records in their source order, each with the references the store holds for it (a PMID the
    store lacks is a PMID-only record)."""
    pmids = project_pmids(store, project)
    papers = {p.pmid: p for p in store.papers(pmids)}
    refs = store.references_of_many(papers)
    return [ScreenRecord.of(papers[p], refs[p]) if p in papers else ScreenRecord(p, "") for p in pmids]


def decide(store: Store, project: str, pmid: int, label: int | str, *, reason: str = "", origin: str = "user") -> int:
    """Append one decision (a later one for the same record replaces it); returns its sequence number."""
    if isinstance(label, str):
        if label.lower() not in LABELS:
            raise ScreenError(store.where, f"decision {label!r} is not include or exclude", field="decision")
        label = LABELS[label.lower()]
    with store.transaction() as conn:
        if (
            conn.execute("SELECT 1 FROM screen_record WHERE project = ? AND pmid = ?", (project, pmid)).fetchone()
            is None
        ):
            raise ScreenError(store.where, f"PMID {pmid} is not a record of project {project!r}", field="pmid")
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM screen_decision WHERE project = ?",
                           (project,)).fetchone()[0]  # fmt: skip
        conn.execute(
            "INSERT INTO screen_decision (project, seq, pmid, label, reason, origin, decided_ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (project, seq, pmid, int(label), reason, origin, int(time.time())),
        )
    return int(seq)


def decisions(store: Store, project: str, *, upto: int | None = None) -> list[Decision]:
    """The current decision per record (the latest), in the order they were made; `upto` replays history."""
    rows = store.conn.execute(
        "SELECT seq, pmid, label, reason, origin, decided_ts FROM screen_decision WHERE project = ? AND seq <= ? "
        "ORDER BY seq", (project, upto if upto is not None else 2**62),
    ).fetchall()  # fmt: skip
    latest = {r["pmid"]: Decision(**dict(r)) for r in rows}
    return sorted(latest.values(), key=lambda d: d.seq)
