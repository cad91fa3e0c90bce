"""Replay known labels through the screening loop: WSS@95, recall at 10 % screened, time to discovery, recall curve."""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ra_agent.config import Config, ScreenConfig
from ra_agent.fileio import InputError, check_text_file
from ra_agent.screen.features import Features, ScreenRecord, split_ids, work_ids
from ra_agent.screen.model import MODEL_NAME, Fitted, Prepared, choose, fit, prepare
from ra_agent.screen.stopping import StopPoint, first_stop

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
Observer = Callable[[Fitted, list[int], np.ndarray], "int | None"]  # (model, rows decided in order, undecided rows)
# columns of a labelled export naming the works each record cites, and the record's own work id
REF_COLUMNS = ("referenced_works", "references", "cited_works", "cited_references", "refs")
ID_COLUMNS = ("openalex_id", "openalex", "work_id")


class LabelError(InputError):
    """A label column is missing or holds a value that is not 0/1 (names the file, line and column)."""


@dataclass(frozen=True)
class LabelledSet:
    records: list[ScreenRecord]
    labels: np.ndarray  # 1 include, 0 exclude
    source: str


@dataclass(frozen=True)
class Metrics:
    wss95: float  # work saved over random at 95 % recall: (N - screened at 95 %) / N - 0.05
    recall_at_10: float  # share of includes found after screening 10 % of the records
    atd: float  # average time to discovery: mean share of records screened when each include is found
    screened_at_95: int
    n: int
    includes: int


def read_labelled_csv(path: str | Path, label: str) -> LabelledSet:
    """The records of a CSV export with a 0/1 label column (PMID, title, abstract, year and DOI columns as `ra import`
    reads them; a row without a PMID keeps its row number as id). Citation links when the export has them: the
    works each record cites (`REF_COLUMNS`, ids separated by spaces, ";" or ",") and its own OpenAlex id
    (`ID_COLUMNS`). A missing label column is a one-line LabelError."""
    from ra_agent.ingest.importers import CSV_COLUMNS

    path = Path(path)
    check_text_file(path, "labelled CSV")
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        headers = list(reader.fieldnames or [])
        if label not in headers:
            raise LabelError(path, f"no label column {label!r} (columns: {', '.join(headers)})", line=1, field=label)
        key = {h.strip().lower().replace(" ", "_"): h for h in headers}

        def column(spellings: tuple[str, ...]) -> str | None:
            return next((key[s] for s in spellings if s in key), None)

        cols = {name: column(CSV_COLUMNS[name]) for name in ("pmid", "title", "abstract", "year", "doi")}
        cols |= {"refs": column(REF_COLUMNS), "work_id": column(ID_COLUMNS)}
        records, labels = [], []
        for line, row in enumerate(reader, start=2):
            raw = (row.get(label) or "").strip()
            if raw not in ("0", "1", "0.0", "1.0"):
                raise LabelError(path, f"label {raw!r} is not 0 or 1", line=line, field=label)
            records.append(_record(row, cols, line))
            labels.append(int(float(raw)))
    return LabelledSet(records, np.asarray(labels, dtype=np.int64), path.name)


def _record(row: dict, cols: dict[str, str | None], line: int) -> ScreenRecord:
    def get(name: str) -> str:
        col = cols[name]
        return (row.get(col) or "").strip() if col else ""

    pmid = get("pmid")
    year = get("year")
    return ScreenRecord(
        pmid=int(pmid) if pmid.isdigit() else -line,
        title=get("title"),
        abstract=get("abstract"),
        year=int(float(year)) if year.replace(".", "", 1).isdigit() else None,
        ids=work_ids(pmid, get("doi"), get("work_id")),
        refs=split_ids(get("refs")),
    )


def metrics(labels_in_order: np.ndarray) -> Metrics:
    """Metrics of one screening order (labels in the order screened, priors first)."""
    y = np.asarray(labels_in_order)
    n, total = len(y), int(y.sum())
    found = np.cumsum(y)
    at95 = int(np.argmax(found >= np.ceil(0.95 * total))) + 1 if total else n
    at10 = max(1, int(n * 0.10))
    positions = np.flatnonzero(y == 1) + 1
    return Metrics(
        wss95=round((n - at95) / n - 0.05, 4) if total else 0.0,
        recall_at_10=round(float(found[at10 - 1]) / total, 4) if total else 0.0,
        atd=round(float(positions.mean()) / n, 4) if total else 0.0,
        screened_at_95=at95,
        n=n,
        includes=total,
    )


def choose_priors(labels: np.ndarray, seed: int) -> tuple[int, int]:
    """One include and one exclude (row numbers) drawn with `seed`; the same rows for every method compared."""
    rng = np.random.default_rng(seed)
    return int(rng.choice(np.flatnonzero(labels == 1))), int(rng.choice(np.flatnonzero(labels == 0)))


