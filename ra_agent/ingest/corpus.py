"""The local corpus: import pending search exports once each, and summarise what the store holds."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

IMPORTABLE = (".csv", ".ris", ".txt", ".nbib", ".medline", ".xml", ".gz")


@dataclass
class PendingImports:
    files: list[str] = field(default_factory=list)
    skipped_known: list[str] = field(default_factory=list)
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # files that could not be read at all (one-line reasons)


def file_sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_loaded(store: Store, sha1: str) -> bool:
    return store.conn.execute("SELECT 1 FROM loaded_file WHERE sha1=?", (sha1,)).fetchone() is not None


def mark_loaded(store: Store, path: Path, sha1: str, kind: str, papers: int, deleted: int, problems: int) -> None:
    with store.transaction():
        store.conn.execute(
            "INSERT OR REPLACE INTO loaded_file(sha1, name, kind, papers, deleted, problems, loaded_ts) "
            "VALUES (?,?,?,?,?,?,?)",
            (sha1, path.name, kind, papers, deleted, problems, int(time.time())),
        )


def pending_import_files(cfg: Config) -> list[Path]:
    """The bundled demo corpus (if configured) and every export dropped in `<data_dir>/imports/`."""
    files: list[Path] = []
    if cfg.workspace.demo_corpus:
        demo = Path(cfg.root) / cfg.workspace.demo_corpus
        if demo.exists():
            files.append(demo)
        else:
            log.warning("demo corpus %s (config [workspace] demo_corpus) does not exist; skipped", demo)
    inbox = Workspace.of(cfg).imports_dir
    if inbox.is_dir():
        files.extend(sorted(p for p in inbox.iterdir() if p.is_file() and p.name.lower().endswith(IMPORTABLE)))
    return files


def import_pending(cfg: Config, store: Store, progress=None) -> PendingImports:
    """Import each pending export whose content was not imported before (by SHA-1); an unreadable file is
    reported in `rejected` (and tried again next time) and the others are still imported."""
    from ra_agent.fileio import InputError
    from ra_agent.ingest.importers import import_file

    out = PendingImports()
    for path in pending_import_files(cfg):
        sha1 = file_sha1(path)
        if is_loaded(store, sha1):
            out.skipped_known.append(path.name)
            continue
        try:
            summary = import_file(store, path, cfg, progress=progress)
        except InputError as exc:
            out.rejected.append(" ".join(str(exc).split()))
            log.error("import rejected: %s", exc)
            continue
        out.files.append(path.name)
        out.inserted += summary.inserted
        out.updated += summary.updated
        out.unchanged += summary.unchanged
        out.problems.extend(str(p) for p in summary.problems)
        mark_loaded(store, path, sha1, "import", summary.inserted + summary.updated, 0, len(summary.problems))
        log.info("imported %s: %d new, %d updated, %d problems", path.name, summary.inserted, summary.updated,
                 len(summary.problems))  # fmt: skip
    return out


def corpus_summary(store: Store, sample: int = 5) -> dict:
    """Counts and a few recent titles, for asset metadata and `ra status`."""
    counts = store.counts()
    years = store.conn.execute("SELECT MIN(year), MAX(year) FROM paper WHERE year IS NOT NULL").fetchone()
    titles = [
        r[0] for r in store.conn.execute("SELECT title FROM paper ORDER BY year DESC, pmid DESC LIMIT ?", (sample,))
    ]
    types = store.conn.execute(
        "SELECT article_type, COUNT(*) FROM paper WHERE article_type != '' GROUP BY article_type "
        "ORDER BY COUNT(*) DESC LIMIT 8"
    ).fetchall()
    return {
        **counts,
        "year_min": years[0],
        "year_max": years[1],
        "sample_titles": titles,
        "article_types": {t: n for t, n in types},
    }
