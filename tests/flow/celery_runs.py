"""Runs of ra's jobs for the celery tests and bench, each phase in a fresh process (as a run worker is), printing JSON.

usage: python celery_runs.py embed_in_process            every shard, then the index, in this process (the baseline)
       python celery_runs.py embed_celery [POOL]          every shard as its own run at once (as the ingest-batch sensor
                                                          or a multi-run backfill launches them), the `embedding` pool
                                                          set to POOL slots, then the index; steps on Celery workers
       python celery_runs.py backfill_celery [POOL]       a backfill of the embeddings group as the UI launches it,
                                                          the backfill and run-queue daemons' iterations run here,
                                                          each run launched as its own process; steps on Celery workers
       python celery_runs.py shard_celery PARTITION       one shard run through Celery
       python celery_runs.py handbook_celery HANDBOOK     handbook_job through Celery: the goal it starts
       python celery_runs.py agent_celery                 the agent sensor ticked here, every run it asks for executed
                                                          through Celery, until it skips
A run here is what a run worker launched by the daemon does: `execute_job` on the code location
`ra_assets.celery_location`, whose executor sends each step to the broker; the run orchestrates and waits.
Environment: RA_CONFIG, DAGSTER_HOME (dagster.yaml on PostgreSQL), DAGSTER_PG_*, RA_CELERY_YAML, RA_CELERY_BROKER,
RA_CELERY_BACKEND.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository

from ra_agent.config import load_config
from ra_agent.workspace import open_store

LOCATION = "ra_assets.celery_location"


def recon(job_name: str):
    return ReconstructableRepository.for_module(
        LOCATION, "defs", working_directory=os.getcwd()
    ).get_reconstructable_job(job_name)


def batches() -> list[str]:
    with open_store(load_config(os.environ["RA_CONFIG"])) as store:
        return [b["batch_id"] for b in store.batches()]


def step_workers(instance: dg.DagsterInstance, run_id: str) -> list[dict]:
    """Per step execution on a worker: the step, the Celery worker that reported it (dagster-celery's engine event
    "Executing steps ... in celery worker"), and when it started and ended."""
    out, spans = [], {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.ENGINE_EVENT and event.step_key:
            data = event.engine_event_data.metadata if event.engine_event_data else {}
            worker = data.get("Celery worker")
            if worker is not None:
                out.append({"step": event.step_key, "worker": worker.value, "at": record.timestamp})
        elif event.event_type in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS):
            spans.setdefault(event.step_key, {})[event.event_type.value] = record.timestamp
    for entry in out:
        span = spans.get(entry["step"], {})
        entry["start"], entry["end"] = span.get("STEP_START"), span.get("STEP_SUCCESS")
    return out


def materialized(instance: dg.DagsterInstance, run_id: str) -> list[dict]:
    """The run's materialisations: asset, partition and the numeric metadata (counts, seconds)."""
    out = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        event = record.asset_materialization
        if event is not None:
            numbers = {k: v.value for k, v in event.metadata.items() if isinstance(v.value, int | float)}
            out.append({"asset": event.asset_key.to_user_string(), "partition": event.partition, **numbers})
    return out


def run_celery(job_name: str, tags: dict | None = None, run_config: dict | None = None) -> dict:
    with dg.DagsterInstance.get() as instance:
        started = time.time()
        with dg.execute_job(recon(job_name), instance=instance, tags=tags or {}, run_config=run_config) as result:
            output = result.output_for_node("start_goal_op") if job_name == "handbook_job" and result.success else None
        failure = next((e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE), None)
        return {
            "job": job_name,
            "run_id": result.run_id,
            "success": result.success,
            "partition": (tags or {}).get("dagster/partition"),
            "steps": step_workers(instance, result.run_id),
            "materialized": materialized(instance, result.run_id),
            "failure": failure.message if failure else None,
            "seconds": round(time.time() - started, 2),
            "output": output,
        }


def embed_in_process() -> dict:
    from ra_assets.definitions import defs

    definitions = defs()
    started = time.time()
    with dg.DagsterInstance.get() as instance:
        keys = batches()
        instance.add_dynamic_partitions("ingest_batch", keys)
        for key in keys:
            job = definitions.resolve_job_def("embedding_shard_job")
            assert job.execute_in_process(instance=instance, partition_key=key).success
        assert definitions.resolve_job_def("embedding_index_job").execute_in_process(instance=instance).success
    return {"seconds": round(time.time() - started, 2), "batches": keys}


def known_batches() -> list[str]:
    """Every ingest batch as a partition of ingest_batch (what the ingest-batch sensor adds as batches arrive)."""
    keys = batches()
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("ingest_batch", keys)
    return keys


def embed_celery(pool: int) -> dict:
    keys = known_batches()
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.set_concurrency_slots("embedding", pool)  # `dagster instance concurrency set`
    started = time.time()
    # one process per run, as the daemon's run launcher starts them (Dagster's execute_job is not for threads,
    # and a fork of this process can inherit a held lock)
    runs = [subprocess.Popen([sys.executable, __file__, "shard_celery", key], stdout=subprocess.PIPE, text=True)
            for key in keys]  # fmt: skip
    shards = []
    for run in runs:
        out, _ = run.communicate()
        assert run.returncode == 0, f"shard run exited {run.returncode}"
        shards.append(json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :]))
    shard_seconds = round(time.time() - started, 2)
    index = run_celery("embedding_index_job")
    return {"shards": shards, "index": index, "shard_seconds": shard_seconds, "batches": keys}


