"""A handbook's question set read through the store's indexes (`load_question_set`, evidence/questions/candidates.py)
holds the questions computed over every record of the store: on one store holding the demo corpus and the CD006468
records (tests/fixtures/gaps), on SQLite and on PostgreSQL, with the full-text queries finding every record the concept
rules accept."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ra_agent.agent.questions import handbook_scope, handbook_topic, load_question_set
from ra_agent.config import Config, load_config
from ra_agent.evidence.questions.build import questions_for_topic
from ra_agent.evidence.questions.candidates import IndexCounts, leading_words, pattern_pieces
from ra_agent.evidence.questions.corpus import references
from ra_agent.evidence.questions.judge import RulesJudge
from ra_agent.evidence.questions.reviews import is_review
from ra_agent.evidence.questions.topic import RESISTANT, Concept, Topic, modified_phrase, word_patterns
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store

ROOT = Path(__file__).resolve().parents[3]
GAPS = ROOT / "tests" / "fixtures" / "gaps"
FILES = [ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv", GAPS / "CD006468_catheter_subset.csv",
         GAPS / "CD006468_study_reports.csv"]  # fmt: skip
HANDBOOKS = [ROOT / "handbooks" / "seek_gap_ppi_gerd.md", ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"]


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> Config:
    """The project's knobs, its sets written under a temporary data_dir."""
    data = tmp_path_factory.mktemp("data")
    return load_config(ROOT / "config.toml", environ={}).with_overrides(workspace={"data_dir": str(data)})


@pytest.fixture(scope="module")
def store(cfg, tmp_path_factory):
    """The demo corpus and the CD006468 records in one SQLite store, as ra's importers store them."""
    with Store(tmp_path_factory.mktemp("both") / "ra.sqlite") as store:
        for path in FILES:
            import_file(store, path, cfg)
        yield store


def every_record_questions(cfg, store: Store, handbook: Path):
    """The reference: the questions over every record of the store (as load_question_set computed them before it
    read through the indexes)."""
    papers = store.papers(store.all_pmids())
    cited = references(store, [p for p in papers if is_review(p)])
    questions, judged, _ = questions_for_topic(
        handbook_topic(handbook), papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
        min_trials=cfg.sr.min_eligible_trials, references=cited, judge=RulesJudge(), scope=handbook_scope(handbook),
    )  # fmt: skip
    return questions, judged, papers


def assert_same_questions(cfg, store: Store, handbook: Path) -> tuple[Topic, list, set[int]]:
    """The stored set (computed through the indexes) against the reference: the same questions (trials, studies,
    reviews, verdicts and reasons), the same topic terms, the same answers for the candidates, every eligible trial
    among them. Returns the topic with its corpus terms, the questions and the candidates (the records judged)."""
    qset = load_question_set(cfg, store, handbook, judge=RulesJudge())
    reference, reference_judged, papers = every_record_questions(cfg, store, handbook)
    assert qset.questions and [q.as_dict() for q in qset.questions] == [q.as_dict() for q in reference]
    for question, expected in zip(qset.questions, reference, strict=True):  # what a reader is shown, one by one
        assert (question.id, question.studies, question.verdict) == (expected.id, expected.studies, expected.verdict)
    topic = handbook_topic(handbook)
    with_terms = topic.with_statistics(IndexCounts(store))
    assert with_terms == topic.with_corpus(papers)  # the same MeSH headings and abbreviations
    candidates = set(qset.eligibility)
    expected = {p: {"eligible": reference_judged[p].eligible, "reason": reference_judged[p].reason} for p in candidates}
    assert qset.eligibility == expected
    assert {p for p, a in reference_judged.items() if a.eligible} <= candidates
    return with_terms, qset.questions, candidates


def pmids_of(*paths: Path) -> set[int]:
    out = set()
    for path in paths:
        with path.open(encoding="utf-8", newline="") as fh:
            out |= {int(r["pubmedID"]) for r in csv.DictReader(fh)}
    return out


