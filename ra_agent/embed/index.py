"""Embedding passes: embed ingest batches into the model's vector folder and switch the active index when complete."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ra_agent.config import Config
from ra_agent.embed.embedder import Embedder, ProgressFn, encode_batched
from ra_agent.store.db import Store
from ra_agent.store.vectors import (
    VectorStore,
    _as_ids,
    active_index,
    configured_slug,
    emb_root,
    missing_vectors,
    model_slug,
    switch_active,
)

log = logging.getLogger(__name__)


def vector_store_for(cfg: Config, embedder: Embedder) -> VectorStore:
    """The (created on demand) folder of `embedder`'s model and version under data_dir/emb."""
    return VectorStore.create(
        emb_root(cfg.data_dir) / model_slug(embedder.model_id, embedder.version),
        model=embedder.model_id,
        version=embedder.version,
        dim=embedder.dim,
        dtype="float16" if cfg.embedding.fp16 else "float32",
        chunk_rows=cfg.embedding.topk_chunk_rows,
    )


# ---------------------------------------------------------------------- embedding passes
@dataclass(frozen=True)
class ShardResult:
    """What one embedding pass did (counts for logs and asset metadata)."""

    model_id: str
    slug: str
    requested: int  # distinct PMIDs asked for
    embedded: int  # vectors this pass appended
    already_present: int
    skipped: list[int] = field(default_factory=list)  # PMIDs whose batch ran out of memory twice: no vector
    missing: list[int] = field(default_factory=list)  # PMIDs without a paper row
    no_text: list[int] = field(default_factory=list)  # PMID-only rows (no title, no abstract): nothing to embed
    seconds: float = 0.0
    count: int = 0  # vectors in the store afterwards
    batch_id: str | None = None


def embed_missing(
    vectors: VectorStore,
    embedder: Embedder,
    db: Store,
    pmids: Iterable[int],
    cfg: Config,
    *,
    on_progress: ProgressFn | None = None,
    batch_id: str | None = None,
) -> ShardResult:
    """Embed ("title · abstract") the PMIDs that have no vector yet, committing every [embedding] chunk_size texts."""
    t0 = time.perf_counter()
    wanted = np.unique(_as_ids(pmids))
    todo = wanted[~vectors.has(wanted)]
    embedded, skipped, missing, no_text = 0, [], [], []
    step = cfg.embedding.chunk_size
    for start in range(0, len(todo), step):
        part = todo[start : start + step].tolist()
        rows = db.papers(part)
        papers = [p for p in rows if p.title.strip() or p.abstract.strip()]
        no_text.extend(p.pmid for p in rows if not (p.title.strip() or p.abstract.strip()))
        found = np.array([p.pmid for p in papers], dtype=np.int64)
        missing.extend(sorted(set(part).difference(p.pmid for p in rows)))
        progress = None if on_progress is None else _offset_progress(on_progress, start, len(todo))
        encoded = encode_batched(
            embedder,
            [p.text for p in papers],
            cfg.embedding.batch_size,
            halve_on_oom=cfg.hardware.gpu_batch_halving,
            on_progress=progress,
        )
        embedded += vectors.append(found[encoded.kept], encoded.vectors)
        skipped.extend(found[encoded.skipped].tolist())
    if skipped:
        log.error("%d papers got no vector (out of memory twice), e.g. %s", len(skipped), skipped[:5])
    return ShardResult(
        model_id=embedder.model_id,
        slug=vectors.slug,
        requested=len(wanted),
        embedded=embedded,
        already_present=len(wanted) - len(todo),
        skipped=skipped,
        missing=missing,
        no_text=no_text,
        seconds=round(time.perf_counter() - t0, 3),
        count=len(vectors),
        batch_id=batch_id,
    )


def _offset_progress(on_progress: ProgressFn, offset: int, total: int) -> ProgressFn:
    return lambda done, _: on_progress(offset + done, total)


def embed_shard(
    cfg: Config,
    db: Store,
    batch_id: str,
    embedder: Embedder,
    vectors: VectorStore | None = None,
    on_progress: ProgressFn | None = None,
) -> ShardResult:
    """Embed one ingest batch's papers into the folder of `embedder`'s model (the `embedding_shards` partition)."""
    if vectors is None:
        vectors = vector_store_for(cfg, embedder)
    result = embed_missing(
        vectors, embedder, db, db.pmids_for_batch(batch_id), cfg, on_progress=on_progress, batch_id=batch_id
    )
    log.info(
        "shard %s: %d embedded, %d already present, %d skipped, %d missing in %.1fs (%s)",
        batch_id,
        result.embedded,
        result.already_present,
        len(result.skipped),
        len(result.missing),
        result.seconds,
        result.slug,
    )
    return result


