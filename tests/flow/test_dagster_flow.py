"""The agent in Dagster: definitions, the agent sensor's decisions, and a full in-process run vs the local runner."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from ra_agent.agent.goal import GoalStore
from ra_agent.agent.runner import run_goal, start_goal
from ra_agent.config import load_config
from ra_agent.evidence.reports.common import verify_citations
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import open_store
from ra_assets import local
from ra_assets.defs.agent.automation import agent_sensor

from .conftest import write_config

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"


@pytest.fixture
def project(demo_project, monkeypatch):
    config = write_config(demo_project)
    monkeypatch.setenv("RA_CONFIG", str(config))
    return demo_project


@pytest.fixture
def defs(project):
    from ra_assets.definitions import defs as load

    return load()


def tick(instance, project: Path, cursor: str | None = None):
    return local.tick(agent_sensor, instance, project / "config.toml", cursor)


def execute(defs, instance, request: dg.RunRequest):
    assert local.execute(defs, instance, request, agent_sensor.name).success


def new_goal(project: Path) -> str:
    cfg = load_config(project / "config.toml")
    with open_store(cfg) as store:
        return start_goal(cfg, store, project / HANDBOOK, RulesBrain.name).goal_id


def test_definitions_hold_the_pipeline(defs):
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert keys == {
        "pubmed_search",
        "papers",
        "references",
        "baseline_snapshot",
        "embedding_shards",
        "embedding_index",
        "clusters",
        "cluster_metrics",
        "pico_extractions",
        "sr_overlap",
        "review_questions",
        "reports",
        "mind_kb",
        "cluster_expansion",
        "ann_index",
        "screening_ranking",
        "extraction_sheet",
    }
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("embedding_index") in graph.get(dg.AssetKey("clusters")).parent_keys
    assert {s.name for s in defs.sensors} == {
        "agent_sensor",
        "ingest_batch_sensor",
        "search_query_sensor",
        "ann_index_automation",
        "review_questions_automation",
        "screening_sensor",
    }
    assert [s.name for s in defs.schedules] == ["weekly_baseline_snapshot"]
    assert defs.resolve_job_def("handbook_job") and defs.resolve_job_def("agent_cycle_job")


def test_sensor_ticks_are_idempotent_and_survive_a_restart(project, defs):
    goal_id = new_goal(project)
    with dg.instance_for_test() as instance:
        first, ctx = tick(instance, project)
        (request,) = first.run_requests
        assert request.job_name == "agent_cycle_job" and request.run_key.startswith(f"{goal_id}:cycle:1:")
        again, _ = tick(instance, project, ctx.cursor)  # daemon restarted with the cursor: same decision
        assert again.run_requests[0].run_key == request.run_key
        assert json.loads(again.cursor)[goal_id] == request.run_key

        execute(defs, instance, request)  # cycle 1: the rules search the seed query
        second, ctx = tick(instance, project, again.cursor)
        (search,) = second.run_requests
        assert search.job_name == "agent_search_job" and search.tags["ra/stage"] == "search"
        (added,) = second.dynamic_partitions_requests
        assert added.partitions_def_name == "search_query" and list(added.partition_keys) == [search.partition_key]

        instance.add_dynamic_partitions("search_query", [search.partition_key])
        run = defs.resolve_job_def("agent_search_job")
        instance.create_run_for_job(run, tags=search.tags)  # queued, not finished
        waiting, _ = tick(instance, project, second.cursor)
        assert isinstance(waiting, dg.SkipReason) and "in flight" in waiting.skip_message


def history_shape(state, labels: dict[str, str]) -> list[tuple]:
    """History without timestamps, cluster ids replaced by labels (ids embed a creation time)."""

    def norm(value):
        text = json.dumps(value, sort_keys=True, default=str)
        for cid, label in labels.items():
            text = text.replace(cid, label)
        return text

    return [(h["event"], h.get("tool"), norm(h.get("args")), norm(h.get("stage")), norm(h.get("partition")))
            for h in state.history]  # fmt: skip


def labels_of(cfg) -> dict[str, str]:
    with open_store(cfg) as store:
        return dict(store.conn.execute("SELECT cluster_id, label FROM cluster_manifest").fetchall())


def test_dagster_path_gives_the_local_runner_history(project, defs, local_gap_run):
    goal_id = new_goal(project)
    cfg = load_config(project / "config.toml")
    with dg.instance_for_test() as instance:
        drive(defs, instance, project)
        wanted = ("pubmed_search", "clusters", "review_questions", "reports", "mind_kb")
        materialized = {k for k in wanted if instance.get_latest_materialization_event(dg.AssetKey(k))}
        questions = instance.get_latest_materialization_event(dg.AssetKey("review_questions"))
        assert questions is not None and questions.asset_materialization is not None
        assert questions.asset_materialization.partition.startswith("seek_gap_ppi_gerd-")  # per handbook
        table = questions.asset_materialization.metadata["table"].value  # every question, the set's numbers
    with open_store(cfg) as store:
        dagster_state = GoalStore(cfg.data_dir, store).load(goal_id)
        reports = [h["path"] for h in dagster_state.history if h["event"] == "report_written"]
        assert dagster_state.status == "stopped" and reports
        assert all(p.startswith(f"reports/{goal_id}/") for p in reports)  # per goal, relative to the workspace
        assert all(verify_citations(store, cfg.data_dir / p) == [] for p in reports)
    assert materialized == set(wanted)
    (question_id,) = dagster_state.success_questions
    assert f"| {question_id} | Proton pump inhibitor for people with gastroesophageal reflux | " in table

    # the same handbook on a fresh copy through the local runner
    local_cfg, local_state = local_gap_run
    assert history_shape(local_state, labels_of(local_cfg)) == history_shape(dagster_state, labels_of(cfg))


def drive(defs, instance, project: Path, ticks: int = 40, cursor: str | None = None):
    """Tick the sensor and execute what it asks for until it skips; returns the last SkipReason and cursor."""
    return local.drive(defs, instance, project / "config.toml", agent_sensor, ticks=ticks, cursor=cursor)


def test_sensor_skips_a_paused_goal_resumes_it_and_picks_up_new_goals(project, defs):
    from ra_agent.agent.guards import PAUSE_FILE, clear_control, request_control

    goal_id = new_goal(project)
    cfg = load_config(project / "config.toml")
    with open_store(cfg) as store:
        goal_dir = GoalStore(cfg.data_dir, store).goal_dir(goal_id)
    request_control(cfg, PAUSE_FILE, goal_dir)
    with dg.instance_for_test() as instance:
        skipped, cursor = drive(defs, instance, project)  # one cycle run notes the pause, then the sensor waits
        assert isinstance(skipped, dg.SkipReason) and f"{goal_id}: paused by {goal_dir / PAUSE_FILE}" in str(
            skipped.skip_message
        )
        with open_store(cfg) as store:
            assert GoalStore(cfg.data_dir, store).load(goal_id).status == "paused"
        clear_control(cfg, PAUSE_FILE, goal_dir)
        second = new_goal(project)  # started while the daemon runs: the next tick sees it
        resumed, _ = tick(instance, project, cursor)
        keys = {r.tags["ra/goal"]: r for r in resumed.run_requests}
        assert set(keys) == {goal_id, second}
        execute(defs, instance, keys[goal_id])
    with open_store(cfg) as store:
        state = GoalStore(cfg.data_dir, store).load(goal_id)
    assert [h["event"] for h in state.history[:3]] == ["created", "paused", "resumed"]
    assert state.status == "in_progress" and state.cycle == 1


def test_max_cycles_binds_the_dagster_path_like_the_local_runner(project, defs, demo_template, tmp_path):
    config = project / "config.toml"
    config.write_text(config.read_text().replace("[goal]\n", "[goal]\nmax_cycles = 2\n"))
    goal_id = new_goal(project)
    cfg = load_config(config)
    with dg.instance_for_test() as instance:
        done, _ = drive(defs, instance, project)
    assert isinstance(done, dg.SkipReason) and str(done.skip_message) == "no goal to run (1 stopped)"
    with open_store(cfg) as store:
        dagster_state = GoalStore(cfg.data_dir, store).load(goal_id)
    assert dagster_state.stop_reason() == "max_cycles reached (2 cycles)" and dagster_state.cycle == 2

    import shutil

    local = tmp_path / "local"
    shutil.copytree(demo_template, local)
    write_config(local).write_text(config.read_text())
    local_cfg = load_config(local / "config.toml")
    with open_store(local_cfg) as store:
        state = start_goal(local_cfg, store, local / HANDBOOK, RulesBrain.name)
        local_state = run_goal(local_cfg, store, state.goal_id, RulesBrain())
    assert history_shape(local_state, labels_of(local_cfg)) == history_shape(dagster_state, labels_of(cfg))


def test_a_failed_stage_run_marks_the_goal_crashed(project, defs):
    from ra_agent.agent.stages import StageRequest

    goal_id = new_goal(project)
    cfg = load_config(project / "config.toml")
    with open_store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        state = goals.load(goal_id)
        state.pending_asset_requests = [StageRequest("pico", "no_such_cluster", "test").to_dict()]
        goals.save(state)
    with dg.instance_for_test() as instance:
        first, _ = tick(instance, project)
        (request,) = first.run_requests
        assert request.job_name == "agent_pico_job"
        instance.add_dynamic_partitions("cluster", ["no_such_cluster"])
        job = defs.resolve_job_def(request.job_name)
        failed = job.execute_in_process(instance=instance, partition_key=request.partition_key, raise_on_error=False,
                                        tags={**request.tags, "dagster/run_key": request.run_key})  # fmt: skip
        assert not failed.success
        skipped, _ = tick(instance, project)
    assert isinstance(skipped, dg.SkipReason) and f"{goal_id}: crashed: stage pico[no_such_cluster]" in str(
        skipped.skip_message
    )
    with open_store(cfg) as store:
        crashed = GoalStore(cfg.data_dir, store).load(goal_id)
    assert crashed.status == "crashed" and crashed.stop_reason().startswith("stage pico[no_such_cluster]: run ")


def test_the_agent_flow_on_a_postgres_instance_with_the_store_on_postgres(project, defs, pg_instance, pg_server):
    """scripts/dagster-postgres.yaml + `[store] url`: runs, materialisations, pools and the goal all in PostgreSQL."""
    import psycopg

    from .conftest import store_on_postgres

    instance, dagster_db = pg_instance
    assert instance.nux_enabled is False  # no "Join the Dagster community" dialog on a deployment's UI either
    store_url = pg_server.new_database()
    store_on_postgres(project, store_url)
    config = project / "config.toml"
    config.write_text(config.read_text() + f'[store]\nurl = "{store_url}"\n')
    goal_id = new_goal(project)
    done, _ = drive(defs, instance, project)
    assert isinstance(done, dg.SkipReason) and str(done.skip_message) == "no goal to run (1 stopped)"

    with psycopg.connect(dagster_db) as conn:
        runs = conn.execute("SELECT run_id, status FROM runs").fetchall()
        goal_runs = conn.execute("SELECT COUNT(*) FROM run_tags WHERE key = 'ra/goal' AND value = %s", (goal_id,))
        materialized = {dg.AssetKey.from_db_string(r[0]).to_user_string() for r in conn.execute(
            "SELECT DISTINCT asset_key FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")}  # fmt: skip
        n_goal_runs = goal_runs.fetchone()[0]
    assert runs and {status for _, status in runs} == {"SUCCESS"}
    assert n_goal_runs == len(runs) == len(instance.get_run_records())
    assert {"pubmed_search", "clusters", "review_questions", "reports", "mind_kb"} <= materialized
    assert instance.event_log_storage.get_concurrency_keys() >= {"llm", "ncbi"}  # pool slots kept in PostgreSQL
    assert all(instance.event_log_storage.get_concurrency_info(k).slot_count == 1 for k in ("llm", "ncbi"))

    cfg = load_config(config)
    with open_store(cfg) as store:
        assert store.dialect == "postgresql"
        state = GoalStore(cfg.data_dir, store).load(goal_id)
        row = store.conn.execute("SELECT status, cycle FROM goal WHERE goal_id=?", (goal_id,)).fetchone()
        calls = [r[0] for r in store.conn.execute("SELECT tool FROM tool_call WHERE goal_id=? ORDER BY id", (goal_id,))]
        reports = [h["path"] for h in state.events("report_written")]
        assert reports and all(verify_citations(store, cfg.data_dir / p) == [] for p in reports)
    assert (row["status"], row["cycle"]) == (state.status, state.cycle) == ("stopped", state.cycle)
    assert calls == [h["tool"] for h in state.events("tool_call")] and "search_pubmed" in calls
    assert not (project / "data" / "ra.sqlite").exists()  # nothing fell back to the workspace file


HOLD_LOCK = """
import sys
from ra_agent.agent.loopguard import GoalLock
with GoalLock(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes stdin
"""


def test_sensor_launches_nothing_for_a_goal_a_live_cli_process_runs(project, defs):
    """Issue 38 §6: with the UI open, `ra run` in a terminal holds the goal (RUNNING.lock) between a cycle and its
    stages; the sensor launched agent_search_job for the same goal. Now it skips it and the goals it spawned, and
    takes them up once the process is gone."""
    import subprocess
    import sys

    from ra_agent.agent.stages import StageRequest

    goal_id = new_goal(project)
    cfg = load_config(project / "config.toml")
    with open_store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        state = goals.load(goal_id)
        state.cycle = 1
        state.pending_asset_requests = [StageRequest("search", state.topic, "the seed query").to_dict()]
        goals.save(state)
        child = goals.create(HANDBOOK, "seek_gap", "esomeprazole AND gastroesophageal reflux")
        child.parent_goal = goal_id
        goals.save(child)
        goal_dir = goals.goal_dir(goal_id)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(goal_dir), goal_id], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with dg.instance_for_test() as instance:
            skipped, _ = tick(instance, project)
            assert isinstance(skipped, dg.SkipReason), skipped.run_requests
            message = str(skipped.skip_message)
            assert f"{goal_id}: run by pid {holder.pid} (" in message and "the sensor launches nothing" in message
            assert f"{child.goal_id}: spawned by {goal_id}, which pid {holder.pid}" in message
            assert instance.get_runs() == []
            assert holder.stdin is not None
            holder.stdin.close()  # the terminal's `ra run` ends: the sensor takes both goals up
            holder.wait(timeout=30)
            resumed, _ = tick(instance, project)
            launched = {(r.tags["ra/goal"], r.job_name) for r in resumed.run_requests}
            assert launched == {(goal_id, "agent_search_job"), (child.goal_id, "agent_cycle_job")}
    finally:
        holder.kill()
        holder.wait()
