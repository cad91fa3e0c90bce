"""What a trial studied, on real records: MeSH subheadings as indexed, the handbook's stated eligibility, every
comparator a trial names, reports that are not of a trial's effects, reviews that ask something else, and reports
of one trial grouped into one study (the demo corpus, CD006468's search results and records of three DERP review
sets)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ra_agent.agent.questions import handbook_topic
from ra_agent.config import load_config
from ra_agent.evidence.questions.build import questions_for_topic
from ra_agent.evidence.questions.mesh import MeshTerm, roles
from ra_agent.evidence.questions.model import (
    DOSE_KIND,
    NON_DRUG_KIND,
    NOT_NAMED,
    OTHER_CLASS,
    PLACEBO_ARM,
    PLACEBO_KIND,
    SAME_CLASS,
    UNNAMED,
)
from ra_agent.evidence.questions.review_asks import read_review
from ra_agent.evidence.questions.reviews import as_read, is_review
from ra_agent.evidence.questions.scope import DEFAULT_KINDS, longest_weeks, read_scope
from ra_agent.evidence.questions.studies import group_studies, registrations
from ra_agent.evidence.questions.topic import Topic
from ra_agent.evidence.questions.trials import eligibility
from ra_agent.evidence.questions.trials import tested_agents as agents_tested
from ra_agent.ingest.importers import import_file
from ra_agent.ingest.medline import iter_pubmed_xml
from ra_agent.models import Paper
from ra_agent.store.db import Store

ROOT = Path(__file__).resolve().parents[3]
GAPS = ROOT / "tests" / "fixtures" / "gaps"
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
BASELINE = ROOT / "tests" / "fixtures" / "medline" / "pmparser_baseline_pubmed26n1334.xml.gz"
DERP = ROOT / "tests" / "fixtures" / "derp" / "eligibility_records.csv"


def _import(path: Path, tmp: Path) -> dict[int, Paper]:
    store = Store(tmp / "ra.sqlite")
    import_file(store, path, load_config(ROOT / "config.toml", environ={}))
    pmids = [r[0] for r in store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
    out = {p.pmid: p for p in store.papers(pmids)}
    store.close()
    return out


@pytest.fixture(scope="module")
def gaps(tmp_path_factory) -> dict[int, Paper]:
    return _import(GAPS / "CD006468_catheter_subset.csv", tmp_path_factory.mktemp("gaps"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[int, Paper]:
    return _import(GAPS / "CD006468_study_reports.csv", tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[int, Paper]:
    return _import(DEMO, tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def reflux() -> Topic:
    return handbook_topic(ROOT / "handbooks" / "seek_gap_ppi_gerd.md")


@pytest.fixture(scope="module")
def derp(tmp_path_factory) -> dict[int, Paper]:
    return _import(DERP, tmp_path_factory.mktemp("derp"))


# ---------------------------------------------------------------------------- MeSH as indexed


def test_the_importer_keeps_subheadings_and_major_topics(gaps):
    warfarin = gaps[15767639]  # "Randomized placebo-controlled study of low-dose warfarin ..."
    assert "Venous Thrombosis/diagnostic imaging/*etiology/*prevention & control" in warfarin.mesh_terms
    term = MeshTerm.parse("Venous Thrombosis/diagnostic imaging/*etiology/*prevention & control")
    assert term.descriptor == "Venous Thrombosis" and term.is_major and term.role == "treated"
    assert roles(warfarin, ["Venous Thrombosis", "Neoplasms"]) == {
        "Venous Thrombosis": "treated",
        "Neoplasms": "treated",
    }


def test_a_condition_indexed_as_chemically_induced_is_an_adverse_effect_not_the_condition_treated():
    """The rule reads NLM's subheading, whatever the condition: a trial whose record indexes the question's
    condition only as "chemically induced" treats something else."""
    topic = Topic.from_seed_query("antidepressants AND insomnia")
    insomnia = replace(topic.population[0], headings=("Sleep Initiation and Maintenance Disorders",))
    topic = replace(topic, population=(insomnia,))  # the heading the corpus links to insomnia (Topic.with_corpus)
    paper = Paper(1, "Paroxetine versus placebo in major depression", "Patients with major depression were "
                  "randomised to paroxetine or placebo for 8 weeks. Insomnia was reported by 12%.",
                  mesh=["Depressive Disorder, Major", "Sleep Initiation and Maintenance Disorders"],
                  mesh_terms=["Depressive Disorder, Major/*drug therapy",
                              "Sleep Initiation and Maintenance Disorders/*chemically induced"],
                  pub_types=["Randomized Controlled Trial"])  # fmt: skip
    answer = eligibility(paper, topic)
    assert not answer.eligible and "adverse effect" in answer.reason and "chemically induced" in answer.reason


# ---------------------------------------------------------------------------- what a trial is and compares


def test_instrument_validation_and_quality_of_life_instruments_are_not_reports_of_effects(demo, reflux):
    for pmid in (12772004, 11467624):  # the GSFQ validation; reliability of disease-specific instruments
        answer = eligibility(demo[pmid], reflux.with_corpus(list(demo.values())))
        assert not answer.eligible and "instrument's validation" in answer.reason, answer.reason


def test_an_abstract_telling_other_authors_studies_and_a_ph_study_are_not_trials_of_the_effect(demo, reflux):
    """What a reviewer strikes in seconds: 10369630's abstract tells Bank et al.'s, Ladas et al.'s ... results (a
    narrative review counted as a trial); 11552904 compares two PPIs on oesophageal acid exposure only (a
    pharmacodynamic study); a title naming a clinical outcome beside pH stays a trial."""
    topic = reflux.with_corpus(list(demo.values()))
    narrative = eligibility(demo[10369630], topic)
    assert not narrative.eligible and "other authors' studies: 'Bank et al', 'Ladas et al'" in narrative.reason
    acid = eligibility(demo[11552904], topic)
    assert not acid.eligible and "oesophageal acid exposure" in acid.reason
    assert eligibility(demo[9354207], topic).eligible  # "Treatment of reflux oesophagitis ... pH monitoring ..."


def test_a_condition_named_only_among_the_exclusions_is_not_the_trials(demo, reflux):
    answer = eligibility(demo[10547167], reflux.with_corpus(list(demo.values())))  # non-ulcer dyspepsia
    assert not answer.eligible and "another condition" in answer.reason


def test_a_title_that_treats_prevents_or_eradicates_another_condition_is_that_conditions_trial(demo, reflux):
    """The title says what a trial treats: preventing chemotherapy-induced gastroduodenal injury (heartburn only
    watched in the abstract) or curing H. pylori infection in ulcer patients (reflux the outcome watched) is not a
    reflux trial; the title's target said in other words ("acid reflux disease") or its people naming reflux
    ("asthmatics with ... gastro-oesophageal reflux") keeps the record."""
    topic = reflux.with_corpus(list(demo.values()))
    for pmid, target in ((8839554, "chemotherapy-induced acute gastroduodenal mucosal injury"),
                         (11179984, "Helicobacter pylori infection"), (12182742, "Helicobacter pylori")):  # fmt: skip
        answer = eligibility(demo[pmid], topic)
        assert not answer.eligible and f"treats another condition (title: {target!r}" in answer.reason, answer.reason
    for pmid in (10383513, 8016006):  # "poorly responsive acid reflux disease"; "asthmatics with ... reflux"
        assert eligibility(demo[pmid], topic).eligible, eligibility(demo[pmid], topic).reason


# a randomised trial of another field, as PubMed stores it (DERP triptans search results, PMID 10891912; title and
# the abstract's design sentence, verbatim)
NARATRIPTAN = Paper(
    pmid=10891912,
    title="Effect of naratriptan on myocardial blood flow and coronary vasodilator reserve in migraineurs.",
    abstract="This study was a randomized, double-blind, placebo-controlled crossover trial in 34 migraine subjects "
    "with no evidence of ischemic heart disease, studied outside a migraine attack.",
    mesh=("Humans", "Migraine Disorders", "Coronary Circulation", "Vasodilation"),
)


def test_analyses_of_prognosis_and_physiology_studies_are_not_reports_of_the_treatments_effect(demo, reflux):
    """A trial's data asked what predicts relapse (9663835: "Prognostic factors for relapse of reflux oesophagitis
    ... during 12 months of therapy with lansoprazole") is not a report of the effect; a title whose endpoint is
    the circulation's measure with no clinical outcome (naratriptan and "myocardial blood flow" in migraineurs) is
    a physiology study, in any field."""
    prognosis = eligibility(demo[9663835], reflux.with_corpus(list(demo.values())))
    assert not prognosis.eligible and "prognosis or association (title says 'Prognostic factors')" in prognosis.reason
    migraine = Topic.from_seed_query("triptan AND migraine")
    flow = eligibility(NARATRIPTAN, migraine)
    assert not flow.eligible and "mechanism study (title says 'blood flow')" in flow.reason, flow.reason
    treated = replace(NARATRIPTAN, title="Naratriptan in the acute treatment of migraine.")  # the same trial, had it
    assert eligibility(treated, migraine).eligible  # reported its clinical outcome


def test_every_comparator_a_trial_names_is_read_as_the_trial_names_it(demo, gaps, reflux):
    topic = reflux.with_corpus(list(demo.values()))
    h2h = eligibility(demo[11012468], topic)  # esomeprazole ... compared with omeprazole
    assert h2h.eligible and h2h.comparators == ("another proton pump inhibitor",) and h2h.kinds == (SAME_CLASS,)
    cvc = Topic.from_seed_query("anticoagulants AND cancer AND central venous catheter").with_corpus(
        list(gaps.values())
    )
    warp = eligibility(gaps[19217991], cvc)  # "compared with no warfarin"
    assert warp.eligible and PLACEBO_ARM in warp.comparators
    monreal = eligibility(gaps[8815570], cvc)  # "randomized to receive or not 2500 IU sc of Fragmin"
    assert monreal.eligible and monreal.comparators == (PLACEBO_ARM,)


def test_a_comparator_is_read_from_a_titles_v_and_comparison_and_from_an_allocation_sentence(demo, reflux):
    """What a reviewer reads in seconds, never "comparator not named": "Omeprazole v ranitidine" (8200548), "a
    randomized blinded comparison of omeprazole and ranitidine" (8857137), and "pantoprazole 20 mg (n=203) or 40 mg
    (n=193)" in an allocation sentence (10571605) or "to compare the efficacy of 20 mg with 40 mg" in the aim
    (10783996): dose comparisons of one agent."""
    topic = reflux.with_corpus(list(demo.values()))
    for pmid in (8200548, 8857137):
        assert eligibility(demo[pmid], topic).comparators == ("H2-receptor antagonist",), pmid
    for pmid in (10571605, 10783996):
        assert eligibility(demo[pmid], topic).kinds == (DOSE_KIND,), pmid


def test_an_errata_notice_in_the_title_is_not_read_as_the_trials_design(demo, reflux):
    """PubMed keeps an erratum's wrong words in the title: "Double-blind comparison [correction of Double-blind,
    placebo-controlled comparison] of rabeprazole 20 mg vs. omeprazole 20 mg" (9892879) compares two PPIs and has no
    placebo arm. The title shown stays PubMed's."""
    topic = reflux.with_corpus(list(demo.values()))
    paper = demo[9892879]
    assert "[correction of Double-blind, placebo-controlled comparison]" in paper.title
    judged = eligibility(paper, topic)
    assert judged.eligible and judged.comparators == ("another proton pump inhibitor",), judged
    assert "[correction of" in demo[9892879].title
    read = as_read(paper)  # what every rule reads: eligibility, is_review and the handbook's scope
    assert read.title.startswith("Double-blind comparison of rabeprazole 20 mg") and "correction" not in read.title
    assert as_read(demo[8016006]) is demo[8016006]  # a title without an erratum is read as it is


