"""Benchmark: how long drawing an evidence-gap map takes (issue 35's target: under 5 s for 200 questions).

The questions are real: the demo handbook's questions over the demo corpus (data/demo, computed once by ra's rules
through its CSV importer), each with its studies, reviews and trials since. 200 questions are made of them by
repeating them on 20 rows (the row renamed "<intervention> #k", ids made unique), so the map has 20 rows and the
demo's comparator columns with real study lists behind every cell (the hover text and the lists of the HTML).

Timed in one process, after the plotting libraries are imported (their import time is printed apart):
- baseline: a plain matplotlib scatter of the same 200 cells (position, area, colour) saved as a PNG, no labels;
- `build_gap_map` (the data), `draw_png` (gap_map.png) and `map_html` (gap_map.html) with the page's script in a
  warm cache, then the script's one-off bundling by vl-convert (a first map on a machine pays it once);
- with --key, the map of Cochrane review CD006468's questions over its 3,874 records (../shared/data/gaps), drawn
  the same way: its questions and cells.

Prints; never asserts.

    python bench/bench_gap_map.py [--questions 200] [--key] [--out DIR]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_CSV = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
DEMO_HANDBOOK = ROOT / "handbooks" / "seek_gap_ppi_gerd.md"
KEY_CSV = ROOT.parent / "shared" / "data" / "gaps" / "CD006468_anticoagulation_cancer_cvc.csv"
KEY_HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"


def handbook_questions(csv_path: Path, handbook: Path, scratch: Path):
    """(questions, papers by PMID, corpus date) of `handbook` over `csv_path` imported into a scratch store."""
    from ra_agent.agent.questions import corpus_date, load_question_set
    from ra_agent.config import Config
    from ra_agent.ingest.importers import import_file
    from ra_agent.store.db import Store
    from ra_agent.workspace import Workspace

    cfg = Config().with_overrides(workspace={"data_dir": str(scratch), "demo_corpus": ""})
    with Store(Workspace.of(cfg).db_path) as store:
        import_file(store, csv_path, cfg)
        questions = load_question_set(cfg, store, handbook).questions
        papers = {p.pmid: p for p in store.papers(store.all_pmids())}
        return questions, papers, corpus_date(store)


def repeated(questions: list, wanted: int) -> list:
    """`wanted` questions: the given ones again and again, each round on rows of its own ("<intervention> #k")."""
    out = []
    for k in range(-(-wanted // len(questions))):
        for q in questions:
            clone = copy.deepcopy(q)
            if k:
                clone.id, clone.intervention = f"{q.id}-{k}", f"{q.intervention} #{k}"
                clone.parent = f"{q.parent}-{k}" if q.parent else None
            out.append(clone)
    return out[:wanted]


def timed(what, *args):
    started = time.perf_counter()
    result = what(*args)
    return result, time.perf_counter() - started


def plain_scatter(gap_map, path: Path) -> None:
    """The baseline: the same cells as a bare matplotlib scatter (no labels, legends or texts) saved as a PNG."""
    from matplotlib.figure import Figure

    columns = {c.label: i for i, c in enumerate(gap_map.columns)}
    rows = {r: i for i, r in enumerate(gap_map.rows)}
    fig = Figure(figsize=(3.0 + 1.35 * len(columns), 2.4 + 0.62 * len(rows)), dpi=110)
    ax = fig.add_subplot()
    most = max(c.studies for c in gap_map.cells)
    ax.scatter([columns[c.column] for c in gap_map.cells], [rows[c.row] for c in gap_map.cells],
               s=[1400 * c.studies / most for c in gap_map.cells], c=[c.colour for c in gap_map.cells])  # fmt: skip
    fig.savefig(path, format="png")


def draw(questions, papers, date, out: Path, cache: Path) -> dict[str, float]:
    from ra_agent.evidence.questions.gap_map import build_gap_map
    from ra_agent.evidence.questions.gap_map_draw import draw_png, map_html

    titles = {p: papers[p].title for q in questions for p in q.trials if p in papers}
    gap_map, build_s = timed(lambda: build_gap_map(questions, titles, date, records=len(papers)))
    _, baseline_s = timed(plain_scatter, gap_map, out / "baseline_scatter.png")
    _, png_s = timed(draw_png, gap_map, out / "gap_map.png")
    html, html_s = timed(map_html, gap_map, cache)
    (out / "gap_map.html").write_text(html, encoding="utf-8")
    return {"cells": len(gap_map.cells), "rows": len(gap_map.rows), "columns": len(gap_map.columns),
            "build": build_s, "png": png_s, "html": html_s, "baseline": baseline_s}  # fmt: skip


def report(name: str, t: dict[str, float]) -> None:
    total = t["build"] + t["png"] + t["html"]
    print(f"{name}: {t['cells']} cells ({t['rows']} rows x {t['columns']} columns): gap map drawn in {total:.2f} s "
          f"(data {t['build']:.3f} s, gap_map.png {t['png']:.2f} s, gap_map.html {t['html']:.2f} s); baseline, a "
          f"plain matplotlib scatter of the same cells: {t['baseline']:.2f} s ({total / t['baseline']:.1f}x)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--key", action="store_true", help="also the map of CD006468 over ../shared/data/gaps")
    parser.add_argument("--out", type=Path, help="keep the drawings here (default: a scratch folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ra-bench-map-") as scratch_dir:
        scratch = Path(scratch_dir)
        out = args.out or scratch / "out"
        out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        questions, papers, date = handbook_questions(DEMO_CSV, DEMO_HANDBOOK, scratch / "demo")
        print(f"demo: {len(questions)} questions over {len(papers):,} records ({time.perf_counter() - started:.0f} s)")
        _, imports_s = timed(lambda: (__import__("matplotlib.figure"), __import__("altair")))
        from ra_agent.evidence.questions.gap_map_draw import javascript_bundle

        _, bundle_s = timed(javascript_bundle, scratch / "cache")  # the one-off: vl-convert bundles the script
        many = repeated(questions, args.questions)
        report(f"{args.questions} questions (the demo's {len(questions)} on {-(-args.questions // len(questions))} "
               f"rows)", draw(many, papers, date, out, scratch / "cache"))  # fmt: skip
        print(f"  one-off costs, not in the figure above: importing matplotlib and altair {imports_s:.2f} s; bundling "
              f"the page's script (vl-convert, kept in the workspace cache after) {bundle_s:.2f} s")  # fmt: skip
        if args.key:
            if not KEY_CSV.exists():
                print(f"--key: {KEY_CSV} is missing", file=sys.stderr)
                return 2
            questions, papers, date = handbook_questions(KEY_CSV, KEY_HANDBOOK, scratch / "key")
            (out / "key").mkdir(exist_ok=True)
            report(f"CD006468 ({len(papers):,} records)", draw(questions, papers, date, out / "key", scratch / "cache"))
        if args.out:
            print(f"drawings in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
