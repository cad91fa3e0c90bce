"""Fixtures of the clustering tests: the demo corpus, its cached E vectors, and a store clustered once per session."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from built_once import cached_array
from demo_corpus import demo_papers
from recorded_vectors import RecordedEmbedder

from ra_agent.config import Config, load_config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.features import Features
from ra_agent.topics.lifecycle import ClusteringResult, cluster_corpus

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
NOW = datetime(2003, 12, 31, tzinfo=UTC)  # the demo corpus ends in 2003


@dataclass(frozen=True)
class Demo:
    papers: list[Paper]  # demo records with a title or an abstract (44 have neither and are left out)
    features: Features  # their E vectors, in the same order

    def paper(self, pmid: int) -> Paper:
        return next(p for p in self.papers if p.pmid == pmid)


def read_demo() -> list[Paper]:
    return [p for p in demo_papers() if p.title.strip() or p.abstract.strip()]


def embed(texts: list[str], cache_dir: Path) -> np.ndarray:
    """ra's all-MiniLM-L6-v2 vectors of `texts` (recorded ones where there are, tests/recorded_vectors.py), cached
    by content hash."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    embedder = RecordedEmbedder(SentenceTransformerEmbedder(Config()))
    key = hashlib.sha1("\n".join([embedder.slug, str(embedder.max_input_tokens), *texts]).encode()).hexdigest()[:16]
    return cached_array(cache_dir / f"E-{key}.npy", lambda: embedder.encode(texts))


@pytest.fixture(scope="session")
def cfg() -> Config:
    return load_config(ROOT / "config.toml", environ={})


@pytest.fixture(scope="session")
def demo(request, cfg) -> Demo:
    papers = read_demo()
    vectors = embed([p.text for p in papers], request.config.cache.mkdir("ra_cluster_demo"))
    features = Features.build([p.pmid for p in papers], {"E": vectors}, cfg.clustering.features)
    features.matrix.setflags(write=False)  # shared by the whole session
    return Demo(papers, features)


def demo_store(path: Path, papers: list[Paper]) -> Store:
    store = Store(path)
    store.upsert_papers(papers, source="import:test")
    return store


@pytest.fixture(scope="session")
def clustered(tmp_path_factory, cfg, demo) -> tuple[Path, ClusteringResult, list[str]]:
    """A store holding the demo corpus clustered with the default config and the rule-based auditor, and the stages
    the clustering told as each started."""
    path = tmp_path_factory.mktemp("clustered") / "ra.sqlite"
    stages: list[str] = []
    with demo_store(path, demo.papers) as store:
        result = cluster_corpus(store, demo.features, cfg, now=NOW, stage=stages.append)
    return path, result, stages


@pytest.fixture
def store(tmp_path, clustered) -> Iterator[Store]:
    """A private copy of the clustered store."""
    path = tmp_path / "ra.sqlite"
    shutil.copy(clustered[0], path)
    with Store(path) as s:
        yield s


@pytest.fixture
def empty_store(tmp_path, demo) -> Iterator[Store]:
    """A store with the demo papers and no clusters."""
    with demo_store(tmp_path / "ra.sqlite", demo.papers) as s:
        yield s
