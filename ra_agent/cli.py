"""The `ra` command line: ingest, import, embed, cluster, run handbooks, status.

Every error is one line on stderr, `ra: error: <file>[:<line>]: <field>: <what is wrong>`, with exit
code 2 for bad input and 1 for failures of the outside world (network, server) or of ra itself;
`--debug` shows the traceback instead. A reader that leaves early (`ra status | head -1`) ends the command
quietly with exit 141, as SIGPIPE ends other commands.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import date
from pathlib import Path

from ra_agent.cliargs import CliError, entrez_date, port_number, positive_int, resolve_handbook
from ra_agent.config import Config, ConfigError, default_config_path, load_config
from ra_agent.fileio import InputError
from ra_agent.store.db import Store
from ra_agent.terminal import LOG_LEVELS, log_handler, quiet_exit_on_closed_stdout, stdout_closed

log = logging.getLogger("ra")


EXIT_BAD_INPUT, EXIT_WORLD = 2, 1


def error_line(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-line message) for an exception reaching the command line."""
    text = " ".join(str(exc).split())
    bad_input = (ConfigError, CliError, InputError, *loaded("ra_agent.agent.success", "HandbookError"),
                 *loaded("ra_agent.agent.goal", "GoalStateError"),
                 *loaded("ra_agent.evidence.questions.question_set", "QuestionSetError"),
                 *loaded("ra_agent.ingest.http", "ApiRequestError"))  # the service refused this request  # fmt: skip
    if isinstance(exc, bad_input):
        return EXIT_BAD_INPUT, text
    if isinstance(exc, loaded("ra_agent.ingest.http", "ApiError")):
        return EXIT_WORLD, text
    if isinstance(exc, OSError) and exc.filename:
        return EXIT_BAD_INPUT, f"{exc.filename}: {exc.strerror or text}"
    if isinstance(exc, MemoryError):
        return EXIT_WORLD, "out of memory (rerun with --debug for the traceback)"
    return EXIT_WORLD, f"internal error: {type(exc).__name__}: {text} (rerun with --debug for the traceback)"


def loaded(module: str, name: str) -> tuple[type, ...]:
    """The exception class `module.name` when that module is loaded (an error can only be one of its classes
    then), else (): reporting an error imports nothing, so bad input exits at once."""
    found = sys.modules.get(module)
    return (getattr(found, name),) if found is not None else ()


def report_error(exc: BaseException) -> int:
    code, message = error_line(exc)
    print(f"ra: error: {message}", file=sys.stderr)
    return code


@contextmanager
def progress_bar(desc: str, total: int | None = None, unit: str = "rec"):
    """A tqdm bar on stderr (count, rate and time left once the total is known), yielding a callback
    progress(done, total=None). Shown on a terminal; RA_PROGRESS=1 shows it also when stderr is a file or a pipe."""
    from tqdm import tqdm

    disable = False if os.environ.get("RA_PROGRESS") == "1" else None  # None: tqdm's "only on a terminal"
    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=disable, dynamic_ncols=True)

    def update(done: int, new_total: int | None = None) -> None:
        if new_total is not None and bar.total != new_total:
            bar.total = new_total
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def _store(cfg: Config):
    from ra_agent.workspace import open_store

    return open_store(cfg)


