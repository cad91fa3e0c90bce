"""First cluster formation (docs/architecture.md): dimension reduction (UMAP or PCA), then HDBSCAN with sizes from n."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ra_agent.config import ClusteringConfig, Config
from ra_agent.topics.features import NOISE, Features, unit_rows

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- formation


@dataclass(frozen=True)
class Sizes:
    """HDBSCAN sizes used for one run (derived from the corpus size by `cluster_sizes`)."""

    min_cluster_size: int
    min_samples: int


@dataclass(frozen=True, eq=False)
class Formation:
    """Provisional clusters: one label per feature row, -1 noise, 0.. by descending size."""

    features: Features
    labels: np.ndarray
    reduction: str = "none"  # what HDBSCAN ran on, e.g. "umap 5" or "pca 32"; "none" = the feature vectors
    sizes_used: Sizes | None = None

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

    @property
    def noise_share(self) -> float:
        """Share of the papers HDBSCAN left as noise (before the tau_assign intake)."""
        return float(np.mean(self.labels == NOISE)) if self.labels.size else 0.0

    def sizes(self) -> list[int]:
        return [int(n) for n in np.bincount(self.labels[self.labels >= 0], minlength=self.n_clusters)]


def cluster_sizes(n: int, ccfg: ClusteringConfig, *, cap: int | None = None) -> Sizes:
    """HDBSCAN sizes for n papers: min_cluster_size = round(sqrt(n)) clamped to [min_cluster_size_floor, cap].

    cap defaults to [clustering] min_cluster_size (30, reached at n = 900, so large corpora keep
    the fixed values); min_samples keeps the fixed ratio min_samples / min_cluster_size (8 / 30), at least
    min_samples_floor and at most min_samples. size_scaling = "fixed" uses the configured values as given.
    """
    cap = cap or ccfg.min_cluster_size
    if ccfg.size_scaling == "fixed":
        return Sizes(cap, ccfg.min_samples)
    mcs = int(min(cap, max(ccfg.min_cluster_size_floor, round(math.sqrt(max(n, 0))))))
    ratio = ccfg.min_samples / ccfg.min_cluster_size
    ms = int(min(ccfg.min_samples, max(ccfg.min_samples_floor, round(mcs * ratio))))
    return Sizes(mcs, ms)


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


def pca_rows(x: np.ndarray, dims: int, ccfg: ClusteringConfig) -> np.ndarray:
    """PCA to `dims` fitted on reduce_sample evenly spaced rows, applied in chunks, rows re-normalised."""
    from sklearn.decomposition import PCA

    sample = x[np.linspace(0, len(x) - 1, min(len(x), ccfg.reduce_sample)).astype(np.int64)]
    pca = PCA(n_components=dims, svd_solver="covariance_eigh").fit(sample)
    out = np.empty((len(x), dims), dtype=np.float32)
    for start in range(0, len(x), ccfg.reduce_sample):
        out[start : start + ccfg.reduce_sample] = pca.transform(x[start : start + ccfg.reduce_sample])
    return unit_rows(out)


def umap_rows(x: np.ndarray, ccfg: ClusteringConfig) -> np.ndarray:
    """UMAP (cosine) to umap_components dims with a fixed random_state and one thread, so runs repeat exactly."""
    import umap  # slow import (numba): only when clustering

    model = umap.UMAP(
        n_components=ccfg.umap_components,
        n_neighbors=min(ccfg.umap_neighbors, len(x) - 1),
        min_dist=ccfg.umap_min_dist,
        metric="cosine",
        random_state=ccfg.reduce_seed,
        n_jobs=1,
    )
    return np.asarray(model.fit_transform(x), dtype=np.float32)


def reduce_dimensions(x: np.ndarray, ccfg: ClusteringConfig) -> tuple[np.ndarray, str]:
    """Rows HDBSCAN runs on and a description: [clustering] reduce_method at every corpus size.

    "umap": UMAP to umap_components dims (above reduce_above rows a PCA to reduce_dims comes first, to keep
    the neighbour search fast); "pca": PCA to reduce_dims; "none": the feature vectors. Too few rows for
    the reduction (UMAP needs more rows than umap_components + 2) fall back to the feature vectors.
    """
    n, dim = x.shape
    method = ccfg.reduce_method
    if method == "none" or n <= max(ccfg.umap_components, ccfg.reduce_dims if method == "pca" else 0) + 2:
        return x, "none"
    pca_dims = min(ccfg.reduce_dims, n - 1, dim)
    if method == "pca":
        return (pca_rows(x, pca_dims, ccfg), f"pca {pca_dims}") if 0 < pca_dims < dim else (x, "none")
    steps = []
    if 0 < pca_dims < dim and n > ccfg.reduce_above:
        x = pca_rows(x, pca_dims, ccfg)
        steps.append(f"pca {pca_dims}")
    steps.append(f"umap {ccfg.umap_components}")
    return umap_rows(x, ccfg), " + ".join(steps)


def hdbscan_labels(x: np.ndarray, ccfg: ClusteringConfig, sizes: Sizes) -> tuple[np.ndarray, str]:
    """HDBSCAN labels (by descending size) of unit rows after the configured reduction, and the reduction used."""
    n = len(x)
    if n < max(sizes.min_cluster_size, sizes.min_samples + 1):
        return np.full(n, NOISE), "none"
    z, reduction = reduce_dimensions(x, ccfg)
    import hdbscan  # slow import: only when clustering

    model = hdbscan.HDBSCAN(
        min_samples=sizes.min_samples,
        min_cluster_size=sizes.min_cluster_size,
        metric="euclidean",
        cluster_selection_method=ccfg.cluster_selection_method,
    )
    return _by_size(model.fit_predict(z)), reduction


def form_clusters(features: Features, cfg: Config, *, split: bool = False) -> Formation:
    """Provisional clusters of `features`, sizes from the number of papers (`cluster_sizes`).

    `split` caps min_cluster_size at split_min_cluster_size (re-clustering one cluster).
    """
    started = time.perf_counter()
    ccfg = cfg.clustering
    sizes = cluster_sizes(len(features), ccfg, cap=ccfg.split_min_cluster_size if split else None)
    labels, reduction = hdbscan_labels(features.matrix, ccfg, sizes)
    formation = Formation(features, labels, reduction, sizes)
    log.info(
        "HDBSCAN (%s, min_cluster_size %d, min_samples %d) over %d %s vectors (reduction: %s): "
        "%d clusters %s, %d noise (%.0f %%), %.1f s",
        ccfg.cluster_selection_method, sizes.min_cluster_size, sizes.min_samples, len(features), features.space,
        reduction, formation.n_clusters, formation.sizes(), len(formation.noise), 100 * formation.noise_share,
        time.perf_counter() - started,
    )  # fmt: skip
    return formation
