"""Approximate nearest-neighbour index (faiss IVF over fp16 codes) of a vector folder's E rows, and search through it."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ra_agent.config import AnnConfig
from ra_agent.fileio import atomic_write
from ra_agent.store.scan import one_faiss_thread
from ra_agent.store.vectors import TopK, VectorStore

log = logging.getLogger(__name__)

ANN_DIR, INDEX_FILE, META_FILE = "ann", "ivf.faiss", "meta.json"
KIND = "faiss-ivf-sq-fp16"  # IndexIVFScalarQuantizer, fp16 codes of the rows themselves (not residuals), inner product
RECALL_K = 10
ADD_ROWS = 65536  # rows converted to float32 and added per step while building
MIN_TRAIN_PER_LIST = 39  # faiss' k-means wants >= 39 training points per centre


@dataclass(frozen=True)
class AnnBuild:
    """What `build_ann` did: built, kept a current index, or skipped (the reason says why)."""

    action: str  # "built" | "current" | "skipped"
    reason: str
    slug: str
    count: int  # E rows the index covers (or the folder holds, when skipped)
    kind: str = KIND
    nlist: int = 0
    nprobe: int = 0
    train_rows: int = 0
    seconds: float = 0.0
    recall_at_10: float | None = None
    recall_queries: int = 0
    index_bytes: int = 0


@dataclass(frozen=True)
class AnnState:
    """Whether a folder's ANN index may answer searches: `current` only when it covers exactly the folder's rows."""

    current: bool
    reason: str
    meta: dict[str, Any] | None


def ann_dir(vectors: VectorStore) -> Path:
    return vectors.root / ANN_DIR


def ann_state(vectors: VectorStore) -> AnnState:
    """Is the folder's index present and built from the rows the folder holds now? (E is append-only: same count = same rows.)"""
    folder = ann_dir(vectors)
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return AnnState(False, "no ANN index", None)
    except (OSError, ValueError) as exc:
        return AnnState(False, f"unreadable {folder / META_FILE}: {exc}", None)
    index = folder / INDEX_FILE
    if meta.get("kind") != KIND or meta.get("slug") != vectors.slug:
        return AnnState(
            False, f"ANN index is {meta.get('kind')} of {meta.get('slug')}, not {KIND} of {vectors.slug}", meta
        )
    if not index.exists() or index.stat().st_size != meta.get("index_bytes"):
        return AnnState(False, f"{index} missing or not the file {META_FILE} describes", meta)
    if meta.get("count") != len(vectors):
        return AnnState(
            False, f"ANN index is stale: built over {meta.get('count')} rows, the folder holds {len(vectors)}", meta
        )
    return AnnState(True, f"ANN index current ({meta['count']} rows)", meta)


