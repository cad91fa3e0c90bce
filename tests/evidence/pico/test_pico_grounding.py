"""LLM PICO values are checked against their abstract: spans and faithful paraphrases stay, invented values go, and
the record says which field was dropped and why (real demo abstracts)."""

from __future__ import annotations

import json

import pytest

from ra_agent.evidence.pico.extract import SCHEMA_KEYS, LearnedExtractor, PicoRecord, read_pico, run_pico
from ra_agent.evidence.pico.grounding import AbstractText, ground_fields, ground_value
from ra_agent.evidence.pico.llm_extract import LlmExtractor

RABEPRAZOLE = 10950032  # rabeprazole vs ranitidine, 338 patients with erosive GERD
OMEPRAZOLE = 10871975  # omeprazole 20 / 10 mg vs placebo, 359 randomised, symptomatic GERD without esophagitis
PANTOPRAZOLE = 9354207  # pantoprazole vs ranitidine, 24 patients with oesophagitis grade II-III, pH profiles


class ScriptedBrain:
    name = "fake:scripted-llm"

    def __init__(self, reply: str):
        self.reply = reply

    def chat(self, messages):
        return self.reply


@pytest.mark.parametrize(
    ("pmid", "key", "value"),
    [
        (RABEPRAZOLE, "I", "rabeprazole 20 mg once daily"),  # "20 mg once daily in the morning"
        (RABEPRAZOLE, "O", "healing of esophageal erosions seen at endoscopy"),  # "absence of esophageal erosions ..."
        (RABEPRAZOLE, "P", "adult patients with erosive reflux disease"),  # "patients with erosive gastroesophageal"
        (OMEPRAZOLE, "P", "patients with heartburn but no erosive esophagitis"),
        (OMEPRAZOLE, "O", "resolution of heartburn"),
        (PANTOPRAZOLE, "P", "patients with grade II or III reflux esophagitis"),  # British spelling in the abstract
        (PANTOPRAZOLE, "O", "24-hour oesophageal pH"),
        (PANTOPRAZOLE, "StudyDesign", "RCT, double-blind"),  # a class in the prompt's words, its qualifier in the text
        (OMEPRAZOLE, "SampleSize", "359"),
    ],
)
def test_a_faithful_paraphrase_is_kept(demo_papers, pmid, key, value):
    kept, where, dropped = ground_value(key, value, AbstractText.of(demo_papers[pmid]))
    assert (kept, dropped) == (value, []), dropped
    assert where


@pytest.mark.parametrize(
    ("pmid", "key", "value", "why"),
    [
        (RABEPRAZOLE, "I", "esomeprazole 40 mg", "40 not in the text"),  # another drug, another dose
        (RABEPRAZOLE, "C", "placebo", "0 of its 1 content words"),  # the trial had an active comparator
        (RABEPRAZOLE, "SampleSize", "450", "450 not in the text"),
        (OMEPRAZOLE, "O", "endoscopic healing of erosive esophagitis", "content words in one sentence"),
        (OMEPRAZOLE, "PopulationAge", "children aged 2 to 11 years", "11 not in the text"),
        (PANTOPRAZOLE, "StudyDesign", "prospective cohort", "0 of its 1 qualifiers"),
        (PANTOPRAZOLE, "P", "elderly nursing-home residents with NSAID ulcers", "content words in one sentence"),
    ],
)
def test_an_invented_value_is_dropped_saying_why(demo_papers, pmid, key, value, why):
    kept, _, dropped = ground_value(key, value, AbstractText.of(demo_papers[pmid]))
    assert kept == "" and len(dropped) == 1 and why in dropped[0] and repr(value) in dropped[0]


def test_an_invented_part_of_a_list_goes_and_the_rest_stays(demo_papers):
    text = AbstractText.of(demo_papers[OMEPRAZOLE])
    kept, _, dropped = ground_value("I", "omeprazole 20 mg once daily; lansoprazole 30 mg", text)
    assert kept == "omeprazole 20 mg once daily" and dropped == ["'lansoprazole 30 mg': 30 not in the text"]


def test_honest_values_stay_and_values_of_another_abstract_go(demo_papers):
    """The learned tagger's values are spans of their own abstract: nearly all stay; the same values checked against
    another abstract of the same (PPI) corpus are mostly dropped."""
    papers = [p for p in demo_papers.values() if p.abstract][:300]
    records = LearnedExtractor().extract(papers)
    own = shifted = own_total = shifted_total = 0
    for i, (record, paper) in enumerate(zip(records, papers, strict=True)):
        values = record.fields()
        grounded, _ = ground_fields(values, paper, SCHEMA_KEYS)
        other, _ = ground_fields(values, papers[(i + 7) % len(papers)], ("P", "I", "C", "O"))
        own_total += sum(bool(v) for v in values.values())
        own += sum(bool(v) and grounded[k] == v for k, v in values.items())
        shifted_total += sum(bool(values[k]) for k in ("P", "I", "C", "O"))
        shifted += sum(bool(values[k]) and other[k] == values[k] for k in ("P", "I", "C", "O"))
    assert own_total > 1000 and shifted_total > 600
    assert own / own_total >= 0.95, f"only {own}/{own_total} of the tagger's own values grounded"
    assert shifted / shifted_total <= 0.2, f"{shifted}/{shifted_total} values of another abstract passed"


def test_the_extractor_blanks_an_invented_value_and_the_line_says_why(demo_papers, tmp_path):
    papers = [demo_papers[p] for p in (RABEPRAZOLE, OMEPRAZOLE)]
    reply = json.dumps({"records": [
        {"pmid": RABEPRAZOLE, "P": "338 patients with erosive gastroesophageal reflux disease",
         "I": "rabeprazole 20 mg once daily", "C": "placebo", "O": "healing at 4 and 8 wk",
         "StudyDesign": "RCT, double-blind", "PopulationAge": "", "SampleSize": "338"},
        {"pmid": OMEPRAZOLE, "P": "patients with symptomatic GERD", "I": "omeprazole 20 mg once daily",
         "C": "placebo", "O": "complete resolution of heartburn", "StudyDesign": "RCT, crossover",
         "PopulationAge": "", "SampleSize": "412"},
    ]})  # fmt: skip
    extractor = LlmExtractor(ScriptedBrain(reply))
    out = tmp_path / "c.jsonl"
    result = run_pico(papers, extractor, out)
    first, second = read_pico(out)
    assert first.extractor == second.extractor == "fake:scripted-llm"  # the brain's name, grounded or not
    assert (first.C, first.O, first.I) == ("", "healing at 4 and 8 wk", "rabeprazole 20 mg once daily")
    assert list(first.dropped) == ["C"] and "'placebo'" in first.dropped["C"]
    assert (second.C, second.StudyDesign, second.SampleSize) == ("placebo", "", "")
    assert (
        set(second.dropped) == {"StudyDesign", "SampleSize"} and "412 not in the text" in second.dropped["SampleSize"]
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["dropped"] == first.dropped and PicoRecord.from_json(lines[1]).dropped == second.dropped
    meta = result.metadata()
    assert meta["llm_values_dropped"] == 3 and meta["llm_mode"] == "text 1" and meta["llm_papers"] == 2


def test_a_bad_dropped_entry_is_a_line_error():
    line = PicoRecord(pmid=5, P="x", extractor="e").to_json() | {"dropped": {"Q": "why"}}
    with pytest.raises(ValueError, match="'dropped' must map schema keys to strings"):
        PicoRecord.from_json(line)
