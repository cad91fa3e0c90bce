"""The 2-D cluster map (PNG) of the active clusters."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ra_agent.fileio import atomic_writer
from ra_agent.topics.features import NOISE

log = logging.getLogger(__name__)

# Cluster map figure (presentation only)
MAP_FIGSIZE_IN = (7, 6)
MAP_DPI = 100
MAP_POINT_SIZE = {"noise": 4, "cluster": 6}
MAP_COLOURMAP = "tab20"


def cluster_map_png(
    vectors: np.ndarray,
    labels: Sequence[Any] | np.ndarray,
    path: str | Path,
    *,
    title: str = "",
    noise_label: Any = NOISE,
) -> Path:
    """A 2-D PCA scatter of the vectors coloured by cluster, written as PNG (Agg canvas).

    `labels` are one per row: provisional indexes, cluster ids or names; rows labelled `noise_label`
    (-1 by default; e.g. "unassigned" with names) are drawn grey. Clusters are coloured by size rank.
    """
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from sklearn.decomposition import PCA

    names = np.array([str(v) for v in labels], dtype=object)
    noise = np.array([v == noise_label for v in labels], dtype=bool)
    clusters, counts = np.unique(names[~noise], return_counts=True)
    ranked = clusters[np.argsort(-counts, kind="stable")]
    xy = (
        PCA(n_components=2, svd_solver="covariance_eigh").fit_transform(vectors)
        if len(vectors) > 2
        else np.zeros((len(vectors), 2))
    )
    fig = Figure(figsize=MAP_FIGSIZE_IN, dpi=MAP_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.scatter(*xy[noise].T, s=MAP_POINT_SIZE["noise"], c="lightgrey", label=f"{noise_label} ({int(noise.sum())})")
    cmap = colormaps[MAP_COLOURMAP]
    for rank, name in enumerate(ranked):
        hit = names == name
        ax.scatter(
            *xy[hit].T, s=MAP_POINT_SIZE["cluster"], color=cmap(rank % cmap.N), label=f"{name} ({int(hit.sum())})"
        )
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title or f"{len(vectors)} papers, {len(ranked)} clusters")
    if len(ranked) <= cmap.N:  # beyond that colours repeat and a legend would mislead
        ax.legend(loc="best", fontsize="small")
    path = Path(path)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path
