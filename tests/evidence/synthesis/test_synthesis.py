"""Arm-level extraction, comparisons within a condition and a review question, and pooling, on real demo abstracts
(Cohen 2006 PPI export)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from demo_corpus import demo_papers

from ra_agent.agent.questions import handbook_topic
from ra_agent.evidence.pico.extract import RuleExtractor
from ra_agent.evidence.synthesis import EXTRACTOR, ArmDatum, extract_arm_data, synthesis_code_version, synthesise
from ra_agent.evidence.synthesis.compare import H2RA, PPI, Comparison, OutcomeContrasts, Side, TrialContrast
from ra_agent.evidence.synthesis.condition import condition_of
from ra_agent.evidence.synthesis.numbers import dispersion
from ra_agent.evidence.synthesis.pool import SMD, pool
from ra_agent.evidence.synthesis.question import from_topic
from ra_agent.evidence.synthesis.report import review_title
from ra_agent.models import Paper

# PPI vs H2-receptor antagonist trials in erosive oesophagitis; their counts were read by hand from the abstracts
# (tests/fixtures/arm_data/gold.tsv)
HEALING_TRIALS = {10950032, 12060043, 9768529, 9354207}
# the same drugs in duodenal ulcer: pantoprazole vs omeprazole (7614102, 8527617), rabeprazole vs ranitidine
# (10763941), lansoprazole or ranitidine triple therapy in H. pylori duodenal ulcer (9128316)
DUODENAL = {7614102, 8527617, 10763941, 9128316}
# pantoprazole vs omeprazole in reflux oesophagitis
OESOPHAGITIS_H2H = {7654895, 8824655, 11563998}
CONDUCT_SR = Path(__file__).resolve().parents[3] / "handbooks" / "conduct_sr_ppi.md"


@pytest.fixture(scope="module")
def papers() -> dict[int, Paper]:
    return {p.pmid: p for p in demo_papers()}


def test_count_pairs_with_their_sentence(papers: dict[int, Paper]) -> None:
    data = extract_arm_data(papers[10950032])
    got = {(d.drug, d.weeks, d.events, d.total) for d in data}
    assert got == {("rabeprazole", 4, 98, 167), ("ranitidine", 4, 60, 169), ("rabeprazole", 8, 146, 167),
                   ("ranitidine", 8, 112, 169)}  # fmt: skip
    for d in data:
        assert d.extractor == EXTRACTOR == "rules:arm-numbers-v5.1"
        assert f"{d.events}/{d.total}" in d.sentence and d.sentence in papers[10950032].abstract
        assert d.outcome == "healing" and not d.continuous
    assert EXTRACTOR in synthesis_code_version()  # the reports asset's code_version follows the extractor


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
    # 11012468: 94.1% of 654 is no whole number of patients, and the healing rates are cumulative life-table
    # estimates ("using cumulative life table estimates"), not shares of the arm: no esomeprazole datum
    arms = {d.arm: (d.events, d.total) for d in extract_arm_data(papers[11012468])}
    assert "esomeprazole 40 mg" not in arms and "esomeprazole 20 mg" not in arms


def test_means_with_a_labelled_sd_still_need_the_arm_sizes(papers: dict[int, Paper]) -> None:
    # 9930385, a crossover of ten completers: "fewer reflux episodes >5 min during treatment with LAN (1.00 +/- 1.33)
    # than with OME (2.90 +/- 2.42)", the abstract saying "mean +/- standard deviation"; no arm is allocated a size
    paper = papers[9930385]
    sentence = next(s for s in paper.abstract.split(". ") if "reflux episodes >5 min" in s)
    assert dispersion(sentence, paper.abstract) == "SD"
    assert dispersion("lesion score of 6.8 +/- 1.4 (+/- SEM)", "") == "SE"
    assert dispersion("pH 4.0 +/- 1.2", "pH per se") == ""  # "se" is not the abbreviation SE; unlabelled: not read
    assert extract_arm_data(paper) == []


def test_ppi_vs_h2ra_healing_pooled_with_statsmodels(papers: dict[int, Paper], tmp_path: Path) -> None:
    s = synthesise([papers[p] for p in sorted(HEALING_TRIALS)], question="PPI vs H2RA", forest_dir=tmp_path)
    main = s.main()
    assert main is not None
    c = main.contrasts.comparison
    assert (c.intervention, c.comparator, c.condition) == (PPI, H2RA, "erosive oesophagitis")
    assert (main.contrasts.outcome, main.contrasts.weeks, main.trials, main.measure) == ("healing", 4, 4, "RR")
    assert main.participants == 167 + 169 + 109 + 113 + 87 + 86 + 11 + 13
    assert main.effect is not None and main.ci_low is not None and main.ci_high is not None
    assert 1 < main.ci_low < main.effect < main.ci_high  # every trial favours the PPI
    # the pooled RR lies between the smallest and largest trial RR, each computed from the hand-read counts
    by_hand = [(98 / 167) / (60 / 169), (69 / 109) / (25 / 113), (70 / 87) / (55 / 86), (6 / 11) / (3 / 13)]
    assert min(by_hand) < main.effect < max(by_hand)
    assert sorted(round(rr, 6) for _, rr, _, _ in main.trial_effects) == sorted(round(x, 6) for x in by_hand)
    assert main.i2 is not None and 0 <= main.i2 < 1 and main.tau2 is not None and main.tau2 >= 0
    assert main.forest_png is not None and main.forest_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_condition_is_read_from_title_population_and_abstract(papers: dict[int, Paper]) -> None:
    def of(pmid: int) -> str:
        p = papers[pmid]
        return condition_of(p.title, "", p.mesh, p.abstract)

    assert {of(p) for p in DUODENAL} == {"duodenal ulcer"}  # 9128316: "Helicobacter pylori-associated duodenal ulcer"
    assert {of(p) for p in OESOPHAGITIS_H2H | HEALING_TRIALS} == {"erosive oesophagitis"}
    assert of(10383510) == "non-erosive reflux disease"  # "heartburn in patients without erosive oesophagitis"
    assert condition_of("A trial", "adults with chronic cough, aged 18-70") == "chronic cough"  # the PICO P's words


def test_no_duodenal_ulcer_trial_joins_an_oesophagitis_pool(papers: dict[int, Paper], tmp_path: Path) -> None:
    trials = [papers[p] for p in sorted(DUODENAL | OESOPHAGITIS_H2H | HEALING_TRIALS)]
    s = synthesise(trials, forest_dir=tmp_path)  # no question: every comparison pooled within its condition
    for r in s.results:
        assert len({s.conditions[t.pmid] for t in r.contrasts.trials}) == 1, r.contrasts.comparison.label
    pooled = {(r.contrasts.comparison.label, r.contrasts.label): {t.pmid for t in r.contrasts.trials} for r in s.pooled}
    assert pooled[("omeprazole vs pantoprazole in duodenal ulcer", "healing at 2 weeks")] == {7614102, 8527617}
    assert pooled[("omeprazole vs pantoprazole in erosive oesophagitis", "healing at 4 weeks")] <= OESOPHAGITIS_H2H
    oesophagitis = [pmids for (label, _), pmids in pooled.items() if "oesophagitis" in label]
    assert oesophagitis and not any(pmids & DUODENAL for pmids in oesophagitis)
    # the goal's review question (the handbook's seed query with its prose's synonyms, as a conduct_SR goal reads
    # it) leaves the duodenal-ulcer comparisons outside
    question = from_topic(handbook_topic(CONDUCT_SR))
    asked = synthesise(trials, question=question, forest_dir=tmp_path)
    assert asked.results and all(t.pmid not in DUODENAL for r in asked.results for t in r.contrasts.trials)
    assert {t.pmid for oc in asked.outside for t in oc.trials} >= {7614102, 8527617, 10763941}
    assert all(oc.comparison.condition == "duodenal ulcer" for oc in asked.outside)
    main = asked.main()
    assert main is not None and main.contrasts.comparison.label == f"{PPI} vs {H2RA} in erosive oesophagitis"
    title = review_title(asked, {})
    assert title.startswith("Systematic review: proton pump inhibitors in gastroesophageal reflux (main comparison: ")
    assert "proton pump inhibitors versus H2-receptor antagonists for healing in erosive oesophagitis" in title


def test_pico_fields_name_arms_not_classes() -> None:
    from ra_agent.evidence.synthesis.compare import arms_named, planned_comparisons

    assert arms_named("pantoprazole 40 mg plus cisapride; PPI alone or proton pump inhibitors") == [
        ("pantoprazole 40 mg", "pantoprazole"), ("cisapride", "cisapride")]  # fmt: skip
    assert arms_named("esomeprazole 40 mg and 20 mg; omeprazole; matching omeprazole placebo") == [
        ("esomeprazole 40 mg", "esomeprazole"), ("esomeprazole 20 mg", "esomeprazole"), ("omeprazole", "omeprazole")]  # fmt: skip
    found = planned_comparisons("esomeprazole 40 mg", "omeprazole 20 mg", "erosive oesophagitis")
    assert [(c.kind, c.arms, c.intervention_class) for c in found] == [
        ("head-to-head", "esomeprazole vs omeprazole", PPI)
    ]


def test_trials_without_numbers_are_placed_by_their_pico(papers: dict[int, Paper]) -> None:
    # 10594396 (lansoprazole vs ranitidine in reflux oesophagitis) prints percentages without arm sizes
    trials = [papers[p] for p in sorted(HEALING_TRIALS | {10594396, 10763941})]
    records = {r.pmid: r for r in RuleExtractor().extract(trials)}
    s = synthesise(trials, question=from_topic(handbook_topic(CONDUCT_SR)), pico=records)
    assert 10594396 not in s.usable
    placed = s.comparison_of(10594396)
    assert placed is not None and placed.label == f"{PPI} vs {H2RA} in erosive oesophagitis" and s.in_question(placed)
    duodenal = s.comparison_of(10763941)
    assert duodenal is not None and duodenal.condition == "duodenal ulcer" and not s.in_question(duodenal)


def test_single_trial_is_not_poolable(papers: dict[int, Paper], tmp_path: Path) -> None:
    from ra_agent.evidence.prisma.checklist import prisma_subitems
    from ra_agent.evidence.synthesis import report

    s = synthesise([papers[10950032]], forest_dir=tmp_path)
    assert s.results and not s.pooled
    assert all("1 trial" in r.not_poolable for r in s.results)
    assert list(tmp_path.iterdir()) == []
    # the draft's sections then claim no pooled estimate and no sensitivity analysis (PRISMA 13f, 20b, 20d missing)
    text = (f"### Synthesis methods\n\n{report.synthesis_methods(s)}\n\n### Results of syntheses\n\n"
            f"{report.syntheses_results(s, tmp_path)}\n")  # fmt: skip
    met = {i.item: i.met for i in prisma_subitems(text)}
    assert met["13a"] and met["13d"] and not met["13f"] and not met["20b"] and not met["20d"]


def test_paule_mandel_and_dersimonian_laird_agree_on_homogeneous_trials(papers: dict[int, Paper]) -> None:
    trials = [papers[p] for p in sorted(HEALING_TRIALS)]
    dl, pm = synthesise(trials, method="dl").main(), synthesise(trials, method="pm").main()
    assert dl and pm and dl.method == "DerSimonian-Laird" and pm.method == "Paule-Mandel"
    assert math.isclose(dl.effect or 0, pm.effect or 0, rel_tol=0.15)


def test_continuous_data_pool_as_a_standardised_mean_difference(tmp_path: Path) -> None:
    # Six trials with means, SDs and sizes per arm (Chen & Peace, Applied Meta-Analysis with R, 2013, chapter 3);
    # per-trial Hedges' g as R metafor's escalc(measure="SMD") gives them (statsmodels' test_meta.py records them)
    trials = [("Carroll", 94, 22, 60, 92, 20, 60), ("Grant", 98, 21, 65, 92, 22, 65), ("Peck", 98, 28, 40, 88, 26, 40),
              ("Donat", 94, 19, 200, 82, 17, 200), ("Stewart", 98, 21, 50, 88, 22, 45),
              ("Young", 96, 21, 85, 92, 22, 85)]  # fmt: skip
    metafor_g = [0.0945241585, 0.2773558663, 0.3665444295, 0.6643849683, 0.4618062813, 0.1851644374]

    def side(pmid: int, arm: str, mean: float, sd: float, n: int) -> Side:
        datum = ArmDatum(pmid, arm, arm, "mean score", 8, 0, n, f"{arm} {mean} ± {sd} (n = {n})", "", mean=mean, sd=sd)
        return Side((arm,), 0, n, (datum,))

    contrasts = tuple(TrialContrast(i, side(i, "treated", m1, s1, n1), side(i, "control", m2, s2, n2))
                      for i, (_name, m1, s1, n1, m2, s2, n2) in enumerate(trials, 1))  # fmt: skip
    oc = OutcomeContrasts(Comparison("class", "treated", "control", "test"), "mean score", 8, contrasts, True)
    r = pool(oc, forest_dir=tmp_path, stem="smd")
    assert r.measure == SMD and r.null == 0.0 and r.participants == sum(t[3] + t[6] for t in trials)
    assert np.allclose([g for _, g, _, _ in r.trial_effects], metafor_g, rtol=1e-5)
    assert r.effect is not None and min(metafor_g) < r.effect < max(metafor_g) and r.ci_low is not None and r.ci_low > 0
    assert r.estimate().startswith("SMD ") and r.forest_png is not None and r.forest_png.exists()


def test_synthesis_record_feeds_the_reports_asset_metadata(papers: dict[int, Paper], tmp_path: Path) -> None:
    from ra_agent.evidence.synthesis.report import drafts_synthesis, synthesis_record_path, write_synthesis_record

    s = synthesise([papers[p] for p in sorted(HEALING_TRIALS)], forest_dir=tmp_path, stem="sr_draft_c1_forest")
    draft = tmp_path / "sr_draft_c1.md"
    draft.write_text("# draft\n", encoding="utf-8")
    write_synthesis_record(s, tmp_path, synthesis_record_path(draft))
    meta = drafts_synthesis([draft, tmp_path / "gap_dossier_c1.md"])
    pooled = [c for c in meta["comparisons"] if c["effect"] is not None]
    label = f"{PPI} vs {H2RA} in erosive oesophagitis"
    assert [(c["comparison"], c["outcome"], c["weeks"], sorted(c["trials"])) for c in pooled] == [
        (label, "healing", 4.0, sorted(HEALING_TRIALS)),
        (label, "healing", 8.0, [9768529, 10950032]),  # 12060043 and 9354207 give no 8-week counts
    ]
    assert all(c["measure"] == "RR" and c["condition"] == "erosive oesophagitis" for c in pooled)
    assert meta["forest_plots"] == [r.forest_png.as_posix() for r in s.pooled if r.forest_png]
    assert len(meta["forest_plots"]) == 2 and all(Path(p).exists() for p in meta["forest_plots"])
    assert meta["forest_md"].count("![") == 2 and all(f"]({p})" in meta["forest_md"] for p in meta["forest_plots"])
    assert "RR 1.7" in meta["pooled_md"] or "RR 1.8" in meta["pooled_md"]
    assert meta["main"] and meta["main"][0].startswith(f"sr_draft_c1.md: For {label}")
