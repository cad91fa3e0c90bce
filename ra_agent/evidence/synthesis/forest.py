"""Forest plots as reviews print them: per study each arm's events/total (or mean, SD and n), the weight, the effect
with its 95 % CI as text and as a square sized by weight; one pooled diamond for the model the config names;
heterogeneity (tau², Q with its df and p, I²) and the test for the overall effect beneath; "Favours …" under the
axis; the whole title.

`forest_data` turns a pooled estimate (`pool.Pooled`, statsmodels' numbers) into the rows a reader sees;
`draw_forest` lays them out with matplotlib. Nothing is computed here but the display: weights, effects, CIs and
tests come from statsmodels' `combine_effects` through `Pooled`.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ra_agent.fileio import atomic_writer

FOREST_DPI = 120
REVIEWER_MARK = "†"
# outcomes a patient wants more of: a risk ratio above 1 favours the intervention; for the others (thrombosis,
# relapse, bleeding, death, …) below 1 does
DESIRABLE = ("healing", "remission", "eradication", "symptom relief", "response")


@dataclass(frozen=True)
class ForestRow:
    """One study as the plot prints it."""

    study: str  # "PMID 9354207"
    intervention: str  # "6/11", or "12.1 (7.9) 30" (mean, SD, n)
    comparator: str
    weight: float  # percent of the pooled weight
    effect: float
    low: float
    high: float
    reviewer: bool = False  # a number of this row was given by a reviewer (sheet), not read by ra


@dataclass(frozen=True)
class ForestData:
    """Everything a forest plot shows; the test checks it against the pooled estimate."""

    title: str
    measure: str  # "RR" or "SMD"
    model: str  # "Random effects (DerSimonian-Laird)" or "Fixed effect"
    intervention: str
    comparator: str
    rows: tuple[ForestRow, ...]
    pooled: ForestRow  # the one pooled row (its effect and CI are the estimate's)
    heterogeneity: str
    overall: str
    favours_left: str
    favours_right: str
    continuous: bool = False
    total_events: tuple[int, int] | None = None  # (intervention, comparator) events of a dichotomous outcome

    @property
    def null(self) -> float:
        return 1.0 if self.measure == "RR" else 0.0


def _p(value: float) -> str:
    return "P < 0.001" if value < 0.001 else f"P = {value:.3f}" if value < 0.01 else f"P = {value:.2f}"


def _side(side, continuous: bool) -> str:
    if continuous:
        return f"{side.mean:g} ({side.sd:g}) {side.total}" if side.mean is not None and side.sd is not None else ""
    return f"{side.events}/{side.total}"


def forest_data(pooled, *, names: dict[int, str] | None = None, reviewer: set[int] | None = None) -> ForestData:
    """The rows, weights, pooled row, heterogeneity and overall-effect lines of a pooled estimate (`pool.Pooled`);
    `names`: PMID → the study's label (else "PMID n"); `reviewer`: PMIDs whose numbers a reviewer gave."""
    oc = pooled.contrasts
    c = oc.comparison
    names = names or {}
    reviewer = reviewer or set()
    rows = tuple(
        ForestRow(names.get(t.pmid, f"PMID {t.pmid}"), _side(t.intervention, oc.continuous),
                  _side(t.comparator, oc.continuous), 100.0 * w, eff, low, high, t.pmid in reviewer)
        for t, w, (_, eff, low, high) in zip(oc.trials, pooled.weights, pooled.trial_effects, strict=True)
    )  # fmt: skip
    total_i, total_c = (str(sum(t.intervention.total for t in oc.trials)),
                        str(sum(t.comparator.total for t in oc.trials)))  # fmt: skip
    assert pooled.effect is not None and pooled.ci_low is not None and pooled.ci_high is not None
    total = ForestRow("Total (95% CI)", total_i, total_c, 100.0, pooled.effect, pooled.ci_low, pooled.ci_high)
    events = (None if oc.continuous else (sum(t.intervention.events for t in oc.trials),
                                          sum(t.comparator.events for t in oc.trials)))  # fmt: skip
    heterogeneity = (f"Heterogeneity: Tau² = {pooled.tau2 or 0:.2f}; Chi² = {pooled.q:.2f}, df = {pooled.trials - 1} "
                     f"({_p(pooled.q_p)}); I² = {100 * (pooled.i2 or 0):.0f}%")  # fmt: skip
    overall = f"Test for overall effect: Z = {abs(pooled.z):.2f} ({_p(pooled.z_p)})"
    better, worse = f"Favours {c.intervention}", f"Favours {c.comparator}"
    if oc.continuous:
        left, right = f"Lower with {c.intervention}", f"Higher with {c.intervention}"
    elif oc.outcome in DESIRABLE:
        left, right = worse, better
    else:
        left, right = better, worse
    title = f"{c.intervention} versus {c.comparator} in {c.condition}: {oc.label}"
    return ForestData(title[:1].upper() + title[1:], pooled.measure, pooled.model, c.intervention, c.comparator, rows,
                      total, heterogeneity, overall, left, right, oc.continuous, events)  # fmt: skip


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def draw_forest(data: ForestData, path: Path) -> Path:
    """The forest plot of `data` as a PNG at `path` (written atomically)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Polygon
    from matplotlib.ticker import NullLocator
    from matplotlib.transforms import blended_transform_factory

    n = len(data.rows)
    title = textwrap.fill(data.title, 110)
    head_lines = 1 + title.count("\n")
    rows_in = n + 2.6  # the studies, a gap, the pooled row, the total events
    height = 1.5 + 0.22 * head_lines + 0.3 * rows_in
    fig = Figure(figsize=(12.5, height), dpi=FOREST_DPI)
    FigureCanvasAgg(fig)
    top = 1 - (0.75 + 0.22 * head_lines) / height  # below the title and the column heads
    bottom = 0.85 / height  # above the axis, "Favours …" and the notes
    ax = fig.add_axes((0.665, bottom, 0.31, top - bottom))
    ys = [n + 1.6 - i for i in range(n)]  # studies from the top; then the pooled row and the total events
    pooled_y, events_y = 0.9, 0.25
    ax.set_ylim(0, n + 2.1)
    text = blended_transform_factory(fig.transFigure, ax.transData)
    log = data.measure == "RR"
    lows = [r.low for r in data.rows] + [data.pooled.low]
    highs = [r.high for r in data.rows] + [data.pooled.high]
    if log:
        span = max(abs(math.log10(max(min(lows), 1e-3))), abs(math.log10(max(highs))), math.log10(2))
        span = min(span * 1.1, 2.0)
        lo, hi = 10**-span, 10**span
        ax.set_xscale("log")
        ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= t <= hi]
    else:
        span = max(abs(min(lows)), abs(max(highs)), 0.5) * 1.1
        lo, hi = -span, span
        ticks = [t for t in (-2, -1, -0.5, 0, 0.5, 1, 2) if lo <= t <= hi]
    ax.set_xlim(lo, hi)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks], fontsize=8)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.axvline(data.null, color="black", linewidth=0.8)
    biggest = max((r.weight for r in data.rows), default=1.0)
    for y, r in zip(ys, data.rows, strict=True):
        ax.plot([max(r.low, lo), min(r.high, hi)], [y, y], color="black", linewidth=1.0)
        if r.low < lo or r.high > hi:  # a CI beyond the axis ends in an arrow
            for end, edge in ((r.low, lo), (r.high, hi)):
                if (end < edge and edge == lo) or (end > edge and edge == hi):
                    ax.annotate("", xy=(edge, y), xytext=(min(max(r.effect, lo), hi), y),
                                arrowprops={"arrowstyle": "->", "lw": 1.0})  # fmt: skip
        if lo < r.effect < hi:
            size = 4 + 10 * math.sqrt(r.weight / biggest)
            ax.plot([r.effect], [y], marker="s", markersize=size, color="#1f4e9a", markeredgecolor="#1f4e9a")
    p = data.pooled
    diamond = [(p.low, pooled_y), (p.effect, pooled_y + 0.3), (p.high, pooled_y), (p.effect, pooled_y - 0.3)]
    ax.add_patch(Polygon(diamond, closed=True, color="black"))
    measure = "Risk ratio" if log else "Std. mean difference"
    method = f"IV, {'Random' if data.model.startswith('Random') else 'Fixed'}, 95% CI"
    arms = "Mean (SD) n" if data.continuous else "Events/Total"
    head_y = n + 2.05
    heads = ((0.01, "Study", "left"), (0.275, f"{textwrap.fill(data.intervention, 20)}\n{arms}", "center"),
             (0.405, f"{textwrap.fill(data.comparator, 20)}\n{arms}", "center"), (0.49, "Weight", "right"),
             (0.575, f"{measure}\n{method}", "center"), (0.82, f"{measure}\n{method}", "center"))  # fmt: skip
    for x, label, align in heads:
        ax.text(x, head_y, label, transform=text, ha=align, va="bottom", fontsize=8.5, fontweight="bold")
    for y, r in [*zip(ys, data.rows, strict=True), (pooled_y, p)]:
        bold = "bold" if r is p else "normal"
        mark = f" {REVIEWER_MARK}" if r.reviewer else ""
        cells = ((0.01, r.study + mark, "left"), (0.275, r.intervention, "center"), (0.405, r.comparator, "center"),
                 (0.49, f"{r.weight:.1f}%", "right"),
                 (0.575, f"{_fmt(r.effect)} [{_fmt(r.low)}, {_fmt(r.high)}]", "center"))  # fmt: skip
        for x, value, align in cells:
            ax.text(x, y, value, transform=text, ha=align, va="center", fontsize=8.5, fontweight=bold)
    if data.total_events is not None:
        ax.text(0.01, events_y, "Total events", transform=text, ha="left", va="center", fontsize=8.5)
        for x, value in zip((0.275, 0.405), data.total_events, strict=True):
            ax.text(x, events_y, str(value), transform=text, ha="center", va="center", fontsize=8.5)
    fig.text(0.5, 1 - 0.15 / height, title, ha="center", va="top", fontsize=10.5, fontweight="bold")
    notes = [data.heterogeneity, data.overall, data.model]
    if any(r.reviewer for r in data.rows):
        notes.append(f"{REVIEWER_MARK} numbers given by a reviewer in the extraction sheet; the others read by ra")
    fig.text(0.01, bottom - 0.08 / height, "\n".join(notes), ha="left", va="top", fontsize=8)
    for x, label, align in ((0.0, data.favours_left, "left"), (1.0, data.favours_right, "right")):
        ax.annotate(label, xy=(x, 0), xycoords="axes fraction", xytext=(0, -24), textcoords="offset points",
                    ha=align, va="top", fontsize=8)  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path
