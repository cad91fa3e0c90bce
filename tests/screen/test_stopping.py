"""The stopping aid on real labels: the demo review replayed through ra's ranking. The statistical rules advise
stopping only once the target recall is reached, on an order where a run of excludes would have stopped too early
and missed includes; buscar's random sample is what `ra screen` shows and its decisions count."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from demo_corpus import demo_rows, write_demo_subset
from screen_support import screen_cfg, warm_cache
from threadpoolctl import threadpool_limits

from ra_agent.cli import main
from ra_agent.screen.project import decide, project_from_import
from ra_agent.screen.session import step
from ra_agent.screen.simulate import choose_priors, read_labelled_csv, simulate, simulation_features
from ra_agent.screen.stopping import first_stop, h0_pvalue, ranked_pvalue, stop_status
from ra_agent.workspace import open_store


@pytest.fixture(scope="module")
def demo_order(demo_labelled, demo_features) -> np.ndarray:
    """The demo's 1,333 labels in the order ra's ranking screens them (seed 0, retrained every 25 decisions)."""
    y = demo_labelled.labels
    order, _ = simulate(demo_features, y, screen_cfg(Path("unused")).screen, seed=0, retrain_every=25)
    return y[order]


def test_the_p_value_is_the_published_hypergeometric_test(demo_order):
    """k = 0 includes in a sample of n from an urn of M holding K: p = C(M - K, n) / C(M, n) (Callaghan & Müller-Hansen
    2020); buscar_ranked's least p over the runs that start after an include equals the least p over every run."""
    assert h0_pvalue(0, 400, 3, 100) == pytest.approx(math.comb(397, 100) / math.comb(400, 100))
    assert h0_pvalue(1, 400, 3, 100) == pytest.approx(
        (math.comb(397, 100) + 3 * math.comb(397, 99)) / math.comb(400, 100)
    )
    y, total = demo_order, len(demo_order)
    for n in (300, 600, 900):
        seen, found = y[:n], int(y[:n].sum())
        every = min(
            h0_pvalue(int(seen[s:].sum()), total - s, math.floor(found / 0.95) + 1 - int(seen[:s].sum()), n - s)
            for s in range(n)
        )
        assert ranked_pvalue(seen, total, 0.95) == pytest.approx(every, abs=1e-12)


def test_statistical_rules_stop_only_past_the_target_on_a_review_where_a_run_of_excludes_misses_includes(
    demo_order,
):
    y, total, includes = demo_order, len(demo_order), int(demo_order.sum())
    at95 = int(np.argmax(np.cumsum(y) >= math.ceil(0.95 * includes))) + 1
    early = first_stop(y, screen_cfg(Path("unused"), stop_rule="consecutive_excludes",
                                     stop_consecutive_excludes=50).screen)  # fmt: skip
    assert early.recall < 0.95, early  # the late includes: a 50-exclude run comes before 95 % recall
    for rule, draws in (("buscar_ranked", 1), ("buscar", 5)):
        screen = screen_cfg(Path("unused"), stop_rule=rule).screen
        for seed in range(draws):
            stop = first_stop(y, screen, seed=seed)
            assert stop.recall >= 0.95 and at95 <= stop.screened < total, (rule, seed, stop, at95)
            if rule == "buscar":
                assert stop.sample_from is not None and stop.sample_from < stop.screened
    ranked = screen_cfg(Path("unused"), stop_rule="buscar_ranked").screen
    quiet = stop_status(y[:100], total, ranked)
    assert not quiet.stop and quiet.p_value is None and "silent until 134 decisions" in quiet.lines()[0]
    stop = first_stop(y, ranked)
    before, at = stop_status(y[: stop.screened - 1], total, ranked), stop_status(y[: stop.screened], total, ranked)
    assert not before.stop and before.p_value is not None and before.p_value >= 0.05
    assert at.stop and at.p_value is not None and at.p_value < 0.05 and at.recall_bound is not None
    assert at.lines()[-1] == ("  you may stop: recall >= 95% with 95% confidence, if the ranking puts includes no "
                              "later than a random order would (buscar_ranked)")  # fmt: skip
    fields = at.fields()  # the asset's metadata: the active rule's own figures, no heuristic estimate beside them
    assert fields["stop_p_value"] == at.p_value and fields["stop_recall_bound"] == at.recall_bound
    assert not any(key.startswith("recall_estimate") for key in fields)
    heuristic = stop_status(y[: stop.screened], total, screen_cfg(Path("unused"), stop_rule="recall_estimate").screen)
    assert "stop_p_value" not in heuristic.fields()
    assert heuristic.fields()["recall_estimate_includes_left"] == heuristic.estimated_left > 0