def test_a_comparator_of_the_interventions_own_class_takes_the_head_to_head_trials(demo):
    """A spawned goal's handbook "lansoprazole or pantoprazole versus omeprazole" asks PPI versus another PPI: the
    trials that compare two PPIs are its studies (it listed 0 while its parent's PPI-vs-PPI question held 35)."""
    topic = Topic.from_seed_query("(lansoprazole OR pantoprazole) AND (reflux OR oesophagitis) AND omeprazole")
    assert topic.intervention == topic.comparator == ("proton pump inhibitor",)
    papers, cfg = list(demo.values()), load_config(ROOT / "config.toml", environ={})
    questions, judged, _ = questions_for_topic(topic, papers, pivot=cfg.sr.sr_overlap_pivot,
                                               update_after=cfg.sr.update_after_trials,
                                               min_trials=cfg.sr.min_eligible_trials)  # fmt: skip
    root = questions[0]
    assert root.comparator == "another proton pump inhibitor"
    assert len(root.studies) >= 6
    assert all(judged[p].comparators and judged[p].kinds[0] == SAME_CLASS for p in root.trials)
    h2ra = eligibility(demo[7605854], topic.with_corpus(papers))  # lansoprazole versus ranitidine: another class
    assert not h2ra.eligible and "not proton pump inhibitor" in h2ra.reason


