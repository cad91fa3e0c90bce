"""Pooling with statsmodels: an effect per trial, a random-effects estimate with its 95 % CI, I² and tau², a forest plot.

The statistics are statsmodels' (`statsmodels.stats.meta_analysis`): `effectsize_2proportions` gives each trial's
log risk ratio and its variance for events/totals (0.5 added to every cell of a trial with a zero cell),
`effectsize_smd` the standardised mean difference (Hedges' g, bias-corrected) and its variance for means/SDs,
`combine_effects` the fixed- and random-effects estimates (tau² by DerSimonian-Laird or Paule-Mandel), Cochran's Q
and I², and `CombineResults.plot_forest` the forest plot. Nothing is computed here by hand except the
exponentiation of log risk ratios.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ra_agent.evidence.synthesis.compare import OutcomeContrasts
from ra_agent.fileio import atomic_writer

METHODS = {"dl": "DerSimonian-Laird", "pm": "Paule-Mandel"}
FOREST_DPI = 110


RR, SMD = "RR", "SMD"


@dataclass(frozen=True)
class Pooled:
    """A comparison × outcome × time point: the pooled effect (risk ratio, or standardised mean difference for
    continuous data) or why not, with the trials and participants behind it."""

    contrasts: OutcomeContrasts
    trials: int
    participants: int
    effect: float | None = None  # RR (intervention over comparator) or SMD (intervention minus comparator)
    ci_low: float | None = None
    ci_high: float | None = None
    i2: float | None = None
    tau2: float | None = None
    method: str = ""
    trial_effects: tuple[tuple[int, float, float, float], ...] = ()  # (pmid, effect, low, high) per trial
    forest_png: Path | None = None
    not_poolable: str = ""  # why no estimate was pooled ("" when one was)
    measure: str = RR

    @property
    def poolable(self) -> bool:
        return self.effect is not None

    @property
    def null(self) -> float:
        """The effect of no difference: 1 for a risk ratio, 0 for a mean difference."""
        return 1.0 if self.measure == RR else 0.0

    def estimate(self) -> str:
        """ "RR 1.42 (95% CI 1.21 to 1.67); I² 35%, tau² 0.012" or the reason it was not pooled."""
        if self.effect is None:
            return f"not poolable: {self.not_poolable}"
        return (f"{self.measure} {self.effect:.2f} (95% CI {self.ci_low:.2f} to {self.ci_high:.2f}); "
                f"I² {100 * (self.i2 or 0):.0f}%, tau² {self.tau2:.3f}")  # fmt: skip


def pool(contrasts: OutcomeContrasts, *, method: str = "dl", forest_dir: Path | None = None, stem: str = "") -> Pooled:
    """Random-effects risk ratio (intervention over comparator), or standardised mean difference for continuous
    data, of the trials in `contrasts`; not poolable with fewer than two trials. Writes `<forest_dir>/<stem>.png`
    when `forest_dir` is given and the estimate was pooled."""
    import statsmodels.stats.meta_analysis as meta  # imported here: statsmodels loads pandas and scipy

    trials = contrasts.trials
    participants = sum(t.intervention.total + t.comparator.total for t in trials)
    measure = SMD if contrasts.continuous else RR
    if len(trials) < 2:
        return Pooled(contrasts, len(trials), participants, not_poolable=f"{len(trials)} trial gives usable arm data "
                      "(two are needed)", measure=measure)  # fmt: skip
    if contrasts.continuous:
        eff, var = meta.effectsize_smd(*_arrays(trials, "mean", "sd", "total"))
    else:
        e1, n1, e2, n2 = _arrays(trials, "events", "total")
        if np.all(e1 + e2 == 0) or np.all(e1 + e2 == n1 + n2):
            return Pooled(contrasts, len(trials), participants,
                          not_poolable="no trial has both outcomes (all events or none)")  # fmt: skip
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
    scale = math.exp if measure == RR else float
    per_trial = tuple(
        (t.pmid, scale(frame.loc[name, "eff"]), scale(frame.loc[name, "ci_low"]), scale(frame.loc[name, "ci_upp"]))
        for t, name in zip(trials, names, strict=True)
    )
    png = _forest(res, contrasts, measure, forest_dir / f"{stem}.png") if forest_dir is not None else None
    return Pooled(
        contrasts, len(trials), participants, effect=scale(frame.loc[row, "eff"]),
        ci_low=scale(frame.loc[row, "ci_low"]), ci_high=scale(frame.loc[row, "ci_upp"]), i2=max(float(res.i2), 0.0),
        tau2=tau2, method=METHODS.get(method, method), trial_effects=per_trial, forest_png=png, measure=measure,
    )  # fmt: skip


def _arrays(trials, *fields: str) -> list[np.ndarray]:
    """Per field, the intervention sides' values, then per field the comparator sides' (statsmodels' argument order)."""
    sides = ("intervention", "comparator")
    return [np.array([float(getattr(getattr(t, side), f)) for t in trials]) for side in sides for f in fields]


def _forest(res: object, contrasts: OutcomeContrasts, measure: str, path: Path) -> Path:
    """statsmodels' forest plot (risk ratios on a log axis, standardised mean differences on a linear one) with the
    comparison and outcome as title, written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter

    k = len(contrasts.trials)
    fig = Figure(figsize=(7, 1.6 + 0.45 * (k + 4)), dpi=FOREST_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res.plot_forest(ax=ax, use_exp=measure == RR)  # type: ignore[attr-defined]
    c = contrasts.comparison
    if measure == RR:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator([0.1, 0.2, 0.5, 1, 2, 5, 10]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _x, _pos: ""))
        ax.set_xlabel(f"risk ratio ({c.intervention} / {c.comparator})")
    else:
        ax.set_xlabel(f"standardised mean difference ({c.intervention} - {c.comparator})")
    ax.axvline(1.0 if measure == RR else 0.0, color="grey", linewidth=0.8)
    ax.set_title(f"{c.label}: {contrasts.label}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path
