"""Pooling with statsmodels: an effect per trial, the pooled estimate of the model the config names (random effects
by default) with its 95 % CI, the weights, I², tau², Cochran's Q and the test for the overall effect, a forest plot.

The statistics are statsmodels' (`statsmodels.stats.meta_analysis`): `effectsize_2proportions` gives each trial's
log risk ratio and its variance for events/totals (0.5 added to every cell of a trial with a zero cell),
`effectsize_smd` the standardised mean difference (Hedges' g, bias-corrected) and its variance for means/SDs,
`combine_effects` the fixed- and random-effects estimates (tau² by DerSimonian-Laird or Paule-Mandel), their
relative weights, Cochran's Q (`test_homogeneity`) and I². Computed here: the exponentiation of log risk ratios and
the overall effect's z = estimate / SE with its two-sided normal p. The plot is `forest.py`'s.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ra_agent.evidence.synthesis.compare import OutcomeContrasts

METHODS = {"dl": "DerSimonian-Laird", "pm": "Paule-Mandel"}
MODELS = ("random", "fixed")


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
    weights: tuple[float, ...] = ()  # each trial's share of the pooled weight (sums to 1), in `trial_effects` order
    q: float = 0.0  # Cochran's Q, with its chi-squared p on trials - 1 df
    q_p: float = 1.0
    z: float = 0.0  # the test for the overall effect: estimate / SE (log scale for RR), two-sided p
    z_p: float = 1.0
    model: str = ""  # "Random effects (DerSimonian-Laird)" or "Fixed effect (inverse variance)"
    reviewer: frozenset[int] = field(default_factory=frozenset)  # trials whose numbers a reviewer gave (sheet)

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


def pool(contrasts: OutcomeContrasts, *, method: str = "dl", forest_dir: Path | None = None, stem: str = "",
         model: str = "random", names: dict[int, str] | None = None) -> Pooled:  # fmt: skip
    """Risk ratio (intervention over comparator), or standardised mean difference for continuous data, of the trials
    in `contrasts`, pooled by `model` ("random": random effects with tau² by `method`, the default; "fixed": inverse
    variance); not poolable with fewer than two trials. Writes `<forest_dir>/<stem>.png` when `forest_dir` is given
    and the estimate was pooled, its studies labelled by `names` (PMID → "Smith 1997 (PMID 123)")."""
    from scipy.stats import norm

    if model not in MODELS:
        raise ValueError(f"pooling model {model!r}: expected one of {', '.join(MODELS)}")
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
    row_names = [f"PMID {t.pmid}" for t in trials]
    with warnings.catch_warnings():  # the WLS rows of summary_frame take sqrt of a negative scale when Q < df
        warnings.simplefilter("ignore", RuntimeWarning)
        res = meta.combine_effects(eff, var, method_re=method, row_names=row_names)
        frame = res.summary_frame()
    # statsmodels leaves a negative between-trial variance as computed; tau² < 0 means tau² = 0, where the random-
    # effects estimate is the fixed-effect one (and I² = 0)
    tau2 = max(float(res.tau2), 0.0)  # pyright: ignore[reportAttributeAccessIssue]  # set by combine_effects
    random = model == "random" and tau2 > 0
    row = "random effect" if random else "fixed effect"
    weights = res.weights_rel_re if random else res.weights_rel_fe  # pyright: ignore[reportAttributeAccessIssue]
    homogeneity = res.test_homogeneity()  # pyright: ignore[reportAttributeAccessIssue]
    z = float(frame.loc[row, "eff"]) / float(np.sqrt(res.var_eff_w_re if random else res.var_eff_w_fe))  # pyright: ignore[reportAttributeAccessIssue]
    scale = math.exp if measure == RR else float
    per_trial = tuple(
        (t.pmid, scale(frame.loc[name, "eff"]), scale(frame.loc[name, "ci_low"]), scale(frame.loc[name, "ci_upp"]))
        for t, name in zip(trials, row_names, strict=True)
    )
    reviewer = frozenset(t.pmid for t in trials for d in (*t.intervention.data, *t.comparator.data)
                         if d.extractor.startswith("reviewer"))  # fmt: skip
    label = (
        f"Random effects ({METHODS.get(method, method)})" if model == "random" else "Fixed effect (inverse variance)"
    )
    pooled = Pooled(
        contrasts, len(trials), participants, effect=scale(frame.loc[row, "eff"]),
        ci_low=scale(frame.loc[row, "ci_low"]), ci_high=scale(frame.loc[row, "ci_upp"]), i2=max(float(res.i2), 0.0),
        tau2=tau2, method=METHODS.get(method, method), trial_effects=per_trial, measure=measure,
        weights=tuple(float(w) for w in weights), q=float(homogeneity.statistic), q_p=float(homogeneity.pvalue),
        z=z, z_p=float(2 * norm.sf(abs(z))), model=label, reviewer=reviewer,
    )  # fmt: skip
    if forest_dir is None:
        return pooled
    from ra_agent.evidence.synthesis.forest import draw_forest, forest_data

    png = draw_forest(forest_data(pooled, names=names, reviewer=set(reviewer)), forest_dir / f"{stem}.png")
    return replace(pooled, forest_png=png)


def _arrays(trials, *fields: str) -> list[np.ndarray]:
    """Per field, the intervention sides' values, then per field the comparator sides' (statsmodels' argument order)."""
    sides = ("intervention", "comparator")
    return [np.array([float(getattr(getattr(t, side), f)) for t in trials]) for side in sides for f in fields]
