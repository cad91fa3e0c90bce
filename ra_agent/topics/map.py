"""The 2-D cluster map (PNG): clusters in strong colours with their labels, unassigned papers light grey behind."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ra_agent.fileio import atomic_writer
from ra_agent.topics.features import NOISE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

# Cluster map figure (presentation only)
MAP_FIGSIZE_IN = (9, 7)
MAP_DPI = 100
MAP_POINT_SIZE = {"noise": 3, "cluster": 8}
MAP_NOISE_COLOUR = "#d9d9d9"
MAP_PALETTES = ("tab10", "Dark2", "Set1")  # strong qualitative colours, in this order, no pastels
MAP_MIN_COLOUR_GAP = 0.2  # RGB distance below which a palette colour is a near twin of one already taken
MAP_LABEL_CHARS = 40  # cluster labels on the map are cut to this many characters
UNASSIGNED = "unassigned"


def strong_colours() -> list[tuple[float, ...]]:
    """The distinct strong colours of MAP_PALETTES (greys and near twins dropped), in order."""
    from matplotlib import colormaps

    out: list[tuple[float, ...]] = []
    for name in MAP_PALETTES:
        for colour in colormaps[name].colors:  # type: ignore[attr-defined]
            rgb = tuple(float(v) for v in colour[:3])
            near = any(sum((a - b) ** 2 for a, b in zip(rgb, c, strict=True)) < MAP_MIN_COLOUR_GAP**2 for c in out)
            if max(rgb) - min(rgb) > 0.05 and not near:  # a grey would read as unassigned; near twins confuse
                out.append(rgb)
    return out


def map_xy(vectors: np.ndarray, projection: str = "pca", seed: int = 0) -> np.ndarray:
    """2-D coordinates of the rows: "umap" (cosine, fixed seed, one thread) keeps topics apart; "pca" is fast."""
    if len(vectors) <= 4:
        return np.zeros((len(vectors), 2))
    if projection == "umap":
        import umap

        model = umap.UMAP(n_components=2, n_neighbors=min(15, len(vectors) - 1), metric="cosine",
                          random_state=seed, n_jobs=1)  # fmt: skip
        return np.asarray(model.fit_transform(vectors))
    from sklearn.decomposition import PCA

    return PCA(n_components=2, svd_solver="covariance_eigh").fit_transform(vectors)


def _short(name: str) -> str:
    return name if len(name) <= MAP_LABEL_CHARS else name[: MAP_LABEL_CHARS - 1] + "…"


def cluster_map_figure(
    vectors: np.ndarray,
    labels: Sequence[Any] | np.ndarray,
    *,
    title: str = "",
    noise_label: Any = NOISE,
    projection: str = "pca",
    seed: int = 0,
) -> Figure:
    """A 2-D scatter of the vectors coloured by cluster (Agg canvas).

    `labels` are one per row: provisional indexes, cluster ids or names; rows labelled `noise_label`
    (-1 by default; e.g. "unassigned" with names) are drawn light grey behind the clusters and appear
    in the legend as "unassigned". Clusters get strong colours by size rank and their label written at
    their median position; beyond the palette colours repeat and the legend is left out.
    """
    from matplotlib import patheffects
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = np.array([str(v) for v in labels], dtype=object)
    noise = np.array([v == noise_label for v in labels], dtype=bool)
    clusters, counts = np.unique(names[~noise], return_counts=True)
    ranked = clusters[np.argsort(-counts, kind="stable")]
    xy = map_xy(vectors, projection, seed)
    fig = Figure(figsize=MAP_FIGSIZE_IN, dpi=MAP_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if noise.any():
        ax.scatter(*xy[noise].T, s=MAP_POINT_SIZE["noise"], color=MAP_NOISE_COLOUR, zorder=1,
                   label=f"{UNASSIGNED} ({int(noise.sum())})")  # fmt: skip
    colours = strong_colours()
    outline = [patheffects.withStroke(linewidth=3, foreground="white")]
    for rank, name in enumerate(ranked):
        hit = names == name
        colour = colours[rank % len(colours)]
        ax.scatter(*xy[hit].T, s=MAP_POINT_SIZE["cluster"], color=colour, zorder=2,
                   label=f"{_short(name)} ({int(hit.sum())})")  # fmt: skip
        cx, cy = np.median(xy[hit], axis=0)
        ax.text(cx, cy, _short(name), fontsize="x-small", weight="bold", color=colour, ha="center", va="center",
                zorder=3, path_effects=outline)  # fmt: skip
    ax.set_xlabel(f"{projection.upper()} 1")
    ax.set_ylabel(f"{projection.upper()} 2")
    ax.set_title(title or f"{len(vectors)} papers, {len(ranked)} clusters")
    if len(ranked) <= len(colours):  # beyond that colours repeat and a legend would mislead
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="x-small", markerscale=2, frameon=False)
    fig.tight_layout()
    return fig


def cluster_map_png(vectors: np.ndarray, labels: Sequence[Any] | np.ndarray, path: str | Path, **kwargs: Any) -> Path:
    """`cluster_map_figure` written as PNG to `path` (atomically)."""
    fig = cluster_map_figure(vectors, labels, **kwargs)
    path = Path(path)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path
