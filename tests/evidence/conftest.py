"""Fixtures of the SR, expansion and report tests: a clustered demo-corpus workspace and a MEDLINE workspace with
real reference lists, each built once per session (vectors cached across sessions) and copied for every test."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from built_once import shared_folder
from recorded_vectors import RecordedEmbedder

from ra_agent.config import Config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.embed.index import embed_missing, vector_store_for
from ra_agent.evidence.pico.extract import RuleExtractor, run_pico
from ra_agent.ingest.baseline import load_baseline
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store
from ra_agent.store.vectors import VectorStore, open_active, switch_active
from ra_agent.topics.audit import TermAuditor, describe_clusters
from ra_agent.topics.features import Features
from ra_agent.topics.formation import Formation
from ra_agent.topics.lifecycle import apply_audit, cluster_corpus
from ra_agent.topics.view import member_pmids, pico_path, set_cluster_metrics
from ra_agent.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
MEDLINE_FILES = sorted((ROOT / "tests" / "fixtures" / "medline").glob("*.xml.gz"))
HANDBOOK = ROOT / "handbooks" / "seek_gap_ppi_gerd.md"
SUBSET_STEP, SUBSET_MAX = 4, 300  # every 4th demo paper with an abstract (PMID order), at most 300
CLUSTERING = {"min_cluster_size": 10, "min_samples": 5}  # the memo's 30/8 suit the full corpus, not a 300 subset


def make_cfg(root: Path) -> Config:
    return Config().with_overrides(workspace={"data_dir": str(root), "demo_corpus": ""}, clustering=CLUSTERING)


@dataclass
class World:
    """One test's private copy of a workspace."""

    cfg: Config
    store: Store
    vectors: VectorStore

    def clusters(self) -> list[dict]:
        """Active clusters with their latest metrics, most eligible trials first."""
        rows = self.store.conn.execute(
            "SELECT c.cluster_id, c.label, (SELECT COUNT(*) FROM cluster_member m WHERE m.cluster_id=c.cluster_id) "
            "AS size, (SELECT eligible_trials FROM cluster_metrics t WHERE t.cluster_id=c.cluster_id ORDER BY "
            "computed_ts DESC LIMIT 1) AS eligible FROM cluster_manifest c WHERE c.status='active'"
        )
        return sorted((dict(r) for r in rows), key=lambda r: (-(r["eligible"] or 0), r["cluster_id"]))

    @property
    def trials_cluster(self) -> str:
        """The cluster with the most eligible trials (the gap candidate)."""
        return self.clusters()[0]["cluster_id"]

    def members(self, cluster_id: str) -> list[int]:
        return member_pmids(self.store, cluster_id)

    def unassigned(self) -> list[int]:
        return [r[0] for r in self.store.conn.execute("SELECT pmid FROM unassigned_pool ORDER BY pmid")]


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(Config())


def _embed_cached(cfg: Config, store: Store, embedder, pmids: list[int], cache: Path) -> None:
    """Embed `pmids` into the workspace's vector folder, reusing a folder cached by content across sessions."""
    vectors = vector_store_for(cfg, embedder)
    texts = "\n".join(p.text for p in store.papers(pmids))
    key = hashlib.sha1(f"{vectors.slug}\n{pmids}\n{texts}".encode()).hexdigest()[:16]
    cached = cache / f"emb-{key}"
    if (cached / "meta.json").exists():
        shutil.rmtree(vectors.root)
        shutil.copytree(cached, vectors.root)
    else:
        embed_missing(vectors, embedder, store, pmids, cfg)
        staging = cache / f".emb-{key}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(vectors.root, staging)
        staging.rename(cached)
    switch_active(cfg.data_dir, vectors.slug)


def _template(request, tmp_path_factory, name: str, embedder, load: Callable[[Store, Config], list[int]],
              freeze) -> Path:  # fmt: skip
    """The workspace `name` (built once for all xdist workers): papers loaded by `load` (which returns those to
    embed), embedded, then `freeze`d."""

    def build(root: Path) -> None:
        cfg = make_cfg(root)
        store = Store(Workspace.of(cfg).db_path)
        pmids = load(store, cfg)
        recorded = RecordedEmbedder(embedder)  # the demo's and the shared key's texts: recorded vectors
        _embed_cached(cfg, store, recorded, pmids, request.config.cache.mkdir("ra_sr_vectors"))
        freeze(store, cfg, Features.build(pmids, {"E": open_active(cfg).get(pmids)}, "abstract"))
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()

    return shared_folder(tmp_path_factory, name, build)


