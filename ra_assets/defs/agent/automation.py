"""The agent in Dagster: a job that starts a goal from a handbook, one job per LLM cycle, and the agent sensor.

The sensor only decides (well inside the 60 s limit): per active goal it emits the
stage runs the last cycle asked for, one at a time, then one `agent_cycle` run once
they have finished. `run_key = goal:cycle:request` makes every tick idempotent across
daemon restarts; the JSON cursor records the last key emitted per goal. Goals are listed
afresh each tick, so goals spawned by propose_alternative_pico are picked up. A goal with a
PAUSE file is skipped until the file goes (its next cycle then resumes it); a goal that a live
process runs (`ra run` in a terminal holds its RUNNING.lock) is skipped without launching anything;
a failed stage run marks the goal `crashed` (`ra resume` retries it); [goal] max_cycles stops a
goal inside its next cycle, as in the local runner.
"""

import json
from collections import Counter

import dagster as dg

from ra_agent.agent import (
    GoalLock,
    GoalLocked,
    GoalStore,
    HandbookError,
    StageRequest,
    live_holder,
    mark_crashed,
    pause_requested,
    register_handbook,
    run_cycle,
    start_goal,
)
from ra_agent.evidence import QuestionSetError
from ra_assets.defs.clusters.assets import cluster_metrics, clusters
from ra_assets.defs.embeddings.assets import embedding_index
from ra_assets.defs.findings.assets import (
    cluster_expansion,
    mind_kb,
    pico_extractions,
    reports,
    review_questions,
)
from ra_assets.defs.ingest.assets import pubmed_search
from ra_assets.handbooks import handbook_choices
from ra_assets.partitions import (
    cluster_partitions,
    expansion_partitions,
    handbook_partitions,
    partition_name,
    search_query_partitions,
)
from ra_assets.resources import BrainResource, RaConfigResource, StoreResource

IN_FLIGHT = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
)
DONE = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


class CycleConfig(dg.Config):
    goal_id: str


HANDBOOKS = handbook_choices()


@dg.op(
    tags={"kind": "agent"},
    config_schema={
        "handbook": dg.Field(
            HANDBOOKS.enum,
            default_value=HANDBOOKS.default,
            description=f"A handbook of {HANDBOOKS.folder} (the list is read when the definitions load).",
        )
    },
)
def start_goal_op(context: dg.OpExecutionContext, ra: RaConfigResource, store: StoreResource,
                  brain: BrainResource) -> str:  # fmt: skip
    """Validate the handbook (strict front matter), create the goal and add the handbook's review_questions
    partition (its key); the agent sensor takes it from here."""
    handbook = HANDBOOKS.path(context.op_config["handbook"])
    cfg = ra.get_config()
    with store.get_client() as db:
        try:
            state = start_goal(cfg, db, handbook, brain.get_client(db).name)
            key = register_handbook(cfg, handbook)
        except (HandbookError, QuestionSetError) as exc:  # a user's file: one line naming it, no stack around it
            raise dg.Failure(description=str(exc), metadata={"handbook": str(handbook)}) from None
    if not context.instance.has_dynamic_partition(partition_name(handbook_partitions), key):
        context.instance.add_dynamic_partitions(partition_name(handbook_partitions), [key])
    context.log.info(f"goal {state.goal_id} created from {handbook.name} ({state.primary_goal}: {state.topic})")
    context.add_output_metadata({"goal_id": state.goal_id, "handbook": str(handbook), "topic": state.topic,
                                 "handbook_key": key})  # fmt: skip
    return state.goal_id


@dg.job(
    description="Start a goal from a handbook: pick one of handbooks/*.md in the Launchpad config "
    "(`ops.start_goal_op.config.handbook`); the agent sensor then runs its cycles and stages, tagged ra/goal and ra/cycle."
)
def handbook_job():
    start_goal_op()


