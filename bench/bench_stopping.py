"""Stopping rules beyond the shipped ones, on ra's screening orders of real reviews, parameters by leave-one-review-out.

usage: python bench/bench_stopping.py --orders DIR [--csv FILE[,label=COLUMN][,seeds=N] ...] [--seeds 3]
                                      [--retrain-every 10] [--reviews NAME ...]

For each --csv and seed, ra's screening is replayed (bench_screening's protocol: priors 1 include + 1 exclude drawn
per seed, the model ra ships, retrained every --retrain-every decisions) to the last record, and DIR keeps
<review>__s<seed>.npz: the labels in screening order and, at each retrain once the aid may speak (10 % screened,
3 includes), the Quant statistics of the undecided records. A replay already in DIR is not run again; without --csv
the report reads every replay in DIR (--reviews: only those).

Rules replayed on every order (the first stop each advises; "work saved" = share of records not screened there):
- shipped: buscar_ranked, buscar (3 random-sample draws), recall_estimate; `hindsight` = stopping.hypergeometric_best;
- quant_<calibration>:z (Yang, Lewis & Frieder 2021, "Heuristic stopping rules for technology-assisted review"): the
  includes left = the sum of the include probabilities of the undecided records; stop when
  found / (found + left + z * sd) >= 0.95, sd = sqrt(sum p (1 - p)) (z = 0: Quant; z > 0: QuantCI). The ranker's
  scores are a rank fusion, not probabilities, so they are calibrated on the screened records. Those are a biased
  sample (the top of every earlier ranking): the current model has seen them, so each is scored by a model trained
  on the other two thirds (3-fold cross-fitting) and the calibrator is fitted on those out-of-fold scores; the
  undecided records get the mean probability of the three fold models. Selection by the ranking is selection on the
  score (covariate shift): P(include | score) is estimated where the screened records reach and extrapolated below
  them by the calibrator's form. `platt`: logistic on the score; `plattlog`: logistic on log(score) (a power law of
  the rank: RRF scores go as 1 / rank); `iso`: isotonic (no extrapolation: the lowest screened bin's rate);
  `plattlog_full`: plattlog applied to the full model's scores; `paper`: the paper's own estimate, in-sample
  probabilities (Platt) of the current model for screened and undecided alike, est = sum over screened / sum over
  all, with the paper's variance;
- wallenius:odds: buscar_ranked's test with each run drawn from a biased urn (Wallenius' noncentral
  hypergeometric, scipy.stats.nchypergeom_wallenius), an include `odds` times as likely to be drawn as an exclude;
- knee (Cormack & Grossman 2016, "Engineering quality and reliability in technology-assisted review", SIGIR), their
  parameters: the knee = the point of the gain curve farthest above the line from the origin to the current point,
  rho = slope before / slope after it (+1 smoothed), stop when rho >= 156 - min(includes found, 150) and at least
  150 records are screened; budget, their other rule: rho >= 6 and screened >= 10 N / includes found, or 75 % of
  the records; knee_rho:t, the same knee with a fixed threshold t (from the aid's 10 %);
- two signals: knee_and_quant:t/z (knee_rho:t and quant_plattlog:z both say stop); knee_check:t/m, budget_check:m
  and quant_check:z/m (when the ranking signal fires, a random sample of m of the records left is screened: no
  include -> stop, else ranked screening goes on and the check is taken again m ranked records later; 3 draws);
  knee_buscar:t (ranked screening to knee_rho:t, then buscar's random sample and test: its guarantee holds).
Parameters (z, odds, t, m) are never chosen on the review reported: for each review the grid value with the most work
saved on the other reviews among those reaching 0.95 recall in >= 95 % of their runs (else the safest) is applied to
it. Printed per rule: runs at >= 0.95 recall at the stop / runs, the median and worst recall there, the median work
saved there, work saved at the stop / work saved at the 95 %-recall point of the same replays (the baseline: ratio of
the means over runs, and the median over reviews of each review's ratio), the values chosen; then per review. Targets
(issue 30: >= 95 % of runs, >= 0.75 of the work saved) printed, never asserted.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ra_agent.config import Config, ScreenConfig, load_config  # noqa: E402
from ra_agent.screen.model import Fitted, Prepared, fit, prepare  # noqa: E402
from ra_agent.screen.simulate import choose_priors, read_labelled_csv, replay, simulation_features  # noqa: E402
from ra_agent.screen.stopping import first_stop, h0_pvalue, hypergeometric_best, needed_left  # noqa: E402

TARGET, ALPHA = 0.95, 0.05
STOP_RUNS, STOP_WORK = 0.95, 0.75
COLS = ("n", "found", "known_ps", "unknown_ps", "all_var", "unknown_var", "u_platt", "v_platt", "u_plattlog",
        "v_plattlog", "u_iso", "v_iso", "u_plattlog_full", "v_plattlog_full")  # fmt: skip
Z = (0, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8)
ODDS = (1.5, 2, 3, 5, 10)
M = (20, 50, 100, 200)
PER_REVIEW = ("buscar_ranked", "buscar", "hindsight", "recall_estimate", "budget", "knee_rho", "wallenius",
              "quant_paper", "quant_plattlog", "quant_iso", "knee_and_quant", "quant_check", "knee_buscar")  # fmt: skip
RULES_VERSION = 1  # bump when a rule or grid below changes (the stored stop points are then recomputed)
RHO = (2, 3, 4, 6, 10, 20, 50)  # knee_rho: fixed thresholds (the published rule's ranges from 6 to 156)
CALIBRATIONS = ("paper", "platt", "plattlog", "iso", "plattlog_full")


# ---------------------------------------------------------------- replays with the Quant statistics


def _platt(scores: np.ndarray, y: np.ndarray, feature: Callable) -> Callable[[np.ndarray], np.ndarray]:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e4, max_iter=1000).fit(feature(scores)[:, None], y)
    return lambda s: model.predict_proba(feature(s)[:, None])[:, 1]


def _log(s: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(s, 1e-9))


def _same(s: np.ndarray) -> np.ndarray:
    return s


def quant_statistics(prep: Prepared, rows: np.ndarray, y: np.ndarray, undecided: np.ndarray, fitted: Fitted,
                     screen: ScreenConfig, seed: int) -> list[float]:  # fmt: skip
    """The sums (include probability, p (1 - p)) over the undecided records under each calibration (COLS[2:])."""
    from sklearn.isotonic import IsotonicRegression

    s = fitted.scores
    p = _platt(s[rows], y, _same)(s)  # the paper's: in-sample scores of the current model
    out = [p[rows].sum(), p[undecided].sum(), (p * (1 - p)).sum(), (p[undecided] * (1 - p[undecided])).sum()]
    rng = np.random.default_rng(seed)
    fold = np.empty(len(rows), dtype=int)
    for cls in (0, 1):  # stratified 3 folds
        idx = np.flatnonzero(y == cls)
        fold[rng.permutation(idx)] = np.arange(len(idx)) % 3
    out_of_fold, on_undecided = np.empty(len(rows)), []
    for f in range(3):
        train = fold != f
        model = fit(prep, rows[train], y[train], screen, seed)
        out_of_fold[~train] = model.scores[rows[~train]]
        on_undecided.append(model.scores[undecided])
    for feature in (_same, _log):
        calibrated = _platt(out_of_fold, y, feature)
        p = np.mean([calibrated(x) for x in on_undecided], axis=0)
        out += [p.sum(), (p * (1 - p)).sum()]
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(out_of_fold, y)
    p = np.mean([iso.predict(x) for x in on_undecided], axis=0)
    out += [p.sum(), (p * (1 - p)).sum()]
    p = _platt(out_of_fold, y, _log)(s[undecided])
    return [float(x) for x in out + [p.sum(), (p * (1 - p)).sum()]]


def replay_with_statistics(prep: Prepared, labels: np.ndarray, screen: ScreenConfig, seed: int, every: int
                           ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(order, Quant statistics per retrain): simulate.replay to the last record. Retrained every `every` decisions,
    every 50 once every include is found and a quarter of the records left at the 95 %-recall point are screened
    (a stop that late misses the work target whatever the rule)."""
    n, total = len(labels), int(labels.sum())
    speak = max(1, math.ceil(screen.stop_min_screened * n))
    snaps: list[list[float]] = []

    def observe(fitted: Fitted, order: list[int], undecided: np.ndarray) -> int:
        rows = np.asarray(order)
        y = labels[rows]
        found = np.cumsum(y)
        if len(rows) >= speak and y.sum() >= 3:
            snaps.append([len(rows), int(y.sum()), *quant_statistics(prep, rows, y, undecided, fitted, screen, seed)])
        reached = np.flatnonzero(found >= math.ceil(TARGET * total))
        late = found[-1] >= total and len(reached) and len(rows) >= reached[0] + 1 + 0.25 * (n - reached[0] - 1)
        return 50 if late else every

    order = replay(prep, labels, choose_priors(labels, seed), screen, seed=seed, observe=observe)
    return order, np.asarray(snaps, dtype=np.float64).reshape(-1, len(COLS))