def test_on_the_demo_the_questions_read_through_the_indexes_are_those_over_every_record(cfg, store):
    topic, questions, candidates = assert_same_questions(cfg, store, HANDBOOKS[0])
    assert questions[0].studies and questions[0].reviews  # trials and reviews on which a wrong read would show
    # most CD006468 records stay out (all are read today); a few say "maintenance" and "healing", or "oesophageal",
    # whose stem the index keeps as that of "oesophagitis"
    other = pmids_of(*FILES[1:])
    assert len(candidates & other) < len(other) / 5


def test_on_the_shared_key_the_questions_read_through_the_indexes_are_those_over_every_record(cfg, store):
    topic, questions, candidates = assert_same_questions(cfg, store, HANDBOOKS[1])
    assert questions[0].studies and questions[0].reviews
    catheter = topic.population[1]
    assert "CVC" in catheter.patterns and catheter.headings  # an abbreviation and MeSH headings to agree on
    assert not candidates & pmids_of(FILES[0])  # no demo record says cancer and central venous catheter


def test_the_questions_are_the_same_on_postgresql(cfg, pg_server):
    with Store(pg_server.new_database()) as store:
        for path in FILES[1:]:
            import_file(store, path, cfg)
        _, questions, candidates = assert_same_questions(cfg, store, HANDBOOKS[1])
        assert questions[0].studies and 0 < len(candidates) < len(store.all_pmids())


# ---------------------------------------------------------------------------- the queries find what the rules find
CONCEPTS = ["gastroesophageal reflux", "gastro-oesophageal reflux disease", "heartburn", "erosive oesophagitis",
            "central venous catheter", "cancer", "haematological malignancy", "peptic ulcer bleeding",
            "treatment-resistant reflux", "metastatic cancer"]  # fmt: skip


def test_a_concepts_records_hold_every_record_its_rules_accept(store):
    """For concepts written every way the rules read (one word or hyphenated, British or American, a modified
    condition), the records the full-text queries return include every record `Concept.find` or
    `Concept.find_modified` accepts, over all records of the store."""
    counts = IndexCounts(store)
    papers = store.papers(store.all_pmids())
    for label in CONCEPTS:
        modified = modified_phrase(label)
        concept = Concept(label, word_patterns(label), modified=(modified,) if modified else ())
        found = counts.concept_records(concept)
        assert found is not None, label
        accepted = {p.pmid for p in papers if concept.find(f"{p.title} {p.abstract}", p.mesh)
                    or concept.find_modified(p.title, f"{p.title} {p.abstract} {' '.join(p.mesh)}")}  # fmt: skip
        assert accepted and accepted <= found, (label, sorted(accepted - found)[:5])
        assert len(found) < len(papers) / 2, label
    hyphenated = Concept("gastroesophageal", word_patterns("gastroesophageal"))  # the text writes gastro-oesophageal
    assert {p.pmid for p in papers if hyphenated.find(p.title) and "gastro-oesophageal" in p.title.lower()}


def test_a_pattern_of_another_shape_reads_every_record(store):
    counts = IndexCounts(store)
    assert pattern_pieces(r"canc(?:er|ers)\w*") is None
    assert counts.concept_records(Concept("cancer", (r"canc(?:er|ers)\w*",))) is None
    assert pattern_pieces(word_patterns("gastro-oesophageal reflux")[0]) == [["gastro", "esophageal"], ["reflux"]]


def test_a_modifier_is_read_by_the_words_every_match_starts_with():
    starts = leading_words(rf"\b(?:{RESISTANT})")
    assert starts is not None
    assert ["inadequately", "respon"] in starts and ["resistan"] in starts and ["did", "not", "improve"] in starts
    assert ["non", "respon"] in starts and ["nonrespon"] in starts
    assert leading_words(r"\bneovascul\w*") == [["neovascul"]]
    assert leading_words(r"neovascul\w*") is None  # may start inside a word