def cmd_init(args: argparse.Namespace) -> int:
    cfg = _config(args)
    with _store(cfg) as store:
        print(f"workspace {cfg.data_dir} ready (schema v{store.schema_version})")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """One search (--query, registered first) or a refresh of every registered one; a failing search is
    reported and recorded (search_run.status) and the others still run.

    A --query NCBI rejects is not registered (it would fail every refresh). A registered search that NCBI
    rejects exactly as at its last run is reported in the refresh summary without raising the exit code:
    the exit code is that of the worst new failure."""
    from ra_agent.ingest.eutils import EutilsError, HistoryExpired
    from ra_agent.ingest.http import ApiError
    from ra_agent.ingest.pipeline import search_and_ingest
    from ra_agent.workspace import query_key, query_runs, register_query, registered_queries, unregister_query

    if args.query is not None and not args.query.strip():
        raise CliError("ingest: --query: empty (give a PubMed query, or no --query to refresh the registered ones)")
    cfg = _config(args)
    status = 0
    with _store(cfg) as store:
        last_runs = query_runs(store)
        if args.query:
            new_query = query_key(args.query) not in last_runs
            register_query(store, args.query, args.since, args.retmax)
            queries = [(args.query, args.since, args.retmax)]
        else:
            new_query = False
            queries = [(q["query"], args.since or q["since"], args.retmax or q["retmax"])
                       for q in registered_queries(store).values()]  # fmt: skip
            if not queries:
                raise CliError("no --query given and no registered searches to refresh (ra ingest --query '...')")
        for query, since, retmax in queries:
            try:
                with progress_bar(f"ingest {query[:40]!r}") as bar:
                    result = search_and_ingest(cfg, store, query, since=since, retmax=retmax, progress=bar)
            except ApiError as exc:  # NCBI rejected the query: recorded as failed; go on with the others
                code, message = error_line(exc)
                rejected = isinstance(exc, EutilsError) and not isinstance(exc, HistoryExpired)
                last = last_runs.get(query_key(query)) or {}
                if rejected and new_query:
                    unregister_query(store, query_key(query))
                    print(f"ra: error: {query!r}: search: rejected: {message}; not registered", file=sys.stderr)
                elif rejected and last.get("status") == "failed" and last.get("error") == str(exc):
                    print(f"{query!r}: rejected again, as at its last run: {message} (not a new failure; "
                          f"ra queries remove {query_key(query)} drops it)")  # fmt: skip
                    continue
                else:
                    print(f"ra: error: {query!r}: search: rejected: {message}", file=sys.stderr)
                status = max(status, code)
                continue
            mode = "OFFLINE (local corpus)" if result.offline else "online"
            print(f"{query!r}: {result.count} hits, {result.fetched} fetched, {result.inserted} new, "
                  f"{result.updated} updated [{mode}] {result.status}")  # fmt: skip
            if result.incomplete:
                what = {"failed": "search failed", "partial": f"search cut short after {result.fetched} records"}
                print(f"ra: error: {query!r}: search: {what.get(result.status, 'E-utilities unreachable')}: "
                      f"{' '.join(result.error.split())}", file=sys.stderr)  # fmt: skip
                status = max(status, EXIT_WORLD)
    return status


def cmd_queries(args: argparse.Namespace) -> int:
    """List the registered searches with their last run, or remove one (by query text or key)."""
    from ra_agent.workspace import query_key, query_runs, unregister_query

    cfg = _config(args)
    with _store(cfg) as store:
        if args.action == "remove":
            if not args.query:
                raise CliError("queries remove: query: give the query text or its key (ra queries lists them)")
            wanted = " ".join(args.query)
            key = wanted if wanted in query_runs(store) else query_key(wanted)
            removed = unregister_query(store, key)
            if removed is None:
                raise CliError(f"{cfg.data_dir}: query: no registered search {wanted!r} (ra queries lists them)")
            print(f"removed {key} {removed!r}; its papers stay in the corpus")
            return 0
        runs = query_runs(store)
        if not runs:
            print("no registered searches (ra ingest --query '...')")
        for key, q in runs.items():
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(q["ran_ts"])) if q["ran_ts"] else "never run"
            counts = f"{q['count']} hits, {q['fetched']} fetched" if q["ran_ts"] else ""
            print(f"{key} {q['status'] or 'new':<8} {when:<16} {counts:<24} {q['origin']:<12} {q['query']!r}"
                  + (f"\n    {'error' if q['status'] in ('failed', 'partial') else 'note'}: {q['error']}"
                     if q["error"] else ""))  # fmt: skip
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from ra_agent.ingest.importers import import_file

    cfg = _config(args)
    status = 0
    with _store(cfg) as store:
        for name in args.files:  # a bad file is reported and the next one still imported
            path = Path(name)
            try:
                with progress_bar(f"import {path.name}") as bar:
                    summary = import_file(store, path, cfg, progress=bar)
            except InputError as exc:
                status = max(status, report_error(exc))
                continue
            print(f"{path}: {summary.inserted} new, {summary.updated} updated, {summary.unchanged} unchanged, "
                  f"{len(summary.problems)} problems")  # fmt: skip
            for kind, items in (("problem (record skipped)", summary.problems), ("warning (record kept)",
                                                                                 summary.warnings)):  # fmt: skip
                for item in items[:20]:
                    print(f"  {kind}: {item.reason}", file=sys.stderr)
                if len(items) > 20:
                    print(f"  ... and {len(items) - 20} more", file=sys.stderr)
            if summary.problems:
                status = max(status, EXIT_BAD_INPUT)
    return status