def replay(
    prep: Prepared,
    labels: np.ndarray,
    priors: Sequence[int],
    screen: ScreenConfig,
    *,
    seed: int,
    retrain_every: int = 1,
    progress: Progress | None = None,
    observe: Observer | None = None,
) -> np.ndarray:
    """The screening order (row numbers, priors first) the model produces when a reviewer's decisions are `labels`.

    Retrains after every `retrain_every` decisions; once every include is found the rest follow in the
    last model's order (they are all excludes, so the metrics do not depend on it). With `observe`, it sees every
    model trained (with the decisions so far) and returns how many decisions come before the next one (None:
    `retrain_every`); the replay then goes on retraining to the last record (a stopping rule that reads the model's
    scores needs them past the last include).
    """
    n, total = len(labels), int(labels.sum())
    order = list(priors)
    decided = np.zeros(n, dtype=bool)
    decided[order] = True
    rng = np.random.default_rng(seed)
    found = int(labels[order].sum())
    while (found < total or observe) and len(order) < n:
        fitted = fit(prep, order, labels[order], screen, seed)
        undecided = np.flatnonzero(~decided)
        batch = (observe(fitted, order, undecided) if observe else None) or retrain_every
        for row, _why in choose(fitted, undecided, batch, screen, rng, found):
            order.append(row)
            decided[row] = True
            found += int(labels[row])
        if progress:
            progress(len(order), n)
    rest = np.flatnonzero(~decided)
    if progress:
        progress(n, n)
    return np.asarray(order + rest.tolist(), dtype=np.int64)


def simulate(
    features: Features,
    labels: np.ndarray,
    screen: ScreenConfig,
    *,
    seed: int,
    priors: Sequence[int] | None = None,
    retrain_every: int = 1,
    progress: Progress | None = None,
) -> tuple[np.ndarray, Metrics]:
    """(screening order, metrics) of one replay with priors = 1 include + 1 exclude drawn with `seed`."""
    prep = prepare(features, screen)
    priors = list(priors) if priors is not None else list(choose_priors(labels, seed))
    order = replay(prep, labels, priors, screen, seed=seed, retrain_every=retrain_every, progress=progress)
    return order, metrics(labels[order])


def random_orders(labels: np.ndarray, priors: Sequence[int], seed: int, runs: int) -> list[np.ndarray]:
    """`runs` random screening orders after the same priors (the baseline every method must beat)."""
    rng = np.random.default_rng(seed)
    rest = np.setdiff1d(np.arange(len(labels)), priors)
    return [np.concatenate([np.asarray(priors), rng.permutation(rest)]) for _ in range(runs)]