@dg.op(pool="llm", tags={"kind": "agent"})
def agent_cycle_op(context: dg.OpExecutionContext, config: CycleConfig, ra: RaConfigResource,
                   store: StoreResource, brain: BrainResource) -> None:  # fmt: skip
    """Exactly one agent cycle: the LLM call happens here, never in the sensor."""
    cfg = ra.get_config()
    with store.get_client() as db:
        model = brain.get_client(db)
        try:
            with GoalLock(GoalStore(cfg.data_dir, db).goal_dir(config.goal_id), config.goal_id):
                outcome = run_cycle(cfg, db, config.goal_id, model)
        except GoalLocked as exc:  # `ra run --goal` holds it: no cycle now, the sensor retries after
            context.log.warning(f"{exc}: cycle skipped")
            context.add_output_metadata({"goal_id": config.goal_id, "skipped": str(exc)})
            return
    context.log.info(f"cycle {outcome.cycle} of {outcome.goal_id}: {outcome.event} "
                     f"{outcome.tool or ''} -> {outcome.status} ({outcome.brain})")  # fmt: skip
    context.add_output_metadata({
        "goal_id": outcome.goal_id, "cycle": outcome.cycle, "event": outcome.event, "tool": outcome.tool or "",
        "status": outcome.status, "brain": outcome.brain, "requests": [r.label() for r in outcome.requests],
        "cycle_log": outcome.log_path or "",
        # how the brain was asked: json_schema (constrained), text_fallback (server refused it), text (rules)
        **{f"brain_{k}": v for k, v in (outcome.brain_call or {}).items() if v is not None},
    })  # fmt: skip


@dg.job(description="One agent cycle of one goal (launched by the agent sensor).")
def agent_cycle_job():
    agent_cycle_op()


def stage_job(stage: str, assets: list, what: str):
    return dg.define_asset_job(
        f"agent_{stage}_job",
        selection=assets,
        description=f"Agent stage `{stage}`: {what} Launched by agent_sensor for the cycle that asked for it "
        "(tags ra/goal, ra/cycle, ra/stage, ra/request).",
    )


STAGE_JOBS = {
    "search": stage_job("search", [pubmed_search], "one PubMed search the goal chose (partition = query key)."),
    "organise": stage_job("organise", [embedding_index, clusters, cluster_metrics],
                          "switch the index when complete, admit new papers to the clusters, refresh metrics."),
    "pico": stage_job("pico", [pico_extractions], "PICO of one cluster's abstracts and its PICO vectors."),
    "questions": stage_job("questions", [review_questions],
                           "the handbook's review questions over the corpus, judged again after it changed."),
    "expand": stage_job("expand", [cluster_expansion], "semantic or citation expansion of one frozen cluster."),
    "reports": stage_job("reports", [reports, mind_kb], "the goal's dossiers or SR drafts, then the Mind-KB."),
}  # fmt: skip
STAGE_PARTITIONS = {
    "search": search_query_partitions,
    "pico": cluster_partitions,
    "questions": handbook_partitions,
    "expand": expansion_partitions,
}


def embeddings_complete(cfg, db) -> bool:
    """Every paper with text has a vector in the configured model's folder (the batch sensor embeds them)."""
    from ra_agent.store import VectorStore, configured_slug, emb_root, missing_vectors

    folder = emb_root(cfg.data_dir) / configured_slug(cfg)
    if not (folder / "meta.json").exists():
        return False
    return missing_vectors(VectorStore(folder), db) == 0


