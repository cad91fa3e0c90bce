"""The heavy stages an agent cycle can ask for, as one core call each (used by the local runner and the assets).

A request is a small dict `{"stage": ..., "partition": ...}`. In Dagster each stage
is the materialisation of the assets in `STAGE_ASSETS`; without Dagster the local
runner calls `perform()`, which runs the same functions.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.workspace import registered_queries

log = logging.getLogger(__name__)

# stage -> the Dagster assets that materialise it (partitioned stages carry the partition key)
STAGE_ASSETS: dict[str, tuple[str, ...]] = {
    "search": ("pubmed_search",),
    "embed": ("embedding_shards",),
    "organise": ("embedding_index", "clusters", "cluster_metrics"),
    "pico": ("pico_extractions",),
    "questions": ("review_questions",),
    "expand": ("cluster_expansion",),
    "reports": ("reports", "mind_kb"),
}
# stages whose assets are partitioned: a request for one must name its partition key
PARTITIONED_STAGES = frozenset({"search", "pico", "questions", "expand"})


@dataclass(frozen=True)
class StageRequest:
    """One unit of heavy work a cycle asked for."""

    stage: str
    partition: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.stage not in STAGE_ASSETS:
            raise ValueError(f"unknown stage {self.stage!r} (known: {', '.join(STAGE_ASSETS)})")
        if self.stage in PARTITIONED_STAGES and not self.partition:
            raise ValueError(f"stage {self.stage!r} needs a partition key")

    @property
    def assets(self) -> tuple[str, ...]:
        return STAGE_ASSETS[self.stage]

    @property
    def key(self) -> str:
        """The partition key of a partitioned stage."""
        if not self.partition:
            raise ValueError(f"stage {self.stage!r} has no partition key")
        return self.partition

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageRequest:
        return cls(data["stage"], data.get("partition"), data.get("reason", ""))

    def label(self) -> str:
        return f"{self.stage}[{self.partition}]" if self.partition else self.stage


def after_new_papers(reason: str) -> list[StageRequest]:
    """What follows any ingest: embed the new batches, then index, cluster intake and metrics."""
    return [StageRequest("embed", reason=reason), StageRequest("organise", reason=reason)]


# ----------------------------------------------------------------------------- stage bodies


def run_search(cfg: Config, store: Store, query_key: str, progress=None):
    """Stage `search`: the registered query behind `query_key`, online or offline."""
    from ra_agent.ingest.pipeline import search_and_ingest

    wanted = registered_queries(store).get(query_key)
    if wanted is None:
        raise KeyError(f"no registered search {query_key!r}")
    return search_and_ingest(
        cfg, store, wanted["query"], since=wanted["since"], retmax=wanted["retmax"], progress=progress
    )


def switch_index(cfg: Config, store: Store, embedder=None):
    """Make the configured model's folder the active index once complete, every vector family with it: the PICO
    families are re-embedded from the PICO records on disk before the switch (embed.index.build_index)."""
    from ra_agent.embed.index import build_index

    return build_index(cfg, store, before_switch=pico_rebuilder(cfg, embedder))


def pico_rebuilder(cfg: Config, embedder=None):
    """build_index's `before_switch` hook with an embedder made only when there are PICO records to embed."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.evidence.pico.vectors import pico_family_rebuilder

    return pico_family_rebuilder(cfg, lambda: embedder or SentenceTransformerEmbedder(cfg))


def run_organise(cfg: Config, store: Store, embedder=None):
    """Stage `organise`: switch the index when complete (with every vector family), then cluster intake and metrics."""
    from ra_agent.topics.organise import organise

    switch_index(cfg, store, embedder)
    return organise(cfg, store)


@dataclass
class PicoStageResult:
    cluster_id: str
    run: dict[str, Any] = field(default_factory=dict)
    vectors_written: int = 0
    eligible_trials: int = 0


