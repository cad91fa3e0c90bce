"""Screening automation: each screening project becomes a partition; a new decision re-ranks its project."""

import dagster as dg

from ra_agent.screen import decisions, projects
from ra_assets.defs.screening.assets import screen_project_partitions, screening_ranking
from ra_assets.partitions import partition_name
from ra_assets.resources import StoreResource

screening_job = dg.define_asset_job(
    "screening_ranking_job",
    selection=dg.AssetSelection.assets(screening_ranking),
    partitions_def=screen_project_partitions,
    description="Retrain one screening project's model on its decisions and re-rank its undecided records.",
)


@dg.sensor(job=screening_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def screening_sensor(context: dg.SensorEvaluationContext, store: StoreResource):
    """Add a partition for every new screening project and re-rank a project once per new decision count."""
    with store.get_client() as db:
        latest = {name: max((d.seq for d in decisions(db, name)), default=0) for name in projects(db)}
    known = set(context.instance.get_dynamic_partitions(partition_name(screen_project_partitions)))
    fresh = [name for name in latest if name not in known]
    requests = [dg.RunRequest(partition_key=name, run_key=f"screen:{name}:{seq}") for name, seq in latest.items()]
    if not requests:
        return dg.SkipReason("no screening projects")
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[screen_project_partitions.build_add_request(fresh)] if fresh else [],
    )