def cmd_embed(args: argparse.Namespace) -> int:
    from ra_agent.agent.stages import pico_rebuilder
    from ra_agent.embed.index import embed_all

    cfg = _config(args)
    with _store(cfg) as store, progress_bar("embed", unit="paper") as bar:
        result = embed_all(cfg, store, progress=bar, before_switch=pico_rebuilder(cfg))
    print(
        f"embedded {result.embedded} papers into {result.folder} ({result.skipped} skipped); active index: {result.active}"
    )
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from ra_agent.topics.organise import organise

    cfg = _config(args)
    with _store(cfg) as store, progress_bar("cluster", unit="step") as bar:

        def stage(step: int, steps: int, what: str) -> None:  # a bar over the stages, each named as it starts
            print(f"cluster: {what}", file=sys.stderr)
            bar(step, steps)

        result = organise(cfg, store, progress=stage)
    print(result.table)
    seed = f"; UMAP seed {result.reduce_seed} ([clustering] reduce_seed)" if result.reduce_seed is not None else ""
    print(f"{result.active_clusters} active clusters ({result.formed} formed, {result.assigned} assigned, "
          f"{result.unassigned} unassigned{seed}); map: {result.map_png}")  # fmt: skip
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ra_agent.agent.control import status_lines
    from ra_agent.ingest.corpus import corpus_summary

    cfg = _config(args)
    with _store(cfg) as store:
        summary = corpus_summary(store)
        print(f"workspace: {cfg.data_dir}")
        print(f"papers: {summary['paper']} ({summary['paper_with_abstract']} with abstract), "
              f"refs: {summary['ref']} (+{summary['ref_unmapped']} unmapped DOIs), batches: {summary['ingest_batch']}")  # fmt: skip
        for line in status_lines(cfg, store):
            print(line)
    return 0


def _run_goals(cfg: Config, store: Store, goal_id: str, brain, max_cycles: int | None) -> None:
    """Run a goal, then the goals it spawned, printing each cycle, each goal's end, reason and reports."""
    from ra_agent.agent.loopguard import GoalLocked
    from ra_agent.agent.runner import run_with_spawned

    def on_goal(state, parent) -> None:
        print(f"goal {state.goal_id} spawned by {parent.goal_id}: {state.topic!r} "
              f"(handbook {state.handbook_path}); running it now")  # fmt: skip

    try:
        states = run_with_spawned(cfg, store, goal_id, brain, max_cycles=max_cycles, on_goal=on_goal,
                                  progress_factory=progress_bar,
                                  on_cycle=lambda o: print(f"  cycle {o.cycle}: {o.event}"
                                                           f"{' ' + o.tool if o.tool else ''} -> {o.status}"))  # fmt: skip
    except GoalLocked as exc:
        raise CliError(str(exc)) from None
    for state in states:
        reason = state.stop_reason()
        print(f"goal {state.goal_id}: {state.status} after {state.cycle} cycles" + (f": {reason}" if reason else ""))
        for h in state.events("alternative_proposed"):
            print(f"  spawned goal {h['new_goal']}: {h.get('new_PICO', '')!r} ({h.get('handbook', '')})")
        for h in state.events("report_written"):
            same = " (the same verdict on the same question: one report)" if h.get("same_question") else ""
            print(f"wrote {cfg.data_dir / h['path']}{same}")


def cmd_run(args: argparse.Namespace) -> int:
    from ra_agent.agent.control import interrupted_goal
    from ra_agent.agent.runner import start_goal
    from ra_agent.llm.select import brain_for

    cfg = _config(args)
    handbook = resolve_handbook(args.handbook, args.config)
    check_handbook(cfg, handbook)
    with _store(cfg) as store:
        goal_id = _existing_goal(cfg, store, args.goal) if args.goal else ""
        if not goal_id and not args.new and (stuck := interrupted_goal(cfg, store, handbook)) is not None:
            print(f"goal {stuck.goal_id} of {handbook.name} was interrupted after cycle {stuck.cycle}: continuing it "
                  "(ra run --new starts another goal)")  # fmt: skip
            goal_id = stuck.goal_id
        brain = brain_for(cfg, store)
        if not goal_id:
            goal_id = start_goal(cfg, store, handbook, brain.name).goal_id
            print(f"goal {goal_id} started from {handbook} (brain: {brain.label()})")
        _run_goals(cfg, store, goal_id, brain, args.max_cycles)
    return 0


