"""Direction of effect (rules:direction-v1) on real demo abstracts: from arm numbers, from the result sentence's
significance and wording, and no difference when the abstract says so. The figure against the Evidence Inference
labels is bench/bench_direction.py's."""

from __future__ import annotations

import pytest
from demo_corpus import demo_papers

from ra_agent.evidence.synthesis.direction import DECREASED, INCREASED, NO_DIFFERENCE, direction_of, result_sentence
from ra_agent.models import Paper


@pytest.fixture(scope="module")
def papers() -> dict[int, Paper]:
    return {p.pmid: p for p in demo_papers() if p.pmid in (10950032, 10594396)}


def test_arm_numbers_decide_when_both_arms_have_counts(papers):
    # 10950032: healing at 4 weeks 98/167 on rabeprazole, 60/169 on ranitidine (and at 8 weeks 146/167, 112/169)
    forward = direction_of(papers[10950032], "rabeprazole 20 mg once daily", "ranitidine 150 mg four times daily",
                           "healing of erosive oesophagitis")  # fmt: skip
    assert (forward.label, forward.how, forward.rules) == (INCREASED, "arm numbers", "rules:direction-v1")
    backward = direction_of(papers[10950032], "ranitidine 150 mg", "rabeprazole 20 mg", "healing")
    assert (backward.label, backward.how) == (DECREASED, "arm numbers")


def test_the_result_sentence_gives_significance_and_direction(papers):
    # 10594396 prints "79% vs. 42%" without arm sizes: no arm numbers, the sentence decides
    paper = papers[10594396]
    healing = direction_of(
        paper, "lansoprazole 30 mg o.d.", "ranitidine 300 mg b.d.", "endoscopically-verified healing"
    )
    assert healing.label == INCREASED and healing.how == "sentence wording"
    assert healing.sentence.startswith(
        "The percentage of patients with endoscopically-verified healing was significantly higher"
    )
    harms = direction_of(paper, "lansoprazole", "ranitidine", "number of patients with adverse events")
    assert (harms.label, harms.how) == (
        NO_DIFFERENCE,
        "significance only",
    )  # "... was similar in both treatment groups"
    assert harms.sentence == "The number of patients with adverse events was similar in both treatment groups."
    unknown = direction_of(paper, "lansoprazole", "ranitidine", "quality-adjusted life years")
    assert (unknown.label, unknown.how, unknown.sentence) == (NO_DIFFERENCE, "no significance cue", "")
    assert result_sentence([], "healing") == ""
