"""Embedding assets: one shard per ingest batch (fp16 memmaps per model folder) and the active index."""

import dagster as dg
import numpy as np

from ra_agent.embed import build_index, embed_shard
from ra_agent.store import missing_vectors, open_active
from ra_assets.defs.ingest.assets import log_progress, papers
from ra_assets.meta import scalars
from ra_assets.partitions import ingest_batch_partitions
from ra_assets.resources import EmbedderResource, RaConfigResource, StoreResource, configured_embedding_slug

EMBEDDING_CODE_VERSION = configured_embedding_slug()


@dg.asset(
    deps=[papers],
    partitions_def=ingest_batch_partitions,
    group_name="embeddings",
    kinds={"pytorch", "numpy"},
    code_version=EMBEDDING_CODE_VERSION,
    pool="embedding",
)
def embedding_shards(
    context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource, embedder: EmbedderResource
) -> dg.MaterializeResult:
    """Vectors ("title · abstract", truncated by tokens) for one ingest batch, appended to
    `emb/<model-slug>/E.f16`. The code version is the model id + version: after a model bump
    the shards show unsynced and a backfill re-embeds them into a new model folder."""
    cfg = ra.get_config()
    model = embedder.get_client()
    with store.get_client() as db:
        result = embed_shard(cfg, db, context.partition_key, model, on_progress=log_progress(context, "embedded"))
    if result.skipped:
        context.log.error(f"{len(result.skipped)} papers got no vector (out of memory twice): {result.skipped[:10]}")
    return dg.MaterializeResult(
        metadata={
            **scalars(result, skip=("skipped", "missing", "no_text")),
            "skipped": len(result.skipped),
            "missing_papers": len(result.missing),
            "no_text": len(result.no_text),
            "model_folder": f"emb/{result.slug}",
        },  # fmt: skip
        data_version=dg.DataVersion(f"{result.slug}:{result.requested - len(result.skipped)}"),
    )


@dg.asset(
    deps=[embedding_shards],
    group_name="embeddings",
    kinds={"numpy"},
    code_version=EMBEDDING_CODE_VERSION,
    check_specs=[
        dg.AssetCheckSpec("offsets_sorted_unique", asset="embedding_index", blocking=True),
        dg.AssetCheckSpec("vectors_finite_unit_norm", asset="embedding_index", blocking=True),
        dg.AssetCheckSpec("every_paper_embedded", asset="embedding_index"),
    ],
)
def embedding_index(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource):
    """The active embedding index (`emb/ACTIVE` → model folder with E.f16 + offsets.npy + meta.json).

    It switches to the configured model's folder only once that folder is complete and
    healthy, so the previous index stays readable during a re-embedding backfill."""
    cfg = ra.get_config()
    with store.get_client() as db:
        result = build_index(cfg, db)
        active = open_active(cfg)
        unembedded = result.missing if result.active == result.slug else missing_vectors(active, db)
    if result.active != result.slug:
        context.log.warning(f"index stays on {result.active}: {result.slug} is incomplete ({result.missing} missing)")
    sorted_ok = bool(np.all(np.diff(active.pmids) > 0)) if len(active) else True
    norm_problems = [p for p in active.verify() if not p.startswith("offsets")]
    yield dg.MaterializeResult(
        metadata={
            **scalars(result),
            "active_count": len(active),
            "dim": active.dim,
            "model": active.model,
            "path": str(active.root),
        },  # fmt: skip
        data_version=dg.DataVersion(f"{result.active}:{len(active)}"),
    )
    yield dg.AssetCheckResult(check_name="offsets_sorted_unique", passed=sorted_ok)
    yield dg.AssetCheckResult(
        check_name="vectors_finite_unit_norm", passed=not norm_problems, metadata={"problems": str(norm_problems)}
    )
    yield dg.AssetCheckResult(
        check_name="every_paper_embedded", passed=unembedded == 0, metadata={"papers_without_vector": unembedded}
    )
