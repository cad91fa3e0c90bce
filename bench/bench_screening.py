"""Screening prioritisation: ra's simulation against ASReview's default model on the same records and priors.

usage: python bench/bench_screening.py [--csv data/demo/Cohen_2006_ProtonPumpInhibitors.csv [--csv MORE.csv ...]]
                                       [--label label_included] [--seeds 5] [--retrain-every 1]
                                       [--asreview-venv DIR] [--skip-asreview] [--every-other-label]
                                       [--stop-rules buscar_ranked,buscar,recall_estimate]

Several --csv: each review is compared as below, then a table and the mean gain over the reviews are printed
(held-out reviews: the demo file's Cohen 2006 siblings are CSVs of the same format; bench/synergy_csv.py turns
SYNERGY dataset folders into such CSVs). --every-other-label also prints, per review, the WSS@95 reached if each
include were ranked by ra's model trained on every other label: an estimate of how far any query strategy over
these features could go, not a bound.

Both methods replay the same labels from the same start: per seed, one include and one exclude drawn
with that seed (ra_agent.screen.simulate.choose_priors, identical row numbers passed to ASReview as
--prior-idx), ASReview with --seed <seed>. ASReview is PyPI `asreview==3.0.8` (its default AI `elas_u4`:
TF-IDF uni+bigrams, sublinear tf, linear SVM C=0.11, "balanced" sample weights ratio 9.8, max query,
retrained after every decision), installed on first use into its own virtualenv under
~/.cache/ra-bench/asreview-3.0.8 (never into ra's .venv). Metrics of both orders come from the same
function (ra_agent.screen.simulate.metrics): WSS@95 = (N - records screened to reach 95 % recall) / N - 0.05,
recall after 10 % of records, ATD = mean share of records screened when each include is found; priors
count as screened. The target (ra >= ASReview + 0.08 WSS@95) is printed, never asserted.

Stopping rules (ra_agent.screen.stopping): on each of ra's orders, every rule in --stop-rules is replayed and the
bench prints where it first advised stopping, the recall reached there and the work saved there (share of the
records not screened) beside the work saved at the 95 %-recall point; buscar draws the records after its sample
starts in a random order (seeded per seed and repeat, --stop-repeats of them). The summary counts the runs whose
recall at the advised stop is >= 0.95, gives the median and worst recall there, the median work saved there and
the work saved at the stop as a share of that at 95 % recall on the same replays (the baseline); targets
(>= 95 % of runs; >= 0.75) printed, never asserted. `hypergeom_hindsight` is not a rule: ranked screening exactly to
the 95 %-recall point (known only in hindsight), then the smallest random sample of the rest that, finding no
include, gives p < 1 - confidence (stopping.hypergeometric_best); the records screened by then. A measure of what
the test behind buscar and buscar_ranked can give on that order, not a strict bound (a run that starts earlier is
a different test and can end a few records sooner). The alternatives to these rules (Quant, knee, a biased urn,
combinations) are measured by bench/bench_stopping.py.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ra_agent.config import load_config  # noqa: E402
from ra_agent.screen.model import MODEL_NAME, fit, prepare  # noqa: E402
from ra_agent.screen.simulate import (  # noqa: E402
    Metrics,
    choose_priors,
    mean_metrics,
    metrics,
    plot_recall,
    random_orders,
    read_labelled_csv,
    simulate,
    simulation_features,
)
from ra_agent.screen.stopping import StopPoint, first_stop, hypergeometric_best  # noqa: E402

ASREVIEW = "asreview==3.0.8"
DEFAULT_VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ra-bench" / "asreview-3.0.8"
TARGET = 0.08
STOP_RECALL, STOP_RUNS, STOP_WORK = 0.95, 0.95, 0.75  # recall at the advised stop in this share of runs; work kept
HINDSIGHT = "hypergeom_hindsight"  # stopping.hypergeometric_best: a hindsight measure, not a rule


def asreview_bin(venv: Path) -> Path:
    """The asreview executable of `venv`, creating the venv and installing ASReview when absent."""
    exe = venv / "bin" / "asreview"
    if exe.exists():
        return exe
    print(f"installing {ASREVIEW} into {venv} (once) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    base = os.environ.get("RA_BENCH_PYTHON", "python3")
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", ASREVIEW], check=True)
    return exe


def asreview_order(exe: Path, csv: Path, priors: tuple[int, int], seed: int, n: int, work: Path) -> np.ndarray:
    """ASReview's screening order (row numbers, priors first) for one seed; the rows it never reached follow
    (ASReview stops once every include is found, so they are all excludes and do not move the metrics)."""
    out = work / f"asreview_seed{seed}.asreview"
    cmd = [str(exe), "simulate", str(csv), "--prior-idx", str(priors[0]), str(priors[1]), "--seed", str(seed),
           "-o", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work,
                   env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})  # fmt: skip
    with zipfile.ZipFile(out) as z:
        z.extract("results.db", work / f"seed{seed}")
    with sqlite3.connect(work / f"seed{seed}" / "results.db") as db:
        rows = [r[0] for r in db.execute("SELECT record_id FROM results ORDER BY rowid")]
        ids = dict(db.execute("SELECT record_id, dataset_row FROM record").fetchall())
    order = [ids[r] for r in rows]
    assert set(order[:2]) == set(priors), f"ASReview did not start from the priors {priors}: {order[:2]}"
    seen = set(order)
    return np.asarray(order + [i for i in range(n) if i not in seen], dtype=np.int64)


def line(name: str, m: Metrics) -> str:
    return f"{name:<28} WSS@95 {m.wss95:6.3f}   recall@10% {m.recall_at_10:6.3f}   ATD {m.atd:6.3f}   " \
           f"screened to 95%: {m.screened_at_95}"  # fmt: skip


def every_other_label(features, y: np.ndarray, screen) -> float:
    """WSS@95 if each include were ranked by ra's model trained on every other record's label (the excludes
    in-sample), counting the excludes that outrank the include at the 95 % cut. An estimate of what more labels
    could buy with these features, not a bound on an active-learning order."""
    prep = prepare(features, screen)
    n, includes, excludes = len(y), np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    above = []
    for i in includes:
        rows = np.setdiff1d(np.arange(n), [i])
        scores = fit(prep, rows, y[rows], screen, seed=0).scores
        above.append(int((scores[excludes] > scores[i]).sum()))
    k95 = int(np.ceil(0.95 * len(includes)))
    return round((n - k95 - sorted(above)[k95 - 1]) / n - 0.05, 4)


def stops_on(y_in_order: np.ndarray, m: Metrics, cfg, rules: list[str], seed: int, repeats: int
             ) -> dict[str, list[tuple[StopPoint, float]]]:  # fmt: skip
    """{rule: [(where it first advised stopping, work saved at 95 % recall)]} on one order of ra's."""
    out: dict[str, list[tuple[StopPoint, float]]] = {}
    for rule in rules:
        screen = cfg.with_overrides(screen={"stop_rule": rule}).screen
        for rep in range(repeats if rule == "buscar" else 1):
            stop = first_stop(y_in_order, screen, seed=seed * 1000 + rep)
            out.setdefault(rule, []).append((stop, 1 - m.screened_at_95 / m.n))
    best = hypergeometric_best(y_in_order, cfg.screen)  # hindsight: the test with its sample begun at the best time
    recall = float(np.cumsum(y_in_order)[best - 1] / y_in_order.sum())
    out[HINDSIGHT] = [(StopPoint(HINDSIGHT, best, m.n, round(recall, 4)), 1 - m.screened_at_95 / m.n)]
    return out


