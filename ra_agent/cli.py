"""The `ra` command line: ingest, import, embed, cluster, run handbooks, status."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ra_agent.config import Config, ConfigError, load_config

log = logging.getLogger("ra")


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


@contextmanager
def progress_bar(desc: str, total: int | None = None, unit: str = "rec"):
    """A tqdm bar on stderr, yielding a callback progress(done, total=None)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None, dynamic_ncols=True)

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
    from ra_agent.ingest.pipeline import search_and_ingest
    from ra_agent.workspace import register_query, registered_queries

    cfg = _config(args)
    with _store(cfg) as store:
        if args.query:
            queries = [args.query]
            register_query(store, args.query, args.since, args.retmax)
        else:
            queries = [q["query"] for q in registered_queries(store).values()]
            if not queries:
                raise CliError("no --query given and no registered searches to refresh (ra ingest --query '...')")
        for query in queries:
            with progress_bar(f"ingest {query[:40]!r}") as bar:
                result = search_and_ingest(cfg, store, query, since=args.since, retmax=args.retmax, progress=bar)
            mode = "OFFLINE (local corpus)" if result.offline else "online"
            print(f"{query!r}: {result.count} hits, {result.inserted} new, {result.updated} updated [{mode}]")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from ra_agent.ingest.importers import import_file

    cfg = _config(args)
    status = 0
    with _store(cfg) as store:
        for name in args.files:
            path = Path(name)
            if not path.exists():
                raise CliError(f"{path}: no such file")
            with progress_bar(f"import {path.name}") as bar:
                summary = import_file(store, path, cfg, progress=bar)
            print(f"{path}: {summary.inserted} new, {summary.updated} updated, {summary.unchanged} unchanged, "
                  f"{len(summary.problems)} problems")  # fmt: skip
            for problem in summary.problems[:20]:
                print(f"  problem: {problem}", file=sys.stderr)
            if summary.problems:
                status = 1
    return status


def cmd_embed(args: argparse.Namespace) -> int:
    from ra_agent.pipeline import embed_all

    cfg = _config(args)
    with _store(cfg) as store, progress_bar("embed", unit="paper") as bar:
        result = embed_all(cfg, store, progress=bar)
    print(f"embedded {result['embedded']} papers into {result['folder']} ({result['skipped']} skipped)")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from ra_agent.pipeline import cluster_corpus

    cfg = _config(args)
    with _store(cfg) as store:
        result = cluster_corpus(cfg, store)
    print(result["table"])
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ra_agent.ingest.corpus import corpus_summary
    from ra_agent.status import status_lines

    cfg = _config(args)
    with _store(cfg) as store:
        summary = corpus_summary(store)
        print(f"workspace: {cfg.data_dir}")
        print(f"papers: {summary['paper']} ({summary['paper_with_abstract']} with abstract), "
              f"refs: {summary['ref']} (+{summary['ref_unmapped']} unmapped DOIs), batches: {summary['ingest_batch']}")  # fmt: skip
        for line in status_lines(cfg, store):
            print(line)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ra_agent.pipeline import run_demo

    cfg = _config(args)
    with _store(cfg) as store:
        written = run_demo(cfg, store, handbook=Path(args.handbook), progress_factory=progress_bar)
    print(f"wrote {written}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ra", description=__doc__)
    parser.add_argument("--config", default=os.environ.get("RA_CONFIG", "config.toml"), help="config.toml path")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(func=func)
        return p

    add("init", cmd_init, "create the workspace and database")
    p = add("ingest", cmd_ingest, "search PubMed and store the records (offline: the local corpus)")
    add_ingest_args(p)
    p = add("import", cmd_import, "import search exports (CSV, RIS, MEDLINE text, PubMed XML)")
    p.add_argument("files", nargs="+")
    add("embed", cmd_embed, "embed every paper not embedded with the configured model")
    add("cluster", cmd_cluster, "form clusters (HDBSCAN + audit) and compute their metrics")
    add("status", cmd_status, "corpus, embeddings, clusters and goals at a glance")
    p = add("demo", cmd_demo, "the main job: run a handbook end to end on the bundled demo corpus")
    p.add_argument("--handbook", default="handbooks/seek_gap_ppi_gerd.md")
    return parser


def add_ingest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query", help="PubMed query; omitted: refresh every registered search")
    p.add_argument("--since", help="only records entered since this date (YYYY-MM-DD or YYYY/MM/DD)")
    p.add_argument("--retmax", type=int, help="maximum records to fetch (default [ingest] default_retmax)")


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return func(args)
    except (ConfigError, CliError) as exc:
        print(f"ra: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ra: interrupted; the store keeps every committed batch", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
