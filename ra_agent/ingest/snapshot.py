"""Weekly snapshot: load new PubMed baseline/update files, then freeze a copy of the active vector index."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ra_agent.config import Config
from ra_agent.ingest.baseline import baseline_files, load_baseline
from ra_agent.ingest.corpus import file_sha1, is_loaded, mark_loaded
from ra_agent.store.db import Store
from ra_agent.store.vectors import active_index, emb_root
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)


@dataclass
class SnapshotResult:
    week: str
    baseline_dir: str
    files_loaded: list[str] = field(default_factory=list)
    files_already_loaded: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    problems: int = 0
    snapshot_dir: str = ""
    snapshot_index: str = ""


def weekly_snapshot(cfg: Config, store: Store, week: str, progress=None) -> SnapshotResult:
    """Load every baseline/update file of `<data_dir>/<baseline_dir>` not loaded before (by content hash),
    then copy the active embedding folder to `artifacts/<week>/` (docs/operations.md, Offline and baseline mode)."""
    ws = Workspace.of(cfg)
    folder = ws.root / cfg.ingest.baseline_dir
    result = SnapshotResult(week=week, baseline_dir=str(folder))
    files = baseline_files(folder) if folder.is_dir() else []
    for path in files:
        sha1 = file_sha1(path)
        if is_loaded(store, sha1):
            result.files_already_loaded += 1
            continue
        summary = load_baseline(store, path, cfg, progress=progress)
        mark_loaded(store, path, sha1, "baseline", summary.stored, summary.deleted, len(summary.problems))
        result.files_loaded.append(path.name)
        result.inserted += summary.inserted
        result.updated += summary.updated
        result.deleted += summary.deleted
        result.problems += len(summary.problems)
    slug = active_index(cfg.data_dir)
    if slug:
        target = ws.artifacts_dir / week.replace("-", "") / slug
        _copy_folder(emb_root(cfg.data_dir) / slug, target)
        result.snapshot_dir, result.snapshot_index = str(target), slug
    log.info("weekly snapshot %s: %d files loaded, index %s", week, len(result.files_loaded), slug or "none yet")
    return result


def _copy_folder(source: Path, target: Path) -> None:
    """Copy into a temp folder, then rename: a crash never leaves a half-copied snapshot."""
    if target.exists():
        return
    temp = target.with_name(target.name + ".partial")
    shutil.rmtree(temp, ignore_errors=True)
    shutil.copytree(source, temp, ignore=shutil.ignore_patterns(".lock"))
    temp.rename(target)
