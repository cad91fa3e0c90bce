"""The rule extractor on real PubMed records: publication types, MeSH, section labels and free-text cues."""

from __future__ import annotations

import pytest
from pico_records import UPDATE_1335, paper_with_author_labels

from ra_agent.evidence.pico.design import design_class, is_rct_design
from ra_agent.evidence.pico.extract import RuleExtractor
from ra_agent.evidence.pico.rules import RULES_NAME
from ra_agent.evidence.pico.text import parse_number, sections_of, sentences
from ra_agent.models import Paper

rules = RuleExtractor()


# --------------------------------------------------------------------------- structured XML abstracts


def test_jama_style_sections_fill_their_fields_through_the_real_parser(xml_papers):
    """ra's parser keeps NLM categories (INTERVENTIONS -> METHODS); the printed labels in the text still count."""
    paper = xml_papers[41604152]
    assert "INTERVENTIONS" not in {s.label for s in paper.sections}  # the parser stored NlmCategory METHODS
    record = rules.extract_one(paper)
    assert record.I == "ICI monotherapy or combination therapy in the first-line or later-line setting"
    assert record.evidence["I"] == "section: interventions"
    assert record.O.startswith("Cox proportional hazards regression")
    assert record.evidence["O"] == "section: outcomes"
    assert record.P == "adults with advanced NSCLC starting ICIs"
    assert record.StudyDesign == "prognostic study (retrospective)"
    assert record.SampleSize == "1830"
    assert record.extractor == RULES_NAME


def test_sections_with_author_labels_and_no_joined_text():
    """A record given only as labelled sections (no joined abstract) reads its labels directly."""
    paper = paper_with_author_labels(UPDATE_1335, 41604152)
    assert paper.abstract == "" and "INTERVENTIONS" in [s.label for s in paper.sections]
    assert [s.label for s in sections_of(paper)][:4] == [
        "IMPORTANCE",
        "OBJECTIVE",
        "DESIGN, SETTING, AND PARTICIPANTS",
        "INTERVENTIONS",
    ]
    record = rules.extract_one(paper)
    assert record.I.startswith("ICI monotherapy") and record.evidence["I"] == "section: interventions"
    assert record.evidence["O"] == "section: outcomes"


def test_patients_section_goes_to_p_and_age_and_size_come_from_its_sentences(xml_papers):
    record = rules.extract_one(xml_papers[30137523])
    assert record.evidence["P"] == "section: participants"
    assert record.P.startswith("This study contains Chinese (n = 63), Malay (n = 51), and Asian-Indian (n = 42) men")
    assert record.PopulationAge == "aged 21 to 40 years"
    assert record.SampleSize == "156"


def test_case_report_sections(xml_papers):
    record = rules.extract_one(xml_papers[29742721])
    assert record.StudyDesign == "case report" and record.evidence["StudyDesign"] == "pub_type: Case Reports"
    assert "intravenous immunoglobulin" in record.I and record.evidence["I"] == "section: interventions"
    assert record.PopulationAge == "middle aged" and record.evidence["PopulationAge"] == "mesh: Middle Aged"


def test_rct_publication_type_mesh_blinding_and_multicentre(xml_papers):
    """Randomized Controlled Trial → RCT; Double-Blind Method (MeSH), Multicenter Study and Phase III qualify it."""
    record = rules.extract_one(xml_papers[29768149])
    assert record.StudyDesign == "RCT (double-blind, multicentre, phase III)"
    assert record.evidence["StudyDesign"] == "pub_type: Randomized Controlled Trial"
    assert record.P == "patients 12 years of age or older with mild asthma"
    assert record.PopulationAge == "12 years of age or older"
    assert record.SampleSize == "3849"  # "A total of 3849 patients underwent randomization"
    assert "budesonide-formoterol" in record.I  # superior-to sentences and the title put it first
    assert "terbutaline" in record.C


@pytest.mark.parametrize(
    ("pmid", "design"),
    [
        (41617358, "RCT"),  # RCT + Phase III + Multicenter publication types
        (30913216, "RCT"),  # stepped-wedge cluster trial
        (31191790, "RCT"),
        (31207565, "systematic review"),
        (27797938, "case-control"),  # Observational Study refined by MeSH/text
        (30530577, "cohort"),  # "a retrospective study", MeSH Retrospective Studies
    ],
)
def test_design_class_of_real_records(xml_papers, pmid, design):
    assert design_class(rules.extract_one(xml_papers[pmid]).StudyDesign) == design


def test_review_classes_carry_no_trial_qualifiers(xml_papers):
    assert rules.extract_one(xml_papers[31207565]).StudyDesign == "systematic review"


def test_case_control_sample_size_adds_cases_and_controls(xml_papers):
    record = rules.extract_one(xml_papers[27797938])  # "386 pancreatic cancer cases and 896 matched controls"
    assert record.SampleSize == "1282"
    assert record.P == "pancreatic cancer cases and matched controls from five prospective US cohorts"


