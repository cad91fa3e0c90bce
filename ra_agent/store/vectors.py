"""fp16 memmap vector families (docs/scaling.md): offsets, appends, chunked exact top-k, the active index."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ra_agent.config import Config
from ra_agent.fileio import atomic_write, atomic_writer, exclusive_lock
from ra_agent.store.db import Store
from ra_agent.store.scan import FlatScan, one_faiss_thread
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

FORMAT = 1
FAMILIES = ("E", "p", "i", "c", "o", "m")  # E: title · abstract; p i c o m: PICO fields and study design
META, OFFSETS, ROWS, LOCK = "meta.json", "offsets.npy", "rows.i64", ".lock"
ACTIVE = "ACTIVE"  # emb/ACTIVE names the model folder consumers read
DEFAULT_CHUNK_ROWS = 4096  # [embedding] topk_chunk_rows
NORM_TOL = 1e-3  # fp16 rounding moves a unit norm by < 5e-4
_SUFFIX = {"float16": ".f16", "float32": ".f32"}

# Crash-test hook: an append sleeps PAUSE_S seconds at the named stage ("after_data" or
# "after_offsets") so a test can SIGKILL it there.
PAUSE_AT_ENV, PAUSE_S_ENV = "RA_VECTORS_TEST_PAUSE_AT", "RA_VECTORS_TEST_PAUSE_S"


class VectorStoreError(RuntimeError):
    """A vector folder is inconsistent in a way the store cannot repair, or belongs to another model."""


@dataclass(frozen=True)
class TopK:
    """Best matches for a query, highest cosine first."""

    pmids: np.ndarray  # int64
    scores: np.ndarray  # float32 cosine similarities
    method: str = "exact"  # "exact" (the chunked scan) or "ann" (store/ann.py's index)


class VectorStore:
    """Vectors of one embedding model + version: the folder `data_dir/emb/<model-slug>/`.

    Files (format 1):

    - `E.f16`: raw float16, row-major, no header; row r is the r-th PMID ever appended.
      Appending n vectors grows it by exactly dim * n * 2 bytes. Readable with
      `np.memmap(path, np.float16, "r", shape=(count, dim))`.
    - `p.f16 i.f16 c.f16 o.f16 m.f16` (and any later family, e.g. `d.f16`): the PICO
      vectors on the same row index as E, written in place for any subset of rows with
      `put()`. A row never written, or past the file's end, reads as zeros ("no value").
    - `rows.i64`: int64 PMIDs in row (append) order; append-only like E.
    - `offsets.npy`: int64 array (2, count): [0] the PMIDs sorted ascending, [1] each one's
      row. A PMID is found by binary search over [0].
    - `meta.json`: format, model, version, slug, dim, dtype, count, families. `count` is the
      commit point: bytes past count rows are leftovers of a killed append.

    An append writes and fsyncs E and rows.i64 past `count`, then replaces offsets.npy and
    meta.json atomically (temp file + os.replace). A killed append leaves a tail that readers
    ignore and the next append truncates; an offsets.npy that does not match `count` is
    rebuilt from rows.i64. Writers hold an exclusive lock on `.lock`; readers see the rows
    committed when they opened (or last called `refresh()`). Scans (`topk`, `verify`) read
    `chunk_rows` rows at a time into reused buffers (`topk`: the raw rows, chunk_rows * dim * 2
    bytes for fp16, in a faiss index's code buffer; `verify`: * 6, with a float32 copy), so
    memory stays bounded whatever the store's size.
    With `dtype="float32"` the data files are `.f32` and rows take dim * 4 bytes.
    """

    def __init__(self, root: str | Path, *, chunk_rows: int = DEFAULT_CHUNK_ROWS):
        self.root = Path(root)
        self.chunk_rows = chunk_rows
        self.refresh()

    @classmethod
    def create(
        cls,
        root: str | Path,
        *,
        model: str,
        version: str,
        dim: int,
        dtype: str = "float16",
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ) -> VectorStore:
        """Open the store at `root`, creating an empty one first; an existing one must hold the same model/version/dim."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        with _locked(root):
            if not (root / META).exists():
                now = int(time.time())
                meta = {
                    "format": FORMAT,
                    "model": model,
                    "version": version,
                    "slug": model_slug(model, version),
                    "dim": int(dim),
                    "dtype": np.dtype(dtype).name,
                    "count": 0,
                    "families": ["E"],
                    "created_ts": now,
                    "updated_ts": now,
                }
                _write_json(root / META, meta)
                log.info("created vector store %s (%s, dim %d, %s)", root, model, dim, meta["dtype"])
        store = cls(root, chunk_rows=chunk_rows)
        wanted = {"model": model, "version": version, "dim": int(dim)}
        found = {key: store.meta[key] for key in wanted}
        if found != wanted:
            raise VectorStoreError(f"{root}: holds {found}, not {wanted}")
        return store

    # ------------------------------------------------------------------ state
    def refresh(self) -> None:
        """Re-read meta.json and the offsets, to see rows committed since this store was opened."""
        meta_path = self.root / META
        if not meta_path.exists():
            raise FileNotFoundError(f"{self.root}: not a vector store ({META} missing)")
        self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        self.dim = int(self.meta["dim"])
        self.dtype = np.dtype(self.meta["dtype"])
        self.count = int(self.meta["count"])
        self._row_bytes = self.dim * self.dtype.itemsize
        for path, needed in ((self.path("E"), self.count * self._row_bytes), (self.root / ROWS, self.count * 8)):
            size = path.stat().st_size if path.exists() else 0
            if size < needed:
                raise VectorStoreError(f"{path}: {size} bytes, but {META} count {self.count} needs {needed}")
        self._row_pmids = _map(self.root / ROWS, np.dtype(np.int64), (self.count,))
        self._offsets = self._load_offsets()
        self._maps: dict[str, np.ndarray] = {}

    def _load_offsets(self) -> np.ndarray:
        if self.count == 0:
            return _readonly(np.zeros((2, 0), dtype=np.int64))
        path = self.root / OFFSETS
        try:
            offsets = np.load(path, mmap_mode="r")
            if offsets.shape == (2, self.count) and offsets.dtype == np.int64:
                return offsets
        except (OSError, ValueError):
            pass
        log.warning("%s does not match %d rows; rebuilding it from %s", path, self.count, ROWS)
        return _readonly(
            _merge_offsets(np.zeros((2, 0), dtype=np.int64), np.asarray(self._row_pmids), _arange(0, self.count))
        )

    @property
    def model(self) -> str:
        return self.meta["model"]

    @property
    def version(self) -> str:
        return self.meta["version"]

    @property
    def slug(self) -> str:
        return self.meta["slug"]

    @property
    def families(self) -> list[str]:
        return list(self.meta["families"])

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"VectorStore({str(self.root)!r}, count={self.count}, dim={self.dim}, families={self.families})"

    def path(self, family: str = "E") -> Path:
        """The data file of a family."""
        _check_family(family)
        return self.root / f"{family}{_SUFFIX[self.dtype.name]}"

    @property
    def pmids(self) -> np.ndarray:
        """Every stored PMID, ascending (read-only)."""
        return self._offsets[0]

    @property
    def row_pmids(self) -> np.ndarray:
        """PMID of each row in row order, aligned with `matrix()` (read-only)."""
        return self._row_pmids

    def matrix(self, family: str = "E") -> np.ndarray:
        """Read-only (rows, dim) memmap of a family in row order; a PICO family may stop short of `count` rows."""
        if family not in self._maps:
            path = self.path(family)
            rows = min(self.count, path.stat().st_size // self._row_bytes) if path.exists() else 0
            self._maps[family] = _map(path, self.dtype, (rows, self.dim))
        return self._maps[family]

    # ------------------------------------------------------------------ lookup
    def rows_of(self, pmids: Iterable[int]) -> np.ndarray:
        """Row of each PMID (binary search over the sorted offsets); -1 where a PMID has no vector."""
        wanted = _as_ids(pmids)
        sorted_pmids, rows = self._offsets
        if self.count == 0:
            return np.full(len(wanted), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(sorted_pmids, wanted), self.count - 1)
        return np.where(sorted_pmids[at] == wanted, rows[at], -1).astype(np.int64)

    def has(self, pmids: Iterable[int], family: str = "E") -> np.ndarray:
        """Boolean mask: which PMIDs have a vector (for a PICO family: a non-zero one)."""
        rows = self.rows_of(pmids)
        found = rows >= 0
        if family != "E" and found.any():
            found[found] = np.any(self._read(family, rows[found]) != 0, axis=1)
        return found

    def __contains__(self, pmid: int) -> bool:
        return bool(self.has([pmid])[0])

    def get(self, pmids: Iterable[int], family: str = "E") -> np.ndarray:
        """float32 (n, dim) vectors of the PMIDs, in the given order; KeyError naming PMIDs that have none."""
        wanted = _as_ids(pmids)
        rows = self.rows_of(wanted)
        absent = wanted[rows < 0]
        if len(absent):
            raise KeyError(f"{len(absent)} PMIDs have no vector in {self.slug}, e.g. {absent[:5].tolist()}")
        return self._read(family, rows)

    def _read(self, family: str, rows: np.ndarray) -> np.ndarray:
        out = np.zeros((len(rows), self.dim), dtype=np.float32)
        stored = self.matrix(family)
        inside = rows < len(stored)
        out[inside] = stored[rows[inside]]
        return out

    # ------------------------------------------------------------------ writes
    def append(self, pmids: Iterable[int], vectors: np.ndarray) -> int:
        """Add E vectors for new PMIDs (rows for PMIDs already stored are left alone); returns rows added."""
        ids, vecs = self._checked(pmids, vectors)
        if len(ids) == 0:
            return 0
        with _locked(self.root):
            self.refresh()
            new = ~self.has(ids)
            ids, vecs = ids[new], vecs[new]
            if len(ids) == 0:
                return 0
            start, end = self.count, self.count + len(ids)
            _append_at(self.path("E"), start * self._row_bytes, vecs)
            _append_at(self.root / ROWS, start * 8, ids)
            _test_pause("after_data")
            _write_npy(self.root / OFFSETS, _merge_offsets(np.asarray(self._offsets), ids, _arange(start, end)))
            _test_pause("after_offsets")
            self._commit(count=end)
        log.debug("appended %d vectors to %s (now %d)", len(ids), self.slug, end)
        return len(ids)

    def put(self, family: str, pmids: Iterable[int], vectors: np.ndarray) -> int:
        """Write vectors of a PICO family (p i c o m ...) for stored PMIDs, in place; a zero vector means "no value".

        Rewriting the same rows is idempotent, so a killed `put` is repaired by running it again.
        """
        _check_family(family)
        if family == "E":
            raise ValueError("family E is append-only: use append()")
        ids, vecs = self._checked(pmids, vectors)
        if len(ids) == 0:
            return 0
        with _locked(self.root):
            self.refresh()
            rows = self.rows_of(ids)
            if (rows < 0).any():
                raise KeyError(f"PMIDs without an E row cannot get {family} vectors, e.g. {ids[rows < 0][:5].tolist()}")
            path = self.path(family)
            with open(path, "ab") as f:
                size = max(f.seek(0, os.SEEK_END), (int(rows.max()) + 1) * self._row_bytes)
                f.truncate(size)  # rows never written read as zeros
            stored = np.memmap(path, dtype=self.dtype, mode="r+", shape=(size // self._row_bytes, self.dim))
            stored[rows] = vecs
            stored.flush()
            del stored
            families = self.families if family in self.families else [*self.families, family]
            self._commit(families=families)
        return len(ids)

    def _checked(self, pmids: Iterable[int], vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PMIDs as int64 and vectors in the store's dtype, after checking shape, uniqueness and finiteness."""
        ids = _as_ids(pmids)
        vecs = np.asarray(vectors)
        if vecs.shape != (len(ids), self.dim):
            raise ValueError(f"expected vectors of shape ({len(ids)}, {self.dim}), got {vecs.shape}")
        if len(np.unique(ids)) != len(ids):
            raise ValueError("duplicate PMIDs in one write")
        vecs = vecs.astype(self.dtype)
        if not np.isfinite(vecs).all():
            raise ValueError(f"vectors must be finite in {self.dtype.name}")
        return ids, vecs

    def _commit(self, **changes) -> None:
        _write_json(self.root / META, {**self.meta, **changes, "updated_ts": int(time.time())})
        self.refresh()

    # ------------------------------------------------------------------ scans
    def _blocks(self, family: str) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float32 block) over a family's stored rows, `chunk_rows` at a time; the buffers are reused."""
        total = len(self.matrix(family))
        if total == 0:
            return
        step = min(self.chunk_rows, total)
        raw = np.empty((step, self.dim), dtype=self.dtype)
        block = np.empty((step, self.dim), dtype=np.float32)
        with open(self.path(family), "rb") as f:
            for start in range(0, total, step):
                n = min(step, total - start)
                view = raw[:n].data.cast("B")
                if f.readinto(view) != view.nbytes:
                    raise VectorStoreError(f"{self.path(family)}: short read at row {start}")
                np.copyto(block[:n], raw[:n])
                yield start, block[:n]

    def topk(self, query: np.ndarray, k: int = 10, family: str = "E") -> TopK:
        """The k rows most cosine-similar to `query`, exact, scanning `chunk_rows` rows at a time (rows without a vector never match).

        Each chunk is read straight into the code buffer of a faiss flat index (fp16 codes
        decoded in SIMD registers, or float32 rows), which keeps the chunk's best k; the
        chunks' candidates are merged with argpartition. Ties go to the earlier row.
        """
        q = self.unit_query(query)
        if k <= 0:
            return TopK(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        total = len(self.matrix(family))
        best_rows = np.zeros(0, dtype=np.int64)
        best_scores = np.zeros(0, dtype=np.float32)
        if total:
            scan = FlatScan(self.dtype, self.dim, min(self.chunk_rows, total))
            with open(self.path(family), "rb", buffering=0) as f, one_faiss_thread():
                for start in range(0, total, scan.rows):
                    if not scan.read(f, min(scan.rows, total - start)):
                        raise VectorStoreError(f"{self.path(family)}: short read at row {start}")
                    rows, scores = scan.search(q, k, skip_zero_rows=family != "E")
                    best_rows = np.concatenate([best_rows, rows + start])
                    best_scores = np.concatenate([best_scores, scores])
                    keep = _top_indices(best_scores, k)
                    best_rows, best_scores = best_rows[keep], best_scores[keep]
        return self.ranked(best_rows, best_scores)

    def unit_query(self, query: np.ndarray) -> np.ndarray:
        """`query` as a unit float32 row of shape (1, dim); ValueError unless it is a non-zero vector of `dim` values."""
        q = np.asarray(query, dtype=np.float32).ravel()
        norm = float(np.linalg.norm(q))
        if q.shape != (self.dim,) or not norm > 0:
            raise ValueError(f"query must be a non-zero vector of {self.dim} values")
        return (q / norm).reshape(1, -1)

    def ranked(self, rows: np.ndarray, scores: np.ndarray, method: str = "exact") -> TopK:
        """Matched rows and their scores as a TopK of PMIDs: highest score first, ties to the earlier row."""
        order = np.lexsort((rows, -scores))
        return TopK(np.asarray(self._row_pmids[rows[order]], dtype=np.int64), scores[order], method)

    def verify(self, norm_tol: float = NORM_TOL) -> list[str]:
        """Problems found (empty when healthy): offsets sorted, unique and matching rows.i64; vectors finite and unit-norm."""
        problems = []
        sorted_pmids, rows = np.asarray(self._offsets[0]), np.asarray(self._offsets[1])
        if np.any(np.diff(sorted_pmids) <= 0):
            problems.append("offsets: PMIDs not sorted and unique")
        if not np.array_equal(np.sort(rows), _arange(0, self.count)):
            problems.append("offsets: rows are not a permutation of 0..count-1")
        elif not np.array_equal(np.asarray(self._row_pmids)[rows], sorted_pmids):
            problems.append(f"offsets: PMIDs disagree with {ROWS}")
        for family in self.families:
            not_finite = off_norm = 0
            for _, block in self._blocks(family):
                finite = np.all(np.isfinite(block), axis=1, keepdims=True)
                norms = np.linalg.norm(np.where(finite, block, 0), axis=1)
                finite = finite[:, 0]
                judged = finite if family == "E" else finite & (norms > 0)
                not_finite += int((~finite).sum())
                off_norm += int((np.abs(norms[judged] - 1) > norm_tol).sum())
            if not_finite:
                problems.append(f"{family}: {not_finite} rows not finite")
            if off_norm:
                problems.append(f"{family}: {off_norm} rows with |norm - 1| > {norm_tol}")
        return problems


def model_slug(model_name: str, version: str) -> str:
    """Folder name of a model's vectors, e.g. "sentence-transformers__all-MiniLM-L6-v2@1"."""

    def clean(s: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", s.strip().strip("/\\").replace("/", "__"))

    return f"{clean(model_name)}@{clean(version)}"


# ---------------------------------------------------------------------- the active index
def emb_root(data_dir: str | Path) -> Path:
    """Folder holding one sub-folder per model slug and the ACTIVE pointer."""
    return Workspace(Path(data_dir)).emb_dir


def active_index(data_dir: str | Path) -> str | None:
    """Slug of the model folder consumers read (emb/ACTIVE), or None before the first switch."""
    try:
        slug = (emb_root(data_dir) / ACTIVE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return slug or None


def switch_active(data_dir: str | Path, slug: str) -> str | None:
    """Point emb/ACTIVE at `slug` (atomic replace); returns the slug it pointed at before."""
    root = emb_root(data_dir)
    if not (root / slug / META).exists():
        raise FileNotFoundError(f"{root / slug}: no vector store to activate")
    previous = active_index(data_dir)
    atomic_write(root / ACTIVE, f"{slug}\n")
    log.info("active embedding index: %s (was %s)", slug, previous)
    return previous


def configured_slug(cfg: Config) -> str:
    """Slug of the model and version named in [embedding]."""
    return model_slug(cfg.embedding.model_name, cfg.embedding.model_version)


def open_active(cfg: Config) -> VectorStore:
    """The index consumers read: the folder emb/ACTIVE names, or the configured model's before any switch."""
    slug = active_index(cfg.data_dir) or configured_slug(cfg)
    return VectorStore(emb_root(cfg.data_dir) / slug, chunk_rows=cfg.embedding.topk_chunk_rows)


# ---------------------------------------------------------------------- helpers
def embeddable_pmids(db: Store) -> list[int]:
    """Papers with a title or an abstract (PMID-only rows from exports have nothing to embed)."""
    return [r[0] for r in db.conn.execute("SELECT pmid FROM paper WHERE trim(title || abstract) != '' ORDER BY pmid")]


def missing_vectors(vectors: VectorStore, db: Store) -> int:
    """How many papers with text have no vector in `vectors`."""
    return int((~vectors.has(embeddable_pmids(db))).sum())


def _check_family(family: str) -> None:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", family):
        raise ValueError(f"bad vector family name {family!r}")


def _as_ids(pmids: Iterable[int]) -> np.ndarray:
    if not isinstance(pmids, np.ndarray):
        pmids = list(pmids)
    return np.asarray(pmids, dtype=np.int64).ravel()


def _arange(start: int, end: int) -> np.ndarray:
    return np.arange(start, end, dtype=np.int64)


def _map(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Read-only memmap of the first shape rows of a raw file (an empty array for zero rows)."""
    if shape[0] == 0:
        return _readonly(np.zeros(shape, dtype=dtype))
    return np.memmap(path, dtype=dtype, mode="r", shape=shape)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _merge_offsets(offsets: np.ndarray, pmids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Offsets (sorted PMIDs over their rows) with new (pmid, row) pairs inserted in order."""
    order = np.argsort(pmids, kind="stable")
    pmids, rows = pmids[order], rows[order]
    at = np.searchsorted(offsets[0], pmids)
    return np.stack([np.insert(offsets[0], at, pmids), np.insert(offsets[1], at, rows)])


def _top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    if len(scores) <= k:
        return np.arange(len(scores))
    return np.argpartition(scores, len(scores) - k)[len(scores) - k :]


def _test_pause(stage: str) -> None:
    if os.environ.get(PAUSE_AT_ENV) == stage:
        time.sleep(float(os.environ.get(PAUSE_S_ENV, "60")))


def _locked(root: Path):
    """Exclusive writer lock on root/.lock, held across processes (released by the OS if the holder dies)."""
    return exclusive_lock(root / LOCK)


def _append_at(path: Path, offset: int, array: np.ndarray) -> None:
    """Write `array` at byte `offset` of `path`, dropping any tail a killed append left there, and fsync."""
    with open(path, "ab") as f:
        f.truncate(offset)
        f.write(np.ascontiguousarray(array).data.cast("B"))
        f.flush()
        os.fsync(f.fileno())


def _write_json(path: Path, obj: dict) -> None:
    atomic_write(path, json.dumps(obj, indent=2))


def _write_npy(path: Path, array: np.ndarray) -> None:
    with atomic_writer(path) as fh:
        np.save(fh, array)
