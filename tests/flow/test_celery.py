"""ra's jobs on dagster-celery for real: a Redis broker on a free loopback port, Dagster's instance on the suite's
PostgreSQL server, two or three Celery worker processes (`dagster-celery worker start`, as docs/deploy.md runs them).

- a backfill of the embeddings group (four ingest batches' shards, then the index), launched as the UI launches
  one, runs one run per shard through the run queue, their steps spread over three workers with the `embedding`
  pool at two slots holding, and the index equals the one a single process builds;
- the agent flow (handbook_job, agent sensor ticks, stage runs) reaches the same reports as the local runner with
  every step on a worker, ra's store on PostgreSQL too;
- a worker killed inside a shard's append (data written, not committed) leaves the folder consistent; the broker
  hands the step to the other worker, the run succeeds and a re-run has nothing left to embed.

Every process started here (broker, workers, run processes) is in its own process group and is stopped by the
fixture or the test that started it, also on failure, and dies with the test process (tests/spawned.py). Select
with `-m celery`.
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from celery_cluster import BIN, CeleryWorker, RedisServer, missing, start_group, stop_group, write_executor_yaml
from demo_corpus import demo_rows, write_demo_subset
from spawned import unavailable

from ra_agent.config import load_config
from ra_agent.store.vectors import PAUSE_AT_ENV, PAUSE_S_ENV, VectorStore, active_index, emb_root

from .conftest import GAP_HANDBOOK, ROOT, write_config

pytestmark = [pytest.mark.celery, pytest.mark.slow]

RUNS = Path(__file__).with_name("celery_runs.py")
SHARDS, PER_SHARD = 4, 12  # four ingest batches (embedding shards) of real demo records
HANDBOOK = GAP_HANDBOOK
_redis_dbs = itertools.count(1)


@pytest.fixture(scope="module")
def redis():
    if reason := missing():
        unavailable(f"the celery tests need a broker and dagster-celery: {reason}")
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def deployment(redis, pg_server, tmp_path):
    """Environment of every process of one deployment: a fresh Dagster database (scripts/dagster-postgres.yaml in
    DAGSTER_HOME), broker and result backend in two fresh Redis databases, and the executor file."""
    url = urlparse(pg_server.new_database("dagster"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "scripts" / "dagster-postgres.yaml", home / "dagster.yaml")
    broker, backend = next(_redis_dbs), next(_redis_dbs)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RA_", "DAGSTER_"))}
    env.update({
        "DAGSTER_HOME": str(home), "DAGSTER_PG_HOST": str(url.hostname), "DAGSTER_PG_PORT": str(url.port),
        "DAGSTER_PG_DB": url.path[1:], "DAGSTER_PG_USERNAME": str(url.username), "DAGSTER_PG_PASSWORD": "",
        "RA_CELERY_BROKER": redis.url(broker), "RA_CELERY_BACKEND": redis.url(backend),
        "RA_CELERY_YAML": str(ROOT / "scripts" / "dagster-celery.yaml"), "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
    })  # fmt: skip
    # docs/deploy.md's "once" step before any worker starts: the instance's tables (workers started together on an
    # empty database each create them, and all but one died on 'type "alembic_version" already exists')
    migrated = subprocess.run([str(BIN / "dagster"), "instance", "migrate"], env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return env


@pytest.fixture
def workers(tmp_path):
    """start(name, env) -> a started CeleryWorker; every worker started is stopped at the end (SIGTERM, SIGKILL)."""
    started: list[CeleryWorker] = []

    def start(name: str, env: dict[str, str]) -> CeleryWorker:
        worker = CeleryWorker(name, env, Path(env["RA_CELERY_YAML"]), tmp_path / f"{name}.log").start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
    assert not [w.name for w in started if w.alive()], "a worker outlived its stop"


class Background:
    result: dict


@contextmanager
def run_in_background(env: dict[str, str], cwd: Path, *args: str, timeout: float = 900) -> Iterator[Background]:
    """`celery_runs.py ARGS` in its own process group while the block runs; then its RESULT (`.result`). The group
    (with the runs it forked) is stopped on timeout, on failure and at the end."""
    process = start_group([sys.executable, str(RUNS), *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    started, done = time.monotonic(), Background()
    try:
        yield done
        try:
            out, err = process.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"celery_runs.py {' '.join(args)} still running after {timeout:.0f}s") from None
        assert process.returncode == 0, err[-4000:]
        done.result = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    finally:
        stop_group(process, grace=5)


def run_step(env: dict[str, str], cwd: Path, *args: str, timeout: float = 900) -> dict:
    """`celery_runs.py ARGS` in its own process group, waited for; its RESULT."""
    with run_in_background(env, cwd, *args, timeout=timeout) as done:
        pass
    return done.result


# ---------------------------------------------------------------------------- embedding shards


def shard_config(project: Path) -> Path:
    path = project / "config.toml"
    path.write_text('[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = true\n'
                    f"[embedding]\nrefresh_threshold = {PER_SHARD}\nchunk_size = 4\n")  # fmt: skip
    return path


@pytest.fixture(scope="module")
def shard_project(redis, tmp_path_factory):
    """Four ingest batches of real demo abstracts, imported, nothing embedded; and the index one process builds from
    it (every shard run then the index run, in process, on its own instance): {pmid: E vector}."""
    from ra_agent.ingest.importers import import_file
    from ra_agent.workspace import open_store

    root = tmp_path_factory.mktemp("celery_shards")
    project = root / "project"
    project.mkdir()
    rows = [r for r in demo_rows() if r["abstract"].strip()][: SHARDS * PER_SHARD]
    cfg = load_config(shard_config(project))
    with open_store(cfg) as store:
        import_file(store, write_demo_subset(root / "subset.csv", rows), cfg)
        assert len(store.batches()) == SHARDS
    baseline = root / "baseline"
    shutil.copytree(project, baseline)
    (root / "baseline_home").mkdir()
    env = {**os.environ, "RA_CONFIG": str(baseline / "config.toml"), "DAGSTER_HOME": str(root / "baseline_home"),
           "HF_HUB_OFFLINE": "1"}  # fmt: skip
    run_step(env, baseline, "embed_in_process")
    folder = emb_root(baseline / "data") / str(active_index(baseline / "data"))
    return project, VectorStore(folder)


def same_vectors(folder: VectorStore, baseline: VectorStore) -> None:
    """The same PMIDs, each with the same E vector (row order follows commit order, which concurrent shards change)."""
    assert folder.verify() == [] and baseline.verify() == []
    assert len(folder) == len(baseline) == SHARDS * PER_SHARD
    assert np.array_equal(folder.pmids, baseline.pmids)
    assert np.array_equal(folder.get(baseline.pmids), baseline.get(baseline.pmids))
    assert (folder.model, folder.version, folder.families) == (baseline.model, baseline.version, baseline.families)


def overlap(spans: list[tuple[float, float]]) -> int:
    """Largest number of spans running at one instant."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    running = peak = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    return peak


