"""The main job through Dagster (`python -m ra_assets.demo`, what scripts/demo.sh runs) on a persistent instance:
the instance then holds the demo's materialisations, checks and runs as the UI shows them, and a daemon starting on
it has nothing to replay (every sensor skips; the runs carry the sensor's run keys)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from ra_assets import local
from ra_assets.defs.agent.automation import agent_sensor
from ra_assets.defs.embeddings.automation import ingest_batch_sensor
from ra_assets.defs.ingest.automation import search_query_sensor

from .conftest import write_config

ROOT = Path(__file__).resolve().parents[2]
DEMO_ASSETS = ("papers", "references", "embedding_index", "clusters", "cluster_metrics", "pubmed_search",
               "pico_extractions", "sr_overlap", "reports", "mind_kb")  # fmt: skip


@pytest.mark.slow
def test_demo_runs_through_dagster_and_leaves_nothing_to_replay(demo_project, tmp_path):
    config = write_config(demo_project)
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "RA_CONFIG": str(config), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "ra_assets.demo", "--config", str(config)], env=env, cwd=demo_project,
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    written = [line[len("wrote ") :] for line in done.stdout.splitlines() if line.startswith("wrote ")]
    assert written and all(Path(p).exists() and "/reports/" in p for p in written)

    with dg.DagsterInstance.from_ref(dg.InstanceRef.from_dir(str(home))) as instance:
        for key in DEMO_ASSETS:
            assert instance.get_latest_materialization_event(dg.AssetKey(key)) is not None, key
        assert instance.get_materialized_partitions(dg.AssetKey("embedding_shards"))
        runs = instance.get_runs()
        assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        jobs = {r.job_name for r in runs}
        assert {"corpus_job", "organise_job", "handbook_job", "agent_cycle_job", "agent_reports_job"} <= jobs
        cycles = [r for r in runs if r.job_name == "agent_cycle_job"]
        assert all(r.tags.get("ra/goal") and r.tags.get("ra/cycle") for r in cycles)
        # what the daemon dedups on: the sensor's name and run key on every run a sensor asked for
        asked = [r for r in runs if r.job_name.startswith("agent_") or r.job_name == "embedding_shard_job"]
        assert all(r.tags.get("dagster/sensor_name") and r.tags.get("dagster/run_key") for r in asked)
        checks = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("clusters"), "members_exist_in_paper"), limit=5
        )
        assert checks
        # a daemon starting on this instance: every sensor skips, none replays a finished goal's request
        for sensor in (agent_sensor, ingest_batch_sensor, search_query_sensor):
            result, _ = local.tick(sensor, instance, config)
            assert isinstance(result, dg.SkipReason), (sensor.name, result)
        skipped, _ = local.tick(agent_sensor, instance, config)
        assert str(skipped.skip_message).startswith("no goal to run (")
