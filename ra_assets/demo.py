"""The main job through Dagster: `python -m ra_assets.demo` (scripts/demo.sh), on the instance scripts/ui.sh opens.

usage: python -m ra_assets.demo [--handbook NAME|PATH] [--config PATH] [-v]

Environment: DAGSTER_HOME (required: the persistent instance; scripts/profile.sh sets `.dagster_home/`),
RA_CONFIG (default ./config.toml: its workspace is the demo's), RA_INGEST__OFFLINE / HF_HUB_OFFLINE (the
profile makes the demo offline on the bundled corpus). Every step is a Dagster run on that instance, so the
UI afterwards shows the materialisations, the asset checks and the runs (tagged ra/goal, ra/cycle, ra/stage):

1. `corpus_job`: papers (imports the bundled demo corpus) and references;
2. the ingest_batch_sensor's requests: one `ingest_batch` partition and one embedding_shards run per batch;
3. `organise_job`: embedding_index, clusters, cluster_metrics;
4. `handbook_job` with the handbook (default the seek-gap handbook), then the agent sensor's requests (cycles and
   stages of the goal and of the goals it spawns) until it has nothing left to run.

Runs carry the tags the daemon gives a sensor's runs, so `dagster dev` started afterwards replays none of them.
Prints one line per step and `wrote <path>` per report (as `ra demo`); exit 1 when a run fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from ra_agent.agent import GoalStore, closing_block, goal_outcome, spawned_goals, written_reports
from ra_agent.cli import error_line
from ra_agent.cliargs import CliError
from ra_agent.config import ConfigError, default_config_path, load_config
from ra_agent.workspace import open_store
from ra_assets.local import console_level, drive

log = logging.getLogger("ra_assets.demo")


class DemoFailed(RuntimeError):
    """A run of the demo failed; the message names the job and the run id."""


LOG_LEVEL = "WARNING"  # Dagster's console logger in the demo's runs (-v: INFO); the UI keeps every event


def run_job(defs: dg.Definitions, instance: dg.DagsterInstance, name: str, run_config: dict | None = None,
            **kwargs) -> dg.ExecuteInProcessResult:  # fmt: skip
    result = defs.resolve_job_def(name).execute_in_process(
        instance=instance, raise_on_error=False, run_config=console_level(run_config, LOG_LEVEL), **kwargs
    )
    if not result.success:
        raise DemoFailed(f"{name} failed (run {result.run_id[:8]}): {failure_of(result)}")
    return result


def failure_of(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            data = event.step_failure_data
            if data.user_failure_data is not None and data.user_failure_data.description:
                return data.user_failure_data.description
            return data.error.message.strip() if data.error else "step failed"
    return "run failed"


def check_outcomes(result: dg.ExecuteInProcessResult) -> str:
    """ "N checks", and each check not passed with what it found in words (its description)."""
    evaluations = result.get_asset_check_evaluations()
    failed = [e.check_name + (f" ({e.description})" if e.description else "") for e in evaluations if not e.passed]
    return f"{len(evaluations)} checks" + (f", not passed: {'; '.join(failed)}" if failed else "")


def handbook_choice(handbook: str, choices) -> str:
    """A handbook name of the Launchpad Enum from a name or a path inside handbooks/."""
    name = Path(handbook).stem if handbook.endswith(".md") else handbook
    if name not in choices.names:
        raise CliError(f"handbook {handbook!r} is not one of {choices.folder}: {', '.join(choices.names)}")
    return name


def goal_tree(goals: GoalStore, first: str) -> list:
    """The first goal and the goals it spawned (breadth first), as final states."""
    queue, seen, states = [first], set(), []
    while queue:
        goal_id = queue.pop(0)
        if goal_id in seen or not goals.exists(goal_id):
            continue
        seen.add(goal_id)
        state = goals.load(goal_id)
        states.append(state)
        queue += spawned_goals(state)
    return states


def brain_line(cfg, goal_id: str) -> str:
    """Which brain decides the goal's cycles, in words ("brain: rules:... (deterministic rules: no Ollama server answers
    at ...)"): the demo says it once here instead of the brain selection's warning in every run."""
    from ra_agent.llm import llm_brain

    with open_store(cfg) as store:
        name = GoalStore(cfg.data_dir, store).load(goal_id).brain
    if not name.startswith("rules"):
        return f"brain: {name}"
    why = 'config.toml [llm] brain = "rules"' if cfg.llm.brain == "rules" else llm_brain(cfg).unavailable_reason()
    return f"brain: {name} (deterministic rules, no LLM: {why or 'the LLM did not answer'}; docs/llm.md)"


