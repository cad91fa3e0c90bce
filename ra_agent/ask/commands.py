"""The `ra ask` subcommand and the ask-run / Mind-KB lines of `ra status` (wired into ra_agent.cli by the lead)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ra_agent.cliargs import CliError, positive_int
from ra_agent.config import Config, load_config
from ra_agent.store.db import Store


def add_ask_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `ra ask "question" [--max-tool-calls N] [--k K]` on the `ra` subparsers."""
    text = "answer a question from the local corpus (bounded tool loop, cited PMIDs, streamed answer)"
    p = subparsers.add_parser("ask", help=text, description=text)
    p.add_argument("question", help="the question, in quotes")
    p.add_argument("--max-tool-calls", type=positive_int,
                   help="tool calls before the answer (1-8; default [ask] max_tool_calls)")  # fmt: skip
    p.add_argument("--k", type=positive_int, help="find_similar results per call (default [ask] k)")
    p.add_argument("--no-embed", action="store_true",
                   help="do not embed papers that lack a vector first (they are then invisible to the search)")  # fmt: skip
    p.set_defaults(func=cmd_ask)
    return p


def cmd_ask(args: argparse.Namespace) -> int:
    if not args.question.strip():  # bad input exits 2 before the store opens or a paper is embedded
        raise CliError('ask: question: empty; ask one in quotes, e.g. ra ask "Does omeprazole heal esophagitis?"')
    if args.max_tool_calls is not None and not 1 <= args.max_tool_calls <= 8:
        raise CliError(f"ask: --max-tool-calls: {args.max_tool_calls} is not within 1-8")
    cfg = load_config(args.config)
    if args.k is not None:
        cfg = cfg.with_overrides(ask={"k": args.k})  # range-checked like config.toml

    from ra_agent.ask.flow import ask, select_ask_brain
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.workspace import open_store

    def stream(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    with open_store(cfg) as store:
        embedder = SentenceTransformerEmbedder(cfg)
        missing = unembedded(cfg, store)
        if missing and getattr(args, "no_embed", False):
            print(f"ra: warning: {missing} papers are not embedded (ra embed); the answer cannot draw on them",
                  file=sys.stderr)  # fmt: skip
        elif missing:
            embed_first(cfg, store, embedder, missing)
        brain = select_ask_brain(cfg)
        print(f"[brain: {brain.label()}]", file=sys.stderr)
        result = ask(cfg, store, args.question, brain=brain, embedder=embedder,
                     max_tool_calls=args.max_tool_calls, on_final_token=stream)  # fmt: skip
        print()
        print()
        if getattr(brain, "fallback_reason", ""):  # [llm] brain = "auto": the LLM failed and the rules answered
            print(f"[brain: {brain.label()}]", file=sys.stderr)
        for line in citation_lines(store, result):
            print(line)
        where = log_telemetry(cfg, result, verbose=getattr(args, "verbose", False))
        print(f"[telemetry of run {result.run_id}: {where}; ra status lists recent runs]", file=sys.stderr)
    return 0 if result.error is None else 1


def log_telemetry(cfg: Config, result: Any, *, verbose: bool = False) -> Path:
    """Append the run's telemetry lines to <data_dir>/<[logging] log_dir>/ask.log (stderr too with --verbose)."""
    path = cfg.data_dir / cfg.logging.log_dir / "ask.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = telemetry_lines(result)
    with path.open("a", encoding="utf-8") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {result.question!r}\n" + "".join(f"{x}\n" for x in lines))
    if verbose:
        for line in lines:
            print(line, file=sys.stderr)
    return path


def unembedded(cfg: Config, store: Store) -> int:
    """Papers with text that the index `ra ask` searches has no vector for (all of them before any `ra embed`)."""
    from ra_agent.store.vectors import embeddable_pmids, open_active

    pmids = embeddable_pmids(store)
    try:
        vectors = open_active(cfg)
    except FileNotFoundError:  # no index yet
        return len(pmids)
    return int((~vectors.has(pmids)).sum())


def embed_first(cfg: Config, store: Store, embedder: Any, missing: int) -> None:
    """Embed the papers an `ra import` (or a search) added since the last `ra embed`, with a progress bar."""
    from tqdm import tqdm

    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.embed.index import embed_all
    from ra_agent.evidence.pico.vectors import pico_family_rebuilder

    print(f"ra ask: {missing} papers are not embedded yet; embedding them first", file=sys.stderr)
    with tqdm(total=missing, desc="embed", unit="paper", file=sys.stderr, disable=None, dynamic_ncols=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        result = embed_all(cfg, store, progress=progress, embedder=embedder,
                           before_switch=pico_family_rebuilder(cfg, lambda: embedder or SentenceTransformerEmbedder(cfg)))  # fmt: skip
    print(f"ra ask: embedded {result.embedded} papers; active index: {result.active}", file=sys.stderr)


def result_lines(store: Store, result: Any) -> list[str]:
    """Citations (with titles) and the telemetry summary of one AskResult."""
    return citation_lines(store, result) + telemetry_lines(result)


def citation_lines(store: Store, result: Any) -> list[str]:
    """The cited papers, each with its design (ra's PICO rules) and year, for the terminal."""
    from ra_agent.ask.evidence import design_label

    lines = ["Citations:" if result.citations else "Citations: none (the corpus holds no support)"]
    for paper in store.papers(result.citations):
        lines.append(f"  [PMID:{paper.pmid}] {design_label(paper)}, {paper.year or 'n.d.'}: {paper.title}")
    if result.removed_citations:
        lines.append("Removed citations (PMIDs not in the corpus): " + ", ".join(map(str, result.removed_citations)))
    return lines


def telemetry_lines(result: Any) -> list[str]:
    """The telemetry summary of one AskResult: steps, tool calls, tokens, latency, Mind-KB use."""
    lines = []
    lines.append(
        f"Telemetry: run {result.run_id}, stop: {result.stop_reason}, {result.turns} turns, {result.tool_calls} tool "
        f"calls, {result.repairs} repairs, tokens {result.tokens_in} in / {result.tokens_out} out, "
        f"{result.latency_ms} ms, {len(result.retrieved)} papers retrieved"
    )
    for n, step in enumerate(result.steps, start=1):
        what = f"{step.kind} {step.tool}" if step.tool else step.kind
        extra = (
            f", {step.new_pmids} new PMIDs" if step.kind == "tool" else f", tokens {step.tokens_in}/{step.tokens_out}"
        )
        lines.append(f"  step {n}: {what} {step.ms} ms{extra}")
    if result.playbooks_used:
        lines.append(f"Mind-KB playbooks in the prompt: {', '.join(p[:12] for p in result.playbooks_used)}")
    if result.playbook_id:
        lines.append(f"Mind-KB: run stored as playbook {result.playbook_id[:12]}")
    return lines


def ask_status_lines(cfg: Config, store: Store) -> list[str]:
    """`ra status` lines: recent ask runs (steps, tool calls, tokens, latency), Mind-KB size and top playbooks."""
    from ra_agent.ask.flow import recent_runs, run_count
    from ra_agent.ask.mindkb import open_playbook_store

    runs = recent_runs(store, cfg.ask.recent_runs)
    lines = [f"ask runs: {run_count(store)}" + (f" (last {len(runs)}):" if runs else "")]
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["started_ts"]))
        lines.append(
            f"  #{r['id']} {when} {r['stop_reason']}: {r['steps']} steps, {r['tool_calls']} tool calls, "
            f"tokens {r['tokens_in']}/{r['tokens_out']}, {r['latency_ms']} ms, {len(r['citations'])} cited "
            f"[{r['brain']}] {r['question'][:60]!r}"
        )
    playbooks = open_playbook_store(cfg, store, None)
    lines.append(f"Mind-KB ({cfg.mindkb.collection}, {cfg.mindkb.backend}): {playbooks.count()} playbooks")
    for book in playbooks.top(cfg.mindkb.status_top):
        lines.append(
            f"  {book.count}x {book.id[:12]} [{book.source}] {book.tool_steps} tool steps: {book.original_prompt[:60]!r}"
        )
    return lines


__all__ = [
    "add_ask_parser",
    "ask_status_lines",
    "citation_lines",
    "cmd_ask",
    "log_telemetry",
    "result_lines",
    "telemetry_lines",
]
