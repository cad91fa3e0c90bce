"""Fixtures of the screening tests: the demo corpus's labels and its features (ra's vectors cached by content)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from built_once import locked
from demo_corpus import DEMO, demo_rows, write_demo_subset
from recorded_vectors import RecordedEmbedder
from screen_support import screen_cfg

from ra_agent.config import Config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.screen.features import Features
from ra_agent.screen.simulate import LabelledSet, read_labelled_csv, simulation_features

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SUBSET = 240  # the first rows of the demo CSV (11 includes): a small project for the store and CLI tests


@pytest.fixture(scope="session")
def cache_dir(request) -> Path:
    """pytest's cache folder for screening vectors and rule features (keyed by content, reused across runs)."""
    return Path(request.config.cache.mkdir("ra_screen"))


@pytest.fixture(scope="session")
def demo_labelled() -> LabelledSet:
    return read_labelled_csv(DEMO, "label_included")


@pytest.fixture(scope="session")
def demo_features(demo_labelled: LabelledSet, cache_dir: Path) -> Features:
    """Features of all 1,333 demo records (embedding them once takes a minute or two; then cached)."""
    cfg = screen_cfg(cache_dir.parent / "unused")
    with locked(cache_dir / "demo_features"):  # one xdist worker embeds them, the other then reads its cache
        embedder = RecordedEmbedder(SentenceTransformerEmbedder(cfg))  # the demo's texts: recorded vectors
        return simulation_features(cfg, demo_labelled, embedder, cache=cache_dir)


@pytest.fixture
def subset_csv(tmp_path: Path) -> Path:
    return write_demo_subset(tmp_path / "ppi_subset.csv", demo_rows()[:SUBSET])


@pytest.fixture
def workspace(tmp_path: Path, cache_dir: Path) -> Config:
    """An empty workspace whose screening cache holds the vectors and rule features computed before."""
    cfg = screen_cfg(tmp_path / "data")
    target = cfg.data_dir / "cache" / "screen"
    target.mkdir(parents=True)
    for path in cache_dir.glob("screen-*"):
        shutil.copy(path, target / path.name)
    return cfg
