"""Arm-level extraction, comparisons and pooling on real demo abstracts (Cohen 2006 PPI export)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from demo_corpus import demo_papers

from ra_agent.evidence.synthesis import EXTRACTOR, extract_arm_data, synthesise
from ra_agent.evidence.synthesis.compare import H2RA, PPI
from ra_agent.models import Paper

# PPI vs H2-receptor antagonist trials in erosive oesophagitis; their counts were read by hand from the abstracts
# (tests/fixtures/arm_data/gold.tsv)
HEALING_TRIALS = {10950032, 12060043, 9768529, 9354207}


@pytest.fixture(scope="module")
def papers() -> dict[int, Paper]:
    return {p.pmid: p for p in demo_papers()}


def test_count_pairs_with_their_sentence(papers: dict[int, Paper]) -> None:
    data = extract_arm_data(papers[10950032])
    got = {(d.drug, d.weeks, d.events, d.total) for d in data}
    assert got == {("rabeprazole", 4, 98, 167), ("ranitidine", 4, 60, 169), ("rabeprazole", 8, 146, 167),
                   ("ranitidine", 8, 112, 169)}  # fmt: skip
    for d in data:
        assert d.extractor == EXTRACTOR == "rules:arm-numbers-v1"
        assert f"{d.events}/{d.total}" in d.sentence and d.sentence in papers[10950032].abstract
        assert d.outcome == "healing"


def test_percentages_need_the_arm_size_sentence(papers: dict[int, Paper]) -> None:
    # "... received either pantoprazole 40 mg (n = 185) or omeprazole 20 mg (n = 91) ..."; "Rates of complete ulcer
    # healing after 2 weeks were 71% in patients given pantoprazole and 74% in patients given omeprazole."
    data = {(d.arm, d.weeks): d for d in extract_arm_data(papers[8527617]) if d.outcome == "healing"}
    assert (data["pantoprazole 40 mg", 2].events, data["pantoprazole 40 mg", 2].total) == (131, 185)
    assert (data["omeprazole 20 mg", 2].events, data["omeprazole 20 mg", 2].total) == (67, 91)
    d = data["omeprazole 20 mg", 2]
    assert "74%" in d.sentence and "(n = 91)" in d.size_sentence
    assert d.sentence in papers[8527617].abstract and d.size_sentence in papers[8527617].abstract


def test_no_arm_size_no_datum(papers: dict[int, Paper]) -> None:
    # 10594396 prints "79% vs. 42%" but only the total of 133 randomised: no count can be tied to a sentence
    assert extract_arm_data(papers[10594396]) == []
    # 11012468: 94.1% of 654 is no whole number of patients, so esomeprazole 40 mg is left out; 89.9% of 656 is 590
    arms = {d.arm: (d.events, d.total) for d in extract_arm_data(papers[11012468])}
    assert "esomeprazole 40 mg" not in arms and arms["esomeprazole 20 mg"] == (590, 656)


def test_ppi_vs_h2ra_healing_pooled_with_statsmodels(papers: dict[int, Paper], tmp_path: Path) -> None:
    s = synthesise([papers[p] for p in sorted(HEALING_TRIALS)], question="PPI vs H2RA", forest_dir=tmp_path)
    main = s.main()
    assert main is not None
    assert (main.contrasts.comparison.intervention, main.contrasts.comparison.comparator) == (PPI, H2RA)
    assert (main.contrasts.outcome, main.contrasts.weeks, main.trials) == ("healing", 4, 4)
    assert main.participants == 167 + 169 + 109 + 113 + 87 + 86 + 11 + 13
    assert main.rr is not None and main.ci_low is not None and main.ci_high is not None
    assert 1 < main.ci_low < main.rr < main.ci_high  # every trial favours the PPI
    # the pooled RR lies between the smallest and largest trial RR, each computed from the hand-read counts
    by_hand = [(98 / 167) / (60 / 169), (69 / 109) / (25 / 113), (70 / 87) / (55 / 86), (6 / 11) / (3 / 13)]
    assert min(by_hand) < main.rr < max(by_hand)
    assert sorted(round(rr, 6) for _, rr, _, _ in main.trial_rr) == sorted(round(x, 6) for x in by_hand)
    assert main.i2 is not None and 0 <= main.i2 < 1 and main.tau2 is not None and main.tau2 >= 0
    assert main.forest_png is not None and main.forest_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_single_trial_is_not_poolable(papers: dict[int, Paper], tmp_path: Path) -> None:
    s = synthesise([papers[10950032]], forest_dir=tmp_path)
    assert s.results and not s.pooled
    assert all("1 trial" in r.not_poolable for r in s.results)
    assert list(tmp_path.iterdir()) == []


def test_paule_mandel_and_dersimonian_laird_agree_on_homogeneous_trials(papers: dict[int, Paper]) -> None:
    trials = [papers[p] for p in sorted(HEALING_TRIALS)]
    dl, pm = synthesise(trials, method="dl").main(), synthesise(trials, method="pm").main()
    assert dl and pm and dl.method == "DerSimonian-Laird" and pm.method == "Paule-Mandel"
    assert math.isclose(dl.rr or 0, pm.rr or 0, rel_tol=0.15)


def test_synthesis_record_feeds_the_reports_asset_metadata(papers: dict[int, Paper], tmp_path: Path) -> None:
    from ra_agent.evidence.synthesis.report import drafts_synthesis, synthesis_record_path, write_synthesis_record

    s = synthesise([papers[p] for p in sorted(HEALING_TRIALS)], forest_dir=tmp_path, stem="sr_draft_c1_forest")
    draft = tmp_path / "sr_draft_c1.md"
    draft.write_text("# draft\n", encoding="utf-8")
    write_synthesis_record(s, tmp_path, synthesis_record_path(draft))
    meta = drafts_synthesis([draft, tmp_path / "gap_dossier_c1.md"])
    pooled = [c for c in meta["comparisons"] if c["rr"] is not None]
    assert [(c["comparison"], c["outcome"], c["weeks"], sorted(c["trials"])) for c in pooled] == [
        (f"{PPI} vs {H2RA}", "healing", 4.0, sorted(HEALING_TRIALS)),
        (f"{PPI} vs {H2RA}", "healing", 8.0, [9768529, 10950032]),  # 12060043 and 9354207 give no 8-week counts
    ]
    assert meta["forest_plots"] == [r.forest_png.as_posix() for r in s.pooled if r.forest_png]
    assert len(meta["forest_plots"]) == 2 and all(Path(p).exists() for p in meta["forest_plots"])
    assert "1.7" in meta["pooled_md"] or "1.8" in meta["pooled_md"]
    assert meta["main"] and meta["main"][0].startswith("sr_draft_c1.md: For proton pump inhibitor vs")
