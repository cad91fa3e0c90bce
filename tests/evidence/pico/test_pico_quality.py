"""Measured quality of the rule extractor: RCT detection against the demo screening proxy and gold-set field F1."""

from __future__ import annotations

import runpy
import sys

import pytest
from pico_records import DEMO, GOLD, ROOT

from ra_agent.evidence.pico.extract import SCHEMA_KEYS, PicoRecord
from ra_agent.evidence.pico.quality import PROXY_NOTE, evaluate, markdown_report, token_f1

# Thresholds sit just under the numbers measured on the fixed data (rules are deterministic), so any
# regression of the cues fails here. Measured: RCT vs screening label P 0.270 / R 0.577 / F1 0.368 at
# prevalence 0.188 (1,171 records with an abstract); RCT recall on the 50 final inclusions 0.720.
# The screening label is a proxy (see PROXY_NOTE): its precision ceiling is far below 1.
RCT_VS_SCREENING = {"precision": 0.25, "recall": 0.55, "f1": 0.35}
MIN_LIFT_OVER_PREVALENCE = 1.3
RCT_RECALL_ON_INCLUSIONS = 0.70
# Gold-set token F1 per field, measured (rules:pico-cues-v2): P 0.574, I 0.554, C 0.634, O 0.377, StudyDesign 0.830,
# PopulationAge 0.931, SampleSize 0.862; design class accuracy 0.897; SampleSize exact 0.862. v1 scored I 0.665,
# C 0.698, O 0.467 on these 29 records it was tuned on; v2 trades that for value precision on the 960 EBM-NLP
# abstracts (I 0.60 -> 0.72, O 0.53 -> 0.70, see bench/eval_pico.py): it drops dosing parentheses and result
# clauses from arms and fills O from result sentences when the methods name no outcome.
GOLD_F1 = {"P": 0.53, "I": 0.52, "C": 0.60, "O": 0.36, "StudyDesign": 0.78, "PopulationAge": 0.88, "SampleSize": 0.80}
GOLD_DESIGN_CLASS_ACCURACY = 0.85
GOLD_SAMPLE_SIZE_EXACT = 0.80


def meets_thresholds(quality) -> dict[str, bool]:
    d = quality.rct_vs_screening
    checks = {f"rct_{k}": getattr(d, k) >= v for k, v in RCT_VS_SCREENING.items()}
    checks["rct_lift"] = d.precision >= MIN_LIFT_OVER_PREVALENCE * d.prevalence
    checks["rct_inclusions"] = quality.rct_vs_included.recall >= RCT_RECALL_ON_INCLUSIONS
    checks.update({f"gold_{k}": quality.gold.f1[k] >= v for k, v in GOLD_F1.items()})
    checks["design_class"] = quality.gold.design_class_accuracy >= GOLD_DESIGN_CLASS_ACCURACY
    checks["sample_size_exact"] = quality.gold.sample_size_exact >= GOLD_SAMPLE_SIZE_EXACT
    return checks


def test_rct_detection_against_the_screening_proxy(quality):
    d = quality.rct_vs_screening
    assert quality.demo_papers == 1171 and d.tp + d.fp + d.fn + d.tn == 1171
    assert d.precision >= RCT_VS_SCREENING["precision"], d
    assert d.recall >= RCT_VS_SCREENING["recall"], d
    assert d.f1 >= RCT_VS_SCREENING["f1"], d
    assert d.precision >= MIN_LIFT_OVER_PREVALENCE * d.prevalence, "RCT flag must enrich for screened-in records"


def test_rct_recall_on_final_inclusions(quality):
    assert quality.rct_vs_included.recall >= RCT_RECALL_ON_INCLUSIONS, quality.rct_vs_included


def test_gold_set_field_f1(quality):
    for field, threshold in GOLD_F1.items():
        assert quality.gold.f1[field] >= threshold, (field, quality.gold.f1[field])
    assert quality.gold.design_class_accuracy >= GOLD_DESIGN_CLASS_ACCURACY
    assert quality.gold.sample_size_exact >= GOLD_SAMPLE_SIZE_EXACT


def test_every_threshold_holds(quality):
    assert all(meets_thresholds(quality).values()), meets_thresholds(quality)


class EmptyExtractor:
    """Extracts nothing: the thresholds must reject it, or they measure nothing."""

    name = "test:empty"
    batch_size = 40

    def extract(self, papers):
        return [PicoRecord(pmid=p.pmid, extractor=self.name) for p in papers]