def backfill_celery(pool: int) -> dict:
    """A backfill of the embeddings group (every shard, then the index) as the UI launches one after a model bump,
    executed as a deployment does: the backfill daemon's and the run queue daemon's iterations run here on the
    workspace of workspace-celery.yaml (its code server a subprocess), the default run launcher starts each run as
    its own process, every step goes to the Celery workers. The celery location's multi-run policy makes it one run
    per shard."""
    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
    from dagster._core.utils import make_new_backfill_id
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._daemon.backfill import execute_backfill_iteration
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

    keys = known_batches()
    logger = logging.getLogger("backfill")
    root = Path(__file__).resolve().parents[2]
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.set_concurrency_slots("embedding", pool)
        started = time.time()
        with WorkspaceProcessContext(instance, WorkspaceFileTarget([str(root / "workspace-celery.yaml")])) as workspace:
            graph = workspace.create_request_context().asset_graph
            backfill = PartitionBackfill.from_asset_partitions(
                backfill_id=make_new_backfill_id(), asset_graph=graph, partition_names=keys,
                asset_selection=[dg.AssetKey("embedding_shards"), dg.AssetKey("embedding_index")],
                backfill_timestamp=started, tags={}, dynamic_partitions_store=instance, all_partitions=False,
                title=None, description=None, run_config=None,
            )  # fmt: skip
            instance.add_backfill(backfill)
            queue = QueuedRunCoordinatorDaemon(interval_seconds=1)
            while (status := backfill_status(instance, backfill.backfill_id)) == BulkActionStatus.REQUESTED:
                assert time.time() - started < 1200, "the backfill is still running after 20 minutes"
                for error in execute_backfill_iteration(workspace, logger):
                    assert error is None, error
                list(queue.run_iteration(workspace))
                time.sleep(1)
        runs = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
        out = []
        for record in sorted(runs, key=lambda r: r.create_timestamp):
            run = record.dagster_run
            # a backfill run of one partition names it as a range from it to itself
            start, end = (run.tags.get(f"dagster/asset_partition_range_{edge}") for edge in ("start", "end"))
            out.append({
                "run_id": run.run_id, "success": run.status == dg.DagsterRunStatus.SUCCESS,
                "partition": run.tags.get("dagster/partition") or (start if start == end else None),
                "assets": sorted(k.to_user_string() for k in run.asset_selection or []),
                "steps": step_workers(instance, run.run_id), "materialized": materialized(instance, run.run_id),
            })  # fmt: skip
    return {"status": status.value, "runs": out, "batches": keys, "seconds": round(time.time() - started, 2)}


def backfill_status(instance: dg.DagsterInstance, backfill_id: str):
    backfill = instance.get_backfill(backfill_id)
    assert backfill is not None, f"backfill {backfill_id} vanished"
    return backfill.status


def agent_celery() -> dict:
    """The agent sensor ticked as the daemon would (ra_assets.local), every run it asks for launched through Celery."""
    from ra_assets import local
    from ra_assets.defs.agent.automation import agent_sensor

    runs = []
    with dg.DagsterInstance.get() as instance:
        cursor, last = None, None
        for _ in range(40):
            result, _context = local.tick(agent_sensor, instance, os.environ["RA_CONFIG"], cursor)
            if isinstance(result, dg.SkipReason):
                last = str(result.skip_message)
                break
            assert isinstance(result, dg.SensorResult), result
            cursor = result.cursor
            local.apply(result, instance)
            for request in result.run_requests or []:
                tags = {
                    **request.tags,
                    "dagster/run_key": request.run_key or "",
                    "dagster/sensor_name": agent_sensor.name,
                }
                if request.partition_key:
                    tags["dagster/partition"] = request.partition_key
                run = run_celery(request.job_name or "", tags, local.console_level(request.run_config, None))
                runs.append(run)
                assert run["success"], run
    return {"runs": runs, "last_skip": last}


def main(argv: list[str]) -> dict:
    step = argv[0]
    if step == "embed_in_process":
        return embed_in_process()
    if step == "embed_celery":
        return embed_celery(int(argv[1]) if len(argv) > 1 else 2)
    if step == "backfill_celery":
        return backfill_celery(int(argv[1]) if len(argv) > 1 else 2)
    if step == "shard_celery":
        known_batches()
        return run_celery("embedding_shard_job", {"dagster/partition": argv[1]})
    if step == "handbook_celery":
        return run_celery("handbook_job", run_config={"ops": {"start_goal_op": {"config": {"handbook": argv[1]}}}})
    if step == "agent_celery":
        return agent_celery()
    raise SystemExit(f"unknown step {step!r}: {__doc__}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print("RESULT " + json.dumps(main(sys.argv[1:]), default=str))
