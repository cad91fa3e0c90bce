"""Embedding assets: one shard per ingest batch (fp16 memmaps per model folder) and the active index."""

import warnings

import dagster as dg

from ra_agent.agent import switch_index
from ra_agent.embed import embed_shard
from ra_agent.store import open_active
from ra_assets.defs.ingest.assets import log_progress, papers
from ra_assets.meta import scalars
from ra_assets.partitions import ingest_batch_partitions
from ra_assets.resources import EmbedderResource, RaConfigResource, StoreResource, configured_embedding_slug

EMBEDDING_CODE_VERSION = configured_embedding_slug()
# `backfill_policy` is beta in Dagster 1.13; ra relies on it (one backfill run re-embeds every shard) and says so here
warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy` of function `asset`")


@dg.asset(
    deps=[papers],
    partitions_def=ingest_batch_partitions,
    # a backfill over every shard (after a model bump) is one run: the model loads once, even for one shard
    backfill_policy=dg.BackfillPolicy.single_run(),
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
    the `shards_on_configured_model` check lists the shards behind, and materialising the
    embeddings group (shards + index) launches one backfill that re-embeds them all into the new
    model folder and then switches the index."""
    cfg = ra.get_config()
    model = embedder.get_client()
    results = []
    with store.get_client() as db:
        for key in context.partition_keys:
            results.append(embed_shard(cfg, db, key, model, on_progress=log_progress(context, f"{key}: embedded")))
    skipped = [p for r in results for p in r.skipped]
    if skipped:
        context.log.error(f"{len(skipped)} papers got no vector (out of memory twice): {skipped[:10]}")
    last = results[-1]
    requested = sum(r.requested for r in results)
    return dg.MaterializeResult(
        metadata={
            **scalars(last, skip=("skipped", "missing", "no_text", "batch_id")),
            "shards": len(results),
            "batch_ids": ", ".join(context.partition_keys)[:500],
            "requested": requested,
            "embedded": sum(r.embedded for r in results),
            "already_present": sum(r.already_present for r in results),
            "seconds": round(sum(r.seconds for r in results), 3),
            "papers_per_second": round(
                sum(r.embedded for r in results) / max(sum(r.seconds for r in results), 1e-9), 2
            ),
            "skipped": len(skipped),
            "missing_papers": sum(len(r.missing) for r in results),
            "no_text": sum(len(r.no_text) for r in results),
            "model_folder": f"emb/{last.slug}",
        },  # fmt: skip
        data_version=dg.DataVersion(f"{last.slug}:{requested - len(skipped)}"),
    )


@dg.asset(
    deps=[embedding_shards],
    group_name="embeddings",
    kinds={"numpy"},
    code_version=EMBEDDING_CODE_VERSION,
)
def embedding_index(
    context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource, embedder: EmbedderResource
) -> dg.MaterializeResult:
    """The active embedding index (`emb/ACTIVE` → model folder with E.f16, the PICO families p i c o m,
    offsets.npy and meta.json).

    It switches to the configured model's folder only once that folder is complete and
    healthy, so the previous index stays readable during a re-embedding backfill; at the switch
    every PICO family is re-embedded with the new model from the PICO records on disk."""
    cfg = ra.get_config()
    with store.get_client() as db:
        result = switch_index(cfg, db, embedder.get_client())
        active = open_active(cfg)
    if result.active != result.slug:
        context.log.warning(f"index stays on {result.active}: {result.slug} is incomplete ({result.missing} missing)")
    elif result.previous not in (None, result.slug):
        context.log.info(f"index switched {result.previous} -> {result.slug} ({result.rebuilt} PICO vectors rebuilt)")
    return dg.MaterializeResult(
        metadata={
            **scalars(result),
            "active_count": len(active),
            "active_families": ", ".join(active.families),
            "dim": active.dim,
            "model": active.model,
            "path": str(active.root),
        },  # fmt: skip
        data_version=dg.DataVersion(f"{result.active}:{len(active)}"),
    )