def _load_demo(store: Store, cfg: Config) -> list[int]:
    import_file(store, DEMO, cfg)
    return [p.pmid for p in store.papers(store.all_pmids()) if p.abstract][::SUBSET_STEP][:SUBSET_MAX]


def _cluster_demo(store: Store, cfg: Config, features: Features) -> None:
    """HDBSCAN + rule audit, then PICO by the rule extractor and eligible_trials per cluster (as run_pico does), and
    the demo handbook's questions over the whole imported corpus (judged once; every copy reads them)."""
    from ra_agent.agent.questions import load_question_set

    for cluster_id in cluster_corpus(store, features, cfg).cluster_ids:
        run = run_pico(store.papers(member_pmids(store, cluster_id)), RuleExtractor(), pico_path(cfg, cluster_id))
        set_cluster_metrics(store, cluster_id, eligible_trials=run.eligible)
    load_question_set(cfg, store, HANDBOOK)


def _load_medline(store: Store, cfg: Config) -> list[int]:
    load_baseline(store, MEDLINE_FILES, cfg)
    return [p.pmid for p in store.papers(store.all_pmids()) if p.title or p.abstract]


def _one_cluster(store: Store, cfg: Config, features: Features) -> None:
    """Every paper in one provisional cluster, labelled and frozen by the rule audit."""
    formation = Formation(features, np.zeros(len(features), dtype=np.int64))
    auditor = TermAuditor(cfg)
    apply_audit(store, formation, auditor.audit(describe_clusters(store, formation, cfg)), cfg, audit_by=auditor.name)


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory, request, embedder) -> Path:
    """The demo corpus imported, 300 papers embedded and clustered (HDBSCAN + rule audit), PICO by the rules."""
    return _template(request, tmp_path_factory, "sr_demo_template", embedder, _load_demo, _cluster_demo)


@pytest.fixture(scope="session")
def medline_template(tmp_path_factory, request, embedder) -> Path:
    """The MEDLINE fixture files loaded (real ReferenceList edges), embedded, frozen as one cluster by the rule audit."""
    return _template(request, tmp_path_factory, "sr_medline_template", embedder, _load_medline, _one_cluster)


GAPS_SUBSET = ROOT / "tests" / "fixtures" / "gaps" / "CD006468_catheter_subset.csv"


def _load_gaps(store: Store, cfg: Config) -> list[int]:
    import_file(store, GAPS_SUBSET, cfg)
    return [p.pmid for p in store.papers(store.all_pmids()) if p.title or p.abstract]


@pytest.fixture(scope="session")
def gaps_template(tmp_path_factory, request, embedder) -> Path:
    """Cochrane review CD006468's catheter records (tests/fixtures/gaps) embedded, frozen as one cluster."""
    return _template(request, tmp_path_factory, "sr_gaps_template", embedder, _load_gaps, _one_cluster)


@pytest.fixture
def gaps(gaps_template: Path, tmp_path: Path) -> Iterator[World]:
    yield from _world(gaps_template, tmp_path / "gaps")


def _world(template: Path, dest: Path) -> Iterator[World]:
    shutil.copytree(template, dest)
    cfg = make_cfg(dest)
    store = Store(Workspace.of(cfg).db_path)
    try:
        yield World(cfg, store, open_active(cfg))
    finally:
        store.close()


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Iterator[World]:
    yield from _world(demo_template, tmp_path / "demo")


@pytest.fixture
def medline(medline_template: Path, tmp_path: Path) -> Iterator[World]:
    yield from _world(medline_template, tmp_path / "medline")


class ScriptedBrain:
    """A stand-in LLM brain that answers from a script (a reply, an exception to raise, or a callable of the messages)."""

    def __init__(self, *replies, name: str = "scripted:test-llm"):
        self.replies = list(replies)
        self.name = name
        self.calls: list[list[dict[str, str]]] = []

    def label(self) -> str:
        return f"{self.name} (scripted test brain)"

    def chat(self, messages: list[dict[str, str]]) -> str:
        self.calls.append(messages)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return str(reply(messages) if callable(reply) else reply)