def run_replays(cfg: Config, specs: list[str], seeds: int, every: int, orders: Path) -> None:
    from threadpoolctl import threadpool_limits

    for spec in specs:
        path, *opts = spec.split(",")
        opt = dict(o.split("=", 1) for o in opts)
        name, n_seeds = Path(path).stem, int(opt.get("seeds", seeds))
        todo = [s for s in range(n_seeds) if not (orders / f"{name}__s{s}.npz").exists()]
        if not todo:
            continue
        data = read_labelled_csv(path, opt.get("label", "label_included"))
        features = simulation_features(cfg, data, cache=orders / "cache")
        prep = prepare(features, cfg.screen)
        for seed in todo:
            t = time.time()
            with threadpool_limits(1):
                order, snaps = replay_with_statistics(prep, data.labels, cfg.screen, seed, every)
            np.savez(orders / f"{name}__s{seed}.npz", order=order, y=data.labels[order], snaps=snaps,
                     cols=np.asarray(COLS))  # fmt: skip
            print(f"{name} seed {seed}: {len(order)} records replayed ({time.time() - t:.0f}s)", flush=True)


# ---------------------------------------------------------------- the rules


def knee_rho(y: np.ndarray) -> np.ndarray:
    """Cormack & Grossman's slope ratio at every rank s (0 before the first include): the knee is the point of the
    gain curve farthest above the chord from the origin to (s, includes found), rho = slope before it / slope after
    it, the latter +1 smoothed."""
    f, n = np.cumsum(y).astype(float), len(y)
    rho = np.zeros(n)
    for s in range(2, n + 1):
        r = f[s - 1]
        if r:
            i = int(np.argmax(f[: s - 1] * s - np.arange(1, s) * r)) + 1
            rho[s - 1] = (f[i - 1] / i) / ((r - f[i - 1] + 1) / (s - i))
    return rho


