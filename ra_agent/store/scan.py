"""Chunked exact inner-product scan of a raw fp16/float32 vector file through a reused faiss flat index."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from io import RawIOBase

import numpy as np

# faiss's loader logs each instruction-set build it probes and misses (`No module named faiss.swigfaiss_avx512`) at
# INFO on every import: noise to a user, whatever build it ends on.
logging.getLogger("faiss.loader").setLevel(logging.WARNING)


class FlatScan:
    """A faiss flat index whose code buffer holds one chunk of a vector file at a time.

    fp16 rows are the codes of an fp16 `IndexScalarQuantizer` (decoded with F16C/SIMD while the
    inner products are taken); float32 rows are the codes of an `IndexFlatIP`. numpy would
    first convert fp16 to float32 element by element, ~4x the cost of the float32 product itself.
    """

    def __init__(self, dtype: np.dtype, dim: int, rows: int):
        import faiss  # only scans need faiss; importing it here keeps `ra` start-up light

        self.rows, self.half = rows, dtype == np.float16
        if self.half:
            self.index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        else:
            self.index = faiss.IndexFlatIP(dim)
        row_bytes = self.index.code_size
        self.index.codes.resize(rows * row_bytes)
        self.codes = faiss.rev_swig_ptr(self.index.codes.data(), rows * row_bytes).reshape(rows, row_bytes)

    def read(self, f: RawIOBase, n: int) -> bool:
        """Read the next n rows of `f` into the index (they become its rows 0..n-1); False on a short read."""
        view = self.codes[:n].data.cast("B")
        self.index.ntotal = n
        return f.readinto(view) == view.nbytes

    def search(self, q: np.ndarray, k: int, *, skip_zero_rows: bool) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the chunk's best k rows for the unit query `q` (1, dim); zero rows left out if asked."""
        n = self.index.ntotal
        want, zero = min(k, n), None
        if skip_zero_rows:
            words = self.codes[:n].view(np.uint16 if self.half else np.uint32)
            zero = np.logical_not((words & (0x7FFF if self.half else 0x7FFFFFFF)).any(axis=1))  # +0 and -0 alike
            want = min(n, k + int(zero.sum()))
            if zero.all():
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores, rows = self.index.search(q, want)
        rows, scores = rows[0].astype(np.int64), scores[0]
        keep = rows >= 0
        if zero is not None:
            keep &= ~zero[np.maximum(rows, 0)]
        return rows[keep], scores[keep]


@contextmanager
def one_faiss_thread() -> Iterator[None]:
    """faiss single-threaded in this thread for a chunked scan: per-chunk OpenMP start-up and barriers cost
    more than they save on a busy machine (bench/bench_topk.py), and the scan is memory-bound anyway."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)
