"""One screening step over a project: features, retrain on every decision so far, rank, stopping aid, store the model."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ra_agent.config import Config
from ra_agent.screen.features import Features, ScreenRecord, build_features, dense_vectors, index_lookup, linked
from ra_agent.screen.model import Fitted, choose, fit, prepare, reasons, spec
from ra_agent.screen.project import decisions, records
from ra_agent.screen.stopping import StopStatus, stop_status
from ra_agent.store.db import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ranked:
    rank: int
    pmid: int
    title: str
    year: int | None
    score: float
    why: str


@dataclass
class Step:
    project: str
    next: list[Ranked]
    ranking: list[tuple[int, float]]  # every undecided record, best first
    stop: StopStatus
    trained_seq: int
    digest: str
    top_terms: list[tuple[str, float]] = field(default_factory=list)


def project_features(cfg: Config, recs: list[ScreenRecord]) -> Features:
    """Features of the project's records: vectors from the active index (the rest embedded, cached), TF-IDF, flags."""
    from ra_agent.workspace import Workspace

    cache = Workspace.of(cfg).cache_dir / "screen"
    dense, slug = dense_vectors(cfg, recs, lookup=index_lookup(cfg), cache_dir=cache)
    return build_features(recs, dense, cfg.screen, embedding=slug, cache_dir=cache)


def step(cfg: Config, store: Store, project: str, *, n: int | None = None, features: Features | None = None) -> Step:
    """Retrain on every decision of `project`, store the model, and return the next records to screen."""
    from threadpoolctl import threadpool_limits

    screen = cfg.screen
    recs = records(store, project)
    made = decisions(store, project)
    row_of = {r.pmid: i for i, r in enumerate(recs)}
    made = [d for d in made if d.pmid in row_of]
    features = features or project_features(cfg, recs)
    prep = prepare(features, screen)
    rows = [row_of[d.pmid] for d in made]
    labels = [d.label for d in made]
    with threadpool_limits(1):  # small dense solves: threads only contend
        fitted = fit(prep, rows, labels, screen, screen.seed)
    decided = np.zeros(len(recs), dtype=bool)
    decided[rows] = True
    undecided = np.flatnonzero(~decided)
    trained_seq = max((d.seq for d in made), default=0)
    rng = np.random.default_rng([screen.seed, trained_seq])
    status = stop_status(labels, len(recs), screen)
    if status.sampling:  # buscar: the test's sample is drawn at random from the undecided records
        drawn = rng.permutation(undecided)[: n or screen.show_next]
        picks = [(int(row), f"drawn at random from the {len(undecided)} undecided records: the stopping test's "
                  "sample (buscar)") for row in drawn]  # fmt: skip
    else:
        picks = choose(fitted, undecided, n or screen.show_next, screen, rng, int(sum(labels)))
    if fitted.digest == "untrained":
        picks = [(row, "source order (the model starts once one include and one exclude are decided)")
                 for row, _ in picks]  # fmt: skip
    order = undecided[np.argsort(-fitted.scores[undecided], kind="stable")]
    ranking = [(recs[i].pmid, round(float(fitted.scores[i]), 4)) for i in order]
    position = {int(row): k + 1 for k, row in enumerate(order)}
    included = [r for r, y in zip(rows, labels, strict=True) if y == 1]

    def why(row: int, how: str) -> str:
        links = [recs[i].pmid for i in linked(features.links, row, included)]
        cites = f" | citation links to included PMID {', '.join(map(str, links[:5]))}" if links else ""
        return f"{how}; {reasons(fitted, prep, row, features.flags[row])}{cites}"

    shown = [
        Ranked(position[row], recs[row].pmid, recs[row].title, recs[row].year, round(float(fitted.scores[row]), 4),
               why(row, how))
        for row, how in picks
    ]  # fmt: skip
    save_model(store, project, trained_seq, fitted, spec(screen, embedding=features.embedding, seed=screen.seed),
               ranking)  # fmt: skip
    return Step(project, shown, ranking, status, trained_seq, fitted.digest, fitted.top_terms)


def save_model(store: Store, project: str, trained_seq: int, fitted: Fitted, spec_json: str, ranking) -> None:
    """The model trained on decisions <= trained_seq: spec, weight digest, top terms and ranking (replaced on retrain)."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO screen_model (project, trained_seq, trained_ts, spec, digest, top_terms, ranking) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, trained_seq) DO UPDATE SET trained_ts = excluded.trained_ts, "
            "spec = excluded.spec, digest = excluded.digest, top_terms = excluded.top_terms, ranking = excluded.ranking",
            (project, trained_seq, int(time.time()), spec_json, fitted.digest, json.dumps(fitted.top_terms),
             json.dumps(ranking)),
        )  # fmt: skip


def stored_model(store: Store, project: str, trained_seq: int | None = None) -> dict | None:
    """The stored model row (the latest, or the one trained on decisions <= trained_seq)."""
    sql = "SELECT * FROM screen_model WHERE project = ?" + (" AND trained_seq = ?" if trained_seq is not None else "")
    args = (project, trained_seq) if trained_seq is not None else (project,)
    row = store.conn.execute(sql + " ORDER BY trained_seq DESC LIMIT 1", args).fetchone()
    return dict(row) if row else None


def discovery_curve(cfg: Config, store: Store, project: str) -> Path:
    """PNG of the project's recall so far (includes found against records screened, in decision order) beside
    the random-order expectation; `plots/screening/<project>.png` in the workspace."""
    import re

    from ra_agent.screen.simulate import plot_recall
    from ra_agent.workspace import Workspace

    made = decisions(store, project)
    total = len(records(store, project))
    labels = np.zeros(total, dtype=np.int64)
    labels[: len(made)] = [d.label for d in made]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", project)
    path = Workspace.of(cfg).plots_dir / "screening" / f"{name}.png"
    title = f"{project}: {len(made)} of {total} screened, {int(labels.sum())} included"
    return plot_recall({"screened so far": labels[: max(1, len(made))]}, path, title, total=total)