def run_pico_stage(cfg: Config, store: Store, cluster_id: str, brain=None, embedder=None, progress=None):
    """Stage `pico`: extract PICO for a cluster's members (LLM brain, else `[pico] extractor`: the learned tagger by default), write
    `pico/<cluster_id>.jsonl`, embed the p i c o m families, record `eligible_trials`."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.evidence.pico.extract import count_eligible, read_pico, run_pico
    from ra_agent.evidence.pico.llm_extract import make_extractor
    from ra_agent.evidence.pico.vectors import embed_pico_families
    from ra_agent.store.vectors import open_active
    from ra_agent.topics.view import member_pmids, pico_path, set_cluster_metrics

    members = member_pmids(store, cluster_id)
    if not members:
        raise KeyError(f"cluster {cluster_id!r} has no members (or does not exist)")
    papers = store.papers(members)
    out_path = pico_path(cfg, cluster_id)
    result = run_pico(papers, make_extractor(brain, cfg), out_path, progress=progress)
    records = read_pico(out_path)
    eligible = count_eligible(papers, {r.pmid: r for r in records})
    set_cluster_metrics(store, cluster_id, eligible_trials=eligible)
    written = embed_pico_families(open_active(cfg), records, embedder or SentenceTransformerEmbedder(cfg))
    log.info("pico %s: %d records, %d eligible trials, %d PICO vectors", cluster_id, len(records), eligible, written)
    return PicoStageResult(cluster_id, result.metadata(), written, eligible)


def run_sr_overlap(cfg: Config, store: Store, cluster_id: str, embedder=None, eutils=None):
    """The sr_overlap asset: reviews covering one cluster by title cosine (live E-utilities, or the local corpus
    offline); the cluster layer's view, not a goal's stage (a goal reads its question's coverage from its set)."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.evidence.sr.search import find_existing_sr
    from ra_agent.ingest.eutils import EutilsClient

    if eutils is None and not cfg.ingest.offline:
        eutils = EutilsClient(cfg, store=store)
    return find_existing_sr(
        cfg, store, cluster_id, embedder=embedder or SentenceTransformerEmbedder(cfg), eutils=eutils
    )


def run_questions(cfg: Config, store: Store, key: str):
    """Stage `questions`: the review questions of the handbook registered under `key` (`load_question_set`: the
    stored set when current, else computed and written)."""
    from ra_agent.agent.questions import load_question_set, registered_handbook

    return load_question_set(cfg, store, registered_handbook(cfg, key))


def expansion_key(cluster_id: str, mode: str) -> str:
    """Partition key of one expansion: `<cluster_id>.<semantic|ripple>`."""
    return f"{cluster_id}.{mode}"


def run_expand(cfg: Config, store: Store, key: str, brain=None, embedder=None, eutils=None):
    """Stage `expand` (docs/architecture.md): grow a frozen cluster from the search candidates (semantic boundary loop),
    or through its citation graph (ripple: upstream parents, then downstream citers); the brain judges."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.ingest.eutils import EutilsClient
    from ra_agent.llm.rules_brain import RulesBrain
    from ra_agent.store.vectors import open_active
    from ra_agent.topics.expansion import ripple, semantic_boundary

    cluster_id, mode = key.rsplit(".", 1)
    judge = brain or RulesBrain()
    vectors = open_active(cfg)
    if mode == "ripple":
        if eutils is None and not cfg.ingest.offline:
            eutils = EutilsClient(cfg, store=store)
        embedder = embedder or SentenceTransformerEmbedder(cfg)
        return ripple(cfg, store, cluster_id, judge, eutils=eutils, vectors=vectors, embedder=embedder)
    candidates = [r[0] for r in store.conn.execute("SELECT DISTINCT pmid FROM candidate_papers ORDER BY pmid")]
    return semantic_boundary(cfg, store, cluster_id, candidates, judge, vectors=vectors)


def run_reports(cfg: Config, store: Store, goal_id: str | None = None, brain=None):
    """Stage `reports`: the dossier or SR draft of the goal's successful questions, in reports/<goal_id>/
    (without a goal: every goal whose successful questions have no report yet); an SR draft's arm data are read by
    `brain` when it is a language model, else by the rules."""
    from ra_agent.agent.reporting import write_goal_reports

    return write_goal_reports(cfg, store, goal_id, brain)


@contextmanager
def _no_progress(desc: str, unit: str = ""):
    yield None


def perform(cfg: Config, store: Store, request: StageRequest, *, brain=None, embedder=None, goal_id=None,
            progress_factory=None):  # fmt: skip
    """Run one stage locally (what the Dagster assets of that stage do). `progress_factory(desc, unit=...)`, a
    context manager yielding progress(done, total) (the CLI's bar), shows the long stages' progress."""
    from ra_agent.embed.index import embed_all

    log.info("stage %s (%s)", request.label(), request.reason or "requested")
    bar = progress_factory or _no_progress
    if request.stage == "search":
        return run_search(cfg, store, request.key)
    if request.stage == "embed":
        with bar("embed", unit="paper") as progress:
            return embed_all(cfg, store, embedder=embedder, before_switch=pico_rebuilder(cfg, embedder),
                             progress=progress)  # fmt: skip
    if request.stage == "organise":
        return run_organise(cfg, store, embedder=embedder)
    if request.stage == "pico":
        with bar(f"pico {request.key}", unit="paper") as progress:
            return run_pico_stage(cfg, store, request.key, brain=brain, embedder=embedder, progress=progress)
    if request.stage == "questions":
        return run_questions(cfg, store, request.key)
    if request.stage == "expand":
        return run_expand(cfg, store, request.key, brain=brain, embedder=embedder)
    return run_reports(cfg, store, goal_id, brain)
