"""Clustering feature space (docs/architecture.md) and the vector maths of frozen centroids, tau_assign, dispersion."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeAlias

import numpy as np

from ra_agent.config import ClusteringConfig

log = logging.getLogger(__name__)

Pmids: TypeAlias = Sequence[int] | np.ndarray  # PMIDs as a list or an int64 array

NOISE = -1  # HDBSCAN's label for papers in no cluster

# Vector families, named as in the vector store: E = title · abstract; p i c o m = PICO fields + study design.
ABSTRACT_FAMILY = "E"
PICO_FEATURE_FAMILIES = ("i", "c", "o", "m")  # the PICO feature space: [I ‖ C ‖ O ‖ StudyDesign]
HET_FAMILIES = ("p", "i", "c", "o")  # het_numeric over P, I, C, O
PICO_SPACE = "|".join(PICO_FEATURE_FAMILIES)


# ----------------------------------------------------------------------------- features


def unit_rows(x: np.ndarray) -> np.ndarray:
    """float32 copy of `x` with every non-zero row scaled to unit L2 norm (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _family_key(name: str) -> str:
    return ABSTRACT_FAMILY if name.upper() == ABSTRACT_FAMILY else name.lower()


def _has_pico(families: Mapping[str, np.ndarray]) -> bool:
    if not all(f in families for f in PICO_FEATURE_FAMILIES):
        return False
    return bool(np.all(np.any(np.hstack([families[f] for f in PICO_FEATURE_FAMILIES]) != 0, axis=1)))


@dataclass(frozen=True, eq=False)
class Features:
    """Row-normalised feature vectors of some papers in one feature space (so euclidean distance ≈ cosine).

    `space` is "E" (abstract vectors) or "i|c|o|m" (concatenated PICO vectors); `families` keeps every
    family that was given, rows unit-normalised, for het_numeric.
    """

    pmids: np.ndarray
    matrix: np.ndarray
    space: str
    families: Mapping[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, pmids: Pmids, families: Mapping[str, np.ndarray], mode: str = "auto") -> Features:
        """Feature matrix from vector families keyed "E", "p", "i", "c", "o", "m" (rows aligned with `pmids`).

        mode "abstract" uses E; "pico" uses [i ‖ c ‖ o ‖ m], each family unit-normalised before
        concatenation (a missing field is a zero block) and the row normalised again; "auto" uses
        PICO when all four families are given and every paper has at least one non-zero PICO field.
        """
        ids = np.asarray(pmids, dtype=np.int64)
        if len(np.unique(ids)) != len(ids):
            raise ValueError("PMIDs must be unique")
        fams = {_family_key(k): unit_rows(v) for k, v in families.items() if v is not None}
        for name, rows in fams.items():
            if rows.ndim != 2 or len(rows) != len(ids):
                raise ValueError(f"family {name}: expected ({len(ids)}, dim) rows, got {rows.shape}")
        if mode not in ("auto", "abstract", "pico"):
            raise ValueError(f"unknown feature mode {mode!r} (auto, abstract, pico)")
        if mode == "pico" or (mode == "auto" and _has_pico(fams)):
            missing = [f for f in PICO_FEATURE_FAMILIES if f not in fams]
            if missing:
                raise ValueError(f"PICO features need families {', '.join(missing)}")
            matrix, space = unit_rows(np.hstack([fams[f] for f in PICO_FEATURE_FAMILIES])), PICO_SPACE
        elif ABSTRACT_FAMILY in fams:
            matrix, space = fams[ABSTRACT_FAMILY], ABSTRACT_FAMILY
        else:
            raise ValueError("abstract features need the E family")
        empty = ~np.any(matrix != 0, axis=1)
        if empty.any():
            raise ValueError(
                f"{int(empty.sum())} papers have an all-zero {space} vector, e.g. {ids[empty][:5].tolist()}"
            )
        return cls(ids, matrix, space, fams)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.pmids)

    @cached_property
    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.pmids, kind="stable")
        return order, self.pmids[order]

    def rows(self, pmids: Pmids) -> np.ndarray:
        """Row numbers of the given PMIDs; KeyError when some have no vector here."""
        order, keys = self._index
        wanted = np.asarray(pmids, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys, wanted), 0, max(len(keys) - 1, 0))
        found = keys[pos] == wanted if len(keys) else np.zeros(len(wanted), bool)
        if not found.all():
            raise KeyError(
                f"{int((~found).sum())} PMIDs have no {self.space} vector, e.g. {wanted[~found][:5].tolist()}"
            )
        return order[pos]

    def vectors(self, pmids: Pmids) -> np.ndarray:
        return self.matrix[self.rows(pmids)]

    def subset(self, pmids: Pmids) -> Features:
        """The same features restricted to (and ordered like) `pmids`."""
        rows = self.rows(pmids)
        return Features(self.pmids[rows], self.matrix[rows], self.space, {k: v[rows] for k, v in self.families.items()})

    def pico_rows(self, rows: np.ndarray) -> np.ndarray | None:
        """The rows' [I ‖ C ‖ O ‖ design] vectors as `build` makes them (zero rows: no PICO vector); None without
        the four families."""
        if not all(f in self.families for f in PICO_FEATURE_FAMILIES):
            return None
        return unit_rows(np.hstack([self.families[f][rows] for f in PICO_FEATURE_FAMILIES]))

    def het_families(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The P, I, C, O family rows that exist (empty when no PICO vectors were given)."""
        return {f: self.families[f][rows] for f in HET_FAMILIES if f in self.families}


# ----------------------------------------------------------------------------- vector maths


def centroid(x: np.ndarray) -> np.ndarray:
    """Normalised mean of unit rows."""
    return unit_rows(x.mean(axis=0, keepdims=True))[0]


def encode_centroid(c: np.ndarray) -> bytes:
    return np.asarray(c, dtype=np.float16).tobytes()


def decode_centroid(blob: bytes, dim: int) -> np.ndarray:
    """A stored fp16 centroid as a float32 unit vector."""
    c = np.frombuffer(blob, dtype=np.float16)
    if c.size != dim:
        raise ValueError(f"centroid blob holds {c.size} values, manifest says {dim}")
    return unit_rows(c.astype(np.float32)[None, :])[0]


def frozen_centroid(x: np.ndarray) -> np.ndarray:
    """The centroid exactly as it is read back after storage (fp16 round trip), so stored distances match."""
    c = centroid(x)
    return decode_centroid(encode_centroid(c), c.size)


def cosine_distances(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """1 - cos(row, c) for unit rows and a unit centroid, in float64."""
    return 1.0 - np.asarray(x, dtype=np.float64) @ np.asarray(c, dtype=np.float64)


def tau_assign(distances: np.ndarray, ccfg: ClusteringConfig) -> float:
    """P(tau_assign_percentile) of member distances; tau_assign_fallback when fewer than two members."""
    if len(distances) < 2:
        return ccfg.tau_assign_fallback
    tau = float(np.percentile(distances, ccfg.tau_assign_percentile))
    return tau if math.isfinite(tau) else ccfg.tau_assign_fallback


def dispersion(x: np.ndarray, c: np.ndarray) -> float:
    """1 - mean cosine of the members to the (frozen) centroid."""
    return float(cosine_distances(x, c).mean())


def het_numeric(families: Mapping[str, np.ndarray]) -> float | None:
    """Mean over the given P/I/C/O families of 1 - mean pairwise cosine (zero rows = missing field, skipped).

    None when no family has two non-empty rows. Uses sum_{i≠j} cos = |Σx|² - n for unit rows.
    """
    values = []
    for rows in families.values():
        rows = rows[np.any(rows != 0, axis=1)].astype(np.float64)
        n = len(rows)
        if n < 2:
            continue
        total = rows.sum(axis=0)
        values.append(1.0 - (float(total @ total) - n) / (n * (n - 1)))
    return float(np.mean(values)) if values else None