def test_a_backfill_spreads_the_shards_over_the_workers_and_the_index_equals_a_single_process_one(
    shard_project, deployment, workers, tmp_path
):
    """The UI's backfill of the embeddings group on the celery location: one run per shard (its multi-run policy),
    launched by the run queue as their own processes, their steps on the workers; the pool of 2 slots holds with 3
    workers free (never 3 shard steps at once, 2 did run together); then the index run, equal to one process's."""
    template, baseline = shard_project
    project = tmp_path / "project"
    shutil.copytree(template, project)
    env = {**deployment, "RA_CONFIG": str(project / "config.toml")}
    pool = [workers(name, env) for name in ("w1", "w2", "w3")]
    for worker in pool:
        worker.wait_ready(180)

    done = run_step(env, project, "backfill_celery", "2", timeout=1500)  # the `embedding` pool at 2 slots

    assert done["status"] == "COMPLETED_SUCCESS" and all(r["success"] for r in done["runs"])
    shard_runs = [r for r in done["runs"] if r["partition"]]
    (index_run,) = [r for r in done["runs"] if not r["partition"]]
    assert sorted(r["partition"] for r in shard_runs) == sorted(done["batches"]) and len(shard_runs) == SHARDS
    assert all(r["assets"] == ["embedding_shards"] for r in shard_runs) and index_run["assets"] == ["embedding_index"]
    shard_steps = [s for r in shard_runs for s in r["steps"] if s["step"] == "embedding_shards"]
    assert len(shard_steps) == SHARDS  # each shard ran once, on a worker
    by_worker = {w.hostname: sorted(r["partition"] for r in shard_runs if r["steps"][0]["worker"] == w.hostname)
                 for w in pool}  # fmt: skip
    print(f"backfill {done['seconds']:.0f} s; shards by worker: {by_worker}")
    assert len({s["worker"] for s in shard_steps}) >= 2  # the backfill spread over the workers
    # the pool holds across the runs (slots in PostgreSQL): with 3 workers free, never more than 2 shard steps at
    # once, and 2 did run at once
    assert overlap([(s["start"], s["end"]) for s in shard_steps]) == 2
    assert min(s["start"] for s in index_run["steps"]) >= max(s["end"] for s in shard_steps)  # the index after them
    embedded = [m for r in shard_runs for m in r["materialized"] if m["asset"] == "embedding_shards"]
    assert sorted(m["embedded"] for m in embedded) == [PER_SHARD] * SHARDS

    data = project / "data"
    assert active_index(data) == active_index(baseline.root.parents[1])
    same_vectors(VectorStore(emb_root(data) / str(active_index(data))), baseline)