def cmd_control(args: argparse.Namespace) -> int:
    from ra_agent.agent.goal import GoalStore
    from ra_agent.agent.guards import PAUSE_FILE, STOP_FILE, clear_control, request_control

    cfg = _config(args)
    with _store(cfg) as store:
        goals = GoalStore(cfg.data_dir, store)
        _existing_goal(cfg, store, args.goal)
        goal_dir = goals.goal_dir(args.goal)
        if args.command == "resume":
            return _resume(cfg, store, goals, args, [*clear_control(cfg, STOP_FILE, goal_dir),
                                                     *clear_control(cfg, PAUSE_FILE, goal_dir)])  # fmt: skip
        path = request_control(cfg, STOP_FILE if args.command == "stop" else PAUSE_FILE, goal_dir)
        print(f"goal {args.goal}: {args.command} requested ({path}); honoured before its next cycle")
    return 0


def check_handbook(cfg: Config, path: Path) -> None:
    """InputError/HandbookError (one line, file and line) for a handbook that is missing, huge, binary,
    not UTF-8, does not parse or has a Seed_query no search may hold, before any goal is created."""
    from ra_agent.agent.handbook import check_seed_query, parse_handbook
    from ra_agent.fileio import read_text_capped

    text = read_text_capped(path, cfg.goal.handbook_max_bytes, "handbook", "[goal] handbook_max_bytes")
    check_seed_query(parse_handbook(text, path), cfg.llm.max_arg_chars)


def _existing_goal(cfg: Config, store: Store, goal_id: str) -> str:
    """`goal_id` when it names a goal of this workspace, else a one-line CliError (never a path outside it)."""
    from ra_agent.agent.goal import GOAL_ID_RE, GoalStore

    goals = GoalStore(cfg.data_dir, store)
    if not GOAL_ID_RE.match(goal_id):
        raise CliError(f"{goals.root}: goal: {goal_id!r} is not a goal id (12 hex digits; ra status lists them)")
    if not goals.exists(goal_id):
        raise CliError(f"{goals.root}: goal: no goal {goal_id} in this workspace (ra status lists them)")
    return goal_id


def _resume(cfg: Config, store: Store, goals, args: argparse.Namespace, removed: list[Path]) -> int:
    """`ra resume`: remove the goal's STOP/PAUSE files; a goal in error or crashed goes back to in_progress and
    is retried now by the local runner (its pending stages first) unless --no-run; an in_progress goal that no live
    process runs (interrupted: its process was killed) is continued the same way; say what was done."""
    from ra_agent.agent.control import in_progress_resume
    from ra_agent.llm.select import brain_for

    state = goals.load(args.goal)
    for path in removed:
        print(f"goal {args.goal}: removed {path}")
    old = state.status
    if old == "stopped":
        print(f"goal {args.goal}: stopped, nothing to resume ({state.stop_reason()})")
        return 0
    if old == "in_progress":  # its process died or was interrupted, or nothing runs it: continue it here
        continue_here, said = in_progress_resume(goals, state)
        print(f"goal {args.goal}: {said}")
        if not continue_here:
            return 0
        if args.no_run:
            print(f"goal {args.goal}: continues in the process that runs it (ra run --goal {args.goal}, or the agent "
                  "sensor)")  # fmt: skip
            return 0
        _run_goals(cfg, store, args.goal, brain_for(cfg, store), None)
        return 0
    state.set_status("in_progress", reason=f"ra resume (was {old}: {state.stop_reason() or 'no reason recorded'})")
    goals.save(state)
    print(f"goal {args.goal}: {old} -> in_progress")
    if old in ("paused", "paused_api", "stopped_manual") or args.no_run:
        print(
            f"goal {args.goal}: continues in the process that runs it (ra run --goal {args.goal}, or the agent sensor)"
        )
        return 0
    print(f"goal {args.goal}: retrying now (was {old})")
    _run_goals(cfg, store, args.goal, brain_for(cfg, store), None)
    return 0