def test_a_treatment_every_participant_already_takes_is_not_the_one_a_trial_tests(demo, gaps):
    """What a trial randomised, not every agent it names: "Addition of metronidazole to omeprazole/amoxycillin dual
    therapy" tests metronidazole (omeprazole is in both arms); a heparin catheter lock is part of the device; "patients
    with planned chemotherapy were randomized" does not compare anticoagulants with chemotherapy."""
    pylori = Topic.from_seed_query("proton pump inhibitors AND Helicobacter pylori").with_corpus(list(demo.values()))
    answer = eligibility(demo[8580271], pylori)  # before: "tests omeprazole (proton pump inhibitor)"
    assert not answer.eligible and answer.reason == "tests metronidazole (nitroimidazole), not proton pump inhibitor"
    cvc = Topic.from_seed_query("anticoagulants AND cancer AND central venous catheter").with_corpus(
        list(gaps.values())
    )
    lock = eligibility(gaps[22958287], cvc)  # "randomized to catheter locking by heparin (n = 22) or taurolidine"
    assert not lock.eligible and lock.reason.startswith("heparin used as part of a device")
    # a heparin-vancomycin flush against bacteraemia: indexed as treating another condition, which the title names
    flush = eligibility(gaps[7608801], cvc)
    assert not flush.eligible and flush.reason.startswith("treats another condition (MeSH Bacteremia/drug therapy)")
    planned = eligibility(gaps[23636449], cvc)  # warfarin, LMWH or no prophylaxis; chemotherapy planned for all
    assert planned.eligible and "antineoplastic" not in planned.comparators
    assert set(planned.comparators) == {"another anticoagulant", PLACEBO_ARM}