# ---------------------------------------------------------------------------- a worker lost mid-step


def test_a_worker_killed_inside_an_append_loses_nothing_and_the_step_runs_on_the_other(shard_project, deployment,
                                                                                       workers, tmp_path):  # fmt: skip
    template, baseline = shard_project
    project = tmp_path / "project"
    shutil.copytree(template, project)
    # Redis hands an unacknowledged step back to the queue after the visibility timeout (45 s here, 6 h in
    # scripts/dagster-celery.yaml: above the longest step); swept every second
    executor = write_executor_yaml(tmp_path / "celery.yaml", visibility_timeout=45, unacked_restore_interval=1,
                                   unacked_restore_throttle=1)  # fmt: skip
    env = {**deployment, "RA_CONFIG": str(project / "config.toml"), "RA_CELERY_YAML": str(executor)}
    # w1 stops inside its first append, after writing vectors and PMIDs past the committed count
    doomed = workers("w1", {**env, PAUSE_AT_ENV: "after_data", PAUSE_S_ENV: "600"})
    doomed.wait_ready(180)
    from ra_agent.workspace import open_store

    with open_store(load_config(project / "config.toml")) as store:
        partition = store.batches()[0]["batch_id"]
    run = start_group([sys.executable, str(RUNS), "shard_celery", partition], env=env, cwd=project,
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        folder = emb_root(project / "data")
        rows = lambda: sum(p.stat().st_size for p in folder.glob("*/rows.i64"))  # noqa: E731
        deadline = time.monotonic() + 300
        while rows() == 0:  # w1 took the step (prefetch 1: it holds no other) and wrote past the commit point
            if run.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the shard step never reached its append: {run.communicate(timeout=5)}")
            time.sleep(0.2)
        survivor = workers("w2", env)  # w1 holds the step, so w2 only takes it once the broker gives it back
        survivor.wait_ready(180)
        doomed.kill()  # the whole worker, main process and pool, SIGKILL: a node lost
        (slug,) = [p.name for p in folder.iterdir()]
        torn = VectorStore(folder / slug)  # what any reader sees now: the uncommitted tail is not there
        assert len(torn) == 0 and rows() > 0 and torn.verify() == []

        out, err = run.communicate(timeout=600)
    finally:
        stop_group(run, grace=5)
    assert run.returncode == 0, err[-4000:]
    result = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    assert result["success"], result["failure"]
    executions = [s["worker"] for s in result["steps"] if s["step"] == "embedding_shards"]
    # delivered again, to the live worker; on a loaded machine the survivor's run can outlast the 45 s visibility
    # timeout, and Redis then hands the step out once more: that run finds every vector present (steps may run
    # twice, scripts/dagster-celery.yaml says, and ra's tolerate it)
    assert executions[0] == doomed.hostname and executions[1:] and set(executions[1:]) == {survivor.hostname}
    first, *again = [m for m in result["materialized"] if m["asset"] == "embedding_shards"]
    assert first["embedded"] == PER_SHARD and first["already_present"] == 0
    assert all(m["embedded"] == 0 and m["already_present"] == PER_SHARD for m in again)

    vectors = VectorStore(folder / slug)
    assert vectors.verify() == [] and len(vectors) == PER_SHARD == len(np.unique(vectors.row_pmids))
    assert np.array_equal(vectors.get(vectors.pmids), baseline.get(vectors.pmids))  # the baseline's vectors

    again = run_step(env, project, "shard_celery", partition)  # a re-run completes and finds nothing to do
    (rerun,) = [m for m in again["materialized"] if m["asset"] == "embedding_shards"]
    assert again["success"] and rerun["embedded"] == 0 and rerun["already_present"] == PER_SHARD
    assert len(VectorStore(folder / slug)) == PER_SHARD


# ---------------------------------------------------------------------------- the agent flow


def test_the_agent_flow_through_celery_gives_the_local_runner_reports(demo_project, deployment, pg_server, workers,
                                                                      request):  # fmt: skip
    from ra_agent.agent.goal import GoalStore
    from ra_agent.workspace import open_store

    from .conftest import store_on_postgres
    from .test_dagster_flow import history_shape, labels_of

    config = write_config(demo_project)
    store_url = pg_server.new_database()
    store_on_postgres(demo_project, store_url)  # on two machines ra's store is a server too
    config.write_text(config.read_text() + f'[store]\nurl = "{store_url}"\n')
    env = {**deployment, "RA_CONFIG": str(config)}
    pool = [workers(name, env) for name in ("w1", "w2")]
    for worker in pool:
        worker.wait_ready(180)

    started = run_step(env, demo_project, "handbook_celery", HANDBOOK)
    assert started["success"] and started["steps"][0]["worker"] in {w.hostname for w in pool}
    goal_id = started["output"]
    with run_in_background(env, demo_project, "agent_celery", timeout=1500) as driving:
        # meanwhile (unless the session has it already) the same handbook on a fresh copy, through the local runner
        local_cfg, local_state = request.getfixturevalue("local_gap_run")
    driven = driving.result
    assert driven["last_skip"] == "no goal to run (1 stopped)"
    runs = driven["runs"]
    for run in [started, *runs]:
        print(f"{run['job']:<22} {run['partition'] or '':<14} {run['seconds']:>6.1f} s  "
              f"{', '.join(sorted({s['worker'] for s in run['steps']}))}  ({len(run['steps'])} steps)")  # fmt: skip
    assert runs and all(r["success"] for r in runs)
    assert all(r["steps"] for r in runs)  # every run's steps executed on a worker
    used = {s["worker"] for r in [started, *runs] for s in r["steps"]}
    assert used == {w.hostname for w in pool}
    assert {r["job"] for r in runs} >= {
        "agent_cycle_job",
        "agent_search_job",
        "agent_questions_job",
        "agent_reports_job",
    }

    cfg = load_config(config)
    with open_store(cfg) as store:
        state = GoalStore(cfg.data_dir, store).load(goal_id)
    assert state.status == "stopped"

    assert history_shape(state, labels_of(cfg)) == history_shape(local_state, labels_of(local_cfg))
    reports = report_texts(cfg.data_dir, state, labels_of(cfg))
    local_reports = report_texts(local_cfg.data_dir, local_state, labels_of(local_cfg))
    assert reports and reports.keys() == local_reports.keys()
    for name, text in reports.items():  # a difference shows as a diff of the two reports
        diff = difflib.unified_diff(local_reports[name].splitlines(), text.splitlines(), "local", "celery", lineterm="")
        assert text == local_reports[name], "\n".join(diff)


def report_texts(data_dir: Path, state, labels: dict[str, str]) -> dict[str, str]:
    """Each report the goal wrote, by path, with the goal id and cluster ids replaced (both embed creation times) and
    the times it states (when it was generated, when the metrics were computed) masked."""
    out = {}
    for event in state.events("report_written"):
        text = (data_dir / event["path"]).read_text(encoding="utf-8")
        name = event["path"]
        for old, new in [(state.goal_id, "GOAL"), *labels.items()]:
            text, name = text.replace(old, new), name.replace(old, new)
        out[name] = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "TIME", text)  # generated / computed at
    return out


