"""The arm-extraction benchmark's scoring on the real gold files (bench/bench_arm_extraction.py): what it counts as
found, extra and of the right outcome class. The extractor itself is run on the development half only: the fresh
held-out batch is scored once, by the benchmark."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from demo_corpus import demo_papers

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_arm_extraction", ROOT / "bench" / "bench_arm_extraction.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through the module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def papers():
    return {p.pmid: p for p in demo_papers()}


def test_the_gold_files_hold_what_their_provenance_says(bench):
    gold, fresh = bench.load_gold(bench.GOLD), bench.load_gold(bench.HELDOUT2)
    assert len(gold) == 40 and sum(bool(v) for v in gold.values()) == 23
    assert len(fresh) == 43 and sum(bool(v) for v in fresh.values()) == 22 and sum(map(len, fresh.values())) == 72
    assert not set(gold) & set(fresh)  # the fresh batch is new abstracts
    dev, held = bench.split(gold)
    assert len(dev) == len(held) == 20 and not set(dev) & set(held)
    for rows in (*gold.values(), *fresh.values()):
        for g in rows:
            assert 0 <= g.events <= g.total and g.drugs
    # every gold label falls in an outcome class; healing, eradication and remission are read as such
    classes = {g.outcome: bench.outcome_class_of(g.outcome) for rows in fresh.values() for g in rows}
    assert classes["ulcer healing (per protocol)"] == "healing"
    assert classes["eradication (intention to treat)"] == "eradication"
    assert classes["endoscopic remission"] == "remission" and classes["severe gastroduodenal damage"] == "other"


def test_a_malformed_gold_line_names_its_file_and_line(bench, tmp_path):
    bad = tmp_path / "gold.tsv"
    bad.write_text("# pmid\tarm\toutcome\tweeks\tevents\ttotal\n123\tomeprazole\thealing\t4\t12\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{bad}:2: expected pmid, arm, outcome, weeks, events, total"):
        bench.load_gold(bad)


def test_scoring_counts_found_extra_and_outcome_class(bench, papers):
    fresh = bench.load_gold(bench.HELDOUT2)
    pmids = sorted(fresh)

    def perfect(paper):  # the gold itself, each datum under the first drug its arm names
        return [((g.pmid, g.arm.split()[0].lower(), g.weeks, g.events, g.total), bench.outcome_class_of(g.outcome))
                for g in fresh[paper.pmid]]  # fmt: skip

    s = bench.score(perfect, papers, fresh, pmids)
    # 10930903 states 16 of 35 PAC patients worsened and 16 of 35 unchanged: one key, two gold data, both found
    assert (s.found, s.gold, s.correct, s.extracted, s.outcome_right) == (72, 72, 71, 71, 72)
    assert s.recall == s.precision == s.f1 == 1.0
    empty = bench.score(lambda paper: [], papers, fresh, pmids)
    assert (empty.found, empty.gold, empty.extracted, empty.recall, empty.precision) == (0, 72, 0, 0.0, 0.0)

    def shifted(paper):  # a thousand patients more in every arm, and every outcome called "other"
        return [
            ((pmid, drug, weeks, events, total + 1000), "other")
            for (pmid, drug, weeks, events, total), _ in perfect(paper)
        ]

    wrong = bench.score(shifted, papers, fresh, pmids)
    assert (wrong.found, wrong.correct, wrong.extracted) == (0, 0, 71)
    # a drug named anywhere in a combination arm's label matches; the class of a matched datum is checked on its own
    combo = [g for g in fresh[12439119] if g.arm.startswith("omeprazole 20 mg + amoxicillin")][0]
    key = (combo.pmid, "clarithromycin", combo.weeks, combo.events, combo.total)
    one = bench.score(lambda paper: [(key, "healing")] if paper.pmid == 12439119 else [], papers, fresh, [12439119])
    assert (one.found, one.correct, one.outcome_right) == (
        1,
        1,
        int(bench.outcome_class_of(combo.outcome) == "healing"),
    )


def test_the_rules_and_both_baselines_score_on_the_development_half(bench, papers):
    gold = bench.load_gold(bench.GOLD)
    dev, _held = bench.split(gold)
    scores = {name: bench.score(fn, papers, gold, dev) for name, fn, _ in bench.EXTRACTORS}
    for s in scores.values():
        assert s.gold == sum(len(gold[p]) for p in dev) and 0 <= s.found <= s.gold and 0 <= s.correct <= s.extracted
        assert s.outcome_right <= s.found
    counts, percent = scores["baseline: count pairs"], scores["baseline: count pairs + percent x n"]
    assert percent.extracted >= counts.extracted and percent.found >= counts.found  # it adds to the count pairs