def cmd_questions(args: argparse.Namespace) -> int:
    """`ra questions HANDBOOK`: the handbook's questions as its set holds them (computed when the corpus, the handbook
    or the [sr] knobs changed since), with the folder of its questions.json and dossiers."""
    from ra_agent.agent.questions import handbook_topic, load_question_set, map_files, questions_root

    cfg = _config(args)
    handbook = resolve_handbook(args.handbook, args.config)  # a name as `ra run` takes it, or a path
    check_handbook(cfg, handbook)
    handbook_topic(handbook)  # a handbook without a seed query is refused before the store opens
    with _store(cfg) as store:
        qset = load_question_set(cfg, store, handbook)
        drawn = map_files(cfg, store, qset) if args.map else None
    if args.changes or args.since:  # living evidence: what changed, from the handbook's history
        from ra_agent.agent.living import changes_lines

        lines, problems = changes_lines(cfg, qset, args.since)
        for problem in problems:  # an unreadable line of the history: named, skipped, kept
            print(f"ra: {problem}", file=sys.stderr)
        print("\n".join(lines))
        return 0
    print(f"judged by: {qset.judged_by}")
    print(f"topic: {qset.topic}; {qset.state.records} papers, {qset.eligible_reports} eligible reports, "
          f"{len(qset.questions)} questions")  # fmt: skip
    if qset.reason:
        print(qset.reason)
    for line in question_lines(qset):
        print(line)
    print(f"questions.json and one dossier per question: {questions_root(cfg) / qset.key}")
    if drawn is not None:
        print(drawn.statement or f"evidence-gap map:\n  {drawn.png}\n  {drawn.html}")
    return 0


def question_lines(qset) -> list[str]:
    """One line per question, as `ra questions` prints it: id, the question in words, studies and reports, verdict."""
    lines = []
    for q in qset.questions:
        indent = "  " if q.parent else ""
        scope = "" if q.in_scope else " [outside the handbook's scope]"
        lines.append(f"{indent}{q.id}  {q.in_words}{scope}  studies {len(q.studies)}, reports {len(q.trials)}  "
                     f"-> {q.verdict}: {q.verdict_reason}")  # fmt: skip
    return lines


def cmd_extract(args: argparse.Namespace) -> int:
    """`ra extract HANDBOOK --sheet FILE` writes the question's extraction sheet; `--from FILE` reads a reviewer's."""
    from ra_agent.agent import SheetError, export_sheet, import_sheet

    cfg = _config(args)
    handbook = resolve_handbook(args.handbook, args.config)
    check_handbook(cfg, handbook)
    try:
        with _store(cfg) as store:
            if args.sheet:
                done = export_sheet(cfg, store, handbook, Path(args.sheet), args.question)
            else:
                done = import_sheet(cfg, store, handbook, Path(args.from_), args.question)
    except SheetError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(done.lines()))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ra_agent.agent.closing import UI_AFTER_LOCAL, closing_block
    from ra_agent.agent.runner import run_demo

    cfg = _config(args)
    handbook = resolve_handbook(args.handbook, args.config)
    check_handbook(cfg, handbook)
    found: list[str] = []
    with _store(cfg) as store:
        written = list(dict.fromkeys(run_demo(cfg, store, handbook=handbook, progress_factory=progress_bar,
                                              found=found)))  # fmt: skip
    for path in written:
        print(f"wrote {path}")
    reports = [p for p in written if not p.endswith(".json")]
    print("\n".join(closing_block(reports, found, ui_says=UI_AFTER_LOCAL)))  # as scripts/demo.sh ends
    return 0