# ---------------------------------------------------------------------------- the executor file


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("execution:\n  config:\n    broker: 3\n", "execution.config.broker: Invalid scalar"),
        ("execution:\n  config:\n    brokr: redis://x\n", 'execution.config: Received unexpected config entry "brokr"'),
        ("execution:\n  config:\n    retries: {enabled: 5}\n", "execution.config.retries.enabled: Value at path"),
        ("execution: [1]\n", "execution.config: expected a mapping"),
        ("execution:\n  config: {broker: [\n", "line 3: not valid YAML"),
    ],
)
def test_a_bad_executor_file_is_one_line_naming_file_and_field(tmp_path, monkeypatch, text, expected):
    if reason := missing():
        unavailable(reason)
    from ra_assets.celery_location import CeleryConfigError, defs

    path = tmp_path / "dagster-celery.yaml"
    path.write_text(text)
    monkeypatch.setenv("RA_CELERY_YAML", str(path))
    with pytest.raises(CeleryConfigError) as error:
        defs()
    message = str(error.value)
    assert message.startswith(f"{path}: {expected}") and "\n" not in message


def test_the_shipped_executor_file_loads_and_names_its_broker_by_environment(monkeypatch):
    if reason := missing():
        unavailable(reason)
    from ra_assets.celery_location import DEFAULT_YAML, executor_config

    monkeypatch.delenv("RA_CELERY_YAML", raising=False)
    config = executor_config(DEFAULT_YAML)
    assert config["broker"] == {"env": "RA_CELERY_BROKER"} and config["backend"] == {"env": "RA_CELERY_BACKEND"}
    source = config["config_source"]
    assert source["task_acks_late"] and source["task_reject_on_worker_lost"]
    assert source["broker_transport_options"]["visibility_timeout"] >= 6 * 3600


