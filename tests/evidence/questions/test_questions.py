"""Review questions on real records: Cochrane review CD006468's search results (tests/fixtures/gaps, with the
reviewers' final inclusions as the key) and the demo corpus."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from ra_agent.agent.handbook import load_handbook
from ra_agent.config import load_config
from ra_agent.evidence.classes import agents_in, classes_named, lineage
from ra_agent.evidence.questions.build import question_id, questions_for_topic
from ra_agent.evidence.questions.model import RULES
from ra_agent.evidence.questions.reviews import is_review
from ra_agent.evidence.questions.topic import Topic
from ra_agent.evidence.questions.trials import eligibility
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store

ROOT = Path(__file__).resolve().parents[3]
GAPS = ROOT / "tests" / "fixtures" / "gaps"
SUBSET = GAPS / "CD006468_catheter_subset.csv"
HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.toml", environ={})


@pytest.fixture(scope="module")
def papers(cfg, tmp_path_factory):
    """The fixture rows imported by ra's CSV importer into a store and read back."""
    store = Store(tmp_path_factory.mktemp("gaps") / "ra.sqlite")
    import_file(store, SUBSET, cfg)
    pmids = [r[0] for r in store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
    out = store.papers(pmids)
    store.close()
    return out


@pytest.fixture(scope="module")
def key():
    with SUBSET.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    included = {int(r["pubmedID"]) for r in rows if r["label_included"] == "1"}
    screened = {int(r["pubmedID"]) for r in rows if r["label_abstract_screening"] == "1"}
    review = json.loads((GAPS / "CD006468_review.json").read_text(encoding="utf-8"))
    versions = {int(v["pmid"]) for v in review["earlier_versions_in_candidates"]}
    return included, screened, versions


@pytest.fixture(scope="module")
def topic():
    return Topic.from_seed_query(load_handbook(HANDBOOK).seed_query or "")


def _run(cfg, topic, papers):
    return questions_for_topic(topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
                               min_trials=cfg.sr.min_eligible_trials)  # fmt: skip


def test_the_csv_importer_keeps_mesh_headings(papers):
    by_pmid = {p.pmid: p for p in papers}
    assert "Dalteparin" in by_pmid[16317012].mesh  # "Dalteparin/administration & dosage/*therapeutic use"
    assert "Catheterization, Central Venous" in by_pmid[16317012].mesh
    assert all("/" not in h and not h.startswith("*") for p in papers for h in p.mesh)


def test_class_table_places_agents_by_inn_stem_and_named_members():
    found = {
        a.word: a.cls for a in agents_in("enoxaparin, warfarin, rivaroxaban, omeprazole, aripiprazole, ranitidine")
    }
    assert found == {"enoxaparin": "low-molecular-weight heparin", "warfarin": "vitamin K antagonist",
                     "rivaroxaban": "factor Xa inhibitor", "omeprazole": "proton pump inhibitor",
                     "aripiprazole": "atypical antipsychotic", "ranitidine": "H2-receptor antagonist"}  # fmt: skip
    assert "anticoagulant" in lineage("low-molecular-weight heparin")
    assert classes_named("Anticoagulation for people with cancer") == ["anticoagulant"]
    assert agents_in("In April 2005 we recruited") == []  # "April" is not an ACE inhibitor (-pril)


def test_a_name_inside_another_is_its_word_but_a_mention_of_its_own_counts():
    # the title of demo PMID 11280530, a head-to-head trial: both drugs are its arms
    title = "Efficacy and safety of esomeprazole compared with omeprazole in GERD patients with erosive esophagitis"
    assert [a.word for a in agents_in(title)] == ["esomeprazole", "omeprazole"]
    both = agents_in("low-molecular-weight heparin versus unfractionated heparin")
    assert [a.cls for a in both] == ["low-molecular-weight heparin", "heparin"]  # no extra bare 'heparin'


def test_topic_from_seed_query_splits_population_and_intervention(topic):
    assert [c.label for c in topic.population] == ["cancer", "central venous catheter"]
    assert topic.intervention == ("anticoagulant",)


def test_every_eligibility_answer_names_its_reason(papers, topic):
    by_pmid = {p.pmid: p for p in papers}
    trial = eligibility(by_pmid[16317012], topic)  # dalteparin vs placebo in cancer patients with a CVC
    assert trial.eligible and "dalteparin" in trial.reason and "randomised" in trial.reason
    assert "placebo" in trial.comparator
    version = eligibility(by_pmid[25318061], topic)  # the 2014 version of the review
    assert not version.eligible and version.reason.startswith("a review")
    answers = [eligibility(p, topic) for p in papers]
    assert all(a.reason for a in answers)
    assert sum(a.eligible for a in answers) < len(answers) / 10  # the catheter records are mostly not its trials


def test_as_is_the_question_is_covered_by_a_version_of_the_review(cfg, papers, topic, key):
    included, _, versions = key
    questions, _, reviews = _run(cfg, topic, papers)
    own = questions[0]
    assert own.comparator == "any" and own.intervention == "anticoagulant"
    assert own.verdict.startswith("covered"), own.verdict_reason
    assert own.covering is not None and own.covering.pmid in versions  # the first named: a version of the review
    assert own.covering.title.lower().startswith("anticoagulation for")
    assert all(r.why for r in own.reviews)
    assert "antimicrobial lock" not in " ".join(r.title.lower() for r in own.reviews[:3])
    assert any("guideline" in why for why in own.not_answering.values())  # guidelines ask something else
    assert not [q for q in questions if q.verdict == "gap"]
    by_id = {q.id: q for q in questions}
    assert all(q.parent in by_id for q in questions[1:])  # a tree under the topic's question
    assert all(by_id[q.parent].parent in (None, own.id) for q in questions[1:])  # two levels at most
    assert own.judged_by == RULES and own.unchecked


def test_an_old_covering_review_warrants_an_update_naming_it(cfg, papers, topic, key):
    """The corpus as a searcher would have found it after the first version (no review newer than 2007): covered by
    the 2007 version; the trials published since are the two the 2011 update added (a heparin catheter-lock trial
    of 2012 counted as a third before: a lock is part of the device), and past update_after_trials they warrant an
    update."""
    included, _, versions = key
    pool = [p for p in papers if not (is_review(p) and (p.year or 0) > 2007)]
    own = _run(cfg, topic, pool)[0][0]
    assert own.covering is not None and own.covering.pmid == 17636845 and own.covering.pmid in versions
    assert sorted(own.trials_since) == [19217991, 19567452] and set(own.trials_since) <= included
    assert own.verdict == "covered"  # 2 since, update after 3 (config.toml)
    sr = dataclasses.replace(cfg.sr, update_after_trials=2)
    own = _run(dataclasses.replace(cfg, sr=sr), topic, pool)[0][0]
    assert own.verdict == "covered, update warranted"
    assert len(own.trials_since) >= sr.update_after_trials
    assert own.verdict_reason.startswith(f"{len(own.trials_since)} trials since PMID 17636845 (2007)")
    assert all((own.years[p] or 0) > 2007 for p in own.trials_since)


@pytest.fixture(scope="module")
def demo_papers(cfg, tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("demo") / "ra.sqlite")
    import_file(store, ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv", cfg)
    out = store.papers(store.all_pmids())
    store.close()
    return out


def test_on_the_demo_the_covering_review_is_a_review_of_ppis_for_reflux(cfg, demo_papers):
    """The demo's question (PPIs for GERD) is covered by a review of PPIs for reflux oesophagitis, not by the
    pharmacogenetics review that merely mentions both; eight trials came after it, so an update is warranted."""
    from ra_agent.agent.questions import handbook_topic

    topic = handbook_topic(ROOT / "handbooks" / "seek_gap_ppi_gerd.md")
    questions, judged, reviews = _run(cfg, topic, demo_papers)
    own = questions[0]
    assert own.covering is not None and own.covering.pmid != 12680476
    assert "proton pump inhibitor" in own.covering.title.lower()
    assert "reflux" in own.covering.title.lower() or "oesophagitis" in own.covering.title.lower()
    assert "Pharmacogenetics" in own.not_answering[12680476]
    assert own.verdict == "covered, update warranted" and own.newest is not None
    assert own.verdict_reason.startswith(f"{len(own.trials_since)} trials since PMID {own.newest.pmid}")
    assert len(own.trials_since) >= cfg.sr.update_after_trials


def test_on_the_demo_extra_oesophageal_and_diagnostic_trials_are_not_the_questions(cfg, demo_papers):
    """The pH-monitoring mix: a PPI given as a diagnostic test, asthma or cough put first with reflux, and trials in
    people with another condition (laryngitis, chest pain, dyspepsia) named in the title are not trials of PPIs for
    GERD; each says why."""
    from ra_agent.agent.questions import handbook_topic

    topic = handbook_topic(ROOT / "handbooks" / "seek_gap_ppi_gerd.md")
    by_pmid = {p.pmid: p for p in demo_papers}
    answers = {pmid: eligibility(by_pmid[pmid], topic) for pmid in (9489902, 11392580, 11106204, 9649457, 12352293)}
    assert "diagnostic test" in answers[9489902].reason  # One-week omeprazole treatment in the diagnosis of GORD
    assert "another condition first ('asthma'" in answers[11392580].reason  # Asthma and gastro-oesophageal reflux
    assert "another condition first ('cough'" in answers[11106204].reason  # Chronic cough and gastro-oesophageal reflux
    assert "noncardiac chest pain" in answers[9649457].reason
    assert not any(a.eligible for a in answers.values())
    assert eligibility(by_pmid[7605854], topic).eligible  # Lansoprazole versus ranitidine for reflux oesophagitis


def test_reviews_removed_the_gap_lists_the_reviewers_trials(cfg, papers, topic, key):
    included, screened, _ = key
    pool = [p for p in papers if not is_review(p)]
    questions, _, reviews = _run(cfg, topic, pool)
    assert reviews == []
    own = questions[0]
    assert own.verdict == "gap"
    listed = set(own.trials)
    precision, recall = len(listed & included) / len(listed), len(listed & included) / len(included)
    assert 2 * precision * recall / (precision + recall) >= 0.5
    assert len(listed & screened) / len(listed) >= 0.7
    assert all(
        ("randomised" in why and "tests" in why) or why.startswith("a further report of study")
        for why in own.trials.values()
    )


def test_question_id_is_stable_and_normalised():
    assert question_id("Cancer ", "anticoagulant", "any") == question_id("cancer", "anticoagulant", "any")
    assert question_id("cancer", "anticoagulant", "any") != question_id("cancer", "heparin", "any")


def test_a_topic_matching_nothing_gives_no_question_trials(cfg, papers):
    topic = Topic.from_seed_query("antipsychotics AND schizophrenia")
    questions, judged, _ = _run(cfg, topic, papers)
    assert questions[0].trials == {} and questions[0].verdict == "too few trials"
    assert all(not j.eligible for j in judged.values())


def test_a_spawned_goal_stays_inside_the_parents_topic():
    from ra_agent.evidence.questions.topic import keep_to_topic

    handbook = load_handbook(ROOT / "handbooks" / "seek_gap_ppi_gerd.md")
    parent = handbook.seed_query
    assert parent
    narrowed = keep_to_topic(parent, "omeprazole AND asthma", handbook.prose)  # another condition on its own
    assert narrowed.seed_query and narrowed.seed_query.startswith(f"({parent}) AND")
    assert "gastroesophageal reflux" in narrowed.note
    child = Topic.from_seed_query(narrowed.seed_query)
    assert {c.label for c in Topic.from_seed_query(parent).population} <= {c.label for c in child.population}
    inside = keep_to_topic(parent, "esomeprazole AND GERD AND maintenance", handbook.prose)  # GERD: the prose's word
    assert inside.seed_query == "esomeprazole AND GERD AND maintenance" and inside.note == ""


def test_a_spawned_goal_never_broadens_the_intervention_or_drops_the_comparator():
    from ra_agent.evidence.questions.topic import keep_to_topic

    broader = keep_to_topic("low-molecular-weight heparins AND cancer", "anticoagulants AND cancer")
    assert broader.seed_query is None and "broadens the intervention" in broader.skipped
    dropped = keep_to_topic("proton pump inhibitors AND placebo AND reflux", "esomeprazole AND reflux")
    assert dropped.seed_query is None and "comparator" in dropped.skipped
    narrower = keep_to_topic("proton pump inhibitors AND placebo AND reflux", "esomeprazole AND placebo AND reflux")
    assert narrower.seed_query == "esomeprazole AND placebo AND reflux"


def test_ra_questions_on_a_handbook_without_seed_query_names_file_and_field(tmp_path, monkeypatch, capsys):
    from ra_agent.cli import main

    monkeypatch.setenv("RA_WORKSPACE__DATA_DIR", str(tmp_path / "ws"))
    handbook = tmp_path / "no_seed.md"
    handbook.write_text(HANDBOOK.read_text(encoding="utf-8").replace('Seed_query: "anticoagulants AND cancer AND '
                                                                   'central venous catheter"\n', ""), encoding="utf-8")  # fmt: skip
    assert "Seed_query" not in handbook.read_text(encoding="utf-8")
    code = main(["--config", str(ROOT / "config.toml"), "questions", str(handbook)])
    err = capsys.readouterr().err
    assert code != 0 and "no_seed.md" in err and "Seed_query" in err and "internal error" not in err
    assert not (tmp_path / "ws").exists()  # refused before any workspace was made


def test_a_concept_outside_the_entry_terms_matches_its_own_words():
    topic = Topic.from_seed_query("metformin AND type 2 diabetes AND older adults")
    diabetes, adults = topic.population
    assert diabetes.find("Patients with type 2 diabetes mellitus were randomised") == "type 2 diabetes"
    assert diabetes.find("type 1 diabetes") is None
    assert adults.find("in older community-dwelling adults") is not None
    oesophagus = Topic.from_seed_query("proton pump inhibitors AND gastro-oesophageal reflux").population[0]
    assert oesophagus.find("Gastro-oesophageal reflux disease (GORD) in adults") is not None


def test_a_comparator_clause_is_the_comparator_not_the_intervention():
    topic = Topic.from_seed_query(
        "(omeprazole OR lansoprazole) AND (placebo OR ranitidine) AND gastro-oesophageal reflux"
    )
    assert topic.intervention == ("proton pump inhibitor",)
    assert topic.comparator == ("H2-receptor antagonist", "placebo or no treatment")
    assert [c.label for c in topic.population] == ["gastro-oesophageal reflux"]


def test_a_seed_query_in_words_is_read_as_intervention_for_population():
    topic = Topic.from_seed_query("proton pump inhibitors for reflux")
    assert topic.intervention == ("proton pump inhibitor",) and [c.label for c in topic.population] == ["reflux"]
    title = Topic.from_seed_query("Anticoagulation for people with cancer and central venous catheters")
    assert [c.label for c in title.population] == ["cancer", "central venous catheters"]
    therapy = Topic.from_seed_query("psychological therapies for treatment-resistant depression")
    assert therapy.intervention == ("psychological therapy",)
    assert therapy.population[0].find("treatment resistant depression") is not None


def test_an_agent_missing_from_the_class_table_is_never_a_population_concept():
    from ra_agent.evidence.questions.topic import TopicError

    with pytest.raises(TopicError, match="names no intervention the class table knows"):
        Topic.from_seed_query("zolbetuximabum AND gastric cancer")  # no class, no INN stem the table knows
    topic = Topic.from_seed_query("(omeprazole OR losec) AND reflux")  # a brand name is left out, not a population
    assert [c.label for c in topic.population] == ["reflux"]


def test_a_handbook_whose_seed_query_names_no_population_fails_naming_file_and_field(tmp_path, monkeypatch, capsys):
    from ra_agent.cli import main

    monkeypatch.setenv("RA_WORKSPACE__DATA_DIR", str(tmp_path / "ws"))
    handbook = tmp_path / "no_population.md"
    handbook.write_text(HANDBOOK.read_text(encoding="utf-8").replace(
        'Seed_query: "anticoagulants AND cancer AND central venous catheter"', 'Seed_query: "anticoagulants"'
    ), encoding="utf-8")  # fmt: skip
    code = main(["--config", str(ROOT / "config.toml"), "questions", str(handbook)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "no_population.md" in err and "Seed_query" in err and "names no population" in err
    assert len(err.splitlines()) == 1


def test_the_review_questions_asset_materialises_per_handbook_with_its_check(gaps, key, tmp_path):
    """The review_questions asset, partitioned by the CD006468 handbook's key, on the review's catheter records:
    metadata per question (the review's own question covered by a version of it), one dossier per question on disk;
    its check passes, and the same structural check fails on the folder once a dossier goes missing."""
    import dagster as dg

    from ra_agent.agent.questions import register_handbook
    from ra_agent.evidence.questions.question_set import question_set_problems
    from ra_assets.defs.findings.assets import review_questions
    from ra_assets.resources import build_resources

    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{gaps.cfg.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    handbook_key = register_handbook(load_config(config, environ={}), HANDBOOK)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("handbook", [handbook_key])
        result = dg.materialize([review_questions], partition_key=handbook_key, instance=instance,
                                resources=build_resources(str(config)))  # fmt: skip
        assert result.success
        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        checked = checks["review_questions_well_formed"]
        meta = result.asset_materializations_for_node("review_questions")[0].metadata
    assert checks["verdicts_unchanged"].passed  # the first evaluation: nothing to compare with
    assert checked.passed and checked.metadata["questions"].value == meta["questions"].value >= 2
    assert "anticoagulant" in str(meta["topic"].value)
    per_question = meta["per_question"].value
    _, _, versions = key
    assert per_question[0]["verdict"].startswith("covered") and per_question[0]["studies"] >= 6
    assert per_question[0]["covering"] in versions
    folder = Path(str(meta["path"].value))
    assert folder.name == handbook_key and folder.parent.parent == gaps.cfg.data_dir
    assert sorted(p.stem for p in folder.glob("q-*.md")) == sorted(q["id"] for q in per_question)
    assert "![evidence-gap map](data:image/png;base64," in meta["gap_map"].value  # the picture, shown in the UI
    assert meta["gap_map_html"].value == str(folder / "gap_map.html") and (folder / "gap_map.html").is_file()
    (folder / f"{per_question[0]['id']}.md").unlink()
    seen, problems = question_set_problems(folder, gaps.store)
    assert seen == len(per_question) and any("no dossier file" in p for p in problems)


def test_propose_alternative_pico_skips_a_child_that_broadens_the_intervention(demo):
    """The demo's goal (proton pump inhibitors for reflux) pivots from its covered topic question, and its brain
    proposes "acid suppressants AND ..." as the next theme from the trials the review leaves out: the spawned goal
    would broaden the intervention, so none is started and the goal's history says why."""
    from evidence.conftest import HANDBOOK as DEMO_HANDBOOK
    from evidence.conftest import ScriptedBrain
    from ra_agent.agent.goal import GoalStore
    from ra_agent.agent.handbook import load_handbook
    from ra_agent.agent.questions import load_question_set
    from ra_agent.agent.tools import ToolContext, propose_alternative_pico

    goals = GoalStore(demo.cfg.data_dir, demo.store)
    goal = goals.create(str(DEMO_HANDBOOK), "seek_gap", "PPI, GERD")
    reply = json.dumps({"new_PICO": "P: people with gastroesophageal reflux; I: acid suppressants",
                        "seed_query": "acid suppressants AND gastroesophageal reflux"})  # fmt: skip
    ctx = ToolContext(demo.cfg, demo.store, goal, goals, load_handbook(DEMO_HANDBOOK), ScriptedBrain(reply),
                      lambda: None)  # fmt: skip
    question = load_question_set(demo.cfg, demo.store, DEMO_HANDBOOK).topic_question
    assert question.verdict.startswith("covered") and question.trials_since  # trials the review leaves out
    effect = propose_alternative_pico(ctx, question.id)
    assert effect.result["error"] == "outside_topic", effect.result
    (skipped,) = goal.events("alternative_skipped")
    assert skipped["message"].startswith("skipped: outside the goal's topic (it broadens the intervention")
    assert goal.events("alternative_proposed") == [] and len(goals.states()) == 1


PPI_VS_PPI = "Proton pump inhibitor versus another proton pump inhibitor for people with gastroesophageal reflux"


def _pivot_on_the_demo(demo, seed_query: str, *, sibling: str = ""):
    """The demo's goal pivots from its covered topic question and its brain proposes `seed_query`; with `sibling`,
    another goal of the workspace was started on that seed query before (a handbook spawned from the demo's).
    Returns (the tool's effect, the goal, the goal store, the sibling goal or None)."""
    from evidence.conftest import HANDBOOK as DEMO_HANDBOOK
    from evidence.conftest import ScriptedBrain
    from ra_agent.agent.goal import GoalStore
    from ra_agent.agent.questions import load_question_set
    from ra_agent.agent.spawn import spawn_handbook
    from ra_agent.agent.tools import ToolContext, propose_alternative_pico
    from ra_agent.workspace import Workspace

    goals = GoalStore(demo.cfg.data_dir, demo.store)
    goal = goals.create(str(DEMO_HANDBOOK), "seek_gap", "PPI, GERD")
    other = None
    if sibling:
        path = spawn_handbook(demo.cfg, DEMO_HANDBOOK, sibling, Workspace.of(demo.cfg).root / "handbooks")
        other = goals.create(str(path), "seek_gap", sibling)
    agent, *comparator = seed_query.split(" AND ")[::2]  # "<agent> AND <condition> [AND <comparator>]"
    pico = f"P: people with gastroesophageal reflux; I: {agent}" + "".join(f"; C: {c}" for c in comparator)
    reply = json.dumps({"new_PICO": pico, "seed_query": seed_query})
    ctx = ToolContext(demo.cfg, demo.store, goal, goals, load_handbook(DEMO_HANDBOOK), ScriptedBrain(reply),
                      lambda: None)  # fmt: skip
    question = load_question_set(demo.cfg, demo.store, DEMO_HANDBOOK).topic_question
    return propose_alternative_pico(ctx, question.id), goal, goals, other


def test_the_question_a_handbook_asks_is_known_before_its_set_is_judged(demo):
    from evidence.conftest import HANDBOOK as DEMO_HANDBOOK
    from ra_agent.agent.questions import handbook_question, load_question_set

    asked = handbook_question(DEMO_HANDBOOK)
    topic_question = load_question_set(demo.cfg, demo.store, DEMO_HANDBOOK).topic_question
    assert (asked.id, asked.in_words) == (topic_question.id, topic_question.in_words) == (
        "q-b65ca66f9b", "Proton pump inhibitor for people with gastroesophageal reflux")  # fmt: skip


@pytest.mark.parametrize("asked_by", ["sibling", "parent"])
def test_a_spawned_goal_whose_question_a_goal_already_asks_is_refused_naming_both(demo, asked_by):
    """The demo's third goal asked the second's question again ("esomeprazole ... omeprazole" after "pantoprazole ...
    omeprazole": both are PPI versus another PPI); a single agent for reflux asks the parent's own question. Either
    way no handbook is written and no goal started; the goal's history names the question and the goal asking it."""
    from ra_agent.workspace import Workspace

    sibling = "pantoprazole AND gastroesophageal reflux AND omeprazole" if asked_by == "sibling" else ""
    seed = "esomeprazole AND gastroesophageal reflux" + (" AND omeprazole" if sibling else "")
    handbooks = Workspace.of(demo.cfg).root / "handbooks"
    effect, goal, goals, other = _pivot_on_the_demo(demo, seed, sibling=sibling)
    earlier, (qid, words) = (other.goal_id, ("q-566cc856f5", PPI_VS_PPI)) if other else (
        goal.goal_id, ("q-b65ca66f9b", "Proton pump inhibitor for people with gastroesophageal reflux"))  # fmt: skip
    message = f"question {qid} ({words}) is already asked by goal {earlier}"
    assert effect.result["error"] == "question_has_a_goal" and effect.result["message"] == message, effect.result
    assert effect.result["existing_goal"] == earlier and effect.result["asks"] == qid
    (failed,) = goal.events("alternative_failed")
    assert failed["message"] == message and failed["existing_goal"] == earlier
    assert goal.events("alternative_proposed") == [] and len(goals.states()) == 1 + bool(other)
    written = sorted(p.name for p in handbooks.glob("*.md")) if handbooks.is_dir() else []
    assert len(written) == bool(other)  # the sibling's handbook only: the refused one was never written


def test_a_spawned_goal_on_a_question_no_goal_asks_is_started(demo):
    from ra_agent.agent.questions import handbook_question

    effect, goal, goals, other = _pivot_on_the_demo(
        demo, "omeprazole AND gastroesophageal reflux AND ranitidine",
        sibling="pantoprazole AND gastroesophageal reflux AND omeprazole",
    )  # fmt: skip
    assert "error" not in effect.result, effect.result
    child = goals.load(effect.result["new_goal"])
    assert child.events("spawned_from")[0]["parent_goal"] == goal.goal_id and len(goals.states()) == 3
    asked = handbook_question(child.handbook_path)
    assert (
        asked.in_words == "Proton pump inhibitor versus H2-receptor antagonist for people with gastroesophageal reflux"
    )
    assert other is not None and asked.id not in {handbook_question(s.handbook_path).id for s in (goal, other)}
