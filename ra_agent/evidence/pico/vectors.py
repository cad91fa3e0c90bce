"""PICO vector families (p i c o m) in a model folder: embed a cluster's records, or all of them at an index switch."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ra_agent.config import Config
from ra_agent.evidence.pico.extract import PicoRecord, pico_texts, read_pico
from ra_agent.store.vectors import VectorStore
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

PICO_FAMILIES = ("p", "i", "c", "o", "m")


def embed_pico_families(vectors: VectorStore, records: Iterable[PicoRecord], embedder) -> int:
    """Write the p i c o m vectors of `records` (PMIDs with an E vector in `vectors`); returns vectors written."""
    records = [r for r in records if r.pmid in vectors]
    pmids = np.array([r.pmid for r in records], dtype=np.int64)
    written = 0
    for family in PICO_FAMILIES:
        texts = [pico_texts(r)[family] for r in records]
        filled = [i for i, t in enumerate(texts) if t]
        if filled:
            written += vectors.put(family, pmids[filled], embedder.encode([texts[i] for i in filled]))
    return written


def all_pico_records(cfg: Config) -> list[PicoRecord]:
    """The records of every `pico/<cluster_id>.jsonl`, one per PMID (the newest file wins)."""
    files = sorted(Path(Workspace.of(cfg).pico_dir).glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    by_pmid: dict[int, PicoRecord] = {}
    for path in files:
        by_pmid.update((r.pmid, r) for r in read_pico(path))
    return list(by_pmid.values())


def pico_family_rebuilder(cfg: Config, embedder_factory: Callable[[], object]) -> Callable[[VectorStore], int]:
    """The `before_switch` hook of `embed.index.build_index`: a new model's folder gets every PICO family
    (re-embedded from the PICO records on disk) before it becomes the active index, not only E."""

    def rebuild(vectors: VectorStore) -> int:
        records = all_pico_records(cfg)
        if not records:
            return 0
        written = embed_pico_families(vectors, records, embedder_factory())
        log.info("index switch to %s: %d PICO vectors re-embedded from %d records", vectors.slug, written,
                 len(records))  # fmt: skip
        return written

    return rebuild
