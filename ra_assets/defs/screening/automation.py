"""Screening automation: each screening project becomes a partition; a new decision re-ranks its project."""

import json

import dagster as dg

from ra_agent.screen import decisions, projects
from ra_assets.defs.screening.assets import screen_project_partitions, screening_ranking
from ra_assets.partitions import unpartitioned
from ra_assets.resources import StoreResource

screening_job = dg.define_asset_job(
    "screening_ranking_job",
    selection=dg.AssetSelection.assets(screening_ranking),
    partitions_def=screen_project_partitions,
    description="Retrain one screening project's model on its decisions and re-rank its undecided records.",
)


@dg.sensor(
    job=screening_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a partition for every new screening project (`ra screen --search/--from`) and re-ranks a "
    "project once per new decision; skips, saying why, when no project has a decision it has not ranked.",
)
def screening_sensor(context: dg.SensorEvaluationContext, store: StoreResource):
    """Add a partition for every new screening project and re-rank a project once per new decision count."""
    with store.get_client() as db:
        latest = {name: max((d.seq for d in decisions(db, name)), default=0) for name in projects(db)}
    if not latest:
        return dg.SkipReason("no screening projects")
    ranked = json.loads(context.cursor) if context.cursor else {}
    fresh = unpartitioned(context.instance, screen_project_partitions, latest)
    due = {name: seq for name, seq in latest.items() if name in fresh or ranked.get(name) != seq}
    if not due:
        return dg.SkipReason(f"no new decisions in {len(latest)} screening project(s)")
    requests = [dg.RunRequest(partition_key=name, run_key=f"screen:{name}:{seq}") for name, seq in due.items()]
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[screen_project_partitions.build_add_request(fresh)] if fresh else [],
        cursor=json.dumps({**ranked, **due}, sort_keys=True),
    )
