"""The `ra screen` subcommand: next records, decisions (prompt or --decide), export, and `ra screen simulate`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ra_agent.cliargs import positive_int
from ra_agent.config import SCREEN_STRATEGIES, Config, load_config

if TYPE_CHECKING:  # the screening modules (scikit-learn) load when a screen command runs, not with the parser
    from ra_agent.screen.session import Step
    from ra_agent.store.db import Store


def add_screen_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `ra screen [...]`, `ra screen export FILE` and `ra screen simulate CSV --label COLUMN`."""
    text = "screen titles/abstracts with active learning: next records, decisions, export, simulation"
    p = subparsers.add_parser("screen", help=text, description=text)
    p.add_argument("--project", help="screening project (default: the only one); ra screen --list names them")
    p.add_argument("--search", help="start/refresh the project of a registered search (its query text or key)")
    p.add_argument("--from", dest="from_file", help="start/refresh the project of a search export (ra import formats)")
    p.add_argument("--seed-labels", metavar="COLUMN", help="with --from: decisions from this 0/1 CSV column")
    p.add_argument("--decide", nargs=2, metavar=("PMID", "DECISION"), help="record a decision: PMID include|exclude")
    p.add_argument("--reason", default="", help="with --decide: why (kept with the decision)")
    p.add_argument("--next", type=positive_int, help="records to show (default [screen] show_next)")
    p.add_argument("--strategy", choices=SCREEN_STRATEGIES,
                   help="query strategy (default [screen] query_strategy)")  # fmt: skip
    p.add_argument("-i", "--interactive", action="store_true", help="prompt for decisions one record at a time")
    p.add_argument("--no-abstract", action="store_true", help="with -i: show title, journal and year only")
    p.add_argument("--list", action="store_true", help="list the screening projects")
    p.set_defaults(func=cmd_screen)
    sub = p.add_subparsers(dest="screen_command")
    e = sub.add_parser("export", help="write the decisions (CSV or RIS, by extension)")
    e.add_argument("out", help="file.csv or file.ris")
    e.set_defaults(func=cmd_screen)
    s = sub.add_parser("simulate", help="replay the labels of a CSV: WSS@95, recall@10%%, ATD, recall curve PNG")
    s.add_argument("csv")
    s.add_argument("--label", required=True, help="the 0/1 label column (e.g. label_included)")
    s.add_argument("--seeds", type=positive_int, help="replays with different priors (default [screen] sim_seeds)")
    s.add_argument(
        "--retrain-every",
        type=positive_int,
        help="retrain after this many decisions (default [screen] sim_retrain_every)",
    )
    s.add_argument("--out", help="recall curve PNG (default <workspace>/plots/screen_simulation_<csv>.png)")
    s.set_defaults(func=cmd_screen)
    return p


def _cfg(args: argparse.Namespace) -> Config:
    cfg = load_config(args.config)
    if getattr(args, "strategy", None):
        cfg = cfg.with_overrides(screen={"query_strategy": args.strategy})
    return cfg


def _citation_links(cfg, store, project: str) -> None:
    from ra_agent.screen.project import fill_citation_links

    linked, total, fetched = fill_citation_links(cfg, store, project)
    how = ("provisional: offline, PubMed could not be reached; only stored references" if fetched.error else
           "offline: only stored references" if fetched.offline else
           f"{fetched.elink_edges} reference edges fetched" if fetched.lacking else "all stored")  # fmt: skip
    print(f"{project}: {linked} of {total} records list references for the citation links ({how})")