def knee_says(y: np.ndarray, rho: np.ndarray, method: str) -> np.ndarray:
    """Per rank: the published knee method (rho >= 156 - min(found, 150), 150 records screened), the budget method
    (rho >= 6 and 10 N / found screened, or 75 % of the records), or a knee with a fixed threshold ("knee:6")."""
    f, n = np.cumsum(y), len(y)
    ranks = np.arange(1, n + 1)
    if method == "knee":
        return (rho >= 156 - np.minimum(f, 150)) & (ranks >= 150) & (f > 0)
    if method == "budget":
        return ((rho >= 6) & (ranks >= 10 * n / np.maximum(f, 1)) & (f > 0)) | (ranks >= 0.75 * n)
    return (rho >= float(method.split(":")[1])) & (f > 0)


def first(says: np.ndarray, start: int = 1) -> int:
    hits = np.flatnonzero(says[start - 1 :])
    return int(hits[0]) + start if len(hits) else len(says)


def wallenius_pvalue(y: np.ndarray, total: int, odds: float) -> float:
    """buscar_ranked's least p over the runs after each include, each drawn from a biased urn."""
    from scipy.stats import nchypergeom_wallenius

    n, found = len(y), int(y.sum())
    starts = np.concatenate([[0], np.flatnonzero(y == 1) + 1])
    starts = starts[starts < n]
    before = np.concatenate([[0], np.cumsum(y)])[starts]
    k, drawn, urn = found - before, n - starts, total - starts
    needed = np.floor(found / TARGET + 1e-9).astype(np.int64) + 1 - before
    if (needed > urn).any():
        return 0.0
    test = needed > k
    if not test.any():
        return 1.0
    return float(np.nanmin(nchypergeom_wallenius.cdf(k[test], urn[test], needed[test], drawn[test], odds)))