def test_an_agent_named_only_as_the_arm_without_the_tested_addition_is_not_tested(demo, reflux):
    """11179985 randomised H. pylori-positive reflux patients "to either an eradication or omeprazole-alone regime"
    (its title names no drug): the trial tests eradication; omeprazole, which both arms take, is not a PPI trial's
    intervention. A trial whose title names the PPI it tests keeps it (8016006's placebo-controlled omeprazole)."""
    topic = reflux.with_corpus(list(demo.values()))
    eradication = demo[11179985]
    assert "omeprazole-alone regime" in eradication.abstract
    assert agents_tested(eradication, topic) == []
    assert eligibility(eradication, topic).reason == "does not test proton pump inhibitor"
    assert eligibility(demo[8016006], topic).eligible


def test_agents_a_title_names_as_alternatives_after_treated_with_are_the_arms(derp):
    """The title "... patients with schizophrenia treated with olanzapine or haloperidol" (12223254): "treated with"
    before two alternatives names the trial's arms, so the trial tests olanzapine; before one agent it names a
    treatment every participant takes (see the test of treatments every participant takes)."""
    topic = Topic.from_seed_query("atypical antipsychotics AND schizophrenia").with_corpus(list(derp.values()))
    trial = derp[12223254]
    assert "treated with olanzapine or haloperidol" in trial.title
    assert [a.word for a in agents_tested(trial, topic)] == ["olanzapine"]
    answer = eligibility(trial, topic)
    assert answer.eligible and "tests olanzapine (atypical antipsychotic)" in answer.reason


def test_what_a_title_adds_to_a_treatment_is_tested_even_outside_the_class_table(derp):
    """The title "D-serine added to clozapine for the treatment of schizophrenia" (10553752): D-serine, which the
    class table does not list, is what the trial adds and tests; clozapine is every participant's treatment, so the
    trial is not one of atypical antipsychotics, and says so."""
    topic = Topic.from_seed_query("atypical antipsychotics AND schizophrenia").with_corpus(list(derp.values()))
    add_on = derp[10553752]
    assert agents_tested(add_on, topic) == []
    assert eligibility(add_on, topic).reason == (
        "does not test atypical antipsychotic: the title names clozapine only as a comparator or a treatment every "
        "participant takes"
    )


def test_a_treatment_named_before_the_words_that_make_it_background_is_not_tested(derp):
    """The title "Treatment of weight gain with fluoxetine in olanzapine-treated schizophrenic outpatients"
    (12629532) tests fluoxetine; "Effect of clozapine and adjunctive high-dose glycine ..." (9892314) tests glycine,
    which the class table does not list: in both, the atypical antipsychotic is what every participant takes."""
    topic = Topic.from_seed_query("atypical antipsychotics AND schizophrenia").with_corpus(list(derp.values()))
    for pmid, agent in ((12629532, "olanzapine"), (9892314, "clozapine")):
        assert agent in derp[pmid].title.lower()
        assert agents_tested(derp[pmid], topic) == [], pmid
    assert eligibility(derp[12629532], topic).reason.startswith("tests fluoxetine (selective serotonin reuptake")
    assert "names clozapine only as a comparator or a treatment" in eligibility(derp[9892314], topic).reason