def test_the_thresholds_can_fail():
    checks = meets_thresholds(evaluate(DEMO, GOLD, ROOT, extractor=EmptyExtractor()))
    failed = {k for k, ok in checks.items() if not ok}
    assert {"rct_recall", "rct_precision", "rct_inclusions", "gold_P", "gold_I", "gold_O", "design_class"} <= failed


def test_demo_fill_rates_are_reported(quality):
    assert set(quality.demo_fill) == set(SCHEMA_KEYS)
    assert quality.demo_fill["P"] > 0.7 and quality.demo_fill["StudyDesign"] > 0.5


def test_gold_set_is_well_formed(gold, gold_paper_map):
    assert len(gold) == 29 and len({g.pmid for g in gold}) == 29
    assert all(isinstance(v, str) for g in gold for v in g.fields.values())
    assert all((ROOT / g.source).exists() for g in gold)
    assert sum(g.source.endswith(".csv") for g in gold) == 17  # the rest are structured XML records
    assert set(gold_paper_map) == {g.pmid for g in gold}
    assert all(gold_paper_map[g.pmid].abstract for g in gold)


@pytest.mark.parametrize(
    ("predicted", "gold", "score"),
    [
        ("", "", 1.0),
        ("placebo", "", 0.0),
        ("", "placebo", 0.0),
        ("Placebo", "placebo", 1.0),
        ("patients with GERD", "patient with gerd", 1.0),  # plurals fold, case is ignored
        ("omeprazole 20 mg", "omeprazole 40 mg", 2 / 3),
    ],
)
def test_token_f1(predicted, gold, score):
    assert token_f1(predicted, gold) == pytest.approx(score)


def _table(out: str, title: str) -> dict[str, list[str]]:
    """The rows (extractor → cells) of the value table under the `## title...` heading of eval_pico's output."""
    section = out.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.count(" | ") == 8 and not line.startswith("| extractor")]
    return {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in table}


def test_report_and_bench_script(quality, monkeypatch, capsys, tmp_path):
    report = markdown_report(quality)
    assert "| detector vs proxy label | TP | FP | FN | prevalence | precision | recall | F1 |" in report
    assert "| field | token F1 (all records) | token F1 (gold non-empty) |" in report
    assert PROXY_NOTE in report and "not a gold PICO or design annotation" in report
    # --expert reads another file of the same CoNLL form (EBM-NLP's expert test split is kept outside the repository):
    # here the first 12 held-out abstracts of the dev split, cut from the fixture as they stand
    source = (ROOT / "tests" / "fixtures" / "ebmnlp" / "ebmnlp_dev.txt").read_text(encoding="utf-8")
    docs = [d for d in source.split("-DOCSTART- ")[1:] if int(d[1 : d.index(")")]) % 2 == 1][:12]
    (tmp_path / "expert_slice.txt").write_text("".join(f"-DOCSTART- {d}" for d in docs), encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["eval_pico.py", "--skip-demo", "--expert", str(tmp_path / "expert_slice.txt")])
    runpy.run_path(str(ROOT / "bench" / "eval_pico.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "held-out odd-PMID half (crowd labels): 491 abstracts" in out
    rows = _table(out, "EBM-NLP dev split, held-out")
    learned = next(name for name in rows if name.startswith("learned:pico-crf-v2@"))
    assert {"baseline:section-lead", "rules:pico-cues-v2", learned} <= set(rows)
    # the bar on the held-out half, strict reading: value precision >= 0.70 and precise recall (a value on
    # the field's labels) >= 0.60 for P, I and O, and token macro-F1 clearly above the rules' (docs/pico.md)
    for cell in rows[learned][:3]:
        precision, any_value, precise = map(float, cell.split(" / "))
        assert precision >= 0.70 and precise >= 0.60 and precise <= any_value, cell
    assert rows["baseline:section-lead"][0].split(" / ")[1] == "1.000"  # a fill rate: the baseline always fills
    macro = {name: float(cells[6]) for name, cells in rows.items()}
    assert macro[learned] >= macro["rules:pico-cues-v2"] + 0.08, macro
    assert "Tagger labels on every token of the same 491 abstracts" in out
    expert = _table(out, "Expert labels (expert_slice.txt): 12 abstracts")
    assert set(expert) == set(rows) and "Tagger labels on every token of the same 12 abstracts" in out