def wallenius_stop(y: np.ndarray, odds: float, speak: int) -> int:
    f = np.cumsum(y)
    for n in range(speak, len(y) + 1, 10):
        if f[n - 1] and wallenius_pvalue(y[:n], len(y), odds) < ALPHA:
            return n
    return len(y)


def quant_says(snaps: np.ndarray, calibration: str, z: float, n: int) -> np.ndarray:
    """Per record count: the latest Quant estimate (lower end, z sd) reaches the target."""
    c = {name: i for i, name in enumerate(COLS)}
    out = np.zeros(n, dtype=bool)
    if not len(snaps):
        return out
    at, found = snaps[:, 0].astype(int), snaps[:, 1]
    if calibration == "paper":
        known, left, var_all, var_left = (snaps[:, c[k]] for k in COLS[2:6])
        total = known + left
        var = known**2 / total**4 * var_all + (var_all - var_left) / total**2
        low = known / total - z * np.sqrt(var)
    else:
        low = found / (found + snaps[:, c["u_" + calibration]] + z * np.sqrt(snaps[:, c["v_" + calibration]]))
    ends = np.append(at[1:], n + 1)
    for a, b, ok in zip(at, ends, low >= TARGET, strict=True):
        out[a - 1 : b - 1] = ok
    return out


def check_then_stop(y: np.ndarray, says: np.ndarray, m: int, seed: int, speak: int) -> tuple[int, int]:
    """(screened, includes found): a ranking signal fires -> a random sample of m of the records left; no include in it
    -> stop; else ranked screening goes on and the signal is checked again m ranked records later."""
    rng, n = np.random.default_rng(seed), len(y)
    sampled = np.zeros(n, dtype=bool)
    at = speak
    while True:
        t = first(says, at)
        if t >= n:
            return n, int(y.sum())
        left = np.flatnonzero(~sampled)
        draw = rng.permutation(left[left >= t])[:m]
        sampled[draw] = True
        if not y[draw].any():
            return t + int(sampled[t:].sum()), int(y[:t].sum() + y[t:][sampled[t:]].sum())
        at = t + m


def sample_after(y: np.ndarray, t: int, seed: int) -> tuple[int, int]:
    """(screened, includes found): ranked screening to t, then buscar's random sample of the rest until p < alpha."""
    n = len(y)
    if t >= n:
        return n, int(y.sum())
    yy = np.concatenate([y[:t], np.random.default_rng(seed).permutation(y[t:])])
    f = np.cumsum(yy)
    base = int(f[t - 1])
    for k in range(t + 1, n + 1):
        r = int(f[k - 1])
        if r and h0_pvalue(r - base, n - t, needed_left(r, base, TARGET), k - t) < ALPHA:
            return k, r
    return n, int(y.sum())