def test_a_pooled_analysis_is_no_trial_report_and_an_agent_in_both_arms_is_not_tested(derp):
    """Tolterodine's "analysis of the pooled phase II efficacy and safety data" (10223495) reports several trials
    together, no one trial; "Rizatriptan combined with rofecoxib vs. rizatriptan" (12100094) tests rofecoxib, as
    "A plus B versus A alone" does."""
    bladder = Topic.from_seed_query("antimuscarinics AND overactive bladder").with_corpus(list(derp.values()))
    assert eligibility(derp[10223495], bladder).reason == (
        "not a report of the trial's effects: a pooled analysis of several trials (title says 'analysis of the pooled')"
    )
    migraine = Topic.from_seed_query("triptans AND migraine").with_corpus(list(derp.values()))
    combined = derp[12100094]
    assert "combined with rofecoxib vs. rizatriptan" in combined.title
    assert agents_tested(combined, migraine) == []
    assert not eligibility(combined, migraine).eligible


def test_a_population_concept_another_one_narrows_is_asked_once():
    topic = Topic.from_seed_query("proton pump inhibitors AND gastroesophageal reflux AND reflux")
    assert [c.label for c in topic.population] == ["gastroesophageal reflux"]
    both = Topic.from_seed_query("anticoagulants AND cancer AND central venous catheter")
    assert [c.label for c in both.population] == ["cancer", "central venous catheter"]


# ---------------------------------------------------------------------------- the handbook's eligibility


PROSE = """The review team's eligibility: adults with chronic pain; one drug compared head to head with another
of the class, or with placebo for clinical outcomes (pain, function); trials of at least 12 weeks; single-dose and
acute-pain studies excluded; dose comparisons excluded."""


def test_the_handbooks_prose_states_the_scope_in_its_own_words():
    scope = read_scope(PROSE, ("non-steroidal anti-inflammatory drug",))
    assert scope.comparators == {SAME_CLASS, PLACEBO_KIND, UNNAMED}
    assert scope.ages == "adults" and scope.min_weeks == 12
    assert scope.outcome_kinds == {PLACEBO_KIND} and "pain" in scope.outcomes
    assert scope.excluded == ("single dose", "acute pain")
    assert any("single-dose and acute-pain studies excluded" in line for line in scope.lines())
    silent = read_scope("Randomised trials of anticoagulants given to people with cancer.", ("anticoagulant",))
    assert silent.comparators == DEFAULT_KINDS and DOSE_KIND not in silent.comparators
    assert OTHER_CLASS in silent.comparators and NON_DRUG_KIND in silent.comparators
    prefer = read_scope("Prefer comparisons that matter clinically (PPI vs H2RA, PPI vs placebo).", ())
    assert prefer.comparators == DEFAULT_KINDS  # a preference is not eligibility


def test_a_trial_outside_the_stated_scope_is_out_and_says_why(demo, reflux):
    scope = read_scope("Adults only. Trials of at least 12 weeks.", reflux.intervention)
    infants = demo[12970637]  # "Double-blind placebo-controlled trial of omeprazole in irritable infants ..."
    answer = eligibility(infants, reflux.with_corpus(list(demo.values())))
    assert answer.eligible
    assert "children" in (scope.outside(infants, answer) or "")
    assert longest_weeks("Patients received omeprazole for 4 weeks, then 8 weeks of maintenance.") == 8


def test_an_outcome_named_only_where_the_abstract_sets_the_scene_is_not_one_the_trial_reports(gaps):
    """16938748 (a commentary on a warfarin trial) names death and pulmonary embolism only in its opening sentence
    ("... with the reported sequelae including death, pulmonary embolism ..."): what is known, not what it measured,
    so a handbook asking for those outcomes leaves it out; trials that report them stay (19217991, 15767639)."""
    cvc = Topic.from_seed_query("anticoagulants AND cancer AND central venous catheter").with_corpus(
        list(gaps.values())
    )
    scope = read_scope("Anticoagulants compared with placebo, no treatment or different doses for clinical outcomes "
                       "(death, pulmonary embolism).", cvc.intervention)  # fmt: skip
    scene = gaps[16938748]
    assert "death, pulmonary embolism" in scene.abstract.split(".")[0] and eligibility(scene, cvc).eligible
    assert "reports none of death, pulmonary embolism" in (scope.outside(scene, eligibility(scene, cvc)) or "")
    for pmid in (19217991, 15767639):
        assert scope.outside(gaps[pmid], eligibility(gaps[pmid], cvc)) is None, pmid


