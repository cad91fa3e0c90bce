"""Ingest automation: searches registered in the store become partitions and runs; weekly baseline schedule."""

import dagster as dg

from ra_agent.workspace import registered_queries
from ra_assets.defs.ingest.assets import baseline_snapshot, papers, pubmed_search, references
from ra_assets.partitions import search_query_partitions, unpartitioned
from ra_assets.resources import StoreResource

search_job = dg.define_asset_job(
    "pubmed_search_job",
    selection=dg.AssetSelection.assets(pubmed_search),
    description="Run one registered PubMed search (partition = query key).",
)

corpus_job = dg.define_asset_job(
    "corpus_job",
    selection=dg.AssetSelection.assets(papers, references),
    description="Import pending search exports (incl. the bundled demo corpus) and harvest references.",
)

baseline_job = dg.define_asset_job(
    "baseline_snapshot_job",
    selection=dg.AssetSelection.assets(baseline_snapshot),
    description="Load this week's PubMed baseline/update files and snapshot the embedding index.",
)

baseline_weekly_schedule = dg.build_schedule_from_partitioned_job(
    baseline_job, name="weekly_baseline_snapshot", description="Every week: baseline files + index snapshot."
)


@dg.sensor(
    job=search_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Turn searches users registered in the store (`ra ingest --query --register`) into `search_query` "
    "partitions and one pubmed_search run each (run_key search:<key>). Logs only what it launches.",
)
def search_query_sensor(context: dg.SensorEvaluationContext, store: StoreResource):
    with store.get_client() as db:
        wanted = registered_queries(db, origin="user")
    new = unpartitioned(context.instance, search_query_partitions, wanted)
    if not new:
        return dg.SkipReason(f"no new searches ({len(wanted)} registered, all partitioned)")
    context.log.info(f"new searches: {', '.join(wanted[k]['query'][:80] for k in new)}")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=k, run_key=f"search:{k}", tags={"ra/query": wanted[k]["query"][:200]})
            for k in new
        ],
        dynamic_partitions_requests=[search_query_partitions.build_add_request(new)],
    )