def run_demo(config_path: Path, handbook: str, instance: dg.DagsterInstance, say=print,
             found: list[str] | None = None) -> list[str]:  # fmt: skip
    """Run the demo's steps on `instance`; returns the written report paths (the first goal's state when none).
    `found` collects one line per goal: its primary goal and its answer in plain words."""
    found = [] if found is None else found
    from ra_assets.definitions import defs as load_defs
    from ra_assets.defs.agent.automation import HANDBOOKS, agent_sensor
    from ra_assets.defs.embeddings.automation import ingest_batch_sensor

    defs = load_defs()
    cfg = load_config(config_path)
    choice = handbook_choice(handbook, HANDBOOKS)
    say(f"demo: Dagster instance {instance.root_directory}, workspace {cfg.data_dir}"
        f" ({'offline' if cfg.ingest.offline else 'online'})")  # fmt: skip
    corpus = run_job(defs, instance, "corpus_job")
    say(f"demo: corpus_job {corpus.run_id[:8]}: papers, references ({check_outcomes(corpus)})")
    shards: list[str] = []
    say(f"demo: embedding the corpus with {cfg.embedding.model_name} on the CPU (a few minutes on two cores; "
        "a progress line every 15 s)")  # fmt: skip
    drive(defs, instance, config_path, ingest_batch_sensor,
          on_run=lambda request, done: shards.append(f"{request.partition_key} {done.run_id[:8]}"), log_level=LOG_LEVEL)  # fmt: skip
    say(f"demo: embedding_shards: {len(shards)} new ingest batch(es) embedded" + (f" ({', '.join(shards)})"
                                                                                  if shards else ""))  # fmt: skip
    say("demo: clustering the vectors into topics (embedding_index, clusters, cluster_metrics)")
    organised = run_job(defs, instance, "organise_job")
    say(f"demo: organise_job {organised.run_id[:8]}: embedding_index, clusters, cluster_metrics "
        f"({check_outcomes(organised)})")  # fmt: skip
    started = run_job(defs, instance, "handbook_job",
                      run_config={"ops": {"start_goal_op": {"config": {"handbook": choice}}}})  # fmt: skip
    goal_id = started.output_for_node("start_goal_op")
    say(f"demo: handbook_job {started.run_id[:8]}: goal {goal_id} from {choice}; {brain_line(cfg, goal_id)}")
    runs: list[str] = []

    def on_run(request: dg.RunRequest, done: dg.ExecuteInProcessResult) -> None:
        runs.append(done.run_id)
        tags = request.tags
        say(f"demo: goal {tags.get('ra/goal')} cycle {tags.get('ra/cycle')} {tags.get('ra/stage')}"
            f"{'[' + request.partition_key + ']' if request.partition_key else ''}: {request.job_name} "
            f"{done.run_id[:8]} {'ok' if done.success else 'FAILED'}")  # fmt: skip

    last, _ = drive(defs, instance, config_path, agent_sensor, ticks=cfg.goal.max_cycles * 50 + 200, on_run=on_run,
                    raise_on_error=False, log_level=LOG_LEVEL)  # fmt: skip
    say(f"demo: agent sensor: {len(runs)} runs; {last.skip_message if last else 'tick limit reached'}")
    with open_store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        states = goal_tree(goals, goal_id)
        written = [path for state in states for path in written_reports(cfg, state)]
        for state in states:
            say(f"demo: goal {state.goal_id} {state.status} after {state.cycle} cycles: {state.stop_reason() or '-'}")
            found.append(goal_outcome(cfg, state))
        return written or [str(goals.state_path(goal_id))]