def test_english_language_publications_drop_a_record_whose_title_pubmed_gives_translated(demo, reflux):
    """PubMed encloses the English translation of a title published in another language in square brackets
    (11586996: "[Changes in ultra rapid urease test ... by antisecretory drugs]", an eligible randomised trial)."""
    english = read_scope("Randomised controlled trials; English-language publications.", reflux.intervention)
    assert english.english_only and any("English-language publications only" in line for line in english.lines())
    topic = reflux.with_corpus(list(demo.values()))
    translated, plain = demo[11586996], demo[12970637]
    assert translated.title.startswith("[") and eligibility(translated, topic).eligible
    assert "not in English" in (english.outside(translated, eligibility(translated, topic)) or "")
    assert english.outside(plain, eligibility(plain, topic)) is None  # a title in English stays
    assert read_scope("Adults only.", reflux.intervention).outside(translated, eligibility(translated, topic)) is None


def test_english_language_publications_read_the_records_language(gaps):
    """A record whose source names its language is in or out by it, whatever its title: the German record of a
    PubMed baseline file (41605226, its title PubMed's VernacularTitle, not in brackets) is out; WARP (19217991,
    "eng") and a record in English and Spanish (26914084, "eng spa") stay, even with a title in brackets."""
    english = read_scope("English-language publications.")
    cvc = Topic.from_seed_query("anticoagulants AND cancer AND central venous catheter").with_corpus(
        list(gaps.values())
    )
    baseline = {p.pmid: p for p in iter_pubmed_xml(BASELINE) if isinstance(p, Paper)}
    german = baseline[41605226]
    assert german.language == ["ger"] and not german.title.startswith("[")
    assert english.outside(german, eligibility(german, cvc)) == (
        "not in English (language: ger; the handbook asks for English-language publications)"
    )
    warp, both = gaps[19217991], gaps[26914084]
    assert (warp.language, both.language) == (["eng"], ["eng", "spa"])
    assert eligibility(warp, cvc).eligible and english.outside(warp, eligibility(warp, cvc)) is None
    assert english.outside(both, eligibility(both, cvc)) is None
    bracketed = replace(warp, title=f"[{warp.title}]")  # the language, known, is read before the title
    assert english.outside(bracketed, eligibility(warp, cvc)) is None
    fallback = replace(bracketed, language=[])  # unknown: the title in brackets is the sign
    assert "its title is in square brackets" in (english.outside(fallback, eligibility(warp, cvc)) or "")


ACE_TOPIC = "ACE inhibitors AND (hypertension OR heart failure OR myocardial infarction OR diabetic nephropathy)"
ACE_ELIGIBILITY = ("An ACE inhibitor compared head to head with another ACE inhibitor, or with placebo or another drug "
                   "class for clinical outcomes (mortality, cardiovascular events, hospitalisation, progression of "
                   "kidney disease).")  # fmt: skip


def test_the_condition_the_participants_have_is_not_an_outcome_the_trial_reports(derp):
    """Asked for clinical outcomes, a placebo-controlled trial in patients after myocardial infarction that measured
    fibrinolysis (9134274) reports no infarction: the words say who was treated. The CATS trial (12633543) counts
    "the incidence of chronic heart failure", a condition of the topic named as an event, and stays."""
    topic = Topic.from_seed_query(ACE_TOPIC).with_corpus(list(derp.values()))
    scope = read_scope(ACE_ELIGIBILITY, topic.intervention)
    after_mi, cats = derp[9134274], derp[12633543]
    assert "myocardial infarction" in after_mi.title.lower() and eligibility(after_mi, topic).eligible
    assert "reports none of mortality" in (
        scope.outside(after_mi, eligibility(after_mi, topic), topic.population) or ""
    )
    assert scope.outside(after_mi, eligibility(after_mi, topic)) is None  # read without the population: infarction
    assert "incidence of chronic heart failure" in cats.abstract
    assert scope.outside(cats, eligibility(cats, topic), topic.population) is None