def cmd_screen(args: argparse.Namespace) -> int:
    from ra_agent.screen.project import ScreenError, decide, project_from_import, project_from_search, resolve
    from ra_agent.screen.session import step
    from ra_agent.workspace import open_store

    cfg = _cfg(args)
    if args.screen_command == "simulate":
        return cmd_simulate(cfg, args)
    with open_store(cfg) as store:
        if args.list:
            return _list(store)
        if args.from_file or args.search:
            project = (project_from_import(cfg, store, args.from_file, args.seed_labels) if args.from_file
                       else project_from_search(store, args.search))  # fmt: skip
            _citation_links(cfg, store, project)
        else:
            if args.seed_labels:
                raise ScreenError(store.where, "--seed-labels needs --from FILE", field="seed-labels")
            project = resolve(store, args.project)
        if args.screen_command == "export":
            from ra_agent.screen.export import export_decisions

            path, n = export_decisions(store, project, args.out)
            print(f"{project}: wrote {n} decisions to {path}")
            return 0
        if args.decide:
            pmid = _pmid(store, args.decide[0])
            seq = decide(store, project, pmid, args.decide[1], reason=args.reason)
            print(f"{project}: decision {seq}: PMID {pmid} {args.decide[1].lower()}"
                  + (f" ({args.reason})" if args.reason else ""))  # fmt: skip
        if args.interactive:
            return _interactive(cfg, store, project, abstract=not args.no_abstract)
        print_step(step(cfg, store, project, n=args.next))
    return 0


def _pmid(store: Store, text: str) -> int:
    from ra_agent.screen.project import ScreenError

    if not text.isdigit():
        raise ScreenError(store.where, f"{text!r} is not a PMID", field="pmid")
    return int(text)


def _list(store: Store) -> int:
    from ra_agent.screen.project import decisions, project_pmids, projects

    known = projects(store)
    if not known:
        print("no screening projects (ra screen --search QUERY or --from FILE)")
    for name in known:
        made = decisions(store, name)
        print(f"{name}: {len(project_pmids(store, name))} records, {len(made)} decided "
              f"({sum(d.label for d in made)} included)")  # fmt: skip
    return 0


def print_step(result: Step) -> None:
    s = result.stop
    print(f"{result.project}: {s.screened} of {s.total} screened, {s.includes} included")
    for line in s.lines():
        print(line)
    if result.top_terms:
        print("model: terms towards include: " + ", ".join(t for t, _ in result.top_terms[:8]))
    for r in result.next:
        print(f"#{r.rank:<5} PMID {r.pmid:<9} {r.year or '----'}  {r.title or '(no title)'}")
        print(f"       why: {r.why}")


def _interactive(cfg: Config, store: Store, project: str, *, abstract: bool = True) -> int:
    """One record at a time (whole title, journal, year, the abstract wrapped to the terminal, the terms towards
    include highlighted): i(nclude) / e(xclude) [reason after a space] / s(top) / q(uit); retrain after each."""
    from dataclasses import replace

    from ra_agent.screen.project import decide
    from ra_agent.screen.session import step
    from ra_agent.screen.show import record_lines, terminal_width, use_colour

    while True:
        result = step(cfg, store, project, n=1)
        print_step(replace(result, next=[]))
        if not result.next:
            print("every record is decided")
            return 0
        record = result.next[0]
        terms = [t for t, _ in result.top_terms[:15]]
        for line in record_lines(store.paper(record.pmid), record.pmid, record.rank, record.why, terms,
                                 width=terminal_width(), abstract=abstract, colour=use_colour(sys.stdout)):  # fmt: skip
            print(line)
        try:
            answer = input(f"PMID {record.pmid}: [i]nclude / [e]xclude (+ reason) / [s]top > ").strip()
        except EOFError:
            return 0
        verb, _, reason = answer.partition(" ")
        if verb.lower() in ("i", "include", "e", "exclude"):
            label = "include" if verb.lower().startswith("i") else "exclude"
            decide(store, project, record.pmid, label, reason=reason.strip())
        elif verb.lower() in ("s", "q", "stop", "quit"):
            return 0
        else:
            print("answer i, e or s", file=sys.stderr)


def cmd_simulate(cfg: Config, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ra_agent.screen.simulate import run_simulation
    from ra_agent.workspace import Workspace

    out = Path(args.out) if args.out else Workspace.of(cfg).plots_dir / f"screen_simulation_{Path(args.csv).stem}.png"
    with tqdm(desc=f"simulate {Path(args.csv).name}", unit="rec", file=sys.stderr, disable=None) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        report = run_simulation(cfg, args.csv, args.label, seeds=args.seeds, retrain_every=args.retrain_every,
                                out=out, progress=progress)  # fmt: skip
    for line in report.lines():
        print(line)
    return 0
