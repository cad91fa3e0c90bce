"""PubMed baseline/update files into the store (upserts, DeleteCitation), and offline search over the local corpus."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ra_agent.config import Config
from ra_agent.ingest.medline import XmlItem, iter_pubmed_xml
from ra_agent.models import Deletion, Paper, ParseProblem
from ra_agent.store.db import Store

log = logging.getLogger(__name__)

Progress = Callable[[int], None]  # called with the number of records stored so far
BASELINE_SUFFIXES = (".xml.gz", ".xml")


@dataclass
class LoadSummary:
    """What loading one or more record streams did to the store."""

    files: list[str] = field(default_factory=list)
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0  # papers removed by DeleteCitation
    delete_listed: int = 0  # PMIDs named in DeleteCitation blocks (present in the store or not)
    skipped_deleted: int = 0  # records of PMIDs an earlier DeleteCitation removed (they stay deleted)
    problems: list[ParseProblem] = field(default_factory=list)
    batches: list[str] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return self.inserted + self.updated + self.unchanged

    def tally(self) -> tuple[int, int, int, int]:
        """(inserted, updated, deleted, problems) so far, to log what one file changed."""
        return self.inserted, self.updated, self.deleted, len(self.problems)


def store_records(
    store: Store,
    records: Iterable[XmlItem],
    *,
    source: str,
    batch_size: int,
    summary: LoadSummary,
    progress: Progress | None = None,
) -> LoadSummary:
    """Upsert the Papers of a parsed stream, apply its Deletions in stream order, collect its problems.

    Papers go to the store in one upsert run until a Deletion arrives; the deletion is applied only
    after everything before it is committed, so the result matches reading the file top to bottom.
    A PMID once deleted stays deleted: later records for it are skipped, which also makes loading
    the same baseline and update files again a no-op.
    """
    items = iter(records)
    pending: list[Deletion] = []
    before = summary.tally()

    def papers_until_deletion() -> Iterator[Paper]:
        for item in items:
            if isinstance(item, Paper):
                if _was_deleted(store, item.pmid):
                    summary.skipped_deleted += 1
                else:
                    yield item
            elif isinstance(item, Deletion):
                pending.append(item)
                return
            else:
                summary.problems.append(item)

    def report(stored_in_run: int) -> None:
        if progress:
            progress(offset + stored_in_run)

    while True:
        offset = summary.stored
        stats = store.upsert_papers(papers_until_deletion(), source=source, batch_size=batch_size, on_progress=report)
        summary.inserted += stats.inserted
        summary.updated += stats.updated
        summary.unchanged += stats.unchanged
        summary.batches.extend(b for b in stats.batches if b not in summary.batches)
        if not pending:
            break
        for deletion in pending:
            summary.deleted += store.delete_citations(deletion.pmids, source=deletion.source or source)
            summary.delete_listed += len(deletion.pmids)
        pending.clear()
    change = (now - then for now, then in zip(summary.tally(), before, strict=True))
    log.info("%s: %d new, %d updated, %d deleted, %d problems", source, *change)
    return summary


def _was_deleted(store: Store, pmid: int) -> bool:
    return store.conn.execute("SELECT 1 FROM deleted_citation WHERE pmid=?", (pmid,)).fetchone() is not None


def baseline_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """A directory's .xml.gz/.xml files in file-name order, or the given files in the given order."""
    if isinstance(paths, str | Path):
        root = Path(paths)
        if root.is_dir():
            return sorted(p for p in root.iterdir() if p.is_file() and p.name.endswith(BASELINE_SUFFIXES))
        paths = [root]
    files = [Path(p) for p in paths]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"baseline files not found: {', '.join(missing)}")
    return files


def load_baseline(
    store: Store,
    paths: str | Path | Iterable[str | Path],
    cfg: Config,
    *,
    progress: Progress | None = None,
) -> LoadSummary:
    """Load PubMed baseline/update files (a directory or explicit files) into the store.

    Each file's papers are upserted with source "baseline:<file name>" in ingest batches of
    `[embedding] refresh_threshold`; its DeleteCitation blocks remove papers. Loading the same
    files again changes no rows. Unreadable records and truncated files end up in `problems`.
    """
    summary = LoadSummary()
    for path in baseline_files(paths):
        source = f"baseline:{path.name}"
        summary.files.append(path.name)
        store_records(
            store,
            iter_pubmed_xml(path, source_name=source),
            source=source,
            batch_size=cfg.embedding.refresh_threshold,
            summary=summary,
            progress=progress,
        )
    return summary