def test_an_outcome_word_in_a_trials_name_when_patients_enrolled_or_what_is_known_is_no_outcome_reported(derp):
    """Asked for clinical outcomes: a subgroup analysis of neurohormones from the "Cooperative North Scandinavian
    Enalapril Survival Study" (7834934), an adrenaline substudy of the "International Study of Infarct Survival"
    (9468078) and heart period variability measured "48 and 72 hours after symptom onset" (8025984) report no
    survival or symptoms: the words name the trial or when patients were enrolled. Nor do 9220212 and 11163738,
    whose abstracts say what ACE inhibitors are known to do, nor 10215284 ("has also been shown"). A trial that counted hospitalisations stays (8541006)."""
    topic = Topic.from_seed_query(ACE_TOPIC).with_corpus(list(derp.values()))
    scope = read_scope(ACE_ELIGIBILITY, topic.intervention)
    words = {7834934: "Survival Study", 9468078: "Study of Infarct Survival", 8025984: "symptom onset"}
    for pmid, said in words.items():
        record = derp[pmid]
        assert said.lower() in f"{record.title} {record.abstract}".lower() and eligibility(record, topic).eligible
        assert "reports none of mortality" in (scope.outside(record, eligibility(record, topic), topic.population)
                                               or ""), pmid  # fmt: skip
    # what the class is known to do, in the present tense and without a figure, is no result of the trial
    for pmid, known in ((9220212, "inhibitors reduce mortality"), (11163738, "inhibitors improve long-term survival")):
        record = derp[pmid]
        assert known in record.abstract and eligibility(record, topic).eligible
        assert "reports none of mortality" in (scope.outside(record, eligibility(record, topic), topic.population)
                                               or ""), pmid  # fmt: skip
    beta = Topic.from_seed_query("beta blockers AND heart failure").with_corpus(list(derp.values()))
    known = derp[10215284]  # "This improvement in LV function has also been shown to be associated with ... survival"
    assert "has also been shown" in known.abstract and eligibility(known, beta).eligible
    asked = read_scope("A beta blocker compared with placebo for clinical outcomes (mortality, hospitalisation).",
                       beta.intervention)  # fmt: skip
    assert "reports none of" in (asked.outside(known, eligibility(known, beta), beta.population) or "")
    counted = derp[8541006]
    assert "rate of hospitalization" in counted.abstract
    assert scope.outside(counted, eligibility(counted, topic), topic.population) is None


def test_a_comparator_the_rules_cannot_name_is_held_to_the_outcomes_the_comparisons_ask(derp):
    """A handbook asking outcomes of placebo and other-class comparisons, not of head-to-head ones: a trial whose
    comparator is unnamed may be any of them, so it must report one (held to them like the rest)."""
    topic = Topic.from_seed_query(ACE_TOPIC).with_corpus(list(derp.values()))
    scope = read_scope(ACE_ELIGIBILITY, topic.intervention)
    after_mi = derp[9134274]
    answer = eligibility(after_mi, topic)
    assert answer.eligible and answer.kinds == (PLACEBO_KIND,)
    unnamed = replace(answer, comparator=NOT_NAMED, comparators=(NOT_NAMED,))
    assert unnamed.kinds == (UNNAMED,)
    assert "reports none of" in (scope.outside(after_mi, unnamed, topic.population) or "")
    head_to_head = read_scope("An ACE inhibitor compared head to head with another ACE inhibitor.", topic.intervention)
    assert head_to_head.outside(after_mi, unnamed, topic.population) is None  # no outcomes asked


def test_stroke_volume_is_a_measurement_not_a_stroke(derp):
    """Nebivolol versus atenolol (12888152) measured stroke volume; a handbook excluding trials that report only
    intermediate outcomes leaves it out."""
    topic = Topic.from_seed_query("beta blockers AND hypertension").with_corpus(list(derp.values()))
    scope = read_scope("A beta blocker compared head to head with another beta blocker, or with placebo or another "
                       "drug for clinical outcomes (mortality, cardiovascular events, hospitalisation, symptoms); "
                       "trials reporting only blood pressure or other intermediate outcomes excluded.",
                       topic.intervention)  # fmt: skip
    trial = derp[12888152]
    assert "stroke volume" in trial.abstract and eligibility(trial, topic).eligible
    assert "reports none of" in (scope.outside(trial, eligibility(trial, topic), topic.population) or "")


def test_baseline_reports_and_analyses_of_prediction_or_genotype_are_not_reports_of_the_effect(derp):
    """The CAPPP trial's "baseline data and current status" (9495662), "Renin status does not predict the
    anti-hypertensive response" (9579769) and the ACE insertion/deletion polymorphism and response (9869506): each
    reports on a randomised trial's participants, none reports what the treatment did."""
    topic = Topic.from_seed_query(ACE_TOPIC).with_corpus(list(derp.values()))
    reasons = {pmid: eligibility(derp[pmid], topic).reason for pmid in (9495662, 9579769, 9869506)}
    assert "a report of baseline data (no results) (title says 'baseline data')" in reasons[9495662]
    assert "an analysis of prognosis or association (title says 'does not predict')" in reasons[9579769]
    assert "an analysis of prognosis or association (title says 'polymorphism')" in reasons[9869506]
    assert not any(eligibility(derp[p], topic).eligible for p in reasons)