def test_the_celery_location_is_ra_definitions_with_shard_backfills_spread(monkeypatch):
    """ra_assets.celery_location holds what ra_assets.definitions holds (assets, checks, jobs, sensors), the
    executor aside; the embedding shards' backfill is RA_CELERY_SHARDS_PER_RUN partitions per run (1 by default),
    the single-process location's one run; a bad RA_CELERY_SHARDS_PER_RUN is one line naming it."""
    if reason := missing():
        unavailable(reason)
    import dagster as dg

    from ra_assets import definitions
    from ra_assets.celery_location import CeleryConfigError, defs

    monkeypatch.delenv("RA_CELERY_YAML", raising=False)
    base, celery = definitions.defs(), defs()

    def graph(d: dg.Definitions):
        repo = d.get_repository_def()
        return (sorted(k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()),
                sorted(str(k) for k in repo.asset_graph.asset_check_keys), sorted(j.name for j in repo.get_all_jobs()),
                sorted(s.name for s in repo.sensor_defs), sorted(s.name for s in repo.schedule_defs))  # fmt: skip

    assert graph(celery) == graph(base)
    shards = dg.AssetKey("embedding_shards")
    policy = lambda d: d.get_repository_def().asset_graph.get(shards).backfill_policy  # noqa: E731
    assert policy(base).max_partitions_per_run is None  # one run: the model loads once
    assert policy(celery).max_partitions_per_run == 1
    monkeypatch.setenv("RA_CELERY_SHARDS_PER_RUN", "8")
    assert policy(defs()).max_partitions_per_run == 8
    monkeypatch.setenv("RA_CELERY_SHARDS_PER_RUN", "0")
    with pytest.raises(CeleryConfigError, match=r"^environment RA_CELERY_SHARDS_PER_RUN: expected an integer >= 1"):
        defs()
