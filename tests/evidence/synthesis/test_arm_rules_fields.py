"""The arm-number rules on real abstracts of the fields' development half (tests/fixtures/arm_data/fields_dev.tsv,
PROVENANCE.md): each rule of rules:arm-numbers-v4 finds the datum it was written for, and each guard keeps out the
number it was written against. Only development PMIDs are read here (the held-out half is scored by the bench)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ra_agent.evidence.synthesis import extract_arm_data
from ra_agent.evidence.synthesis.extract import ArmDatum
from ra_agent.models import Paper

GOLD_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "arm_data"


@pytest.fixture(scope="module")
def dev() -> dict[int, Paper]:
    """The development half's records (PMIDs of fields_dev.tsv only)."""
    pmids = {int(line.split("\t")[0]) for line in (GOLD_DIR / "fields_dev.tsv").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")}  # fmt: skip
    csv.field_size_limit(10**7)
    with (GOLD_DIR / "fields_records.csv").open(encoding="utf-8", newline="") as fh:
        return {int(r["pmid"]): Paper(pmid=int(r["pmid"]), title=r["title"], abstract=r["abstract"])
                for r in csv.DictReader(fh) if int(r["pmid"]) in pmids}  # fmt: skip


def _data(paper: Paper) -> list[ArmDatum]:
    return extract_arm_data(paper)


def _counts(paper: Paper) -> set[tuple[str, int, int]]:
    return {(d.arm, d.events, d.total) for d in _data(paper) if not d.continuous}


def test_a_stated_count_keeps_its_rounded_percentage_and_the_ci_masks_only_its_clause(dev):
    # "Compared with no warfarin (n=404), warfarin (n=408; 324 [79%] on fixed-dose …) did not reduce the rate of
    # catheter-related thromboses (24 [6%] vs 24 [6%]; relative risk 0.99, 95% CI 0.57-1.72, p=0.98)": the CI clause
    # is masked, not the counts before it; "fixed-dose" alone names no arm. "(13 [3%] vs 34 [7%]" over 473 and 471:
    # 13/473 prints as 3 % although 3 % of 473 rounds to 14.
    got = _counts(dev[19217991])
    assert {("warfarin", 24, 408), ("no warfarin", 24, 404)} <= got
    assert {("dose-adjusted warfarin", 13, 473), ("fixed-dose warfarin", 34, 471)} <= got


def test_bare_doses_beside_placebo_and_a_corresponding_count_list(dev):
    # "Thirty-two patients received 5 mg, 30 patients 10 mg, 33 patients 20 mg, and 30 patients placebo. In these
    # groups, there were 0, 0, 2 and 1 major bleeds, respectively. The corresponding data for CRNM bleeds were 1, 1,
    # 2, and 0.": the doses are the abstract's one dosed drug (apixaban) though placebo stands beside them; the time
    # is the 12 weeks of treatment, not "began within 4 weeks of the start of chemotherapy".
    data = [d for d in _data(dev[22409262]) if d.outcome == "bleeding"]
    got = {(d.arm, d.events, d.total, d.weeks) for d in data}
    assert {("apixaban 5 mg", 0, 32, 12.0), ("apixaban 20 mg", 2, 33, 12.0), ("placebo", 1, 30, 12.0)} <= got
    assert {("apixaban 5 mg", 1, 32, 12.0), ("apixaban 20 mg", 2, 33, 12.0), ("placebo", 0, 30, 12.0)} <= got


def _means(paper: Paper) -> set[tuple[str, float, float, int, float | None]]:
    return {(d.arm, d.mean, d.spread, d.total, d.weeks) for d in _data(paper) if d.continuous}  # type: ignore[misc]


def test_each_arm_heading_its_own_values_per_time_point(dev):
    # "for the combination group, weight gain was 1.6 +/- 1.8 kg at 3 months and 2.1 +/- 2.5% kg at 6 months (both
    # P < 0.0001 vs baseline), whereas for the insulin group, weight gain was 3.5 +/- 4.3 and 5.2 +/- 4.1 kg,
    # respectively": each arm's two values are its 3- and 6-month ones; "vs baseline" in a P value is a result.
    got = _means(dev[7555472])
    assert {("combination", 1.6, 1.8, 27, 13.0), ("combination", 2.1, 2.5, 27, 26.0)} <= got
    assert {
        ("twice-daily insulin (insulin group)", 3.5, 4.3, 26, 13.0),
        ("twice-daily insulin (insulin group)", 5.2, 4.1, 26, 26.0),
    } <= got


def test_combined_therapy_names_the_one_combined_arm(dev):
    # "metformin with the addition of repaglinide (n = 27)" and "repaglinide in combination with metformin" are one
    # arm, which "combined therapy" names: "An increase in body weight occurred in the repaglinide and combined therapy
    # groups (2.4 +/- 0.5 and 3.0 +/- 0.5 kg, respectively" over 29 and 27 patients.
    got = {(arm, mean, n) for arm, mean, _, n, _ in _means(dev[10333912])}
    assert {("repaglinide", 2.4, 29), ("repaglinide + metformin", 3.0, 27), ("repaglinide + metformin", 1.4, 27)} <= got
    assert ("repaglinide", 2.4, 27) not in got


def test_a_partners_dose_is_not_a_second_dose_of_the_arm(dev):
    # "1 rizatriptan 10 mg tablet to 2 ergotamine 1 mg/caffeine 100 mg tablets in 439 patients": 100 mg is caffeine's,
    # so ergotamine has one dose, and its printed percentages (24.3%, 47.3%) that no count of 439 reproduces show 439
    # is not its denominator: no "20% of patients on ergotamine/caffeine" or "15.3%" becomes a count over 439.
    assert not [d for d in _data(dev[12464714]) if d.drug == "ergotamine" and d.total == 439]


def test_shares_of_attacks_and_pooled_figures_are_not_arm_shares(dev):
    from ra_agent.evidence.synthesis.numbers import numbers_in

    # "Within 2 hours, headache severity decreased to none/mild in 86% of all attacks in the sumatriptan group (STG)
    # compared to 25% in the customary group (CTG)." (9922821): 86% is a share of attacks, not of patients.
    sentence = next(s for s in dev[9922821].abstract.split(". ") if "of all attacks" in s)
    assert [n.percent for n in numbers_in(sentence)] == [25.0]
    # "Overall, 162/676 (24 %) patients …" (27344439): a figure over both arms is no arm's.
    pooled = next(s for s in dev[27344439].abstract.split(". ") if s.startswith("Overall, 162/676"))
    assert all(n.total != 676 and n.percent != 24 for n in numbers_in(pooled))
