"""Embedding automation: every new ingest batch becomes an `ingest_batch` partition and a shard run."""

import dagster as dg

from ra_assets.defs.embeddings.assets import embedding_index, embedding_shards
from ra_assets.partitions import ingest_batch_partitions, unpartitioned
from ra_assets.resources import StoreResource

shard_job = dg.define_asset_job(
    "embedding_shard_job",
    selection=dg.AssetSelection.assets(embedding_shards),
    description="Embed ingest batches into the configured model's folder (one partition per batch). After a model "
    "bump, materialise the embeddings group instead: one backfill over every shard, then the index switch.",
)

index_job = dg.define_asset_job(
    "embedding_index_job",
    selection=dg.AssetSelection.assets(embedding_index),
    description="Check the configured model's folder and make it the active index.",
)


def new_batches(context: dg.SensorEvaluationContext, store: StoreResource) -> list[str]:
    """Ingest batches in the store that are not yet `ingest_batch` partitions."""
    with store.get_client() as db:
        batches = [b["batch_id"] for b in db.batches()]
    return unpartitioned(context.instance, ingest_batch_partitions, batches)


@dg.sensor(
    job=shard_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Add an `ingest_batch` partition and request one embedding_shards run (run_key shard:<batch>) for "
    "every new ingest batch in the store. Logs only what it launches.",
)
def ingest_batch_sensor(context: dg.SensorEvaluationContext, store: StoreResource):
    fresh = new_batches(context, store)
    if not fresh:
        return dg.SkipReason("no new ingest batches")
    context.log.info(f"new ingest batches: {', '.join(fresh)}")
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=b, run_key=f"shard:{b}") for b in fresh],
        dynamic_partitions_requests=[ingest_batch_partitions.build_add_request(fresh)],
    )
