"""Pooling with statsmodels: risk ratios per trial, a random-effects estimate with its 95 % CI, I² and tau², a forest plot.

The statistics are statsmodels' (`statsmodels.stats.meta_analysis`): `effectsize_2proportions` gives each trial's
log risk ratio and its variance (0.5 added to every cell of a trial with a zero cell), `combine_effects` the
fixed- and random-effects estimates (tau² by DerSimonian-Laird or Paule-Mandel), Cochran's Q and I², and
`CombineResults.plot_forest` the forest plot. Nothing is computed here by hand except the exponentiation.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ra_agent.evidence.synthesis.compare import OutcomeContrasts
from ra_agent.fileio import atomic_writer

METHODS = {"dl": "DerSimonian-Laird", "pm": "Paule-Mandel"}
FOREST_DPI = 110


@dataclass(frozen=True)
class Pooled:
    """A comparison × outcome × time point: pooled risk ratio or why not, with the trials and participants behind it."""

    contrasts: OutcomeContrasts
    trials: int
    participants: int
    rr: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    i2: float | None = None
    tau2: float | None = None
    method: str = ""
    trial_rr: tuple[tuple[int, float, float, float], ...] = ()  # (pmid, rr, low, high) per trial
    forest_png: Path | None = None
    not_poolable: str = ""  # why no estimate was pooled ("" when one was)

    @property
    def poolable(self) -> bool:
        return self.rr is not None

    def estimate(self) -> str:
        """ "RR 1.42 (95% CI 1.21 to 1.67); I² 35%, tau² 0.012" or the reason it was not pooled."""
        if self.rr is None:
            return f"not poolable: {self.not_poolable}"
        return (f"RR {self.rr:.2f} (95% CI {self.ci_low:.2f} to {self.ci_high:.2f}); I² {100 * (self.i2 or 0):.0f}%, "
                f"tau² {self.tau2:.3f}")  # fmt: skip


def pool(contrasts: OutcomeContrasts, *, method: str = "dl", forest_dir: Path | None = None, stem: str = "") -> Pooled:
    """Random-effects risk ratio (intervention over comparator) of the trials in `contrasts`; not poolable with fewer
    than two trials. Writes `<forest_dir>/<stem>.png` when `forest_dir` is given and the estimate was pooled."""
    import statsmodels.stats.meta_analysis as meta  # imported here: statsmodels loads pandas and scipy

    trials = contrasts.trials
    participants = sum(t.intervention.total + t.comparator.total for t in trials)
    if len(trials) < 2:
        return Pooled(contrasts, len(trials), participants, not_poolable=f"{len(trials)} trial gives usable arm data "
                      "(two are needed)")  # fmt: skip
    e1 = np.array([t.intervention.events for t in trials], dtype=float)
    n1 = np.array([t.intervention.total for t in trials], dtype=float)
    e2 = np.array([t.comparator.events for t in trials], dtype=float)
    n2 = np.array([t.comparator.total for t in trials], dtype=float)
    if np.all(e1 + e2 == 0) or np.all(e1 + e2 == n1 + n2):
        return Pooled(
            contrasts, len(trials), participants, not_poolable="no trial has both outcomes (all events or none)"
        )
    zero = (e1 == 0) | (e2 == 0) | (e1 == n1) | (e2 == n2)
    e1, n1, e2, n2 = e1 + 0.5 * zero, n1 + zero, e2 + 0.5 * zero, n2 + zero  # 0.5 per cell of a zero-cell trial
    eff, var = meta.effectsize_2proportions(e1, n1, e2, n2, statistic="risk-ratio")
    names = [f"PMID {t.pmid}" for t in trials]
    with warnings.catch_warnings():  # the WLS rows of summary_frame take sqrt of a negative scale when Q < df
        warnings.simplefilter("ignore", RuntimeWarning)
        res = meta.combine_effects(eff, var, method_re=method, row_names=names)
        frame = res.summary_frame()
    # statsmodels leaves a negative between-trial variance as computed; tau² < 0 means tau² = 0, where the random-
    # effects estimate is the fixed-effect one (and I² = 0)
    tau2 = max(float(res.tau2), 0.0)  # pyright: ignore[reportAttributeAccessIssue]  # set by combine_effects
    row = "random effect" if tau2 > 0 else "fixed effect"
    center, low, high = frame.loc[row, "eff"], frame.loc[row, "ci_low"], frame.loc[row, "ci_upp"]
    per_trial = tuple(
        (
            t.pmid,
            math.exp(frame.loc[name, "eff"]),
            math.exp(frame.loc[name, "ci_low"]),
            math.exp(frame.loc[name, "ci_upp"]),
        )
        for t, name in zip(trials, names, strict=True)
    )
    png = _forest(res, contrasts, forest_dir / f"{stem}.png") if forest_dir is not None else None
    return Pooled(
        contrasts, len(trials), participants, rr=math.exp(center), ci_low=math.exp(low),
        ci_high=math.exp(high), i2=max(float(res.i2), 0.0), tau2=tau2, method=METHODS.get(method, method),
        trial_rr=per_trial, forest_png=png,
    )  # fmt: skip


def _forest(res: object, contrasts: OutcomeContrasts, path: Path) -> Path:
    """statsmodels' forest plot (risk ratios on a log axis) with the comparison and outcome as title, written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter

    k = len(contrasts.trials)
    fig = Figure(figsize=(7, 1.6 + 0.45 * (k + 4)), dpi=FOREST_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res.plot_forest(ax=ax, use_exp=True)  # type: ignore[attr-defined]
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator([0.1, 0.2, 0.5, 1, 2, 5, 10]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda _x, _pos: ""))
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel(f"risk ratio ({contrasts.comparison.intervention} / {contrasts.comparison.comparator})")
    ax.set_title(f"{contrasts.comparison.label}: {contrasts.label}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:80]
