"""First cluster formation (memo 40 §2): dimension reduction, then HDBSCAN, labels by size."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ra_agent.config import ClusteringConfig, Config
from ra_agent.topics.features import NOISE, Features, unit_rows

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- formation


@dataclass(frozen=True, eq=False)
class Formation:
    """Provisional clusters: one label per feature row, -1 noise, 0.. by descending size."""

    features: Features
    labels: np.ndarray
    reduced_dims: int = 0  # PCA dims HDBSCAN ran on; 0 = the full feature vectors

    @property
    def n_clusters(self) -> int:
        return int(self.labels.max()) + 1 if self.labels.size else 0

    def member_rows(self, idx: int | Sequence[int]) -> np.ndarray:
        return np.flatnonzero(np.isin(self.labels, idx))

    def members(self, idx: int | Sequence[int]) -> np.ndarray:
        return self.features.pmids[self.member_rows(idx)]

    @property
    def noise(self) -> np.ndarray:
        return self.members(NOISE)

    def sizes(self) -> list[int]:
        return [int(n) for n in np.bincount(self.labels[self.labels >= 0], minlength=self.n_clusters)]


def _by_size(labels: np.ndarray) -> np.ndarray:
    """Relabel clusters 0.. by descending size (ties: lower original label first); noise stays -1."""
    found = labels[labels >= 0]
    if not found.size:
        return labels
    sizes = np.bincount(found)
    order = np.lexsort((np.arange(sizes.size), -sizes))
    new = np.full(sizes.size, NOISE)
    new[order] = np.arange(sizes.size)
    return np.where(labels >= 0, new[np.maximum(labels, 0)], NOISE)


def reduce_dimensions(x: np.ndarray, ccfg: ClusteringConfig) -> np.ndarray:
    """PCA to reduce_dims fitted on reduce_sample evenly spaced rows, applied in chunks, rows re-normalised.

    HDBSCAN's tree-based minimum spanning tree degrades towards brute force in hundreds of
    dimensions; a few dozen principal components keep it fast on large inputs.
    """
    from sklearn.decomposition import PCA

    sample = x[np.linspace(0, len(x) - 1, min(len(x), ccfg.reduce_sample)).astype(np.int64)]
    pca = PCA(n_components=ccfg.reduce_dims, svd_solver="covariance_eigh").fit(sample)
    out = np.empty((len(x), ccfg.reduce_dims), dtype=np.float32)
    for start in range(0, len(x), ccfg.reduce_sample):
        out[start : start + ccfg.reduce_sample] = pca.transform(x[start : start + ccfg.reduce_sample])
    return unit_rows(out)


def hdbscan_labels(x: np.ndarray, ccfg: ClusteringConfig, min_cluster_size: int) -> tuple[np.ndarray, int]:
    """HDBSCAN labels of unit rows (euclidean on the sphere ≈ cosine) and the PCA dims used (0 = none)."""
    n = len(x)
    if n < max(min_cluster_size, ccfg.min_samples + 1):
        return np.full(n, NOISE), 0
    reduced = 0
    if 0 < ccfg.reduce_dims < x.shape[1] and n > ccfg.reduce_above and ccfg.reduce_dims <= min(n, ccfg.reduce_sample):
        x, reduced = reduce_dimensions(x, ccfg), ccfg.reduce_dims
    import hdbscan  # slow import: only when clustering

    model = hdbscan.HDBSCAN(
        min_samples=ccfg.min_samples,
        min_cluster_size=min_cluster_size,
        metric="euclidean",
        cluster_selection_method=ccfg.cluster_selection_method,
    )
    return _by_size(model.fit_predict(x)), reduced


def form_clusters(features: Features, cfg: Config, *, min_cluster_size: int | None = None) -> Formation:
    """Provisional clusters of `features` (memo 40 §2); min_cluster_size defaults to the config's."""
    started = time.perf_counter()
    labels, reduced = hdbscan_labels(
        features.matrix, cfg.clustering, min_cluster_size or cfg.clustering.min_cluster_size
    )
    formation = Formation(features, labels, reduced)
    log.info(
        "HDBSCAN over %d %s vectors (%s): %d clusters %s, %d noise, %.1f s",
        len(features), features.space, f"PCA {reduced} dims" if reduced else f"{features.dim} dims",
        formation.n_clusters, formation.sizes(), len(formation.noise), time.perf_counter() - started,
    )  # fmt: skip
    return formation