def stop_summary(name: str, runs: list[tuple[StopPoint, float]]) -> str:
    saved = float(np.mean([1 - s.share for s, _ in runs]))
    saved95 = float(np.mean([w for _, w in runs]))
    reached = sum(s.recall >= STOP_RECALL for s, _ in runs)
    return (f"{name:<22} stop after {np.mean([s.share for s, _ in runs]):6.1%}  recall {np.mean([s.recall for s, _ in runs]):.3f}"
            f" (>= {STOP_RECALL} in {reached}/{len(runs)})  work saved {saved:.3f} vs {saved95:.3f} at 95% recall"
            f" ({saved / saved95 if saved95 else 0:.2f} of it)")  # fmt: skip


def compare(csv: Path, label: str, args, cfg, exe: Path | None) -> tuple[Metrics, Metrics | None]:
    """Both tools on one labelled CSV, seeds 0..args.seeds-1: per-seed lines, the means, the recall-curve PNG."""
    from threadpoolctl import threadpool_limits

    data = read_labelled_csv(csv, label)
    y = data.labels
    print(f"\n{csv.name}: {len(y)} records, {int(y.sum())} includes ({label}); seeds 0..{args.seeds - 1}; "
          f"retrain every {args.retrain_every} decision(s)")  # fmt: skip
    t0 = time.time()
    features = simulation_features(cfg, data)
    print(f"features (ra {features.embedding} vectors, TF-IDF, design flags; citation links on "
          f"{features.linked_records} records): {time.time() - t0:.0f}s")  # fmt: skip
    ra_runs, asr_runs, curves = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            priors = choose_priors(y, seed)
            t = time.time()
            with threadpool_limits(1):
                order, m = simulate(features, y, cfg.screen, seed=seed, priors=priors, retrain_every=args.retrain_every)
            ra_runs.append(m)
            print(f"seed {seed} priors rows {priors}")
            print("  " + line(f"ra {MODEL_NAME}", m) + f"   ({time.time() - t:.0f}s)", flush=True)
            for rule, runs in stops_on(y[order], m, cfg, args.stop_rules, seed, args.stop_repeats).items():
                STOPS.setdefault(csv.stem, {}).setdefault(rule, []).extend(runs)
                for stop, _ in runs:
                    print(f"    stop {rule:<20} after {stop.screened} ({stop.share:.1%}): recall {stop.recall:.3f}")
            if seed == 0:
                curves[f"ra {MODEL_NAME}"] = y[order]
            if exe is not None:
                t = time.time()
                a_order = asreview_order(exe, csv, priors, seed, len(y), Path(tmp))
                am = metrics(y[a_order])
                asr_runs.append(am)
                print("  " + line("ASReview 3.0.8 elas_u4", am) + f"   ({time.time() - t:.0f}s)", flush=True)
                if seed == 0:
                    curves["ASReview 3.0.8 (elas_u4)"] = y[a_order]
    randoms = random_orders(y, choose_priors(y, 0), seed=0, runs=cfg.screen.sim_random_runs)
    curves["random order"] = y[randoms[0]]
    print("mean over seeds")
    ra_mean = mean_metrics(ra_runs)
    print("  " + line(f"ra {MODEL_NAME}", ra_mean))
    asr_mean = mean_metrics(asr_runs) if asr_runs else None
    if asr_mean is not None:
        print("  " + line("ASReview 3.0.8 elas_u4", asr_mean))
    print("  " + line("random order", mean_metrics([metrics(y[o]) for o in randoms])))
    for rule, runs in STOPS.get(csv.stem, {}).items():
        print("  " + stop_summary(f"stop {rule}", runs))
    if args.every_other_label:
        with threadpool_limits(1):
            estimate = every_other_label(features, y, cfg.screen)
        print(f"  every-other-label estimate (ra's model knowing every other label): WSS@95 {estimate:.3f}")
    if asr_mean is not None:
        wins = sum(a.wss95 < r.wss95 for a, r in zip(asr_runs, ra_runs, strict=True))
        print(
            f"WSS@95 ra - ASReview: {ra_mean.wss95 - asr_mean.wss95:+.3f} (ra ahead on {wins} of {len(ra_runs)} seeds)"
        )
    out = args.out if len(args.csv) == 1 else args.out.with_name(f"{args.out.stem}_{csv.stem}{args.out.suffix}")
    png = plot_recall(curves, out, f"{csv.name}: recall curve, seed 0 priors")
    print(f"recall curves: {png}")
    return ra_mean, asr_mean