def test_cluster_trial_qualifiers_and_age_bound(xml_papers):
    record = rules.extract_one(xml_papers[30913216])
    assert record.StudyDesign == "RCT (cluster, stepped-wedge)"
    assert record.PopulationAge == "aged ≥ 40 years"
    assert record.O.startswith("proportion meeting systolic blood pressure")


def test_primary_endpoint_sentence(xml_papers):
    record = rules.extract_one(xml_papers[30530577])  # "The primary endpoint was overall survival."
    assert record.O == "overall survival"
    assert record.evidence["O"].startswith("primary outcome:")


# --------------------------------------------------------------------------- free-text abstracts (demo corpus)


@pytest.mark.parametrize(
    ("pmid", "size", "sentence"),
    [
        (10024259, "704", "704 patients were randomised, 677 were eligible for analyses"),
        (10559084, "107", "One hundred seven asthmatic patients."),
        (10871975, "359", "Of 359 randomized patients, 355 were included"),
        (11876701, "251", "Two hundred and seventy-four patients were screened, 251 patients were randomized"),
        (8527618, "154", "One-hundred and fifty-four patients were recruited and randomized"),
        (10950032, "338", "A total of 338 patients were enrolled and randomly assigned"),
        (7654116, "33", "We studied 33 consecutive outpatients"),
    ],
)
def test_sample_size_from_real_sentences(demo_papers, pmid, size, sentence):
    paper = demo_papers[pmid]
    assert sentence in paper.abstract
    assert rules.extract_one(paper).SampleSize == size


def test_free_text_rct_with_placebo_crossover(demo_papers):
    record = rules.extract_one(demo_papers[10559084])
    assert record.StudyDesign == "RCT (double-blind, placebo-controlled, crossover)"
    assert record.evidence["StudyDesign"] == "text: 'randomized'"
    assert record.I == "omeprazole, 40 mg qd" and record.C == "placebo"
    assert record.P == "asthmatic patients"


def test_free_text_arms_and_primary_indicator(demo_papers):
    record = rules.extract_one(demo_papers[10950032])
    assert record.I == "rabeprazole 20 mg once daily"
    assert record.C == "ranitidine 150 mg four times daily"
    assert record.O.startswith("absence of esophageal erosions or ulcerations")
    assert record.P == "patients with erosive gastroesophageal reflux disease"


def test_conclusion_orders_the_arms(demo_papers):
    """Listed ranitidine first, but "Both doses of omeprazole were superior to ranitidine" makes omeprazole I."""
    record = rules.extract_one(demo_papers[7654116])
    assert record.I == "omeprazole, 40 mg/d; omeprazole, 40 mg twice daily"
    assert record.C == "ranitidine, 150 mg twice daily"


def test_blinded_trial_without_stated_randomisation_is_not_called_rct(demo_papers):
    record = rules.extract_one(demo_papers[8580272])  # "A double-blind, multicentre study ... with placebo"
    assert record.StudyDesign == "controlled trial (double-blind, placebo-controlled, multicentre)"
    assert not is_rct_design(record.StudyDesign)
    assert record.I == "lansoprazole (15, 30 and 60 mg)" and record.C == "placebo"


def test_abstract_without_any_cue_stays_empty():
    record = rules.extract_one(Paper(pmid=1, title="Notes from the clinic.", abstract=""))
    assert record.fields() == dict.fromkeys(record.fields(), "")
    assert record.evidence == {}


def test_a_title_alone_can_name_a_non_trial_publication():
    record = rules.extract_one(Paper(pmid=1, title="Editorial note.", abstract=""))
    assert record.StudyDesign == "editorial" and record.evidence["StudyDesign"] == "title: 'Editorial'"


def test_extraction_is_deterministic(demo_papers):
    papers = list(demo_papers.values())[:40]
    assert [r.to_json() for r in rules.extract(papers)] == [r.to_json() for r in rules.extract(papers)]


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("One hundred seven", 107),
        ("Two hundred and seventy-four", 274),
        ("One-hundred and fifty-four", 154),
        ("Eighty-nine", 89),
        ("sixteen", 16),
        ("1,282", 1282),
        ("62,254", 62254),
        ("banana", None),
    ],
)
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    ("design", "cls"),
    [
        ("RCT (double-blind)", "RCT"),
        ("randomised double-blind", "RCT"),
        ("Randomized controlled trial", "RCT"),
        ("non-randomised controlled trial", "controlled trial"),
        ("cohort (prospective)", "cohort"),
        ("case-control study", "case-control"),
        ("", ""),
    ],
)
def test_design_class_of_llm_and_rule_strings(design, cls):
    assert design_class(design) == cls


def test_sentences_do_not_break_after_initials_or_abbreviations():
    text = "Eradication of H. pylori was measured. Patients received 20 mg b.i.d. for 4 weeks vs. placebo. Done."
    assert sentences(text) == [
        "Eradication of H. pylori was measured.",
        "Patients received 20 mg b.i.d. for 4 weeks vs. placebo.",
        "Done.",
    ]