@dataclass(frozen=True)
class IndexResult:
    """Outcome of `build_index`: the checked folder and which one is active afterwards."""

    slug: str
    count: int
    families: list[str]
    missing: int  # papers in the database without an E vector in this folder
    problems: list[str]
    active: str | None
    previous: str | None
    rebuilt: int = 0  # vectors `before_switch` wrote into the folder before it became active


BeforeSwitch = Callable[[VectorStore], int]


def build_index(
    cfg: Config,
    db: Store | None = None,
    slug: str | None = None,
    *,
    activate: bool = True,
    allow_incomplete: bool = False,
    before_switch: BeforeSwitch | None = None,
) -> IndexResult:
    """Check a model folder (default: the configured model's) and make it the active index.

    The switch needs a clean `verify()` and, when `db` is given and another folder is
    active, a vector for every paper: a half-finished re-embed never replaces a complete
    index unless `allow_incomplete`. `before_switch(folder)` runs just before the switch (the
    agent passes `evidence.pico.vectors.pico_family_rebuilder`: every PICO family, not only E).
    """
    slug = slug or configured_slug(cfg)
    vectors = VectorStore(emb_root(cfg.data_dir) / slug, chunk_rows=cfg.embedding.topk_chunk_rows)
    problems = vectors.verify()
    missing = missing_vectors(vectors, db) if db is not None else 0
    previous = active_index(cfg.data_dir)
    complete = missing == 0 or allow_incomplete or previous in (None, slug)
    rebuilt = 0
    if activate and previous != slug:
        if problems or not complete:
            log.warning("not activating %s: %s", slug, "; ".join(problems) or f"{missing} papers lack a vector")
        else:
            rebuilt = before_switch(vectors) if before_switch is not None else 0
            switch_active(cfg.data_dir, slug)
    return IndexResult(slug, len(vectors), vectors.families, missing, problems, active_index(cfg.data_dir), previous,
                       rebuilt)  # fmt: skip


def shards_behind(cfg: Config, db: Store) -> list[dict]:
    """Ingest batches (embedding shards) with papers that have text but no vector in the configured model's folder:
    [{batch_id, papers, missing}] — every shard after a model bump, until its backfill run."""
    folder = emb_root(cfg.data_dir) / configured_slug(cfg)
    vectors = VectorStore(folder) if (folder / "meta.json").exists() else None
    behind = []
    for batch in db.batches():
        papers = [r[0] for r in db.conn.execute(
            "SELECT pmid FROM paper WHERE batch_id = ? AND (trim(title) != '' OR trim(abstract) != '') ORDER BY pmid",
            (batch["batch_id"],))]  # fmt: skip
        missing = len(papers) if vectors is None else int((~vectors.has(papers)).sum())
        if missing:
            behind.append({"batch_id": batch["batch_id"], "papers": len(papers), "missing": missing})
    return behind


Progress = Callable[..., None] | None


@dataclass
class EmbedAllResult:
    folder: str
    embedded: int = 0
    skipped: int = 0
    shards: list[str] = field(default_factory=list)
    active: str | None = None


def embed_all(cfg: Config, store: Store, progress: Progress = None, embedder=None,
              before_switch: BeforeSwitch | None = None) -> EmbedAllResult:  # fmt: skip
    """Embed every ingest batch (only papers without a vector) and switch the active index when complete
    (`before_switch`: see build_index)."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.embed.index import build_index, embed_shard, vector_store_for

    embedder = embedder or SentenceTransformerEmbedder(cfg)
    vectors = vector_store_for(cfg, embedder)
    out = EmbedAllResult(folder=str(vectors.root))
    total = store.counts()["paper"]
    done = 0
    for batch in store.batches():
        shard_progress = None if progress is None else (lambda d, _t, base=done: progress(base + d, total))
        result = embed_shard(cfg, store, batch["batch_id"], embedder, vectors, on_progress=shard_progress)
        out.embedded += result.embedded
        out.skipped += len(result.skipped)
        out.shards.append(batch["batch_id"])
        done += result.requested
        if progress:
            progress(done, total)
    out.active = build_index(cfg, store, before_switch=before_switch).active
    return out