def test_buscar_shows_a_random_sample_and_its_decisions_count(workspace, tmp_path, cache_dir):
    """The first 150 of 240 demo records seeded from their labels; buscar's sample starts at once (stop_sample_from 1):
    the records shown are drawn at random, say so, and a decision on one enters the sample."""
    rows = demo_rows()[:240]
    for row in rows[150:]:
        row["label_included"] = ""
    path = write_demo_subset(tmp_path / "ppi_half.csv", rows)
    cfg = workspace.with_overrides(screen={"stop_rule": "buscar", "stop_sample_from": 1.0})
    with open_store(cfg) as store:
        project = project_from_import(cfg, store, path, seed_labels="label_included")
        first = step(cfg, store, project, n=5)
        assert first.stop.sampling and first.stop.sample_from is not None
        assert all("drawn at random" in r.why for r in first.next)
        ranked = step(workspace.with_overrides(screen={"stop_rule": "buscar_ranked"}), store, project, n=5)
        assert [r.pmid for r in first.next] != [r.pmid for r in ranked.next]  # not the model's best
        assert any("AT RANDOM" in line for line in first.stop.lines())
        decide(store, project, first.next[0].pmid, "exclude")
        after = step(cfg, store, project, n=5)
        warm_cache(workspace, cache_dir)
    assert after.stop.sample_from == first.stop.sample_from
    assert after.stop.sample_size == first.stop.sample_size + 1 and after.stop.p_value is not None


def test_simulate_prints_the_advised_stop_per_seed(workspace, tmp_path, capsys, cache_dir):
    path = write_demo_subset(tmp_path / "ppi_subset.csv", demo_rows()[:240])
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{workspace.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    code = main(["--config", str(config), "screen", "simulate", str(path), "--label", "label_included", "--seeds", "2",
                 "--retrain-every", "20"])  # fmt: skip
    out = capsys.readouterr().out
    warm_cache(workspace, cache_dir)
    assert code == 0
    per_seed = re.findall(r"^    stop advised \(buscar_ranked\) after (\d+) records \(([\d.]+%)\): recall ([\d.]+); "
                          r"work saved ([\d.]+) vs ([\d.]+) at 95% recall$", out, re.M)  # fmt: skip
    assert len(per_seed) == 2, out
    # the same replays, independently: each order through first_stop gives the printed figures
    data = read_labelled_csv(path, "label_included")
    features = simulation_features(workspace, data)
    stops = []
    for seed, printed in enumerate(per_seed):
        with threadpool_limits(1):
            order, m = simulate(features, data.labels, workspace.screen, seed=seed,
                                priors=choose_priors(data.labels, seed), retrain_every=20)  # fmt: skip
        stop = first_stop(data.labels[order], workspace.screen, seed=seed)
        stops.append(stop)
        assert printed == (str(stop.screened), f"{stop.share:.1%}", f"{stop.recall:.3f}", f"{1 - stop.share:.3f}",
                           f"{1 - m.screened_at_95 / m.n:.3f}"), (seed, stop, m)  # fmt: skip
    mean = re.search(r"^stop advised \(buscar_ranked, mean of 2\): after ([\d.]+%) of the records, recall ([\d.]+) "
                     r"\(>= 0.95 in (\d) of 2\)", out, re.M)  # fmt: skip
    assert mean is not None, out
    assert mean[1] == f"{np.mean([s.share for s in stops]):.1%}"
    assert mean[2] == f"{np.mean([s.recall for s in stops]):.3f}"
    assert int(mean[3]) == sum(s.recall >= 0.95 for s in stops)
