"""Forest plots as reviews print them: the plot's data (its rows, weights summing to 100 %, one pooled row, the
heterogeneity and overall-effect lines) are the pooled estimate's, on the demo's PPI vs H2-receptor antagonist
healing trials; weights are checked against inverse-variance weights computed here from the trials' counts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from demo_corpus import demo_papers
from scipy.stats import chi2, norm

from ra_agent.agent.questions import handbook_topic
from ra_agent.evidence.synthesis import synthesise
from ra_agent.evidence.synthesis.forest import REVIEWER_MARK, draw_forest, forest_data
from ra_agent.evidence.synthesis.question import from_topic

# PPI vs H2-receptor antagonist trials in erosive oesophagitis (counts read by hand: tests/fixtures/arm_data/gold.tsv)
HEALING_TRIALS = (10950032, 12060043, 9768529, 9354207, 10741935)
CONDUCT_SR = Path(__file__).resolve().parents[3] / "handbooks" / "conduct_sr_ppi.md"


def _by_hand(r, model: str) -> tuple[np.ndarray, float, float, float, float, float]:
    """Inverse-variance weights (random effects: DerSimonian-Laird tau²), pooled log RR, its SE, Q and tau², from the
    trials' counts (textbook formulas, not statsmodels)."""
    a = np.array([t.intervention.events for t in r.contrasts.trials], float)
    n1 = np.array([t.intervention.total for t in r.contrasts.trials], float)
    c = np.array([t.comparator.events for t in r.contrasts.trials], float)
    n2 = np.array([t.comparator.total for t in r.contrasts.trials], float)
    y = np.log((a / n1) / (c / n2))
    v = 1 / a - 1 / n1 + 1 / c - 1 / n2
    w = 1 / v
    q = float(np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2))
    tau2 = max(0.0, (q - (len(y) - 1)) / (np.sum(w) - np.sum(w**2) / np.sum(w))) if model == "random" else 0.0
    w = 1 / (v + tau2)
    mu = float(np.sum(w * y) / np.sum(w))
    return w / w.sum(), mu, math.sqrt(1 / np.sum(w)), q, tau2, float(len(y) - 1)


@pytest.mark.parametrize("model", ["random", "fixed"])
def test_the_plots_data_are_the_pooled_estimates(tmp_path: Path, model: str) -> None:
    papers = {p.pmid: p for p in demo_papers()}
    question = from_topic(handbook_topic(CONDUCT_SR))
    syn = synthesise([papers[p] for p in HEALING_TRIALS], question=question, forest_dir=tmp_path, stem="f", model=model)
    pooled = syn.pooled
    assert pooled and all(r.forest_png is not None and r.forest_png.stat().st_size > 20_000 for r in pooled)
    main = syn.main()
    assert main is not None and main.contrasts.outcome == "healing" and main.trials == 5
    for r in pooled:
        data = forest_data(r)
        # one row per trial, in the estimate's order, with its effect and CI; one pooled row with the estimate
        assert [row.study for row in data.rows] == [f"PMID {pmid}" for pmid, *_ in r.trial_effects]
        assert [(row.effect, row.low, row.high) for row in data.rows] == [tuple(e[1:]) for e in r.trial_effects]
        assert (data.pooled.effect, data.pooled.low, data.pooled.high) == (r.effect, r.ci_low, r.ci_high)
        assert sum(row.weight for row in data.rows) == pytest.approx(100.0, abs=1e-9)
        assert data.pooled.weight == 100.0
        weights, mu, se, q, tau2, df = _by_hand(r, model)
        assert [row.weight for row in data.rows] == pytest.approx(list(100 * weights), rel=1e-9)
        assert math.log(r.effect) == pytest.approx(mu, rel=1e-9)
        assert (math.log(r.ci_low), math.log(r.ci_high)) == pytest.approx((mu - 1.959964 * se, mu + 1.959964 * se),
                                                                            rel=1e-6)  # fmt: skip
        assert r.q == pytest.approx(q, rel=1e-9) and r.q_p == pytest.approx(float(chi2.sf(q, df)), rel=1e-9)
        assert r.z == pytest.approx(mu / se, rel=1e-9) and r.z_p == pytest.approx(float(2 * norm.sf(abs(mu / se))))
        assert (
            f"Chi² = {q:.2f}, df = {int(df)}" in data.heterogeneity and f"I² = {100 * r.i2:.0f}%" in data.heterogeneity
        )
        assert f"Tau² = {(tau2 if model == 'random' else r.tau2):.2f}" in data.heterogeneity
        assert data.overall.startswith(f"Test for overall effect: Z = {abs(mu / se):.2f} (P")
        assert data.model.startswith("Random effects" if model == "random" else "Fixed effect")
        # healing is wanted: a risk ratio above 1 favours the PPI, shown on the right
        assert (data.favours_left, data.favours_right) == ("Favours H2-receptor antagonist",
                                                           "Favours proton pump inhibitor")  # fmt: skip
        assert data.title.startswith(
            "Proton pump inhibitor versus H2-receptor antagonist in erosive oesophagitis: healing"
        )
        arms = {row.intervention for row in data.rows}
        assert all("/" in a for a in arms) and data.total_events == (
            sum(t.intervention.events for t in r.contrasts.trials),
            sum(t.comparator.events for t in r.contrasts.trials),
        )


def test_a_reviewers_numbers_are_marked(tmp_path: Path) -> None:
    papers = {p.pmid: p for p in demo_papers()}
    syn = synthesise([papers[p] for p in HEALING_TRIALS], question=from_topic(handbook_topic(CONDUCT_SR)))
    main = syn.main()
    assert main is not None
    data = forest_data(main, reviewer={9354207})
    marked = [row.study for row in data.rows if row.reviewer]
    assert marked == ["PMID 9354207"]
    png = draw_forest(data, tmp_path / "marked.png")
    assert png.stat().st_size > 20_000 and REVIEWER_MARK == "†"