def build_ann(vectors: VectorStore, cfg: AnnConfig) -> AnnBuild:
    """Build (or keep, when current) the folder's IVF index once it holds `cfg.min_rows` E rows.

    Trains `nlist` centres (default 4 * sqrt(rows)) on `train_rows` sampled rows, adds every
    row as fp16 codes, writes `ann/ivf.faiss` then `ann/meta.json` (the commit point) and
    measures recall@10 against the exact scan on `recall_queries` stored rows (their own row
    left out of both answers).
    """
    count = len(vectors)
    state = ann_state(vectors)
    if count < cfg.min_rows:
        reason = f"{count} rows < [ann] min_rows {cfg.min_rows}: searches scan exactly"
        return AnnBuild("skipped", reason, vectors.slug, count)
    if state.current and state.meta is not None:
        fields = {k: state.meta[k] for k in AnnBuild.__dataclass_fields__ if k in state.meta}
        return AnnBuild(**{**fields, "action": "current", "reason": state.reason})
    import faiss

    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    train_rows = min(count, cfg.train_rows)
    nlist = cfg.nlist or round(4 * math.sqrt(count))
    nlist = max(1, min(nlist, train_rows // MIN_TRAIN_PER_LIST))
    matrix = vectors.matrix("E")
    sample = np.asarray(matrix[np.sort(rng.choice(count, train_rows, replace=False))], dtype=np.float32)
    quantizer = faiss.IndexFlatIP(vectors.dim)
    index = faiss.IndexIVFScalarQuantizer(
        quantizer, vectors.dim, nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT, False
    )
    index.cp.seed = cfg.seed
    index.train(sample)
    del sample
    for start in range(0, count, ADD_ROWS):
        index.add(np.asarray(matrix[start : start + ADD_ROWS], dtype=np.float32))
    index.nprobe = min(cfg.nprobe, nlist)
    recall, queries = _recall(vectors, index, cfg, rng)
    seconds = round(time.perf_counter() - t0, 2)

    folder = ann_dir(vectors)
    folder.mkdir(exist_ok=True)
    (folder / META_FILE).unlink(missing_ok=True)  # the index being replaced is no longer described
    tmp = folder / f"{INDEX_FILE}.tmp"
    faiss.write_index(index, str(tmp))
    os.replace(tmp, folder / INDEX_FILE)
    built = AnnBuild(
        "built",
        f"built over {count} rows",
        vectors.slug,
        count,
        nlist=nlist,
        nprobe=index.nprobe,
        train_rows=train_rows,
        seconds=seconds,
        recall_at_10=recall,
        recall_queries=queries,
        index_bytes=(folder / INDEX_FILE).stat().st_size,
    )
    atomic_write(folder / META_FILE, json.dumps({**asdict(built), "built_ts": int(time.time())}, indent=2))
    _LOADED.pop(str(folder / INDEX_FILE), None)
    log.info(
        "ANN index of %s: %d rows, %d lists, nprobe %d, recall@10 %s on %d queries, %.1fs",
        vectors.slug, count, nlist, index.nprobe, recall, queries, seconds,
    )  # fmt: skip
    return built


def _recall(vectors: VectorStore, index: Any, cfg: AnnConfig, rng: np.random.Generator) -> tuple[float | None, int]:
    """Mean recall@10 of the index against the exact scan; queries are stored rows, each left out of its own answers."""
    n = min(cfg.recall_queries, len(vectors) - RECALL_K - 1)
    if n <= 0:
        return None, 0
    rows = rng.choice(len(vectors), n, replace=False)
    queries = np.asarray(vectors.matrix("E")[np.sort(rows)], dtype=np.float32)
    hits = 0
    with one_faiss_thread():
        _, approx = index.search(queries, RECALL_K + 1)
    for row, query, found in zip(np.sort(rows), queries, approx, strict=True):
        exact = vectors.rows_of(vectors.topk(query, RECALL_K + 1).pmids)
        truth = [r for r in exact.tolist() if r != row][:RECALL_K]
        hits += len(set(truth) & {r for r in found.tolist() if r != row})
    return round(hits / (n * RECALL_K), 4), n


def remove_ann(vectors: VectorStore) -> bool:
    """Delete the folder's ANN index (searches then scan exactly); True if there was one."""
    folder = ann_dir(vectors)
    _LOADED.pop(str(folder / INDEX_FILE), None)
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True


# ---------------------------------------------------------------------- search
_LOADED: dict[str, tuple[tuple[int, int], Any]] = {}  # index path -> ((mtime_ns, size), faiss index)
_LAST_ROUTE: dict[str, str] = {}  # folder -> the last route logged, so a change is logged once


def search(vectors: VectorStore, query: np.ndarray, k: int, cfg: AnnConfig) -> TopK:
    """The k rows nearest `query`: through the ANN index when it is current, else the exact scan (`TopK.method` says which)."""
    state = ann_state(vectors)
    if not state.current:
        if state.meta is not None or len(vectors) >= cfg.min_rows:
            _log_route(vectors, f"exact scan ({state.reason})")
        return vectors.topk(query, k)
    q = vectors.unit_query(query)
    if k <= 0:
        return TopK(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), "ann")
    index = _load(ann_dir(vectors) / INDEX_FILE)
    index.nprobe = cfg.nprobe
    with one_faiss_thread():
        scores, rows = index.search(q, k)
    scores, rows = scores[0], rows[0]
    found = rows >= 0
    _log_route(vectors, f"ANN index ({KIND}, {state.meta and state.meta.get('count')} rows, nprobe {cfg.nprobe})")
    return vectors.ranked(rows[found].astype(np.int64), scores[found], "ann")


def _load(path: Path) -> Any:
    import faiss

    stat = path.stat()
    signature = (stat.st_mtime_ns, stat.st_size)
    cached = _LOADED.get(str(path))
    if cached is None or cached[0] != signature:
        _LOADED.clear()  # one index in memory at a time
        _LOADED[str(path)] = (signature, faiss.read_index(str(path)))
    return _LOADED[str(path)][1]


def _log_route(vectors: VectorStore, route: str) -> None:
    if _LAST_ROUTE.get(str(vectors.root)) != route:
        _LAST_ROUTE[str(vectors.root)] = route
        log.info("vector search in %s: %s", vectors.slug, route)