def stops(path: Path, screen: ScreenConfig) -> tuple[float, dict[str, list[tuple[int, int]]]]:
    """(work saved at 95 % recall, {rule: [(screened, includes found)]}) on one stored replay."""
    z = np.load(path)
    y, snaps = z["y"], z["snaps"]
    n, includes = len(y), int(y.sum())
    f = np.cumsum(y)
    speak = max(1, math.ceil(screen.stop_min_screened * n))
    out: dict[str, list[tuple[int, int]]] = {}

    def put(rule: str, screened: int, found: int | None = None) -> None:
        out.setdefault(rule, []).append((screened, int(f[screened - 1]) if found is None else found))

    def rule(name: str) -> ScreenConfig:
        from dataclasses import replace

        return replace(screen, stop_rule=name)

    for name in ("buscar_ranked", "recall_estimate"):
        put(name, first_stop(y, rule(name)).screened)
    for draw in range(3):
        s = first_stop(y, rule("buscar"), seed=draw)
        put("buscar", s.screened, round(s.recall * includes))
    put("hindsight", hypergeometric_best(y, screen))
    rho = knee_rho(y)
    knee = knee_says(y, rho, "knee")
    put("knee", first(knee))
    budget = knee_says(y, rho, "budget")
    put("budget", first(budget))
    tuned = {t: knee_says(y, rho, f"knee:{t}") for t in RHO}
    for t in RHO:
        put(f"knee_rho:{t}", first(tuned[t], speak))
    for odds in ODDS:
        put(f"wallenius:{odds}", wallenius_stop(y, odds, speak))
    for calibration in CALIBRATIONS:
        for zz in Z:
            put(f"quant_{calibration}:{zz}", first(quant_says(snaps, calibration, zz, n)))
    quant = {zz: quant_says(snaps, "plattlog", zz, n) for zz in Z}
    for t in RHO:
        for zz in Z:
            put(f"knee_and_quant:{t}/{zz}", first(tuned[t] & quant[zz], speak))
    for m in M:
        for draw in range(3):
            put(f"budget_check:{m}", *check_then_stop(y, budget, m, 100 + draw, speak))
            for t in RHO:
                put(f"knee_check:{t}/{m}", *check_then_stop(y, tuned[t], m, 100 + draw, speak))
            for zz in Z:
                put(f"quant_check:{zz}/{m}", *check_then_stop(y, quant[zz], m, 100 + draw, speak))
    for t in RHO:
        for draw in range(3):
            put(f"knee_buscar:{t}", *sample_after(y, first(tuned[t], speak), 200 + draw))
    at95 = int(np.argmax(f >= math.ceil(TARGET * includes))) + 1
    return 1 - at95 / n, out


# ---------------------------------------------------------------- leave one review out

Run = tuple[float, float, float]  # (work saved at the stop, work saved at 95 % recall, recall at the stop)


@dataclass(frozen=True)
class Summary:
    runs: int
    reached: int  # runs at >= TARGET recall
    kept: float  # work saved at the stop / at 95 % recall: ratio of the means over runs
    median_recall: float
    worst_recall: float
    median_saved: float  # work saved at the stop
    median_saved95: float  # the baseline: work saved at the 95 %-recall point of the same replays

    @property
    def share(self) -> float:
        return self.reached / self.runs if self.runs else 0.0


def summary(runs: list[Run]) -> Summary:
    """The runs' figures: how many reach the target recall, the recall and work saved at the stop, the ratio kept."""
    if not runs:
        return Summary(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)
    saved, saved95, recall = (np.asarray([r[i] for r in runs]) for i in range(3))
    mean95 = float(saved95.mean())
    return Summary(len(runs), int((recall >= TARGET - 1e-9).sum()), float(saved.mean()) / mean95 if mean95 else 0.0,
                   float(np.median(recall)), float(recall.min()), float(np.median(saved)), float(np.median(saved95)))  # fmt: skip


def held_out(table: dict[str, dict[str, list[Run]]], family: str) -> tuple[dict[str, list[Run]], Counter]:
    """Per review, the runs of the family's grid value chosen on the other reviews."""
    params = sorted({rule for per in table.values() for rule in per if rule.split(":")[0] == family})
    runs, chosen = {}, Counter()

    def score(rule: str, left_out: str) -> tuple[bool, float]:
        s = summary([r for other in table if other != left_out for r in table[other][rule]])
        return s.share >= STOP_RUNS, s.kept if s.share >= STOP_RUNS else s.share

    for review in table:
        best = max(params, key=lambda rule: score(rule, review)) if len(params) > 1 else params[0]
        runs[review] = table[review][best]
        chosen[best.partition(":")[2]] += 1
    return runs, chosen


def cached_stops(path: Path, screen: ScreenConfig) -> tuple[float, dict[str, list[tuple[int, int]]]]:
    """`stops`, kept beside the replay (<replay>.stops.json) for this RULES_VERSION and these knobs."""
    import json

    version = (
        f"{RULES_VERSION} {screen.stop_min_screened} {screen.stop_recall_target} {screen.stop_confidence} "
        f"{screen.stop_sample_from} {screen.stop_window}"
    )
    cache = path.with_suffix(".stops.json")
    if cache.exists() and cache.stat().st_mtime >= path.stat().st_mtime:
        kept = json.loads(cache.read_text())
        if kept["version"] == version:
            return kept["saved95"], {rule: [tuple(run) for run in runs] for rule, runs in kept["rules"].items()}
    saved95, per_rule = stops(path, screen)
    cache.write_text(json.dumps({"version": version, "saved95": saved95, "rules": per_rule}))
    return saved95, per_rule