class ProgressFormatter(logging.Formatter):
    """A long step's progress line under the run it belongs to ("demo:   run 03abe4c9: clusters: step 1/3: ..."):
    the same step in two runs (each goal's organise) reads as two lines, not one line twice."""

    def format(self, record: logging.LogRecord) -> str:
        run = getattr(record, "ra_run", "")
        return f"demo:   {'run ' + run + ': ' if run else ''}{record.getMessage()}"


class OnceFilter(logging.Filter):
    """Pass each distinct log message once (the brain selection warns in every run)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


def check_input(config: Path, handbook: str) -> None:
    """Raise a bad-input error (ConfigError, CliError, HandbookError, InputError) for a config that does not
    load, a handbook that is not one of the Launchpad's choices, or one that does not parse."""
    from ra_agent.cli import check_handbook
    from ra_assets.handbooks import handbook_choices

    cfg = load_config(config)
    choices = handbook_choices(config)
    check_handbook(cfg, choices.path(handbook_choice(handbook, choices)))


@contextmanager
def demo_logging(verbose: bool) -> Iterator[None]:
    """The demo's console: quiet unless `verbose` (the sensors' context.log lines duplicate the demo's own; a repeated
    warning shows once; long steps say how far they are). Undone on the way out, so a caller in the same process
    (a test, ra demo) keeps its own logging."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
    if verbose:
        yield
        return
    root = logging.getLogger()
    quiet = {"dagster": logging.WARNING, "ra_agent.llm.select": logging.ERROR}  # the handbook_job line names the brain
    saved = {name: logging.getLogger(name).level for name in quiet}
    progress = logging.getLogger("ra_assets.progress")  # long steps say how far they are
    before = (progress.level, progress.propagate)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(ProgressFormatter())
    once = [(h, OnceFilter()) for h in root.handlers]
    try:
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)
        progress.setLevel(logging.INFO)
        progress.propagate = False
        progress.addHandler(handler)
        for h, f in once:
            h.addFilter(f)
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        progress.setLevel(before[0])
        progress.propagate = before[1]
        progress.removeHandler(handler)
        for h, f in once:
            h.removeFilter(f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ra_assets.demo", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--handbook", default="seek_gap_ppi_gerd", help="a handbooks/*.md name or path")
    parser.add_argument("--config", default=str(default_config_path()), help="config.toml (default RA_CONFIG)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Dagster's and ra's logs")
    args = parser.parse_args(argv)
    with demo_logging(args.verbose):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    global LOG_LEVEL
    LOG_LEVEL = "INFO" if args.verbose else "WARNING"
    if not os.environ.get("DAGSTER_HOME"):
        print("ra demo: DAGSTER_HOME is not set (scripts/demo.sh sets .dagster_home/)", file=sys.stderr)
        return 2
    config = Path(args.config).resolve()
    try:  # bad input exits 2 before any run: the config, the handbook's name and the handbook itself
        check_input(config, args.handbook)
    except Exception as exc:
        code, message = error_line(exc)
        print(f"ra demo: {message}", file=sys.stderr)
        return code
    os.environ["RA_CONFIG"] = str(config)  # the definitions' resources read the same file
    try:
        with dg.DagsterInstance.get() as instance:
            found: list[str] = []
            written = list(dict.fromkeys(run_demo(config, args.handbook, instance, found=found)))  # one line a report
    except (DemoFailed, ConfigError) as exc:
        print(f"ra demo: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    for line in closing_block([p for p in written if not p.endswith(".json")], found):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