def next_step(context, cfg, db, state) -> tuple[dg.RunRequest | None, list, str]:
    """The one run this goal needs now (stage or cycle), its partition requests, or why it waits."""
    runs = context.instance.get_runs(filters=dg.RunsFilter(tags={"ra/goal": state.goal_id}), limit=200)
    busy = [r.run_id[:8] for r in runs if r.status in IN_FLIGHT]
    if busy:
        return None, [], f"runs in flight ({', '.join(busy)})"
    if owner := cli_owner(cfg, db, state):  # `ra run` in a terminal runs it: launching its stages would run them twice
        return None, [], owner
    if state.status == "crashed":
        return None, [], f"crashed ({state.stop_reason()}); `ra resume {state.goal_id}` retries it"
    attempt = str(len(state.events("crashed")))  # `ra resume` after a crash retries the stages afresh
    tags = {"ra/goal": state.goal_id, "ra/cycle": str(state.cycle), "ra/attempt": attempt}
    for i, raw in enumerate(state.pending_asset_requests):
        request = StageRequest.from_dict(raw)
        finished = [r for r in runs if r.tags.get("ra/cycle") == str(state.cycle) and r.status in DONE
                    and r.tags.get("ra/request") == str(i) and r.tags.get("ra/attempt", "0") == attempt]  # fmt: skip
        if any(r.status == dg.DagsterRunStatus.SUCCESS for r in finished):
            continue
        if finished and state.is_active:  # the stage run failed or was cancelled: never leave it in_progress
            failed = finished[0]
            mark_crashed(
                cfg, db, state.goal_id, f"stage {request.label()}: run {failed.run_id[:8]} {failed.status.value}"
            )
            return None, [], f"crashed: stage {request.label()} run {failed.run_id[:8]} {failed.status.value}"
        if finished:
            continue
        if request.stage == "embed":
            if embeddings_complete(cfg, db):
                continue
            return None, [], "waiting for embedding shards (ingest_batch_sensor)"
        additions = []
        partitions = STAGE_PARTITIONS.get(request.stage)
        if partitions is not None and not context.instance.has_dynamic_partition(
            partition_name(partitions), request.key
        ):
            additions.append(partitions.build_add_request([request.key]))
        run = dg.RunRequest(
            job_name=STAGE_JOBS[request.stage].name,
            partition_key=request.partition,
            run_key=f"{state.goal_id}:{state.cycle}:{i}:{request.label()}"
            + (f":retry{attempt}" if attempt != "0" else ""),
            tags={**tags, "ra/request": str(i), "ra/stage": request.stage},
        )
        return run, additions, ""
    if state.status == "paused":
        pause = pause_requested(cfg, GoalStore(cfg.data_dir, db).goal_dir(state.goal_id))
        if pause:
            return None, [], f"paused by {pause} (remove it to resume)"
    elif not state.is_active:
        return None, [], f"status {state.status}"
    run = dg.RunRequest(
        job_name=agent_cycle_job.name,
        # the history length tells a resumed attempt of the same cycle from the one that paused
        run_key=f"{state.goal_id}:cycle:{state.cycle + 1}:{len(state.history)}",
        run_config=dg.RunConfig(ops={"agent_cycle_op": CycleConfig(goal_id=state.goal_id)}),
        tags={**tags, "ra/cycle": str(state.cycle + 1), "ra/stage": "cycle"},
    )
    return run, [], ""


def cli_owner(cfg, db, state) -> str:
    """Why the sensor leaves a goal alone that another process runs (no run of the sensor's is in flight): a live
    process holds its lock (`ra run`, `ra resume`), or its parent's, whose `ra run` runs its spawned goals next."""
    goals = GoalStore(cfg.data_dir, db)
    if holder := live_holder(goals.goal_dir(state.goal_id)):
        return f"run by {holder}: the sensor launches nothing for it"
    if state.parent_goal and (holder := live_holder(goals.goal_dir(state.parent_goal))):
        return f"spawned by {state.parent_goal}, which {holder} runs (it runs this goal next)"
    return ""


def finished(state, why: str) -> bool:
    """A goal with nothing left to run (stopped, error, or crashed before this tick): counted, not listed."""
    return why == f"status {state.status}" or (state.status == "crashed" and not why.startswith("crashed:"))


@dg.sensor(
    jobs=[agent_cycle_job, *STAGE_JOBS.values()],
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Per active goal: run the stages its last cycle asked for, then its next cycle (runs tagged "
    "ra/goal, ra/cycle, ra/stage; run_key goal:cycle:request). Logs only what it launches or marks crashed; "
    "otherwise the skip reason names the goals that wait and counts the finished ones.",
)
def agent_sensor(context: dg.SensorEvaluationContext, ra: RaConfigResource, store: StoreResource):
    cfg = ra.get_config()
    cursor = json.loads(context.cursor) if context.cursor else {}
    runs, additions, waiting, done = [], [], [], Counter()
    with store.get_client() as db:
        for state in GoalStore(cfg.data_dir, db).states():
            run, adds, why = next_step(context, cfg, db, state)
            if run is None:
                if finished(state, why):
                    done[state.status] += 1
                    continue
                if why.startswith("crashed:"):  # this tick marked it crashed: an action worth a log line
                    context.log.warning(f"goal {state.goal_id} {why}")
                waiting.append(f"{state.goal_id}: {why}")
                continue
            context.log.info(f"goal {state.goal_id}: {run.tags['ra/stage']} run (cycle {run.tags['ra/cycle']}, "
                             f"{run.job_name}{' ' + run.partition_key if run.partition_key else ''})")  # fmt: skip
            runs.append(run)
            additions.extend(adds)
            cursor[state.goal_id] = run.run_key
    if not runs:
        summary = ", ".join(f"{n} {status}" for status, n in sorted(done.items()))
        parts = waiting + ([f"finished goals: {summary}"] if summary else [])
        return dg.SkipReason("; ".join(parts) if waiting else "no goal to run" + (f" ({summary})" if summary else
                             " (launch handbook_job)"))  # fmt: skip
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=additions, cursor=json.dumps(cursor))