def test_a_systematic_overview_is_a_review_and_a_drug_profile_is_no_trial_report(derp):
    """The words "systematic overview" are the older name of a systematic review of trials (10841227, individual
    data of 96,712 randomised patients): a review that may cover a question. A drug profile, "Quinapril: a further
    update of its pharmacology and therapeutic use ..." (11817979), is a narrative review: neither a trial nor a
    covering review."""
    topic = Topic.from_seed_query(ACE_TOPIC).with_corpus(list(derp.values()))
    overview, profile = derp[10841227], derp[11817979]
    assert is_review(overview) == "title says 'systematic overview'"
    assert not eligibility(overview, topic).eligible
    assert is_review(profile) is None
    assert eligibility(profile, topic).reason == (
        "not a report of the trial's effects: a narrative review (title says 'its pharmacology')"
    )


def test_healthy_volunteers_named_in_the_background_are_not_the_trials_participants(derp, demo, reflux):
    """Eletriptan versus sumatriptan (10636142) says "In healthy volunteers, the pharmacokinetics of eletriptan are
    characterized by ..." before randomising 857 outpatients with migraine: a trial in patients. A crossover study
    in which "Twelve healthy volunteers took part" (demo 8276209) stays a study in healthy volunteers."""
    migraine = Topic.from_seed_query("triptans AND migraine").with_corpus(list(derp.values()))
    eletriptan = derp[10636142]
    assert "In healthy volunteers" in eletriptan.abstract
    answer = eligibility(eletriptan, migraine)
    assert answer.eligible and "healthy" not in answer.reason
    assert (
        eligibility(demo[8276209], reflux.with_corpus(list(demo.values()))).reason
        == "healthy volunteers ('healthy volunteers')"
    )


# ---------------------------------------------------------------------------- studies, not reports


def test_reports_of_one_trial_are_one_study(reports, gaps):
    assert registrations(reports[19726226]) == registrations(reports[22013950]) == {"NCT00951574"}
    agents = {p: {"nadroparin"} for p in (19726226, 22013950)} | {p: {"tinzaparin"} for p in (23764005, 26284719)}
    studies = group_studies([reports[p] for p in (19726226, 22013950, 23764005, 26284719)], agents)
    assert sorted(s.reports for s in studies) == [[19726226, 22013950], [23764005, 26284719]]
    assert all(s.links and "same registration" in s.links[0] for s in studies)


def test_the_shared_key_counts_studies_and_keeps_the_secondary_analysis_under_its_trial(gaps):
    cfg = load_config(ROOT / "config.toml", environ={})
    topic = Topic.from_seed_query("anticoagulants AND cancer AND central venous catheter")
    questions, judged, _ = questions_for_topic(topic, list(gaps.values()), pivot=cfg.sr.sr_overlap_pivot,
                                               update_after=cfg.sr.update_after_trials,
                                               min_trials=cfg.sr.min_eligible_trials)  # fmt: skip
    own = questions[0]
    # "Risk factors for upper limb deep vein thrombosis ..." reports on patients of the enoxaparin trial (15767643)
    assert judged[18317868].eligible and judged[18317868].reason.startswith("a further report of study")
    study = next(sid for sid, r in own.studies.items() if 18317868 in r)
    assert own.studies[study] == [15767643, 18317868]
    assert own.metrics["eligible_trials"] == len(own.studies) < own.metrics["reports"] == len(own.trials)


# ---------------------------------------------------------------------------- reviews that ask something else


def test_a_meta_analysis_of_gene_polymorphisms_asks_something_else_than_the_treatments_effect():
    review = Paper(2, "Association between VEGF gene polymorphisms and response to anti-VEGF therapy in neovascular "
                   "age-related macular degeneration: a meta-analysis", pub_types=["Meta-Analysis"])  # fmt: skip
    assert read_review(review).other_kind in ("gene", "polymorphisms")
    effect = Paper(
        3,
        "Anti-vascular endothelial growth factor for neovascular age-related macular degeneration",
        "OBJECTIVES: To assess the effects of anti-VEGF agents.",
        journal="Cochrane Database Syst Rev",
    )
    assert read_review(effect).other_kind == ""