def report(orders: Path, reviews: list[str], screen: ScreenConfig) -> None:
    table: dict[str, dict[str, list[Run]]] = {}
    for path in sorted(orders.glob("*__s*.npz")):
        review = path.stem.split("__s")[0]
        if reviews and review not in reviews:
            continue
        saved95, per_rule = cached_stops(path, screen)
        y = np.load(path)["y"]
        n, includes = len(y), int(y.sum())
        for rule, runs in per_rule.items():
            table.setdefault(review, {}).setdefault(rule, []).extend(
                (1 - screened / n, saved95, found / includes) for screened, found in runs
            )
    families = sorted({rule.split(":")[0] for per in table.values() for rule in per})
    if len(table) < 2:
        print("one review: the parameters below are not chosen on other reviews (the grid's first value)")
    base = summary([r for per in table.values() for r in per["buscar_ranked"]])
    print(f"\n{len(table)} reviews, {base.runs} replays; parameters chosen leaving the review out")
    print(f"baseline, measured on the same replays: the 95 %-recall point (known only in hindsight) saves "
          f"{base.median_saved95:.3f} of the work (median over replays); buscar_ranked is the shipped default, "
          f"recall_estimate the earlier one")  # fmt: skip
    print("reached: runs at recall >= 0.95 at the advised stop / runs (a rule with random draws has several per "
          "replay); saved: share of the records not screened at the stop; kept: work saved at the stop / at the "
          "95 %-recall point (ratio of the means over runs; median over reviews of each review's ratio)")  # fmt: skip
    head = ("rule", "reached", "share", "med recall", "worst", "med saved", "kept", "kept/review", "chosen (x reviews)")
    print(f"{head[0]:<20} {head[1]:>9} {head[2]:>6} {head[3]:>10} {head[4]:>6} {head[5]:>9} {head[6]:>5} "
          f"{head[7]:>11}  {head[8]}")  # fmt: skip
    held = {}
    for family in families:
        runs, chosen = held_out(table, family)
        held[family] = runs
        s = summary([r for per in runs.values() for r in per])
        median = float(np.median([summary(per).kept for per in runs.values()]))
        met = " MEETS BOTH" if s.share >= STOP_RUNS and s.kept >= STOP_WORK else ""
        values = ", ".join(f"{value} x{count}" for value, count in chosen.most_common() if value)
        note = " (hindsight, not a rule)" if family == "hindsight" else ""
        print(f"{family:<20} {f'{s.reached}/{s.runs}':>9} {s.share:6.1%} {s.median_recall:10.3f} {s.worst_recall:6.3f} "
              f"{s.median_saved:9.3f} {s.kept:5.2f} {median:11.2f}  {values}{met}{note}")  # fmt: skip
    print(f"targets (issue 30): recall >= 0.95 in >= {STOP_RUNS:.0%} of runs and kept >= {STOP_WORK}")
    shown = [family for family in PER_REVIEW if family in held]
    print("\nper review (held-out choice): runs at >= 0.95 recall / runs, then kept (work saved at the stop / at 95 % "
          "recall)")  # fmt: skip
    print(f"{'review':<36} {'saved@95':>8}" + "".join(f" {family[:14]:>14}" for family in shown))
    for review, per in table.items():
        cells = []
        for family in shown:
            s = summary(held[family][review])
            cells.append(f"{s.reached}/{s.runs} {s.kept:.2f}")
        print(f"{review[:36]:<36} {np.mean([r[1] for r in per['buscar_ranked']]):8.2f}"
              + "".join(f" {c:>14}" for c in cells))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--orders", type=Path, required=True, help="folder of the stored replays (made if absent)")
    ap.add_argument("--csv", action="append", default=[], help="FILE[,label=COLUMN][,seeds=N] (repeat)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--retrain-every", type=int, default=10)
    ap.add_argument("--reviews", nargs="*", default=[], help="report only these reviews (file stems)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    cfg = load_config(ROOT / "config.toml")
    args.orders.mkdir(parents=True, exist_ok=True)
    run_replays(cfg, args.csv, args.seeds, args.retrain_every, args.orders)
    report(args.orders, args.reviews, cfg.screen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