def plot_recall(curves: dict[str, np.ndarray], path: str | Path, title: str, *, total: int | None = None) -> Path:
    """Recall against records screened (share) for each named order of labels; a diagonal for random order.
    `total`: the record count when a curve covers only the records screened so far (recall is then of the
    includes found so far)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=110)
    for name, labels_in_order in curves.items():
        y = np.asarray(labels_in_order)
        x = np.arange(1, len(y) + 1) / (total or len(y))
        ax.plot(x, np.cumsum(y) / max(1, y.sum()), label=name, linewidth=1.6)
    ax.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1, label="expected random")
    ax.axhline(0.95, color="grey", linewidth=0.6, linestyle="--")
    ax.set_xlabel("share of records screened")
    ax.set_ylabel("recall (share of includes found)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


@dataclass
class SimulationReport:
    source: str
    n: int
    includes: int
    seeds: list[int]
    priors: list[tuple[int, int]]  # (include row, exclude row) per seed
    runs: list[Metrics]  # ra, one per seed
    random: Metrics  # mean of random orders after the same priors
    png: Path | None
    retrain_every: int
    linked: int = 0  # records with a citation link to another record (0: the export lists no references)
    stops: list[StopPoint] = field(default_factory=list)  # where the stopping aid first advised stopping, per seed

    def mean(self) -> Metrics:
        return mean_metrics(self.runs)

    def lines(self) -> list[str]:
        out = [f"{self.source}: {self.n} records, {self.includes} includes; priors 1 include + 1 exclude per seed; "
               f"retrained every {self.retrain_every} decision(s); citation links on {self.linked} records"]  # fmt: skip
        for seed, (inc, exc), m, stop in zip(self.seeds, self.priors, self.runs, self.stops, strict=True):
            out.append(f"  seed {seed} (priors rows {inc}, {exc}): WSS@95 {m.wss95:.3f}  recall@10% "
                       f"{m.recall_at_10:.3f}  ATD {m.atd:.3f}  screened for 95% recall: {m.screened_at_95}")  # fmt: skip
            out.append("    " + stop_line(stop, m))
        m, r = self.mean(), self.random
        out.append(f"ra (mean of {len(self.runs)}): WSS@95 {m.wss95:.3f}  recall@10% {m.recall_at_10:.3f}  "
                   f"ATD {m.atd:.3f}")  # fmt: skip
        if self.stops:
            out.append(mean_stop_line(self.stops, self.runs))
        out.append(f"random order (mean): WSS@95 {r.wss95:.3f}  recall@10% {r.recall_at_10:.3f}  ATD {r.atd:.3f}")
        if self.png:
            out.append(f"recall curve: {self.png}")
        return out


def stop_line(stop: StopPoint, m: Metrics) -> str:
    """Where the stopping aid first advised stopping on one order, beside the 95 %-recall point."""
    sampled = f", random sample from record {stop.sample_from + 1}" if stop.sample_from is not None else ""
    return (
        f"stop advised ({stop.rule}{sampled}) after {stop.screened} records ({stop.share:.1%}): recall "
        f"{stop.recall:.3f}; work saved {1 - stop.share:.3f} vs {1 - m.screened_at_95 / m.n:.3f} at 95% recall"
    )


def mean_stop_line(stops: Sequence[StopPoint], runs: Sequence[Metrics]) -> str:
    saved = float(np.mean([1 - s.share for s in stops]))
    saved95 = float(np.mean([1 - m.screened_at_95 / m.n for m in runs]))
    reached = sum(s.recall >= 0.95 for s in stops)
    return (f"stop advised ({stops[0].rule}, mean of {len(stops)}): after {np.mean([s.share for s in stops]):.1%} "
            f"of the records, recall {np.mean([s.recall for s in stops]):.3f} (>= 0.95 in {reached} of "
            f"{len(stops)}); work saved {saved:.3f} vs {saved95:.3f} at 95% recall "
            f"({saved / saved95 if saved95 else 0:.2f} of it)")  # fmt: skip


def mean_metrics(runs: Sequence[Metrics]) -> Metrics:
    return Metrics(
        wss95=round(float(np.mean([m.wss95 for m in runs])), 4),
        recall_at_10=round(float(np.mean([m.recall_at_10 for m in runs])), 4),
        atd=round(float(np.mean([m.atd for m in runs])), 4),
        screened_at_95=int(round(np.mean([m.screened_at_95 for m in runs]))),
        n=runs[0].n,
        includes=runs[0].includes,
    )


def simulation_features(cfg: Config, data: LabelledSet, embedder=None, cache: Path | None = None, *,
                        from_index: bool = True) -> Features:  # fmt: skip
    """Features of a labelled CSV's records: the vectors the workspace's index holds for their PMIDs (`from_index`),
    the rest from ra's embedder (vectors and rule features cached by content in `cache`, by default the workspace's
    cache/screen)."""
    from ra_agent.screen.features import build_features, dense_vectors, index_lookup
    from ra_agent.workspace import Workspace

    cache = cache or Workspace.of(cfg).cache_dir / "screen"
    lookup = index_lookup(cfg) if from_index else None
    dense, slug = dense_vectors(cfg, data.records, lookup=lookup, embedder=embedder, cache_dir=cache)
    return build_features(data.records, dense, cfg.screen, embedding=slug, cache_dir=cache)


def run_simulation(
    cfg: Config,
    path: str | Path,
    label: str,
    *,
    seeds: int | None = None,
    retrain_every: int | None = None,
    out: str | Path | None = None,
    progress: Progress | None = None,
    features: Features | None = None,
) -> SimulationReport:
    """`ra screen simulate`: replay the labels with seeds 0..seeds-1 (priors drawn per seed), against random order."""
    from threadpoolctl import threadpool_limits

    screen = cfg.screen
    data = read_labelled_csv(path, label)
    if data.labels.sum() < 2 or (data.labels == 0).sum() < 1:
        raise LabelError(Path(path), "a simulation needs at least 2 includes and 1 exclude", field=label)
    features = features or simulation_features(cfg, data)
    retrain = retrain_every or screen.sim_retrain_every
    n_seeds = seeds or screen.sim_seeds
    runs, priors, orders, stops = [], [], [], []
    done = 0
    total = n_seeds * len(data.labels)

    def tick(k: int, _n: int) -> None:
        if progress:
            progress(done + k, total)

    with threadpool_limits(1):  # many small fits: BLAS threads only contend
        for seed in range(n_seeds):
            pair = choose_priors(data.labels, seed)
            order, m = simulate(features, data.labels, screen, seed=seed, priors=pair, retrain_every=retrain,
                                progress=tick)  # fmt: skip
            runs.append(m)
            priors.append(pair)
            orders.append(order)
            stops.append(first_stop(data.labels[order], screen, seed=seed))
            done += len(data.labels)
    randoms = random_orders(data.labels, priors[0], seed=0, runs=screen.sim_random_runs)
    random_mean = mean_metrics([metrics(data.labels[o]) for o in randoms])
    png = None
    if out:
        title = f"{data.source}: {len(data.labels)} records, {int(data.labels.sum())} includes (seed 0)"
        png = plot_recall({f"ra {MODEL_NAME}": data.labels[orders[0]], "random order": data.labels[randoms[0]]},
                          out, title)  # fmt: skip
    return SimulationReport(data.source, len(data.labels), int(data.labels.sum()), list(range(n_seeds)), priors,
                            runs, random_mean, png, retrain, features.linked_records, stops)  # fmt: skip