STOPS: dict[str, dict[str, list[tuple[StopPoint, float]]]] = {}  # review -> rule -> runs


def print_stop_table() -> None:
    """Per review and rule: recall at the advised stop, work saved there and at 95 % recall; then over all runs."""
    rules = sorted({rule for per in STOPS.values() for rule in per})
    print("\nstopping rules: recall at the advised stop / work saved there / work saved at 95 % recall (mean of runs)")
    print(f"{'review':<44}" + "".join(f" {rule:>24}" for rule in rules))
    for review, per in STOPS.items():
        cells = []
        for rule in rules:
            runs = per.get(rule, [])
            cells.append(f"{np.mean([s.recall for s, _ in runs]):.3f} / {np.mean([1 - s.share for s, _ in runs]):.2f} / "
                         f"{np.mean([w for _, w in runs]):.2f}" if runs else "-")  # fmt: skip
        print(f"{review[:44]:<44}" + "".join(f" {c:>24}" for c in cells))
    for rule in rules:
        runs = [run for per in STOPS.values() for run in per.get(rule, [])]
        recalls = np.asarray([s.recall for s, _ in runs])
        n_reached = int((recalls >= STOP_RECALL).sum())
        reached = n_reached / len(runs)
        saved = float(np.mean([1 - s.share for s, _ in runs]))
        saved95 = float(np.mean([w for _, w in runs]))
        kept = saved / saved95 if saved95 else 0.0
        if rule == HINDSIGHT:
            print(f"{rule} (hindsight, not a rule): work saved {saved:.3f} vs {saved95:.3f} at 95 % recall = "
                  f"{kept:.2f} of it")  # fmt: skip
            continue
        print(f"{rule}: {len(runs)} runs on {len(STOPS)} review(s); recall >= {STOP_RECALL} at the advised stop in "
              f"{n_reached}/{len(runs)} = {reached:.1%} (target {STOP_RUNS:.0%}: "
              f"{'met' if reached >= STOP_RUNS else 'NOT met'}); recall there median {np.median(recalls):.3f}, worst "
              f"{recalls.min():.3f}; work saved at the stop median {np.median([1 - s.share for s, _ in runs]):.3f}, "
              f"mean {saved:.3f} vs {saved95:.3f} at 95 % recall (the baseline, same replays) = {kept:.2f} of it "
              f"(target {STOP_WORK}: {'met' if kept >= STOP_WORK else 'NOT met'})")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--csv", action="append", type=Path,
                    help="a labelled CSV (repeat for several reviews; default: the demo corpus)")  # fmt: skip
    ap.add_argument("--label", default="label_included")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--retrain-every", type=int, default=1)
    ap.add_argument("--asreview-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--skip-asreview", action="store_true")
    ap.add_argument("--every-other-label", action="store_true",
                    help="also print the WSS@95 of ranking each include with every other label known")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "screening_recall.png")
    ap.add_argument("--stop-rules", default="buscar_ranked,buscar,recall_estimate",
                    help="stopping rules replayed on each of ra's orders (comma-separated; empty: none)")  # fmt: skip
    ap.add_argument("--stop-repeats", type=int, default=5, help="random sample draws per order for buscar")
    args = ap.parse_args()
    args.stop_rules = [rule for rule in args.stop_rules.split(",") if rule]
    args.csv = [csv.resolve() for csv in args.csv or [ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"]]

    cfg = load_config(ROOT / "config.toml")
    exe = None if args.skip_asreview else asreview_bin(args.asreview_venv)
    results = [(csv, *compare(csv, args.label, args, cfg, exe)) for csv in args.csv]
    if STOPS:
        print_stop_table()
    if exe is None:
        return 0
    gains = [r.wss95 - a.wss95 for _, r, a in results if a is not None]
    if len(results) > 1:
        print(f"\n{'review':<44} {'ra WSS@95':>9} {'ASReview':>9} {'gain':>7}   ra recall@10% / ASReview")
        for csv, r, a in results:
            assert a is not None
            print(f"{csv.stem[:44]:<44} {r.wss95:9.3f} {a.wss95:9.3f} {r.wss95 - a.wss95:+7.3f}   "
                  f"{r.recall_at_10:.3f} / {a.recall_at_10:.3f}")  # fmt: skip
    gain = float(np.mean(gains))
    ahead = sum(g > 0 for g in gains)
    print(f"\nWSS@95 ra - ASReview, mean over {len(gains)} review(s): {gain:+.3f} (ra ahead on {ahead}); "
          f"target +{TARGET:.2f}: {'met' if gain >= TARGET else 'NOT met'}")  # fmt: skip
    if len(results) == 1:
        print("one dataset, one review topic: these figures do not show how either tool does on other reviews")
    return 0


if __name__ == "__main__":
    sys.exit(main())
