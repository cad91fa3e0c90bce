"""Fixtures of the ask / Mind-KB tests: a 200-paper demo workspace embedded once (vectors cached) and copied per test."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from built_once import cached_array
from recorded_vectors import RecordedEmbedder
from replay.ollama_server import OllamaReplayServer

from ra_agent.config import Config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.embed.index import build_index, vector_store_for
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
SUBSET = 200  # demo papers in the test workspace (all with an abstract)


def ask_cfg(data_dir: Path, **sections: dict) -> Config:
    """Defaults with the workspace in `data_dir` (and the project root beside it)."""
    cfg = Config().with_overrides(workspace={"data_dir": str(data_dir), "demo_corpus": ""}, **sections)
    return dataclasses.replace(cfg, root=str(data_dir.parent))


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The configured (bundled, offline) all-MiniLM-L6-v2, loaded once."""
    return SentenceTransformerEmbedder(Config())


def _cache_dir(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("ra_ask_demo") if cache is not None else tmp_path_factory.mktemp("ra_ask_demo_cache")


@pytest.fixture(scope="session")
def template(request, tmp_path_factory, embedder) -> Path:
    """A workspace folder: the demo CSV imported, SUBSET papers kept, embedded (vectors cached by content hash), indexed."""
    root = tmp_path_factory.mktemp("ask_template")
    data = root / "data"
    cfg = ask_cfg(data)
    with Store(root / "full.sqlite") as full:
        summary = import_file(full, DEMO, cfg)
        assert summary.inserted > 1000
        papers = [p for p in full.papers(full.all_pmids()) if len(p.abstract) >= 400][:SUBSET]
    texts = [p.text for p in papers]
    key = hashlib.sha1("\n".join([embedder.slug, str(cfg.embedding.max_input_tokens), *texts]).encode()).hexdigest()
    cached = _cache_dir(request, tmp_path_factory) / f"E-{key[:16]}.npy"

    def embed():
        encoded = RecordedEmbedder(embedder).embed(texts)  # the demo's texts: recorded vectors
        assert len(encoded.skipped) == 0
        return encoded.vectors

    vectors = cached_array(cached, embed)
    with Store(data / "ra.sqlite") as store:
        store.upsert_papers(papers, source="import:demo-subset")
        vector_store_for(cfg, embedder).append([p.pmid for p in papers], vectors)
        assert build_index(cfg, store).active == embedder.slug
    return data


@pytest.fixture
def cfg(tmp_path: Path, template: Path) -> Config:
    """A fresh copy of the template workspace in tmp_path."""
    data = tmp_path / "data"
    shutil.copytree(template, data)
    return ask_cfg(data)


@pytest.fixture
def store(cfg: Config) -> Iterator[Store]:
    with Store(cfg.data_dir / "ra.sqlite") as db:
        yield db


@pytest.fixture
def ollama_cfg(cfg: Config, ollama_server: OllamaReplayServer) -> Config:
    return cfg.with_overrides(llm={"ollama_host": ollama_server.host, "timeout_s": 10.0, "probe_timeout_s": 2.0})