def cmd_llm(args: argparse.Namespace) -> int:
    """`ra llm serve` / `ra llm stop`: a local llama.cpp server with Gemma 3 270M (see docs/llm.md)."""
    from ra_agent.llm import serve

    cfg = _config(args)
    try:
        if args.action == "stop":
            info = serve.stop(cfg.data_dir)
            print(f"stopped the llama.cpp server (pid {info.pid})" if info else "no llama.cpp server was running")
            return 0
        info = serve.serve(cfg.data_dir, n_ctx=args.n_ctx, port=args.port, threads=args.threads)
    except serve.LlmServeError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(["# put these in config.toml (or export the variables) to use it:", *serve.settings(info)]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ra", description=__doc__)
    parser.add_argument("--config", default=str(default_config_path()), help="config.toml path")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="show ra's progress logs (INFO); -vv: debug logs (default: warnings and errors only)")  # fmt: skip
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        return p

    add("init", cmd_init, "create the workspace and database")
    p = add("ingest", cmd_ingest, "search PubMed and store the records (offline: the local corpus)")
    add_ingest_args(p)
    p = add("queries", cmd_queries, "list the registered searches with their last run, or remove one")
    p.add_argument("action", nargs="?", choices=("list", "remove"), default="list")
    p.add_argument("query", nargs="*", help="remove: the query text or its key (as listed)")
    p = add("import", cmd_import, "import search exports (CSV, RIS, MEDLINE text, PubMed XML)")
    p.add_argument("files", nargs="+")
    add("embed", cmd_embed, "embed every paper not embedded with the configured model")
    add("cluster", cmd_cluster, "form clusters (HDBSCAN + audit) and compute their metrics")
    add("status", cmd_status, "corpus, embeddings, clusters and goals at a glance")
    p = add("run", cmd_run, "run a handbook's goal cycle by cycle without Dagster (local runner)")
    p.add_argument("handbook", help="a handbook name as the Launchpad shows it (seek_gap_ppi_gerd) or a file path")
    p.add_argument("--goal", help="continue this existing goal instead of starting a new one")
    p.add_argument("--new", action="store_true",
                   help="start a new goal even when one of this handbook was interrupted (it is continued otherwise)")  # fmt: skip
    p.add_argument("--max-cycles", type=positive_int,
                   help="cap on the cycles of this run ([goal] max_cycles caps the goal in total)")  # fmt: skip
    for name, text in (("stop", "stop a goal after its current cycle (STOP file)"),
                       ("pause", "pause a goal until resumed (PAUSE file)"),
                       ("resume", "resume a paused or stopped-by-hand goal; retry a goal in error or crashed; "
                                  "continue an interrupted one")):  # fmt: skip
        p = add(name, cmd_control, text)
        p.add_argument("goal")
        if name == "resume":
            p.add_argument("--no-run", action="store_true", help="only mark it in_progress (the agent sensor runs it)")
    from ra_agent.ask.commands import add_ask_parser

    add_ask_parser(sub)
    from ra_agent.screen.commands import add_screen_parser

    add_screen_parser(sub)
    p = add("llm", cmd_llm, "serve a local LLM (llama.cpp, Gemma 3 270M) in the background, or stop it")
    p.add_argument("action", choices=("serve", "stop"))
    p.add_argument("--n-ctx", type=positive_int, default=8192, help="the model's context in tokens (default 8192)")
    p.add_argument("--port", type=port_number, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--threads", type=positive_int, help="the server's CPU threads (default: half the CPUs, 1 to 4)")
    p = add("questions", cmd_questions, "a handbook's review questions over the corpus: studies, coverage, verdicts "
            "(kept with one dossier per question in <data_dir>/questions/)")  # fmt: skip
    p.add_argument("handbook", help="a handbook name from handbooks/ (as ra run takes) or a path")
    p.add_argument("--changes", action="store_true", help="what changed since the evaluation before (its history)")
    p.add_argument(
        "--since", type=date.fromisoformat, help="every evaluation's changes on or after this date (YYYY-MM-DD)"
    )
    p.add_argument(
        "--map", action="store_true", help="print where the evidence-gap map is (gap_map.png, an offline gap_map.html)"
    )
    p = add("extract", cmd_extract, "the extraction sheet of a handbook's review question: write it, or read a "
            "reviewer's back (validated; their numbers then win in the SR draft)")  # fmt: skip
    p.add_argument("handbook", help="a handbook name from handbooks/ (as ra run takes) or a path")
    p.add_argument("--question", help="a review question id (default: the topic's own question)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--sheet", metavar="FILE", help="write the sheet (.xlsx or .csv)")
    which.add_argument("--from", dest="from_", metavar="FILE", help="read a reviewer's sheet (.xlsx or .csv)")
    p = add("demo", cmd_demo, "the main job: run a handbook end to end on the bundled demo corpus")
    p.add_argument("--handbook", default="seek_gap_ppi_gerd", help="a handbook name (as ra run takes) or a path")
    return parser


def add_ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query", help="PubMed query; omitted: refresh every registered search")
    p.add_argument("--since", type=entrez_date, help="only records entered since this date (YYYY-MM-DD or YYYY/MM/DD)")
    p.add_argument("--retmax", type=positive_int, help="maximum records to fetch (default [ingest] default_retmax)")


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    verbose = int(getattr(args, "verbose", 0) or 0)
    logging.basicConfig(level=LOG_LEVELS[min(verbose, len(LOG_LEVELS) - 1)], handlers=[log_handler(verbose)])
    try:
        code = func(args)
        sys.stdout.flush()  # a reader gone now, not at the interpreter's exit, where no handler would see it
        return code
    except KeyboardInterrupt:
        print("ra: interrupted; the store keeps every committed batch", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not stdout_closed():
            raise
        return quiet_exit_on_closed_stdout()
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        log.debug("error", exc_info=True)
        return report_error(exc)


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:  # --help or a usage error, printed: flush while a closed stdout can still be handled
            sys.stdout.flush()
            raise
    except BrokenPipeError:
        return quiet_exit_on_closed_stdout()
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
