"""How ra reads a handbook and a record as a reviewer reads them, on the repository's handbooks and the demo corpus:
prose wrapped anywhere says the same, instructions to the agent are no eligibility, a randomised design is quoted
as such, and an outcome is named once however its records word it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.questions import handbook_scope, handbook_topic
from ra_agent.config import load_config
from ra_agent.evidence.questions.build import outcome_name, questions_for_topic
from ra_agent.evidence.questions.scope import read_scope
from ra_agent.evidence.questions.topic import Topic
from ra_agent.evidence.questions.trials import eligibility
from ra_agent.ingest.importers import import_file
from ra_agent.models import Paper
from ra_agent.store.db import Store

ROOT = Path(__file__).resolve().parents[3]
HANDBOOKS = ROOT / "handbooks"
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[int, Paper]:
    store = Store(tmp_path_factory.mktemp("demo") / "ra.sqlite")
    import_file(store, DEMO, load_config(ROOT / "config.toml", environ={}))
    pmids = [r[0] for r in store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
    out = {p.pmid: p for p in store.papers(pmids)}
    store.close()
    return out


def test_prose_wrapped_anywhere_lists_the_same_synonyms_so_two_handbooks_ask_one_question(tmp_path):
    """conduct_sr_ppi.md breaks its line inside "erosive or non-erosive oesophagitis": the topic read "erosive" as a
    synonym of reflux and lost "oesophagitis", so the SR draft's question (70 studies, covered by another review)
    was not the seek-gap handbook's (89 studies) although both ask the same thing."""
    seek, conduct = handbook_topic(HANDBOOKS / "seek_gap_ppi_gerd.md"), handbook_topic(HANDBOOKS / "conduct_sr_ppi.md")
    assert "esophagitis" in conduct.population[0].listed and "erosive" not in conduct.population[0].listed
    assert conduct == seek and conduct.definition() == seek.definition()
    # the same handbook with its prose on one line and on lines of a few words each
    text = (HANDBOOKS / "seek_gap_ppi_gerd.md").read_text(encoding="utf-8")
    head, prose = text.split("\n---\n", 1)
    topics = []
    for name, wrapped in (
        ("one_line", " ".join(prose.split())),
        ("narrow", "\n".join(re.findall(r"(?:\S+\s+){1,3}", prose))),
    ):
        path = tmp_path / f"{name}.md"
        path.write_text(f"{head}\n---\n{wrapped}\n", encoding="utf-8")
        assert load_handbook(path).seed_query == "proton pump inhibitors AND gastroesophageal reflux"
        topics.append(handbook_topic(path))
    assert topics[0] == topics[1] == seek


def test_instructions_to_the_agent_are_no_eligibility_and_a_genus_ends_no_sentence():
    """The demo handbook's four sentences about clusters and tools were listed as eligibility "the rules do not
    apply"; "*H. pylori*" cut the SR handbook's exclusion sentence in two."""
    seek = handbook_scope(HANDBOOKS / "seek_gap_ppi_gerd.md")
    assert not seek.statements
    conduct = handbook_scope(HANDBOOKS / "conduct_sr_ppi.md")
    words = [s.words for s in conduct.statements]
    assert any(w.endswith("studies of *H. pylori* eradication or NSAID ulcers unless they report reflux outcomes.")
               for w in words), words  # fmt: skip
    assert not any(re.search(r"`\w+|\bclusters?\b", w) for w in words), words
    # eligibility that names no tool is still read, and still listed when the rules cannot apply it
    stated = read_scope("Run the search again. Only trials in adults are eligible; crossover trials are included.")
    assert stated.ages == "adults"
    assert [s.words for s in stated.statements] == [
        "Only trials in adults are eligible",
        "crossover trials are included.",
    ]


@pytest.mark.parametrize("pmid", [10871974, 10958216, 11095321])
def test_a_randomised_design_is_the_reason_quoted_not_the_placebo_arm(demo, pmid):
    """ "In 2 randomized, double-blind, multicenter trials of 901 patients" and "a multicentre, randomized,
    double-blind, parallel-group design" say the trial was randomised; the reason quoted 'or placebo' instead."""
    reflux = handbook_topic(HANDBOOKS / "seek_gap_ppi_gerd.md")
    answer = eligibility(demo[pmid], reflux)
    assert answer.eligible
    quoted = re.match(r"randomised \(abstract says '([^']+)'\)", answer.reason)
    assert quoted and re.search(r"randomi[sz]ed", quoted.group(1)), answer.reason
    # a sentence about other randomised trials is no design of this one
    background = Paper(
        pmid=1,
        title="Omeprazole in reflux oesophagitis",
        abstract="Two randomized trials have "
        "shown that omeprazole heals oesophagitis. We studied 40 patients given omeprazole.",
    )
    assert not eligibility(background, reflux).eligible


def test_the_questions_outcomes_name_each_word_family_once(demo):
    """The demo's topic question listed "symptoms, healing, symptom, adverse events, symptomatic"."""
    assert [outcome_name(w) for w in ("Symptom", "symptomatic", "symptoms", "death", "side effect", "hemorrhage")] \
        == ["symptoms", "symptoms", "symptoms", "mortality", "side effects", "haemorrhage"]  # fmt: skip
    cfg = load_config(ROOT / "config.toml", environ={})
    topic: Topic = handbook_topic(HANDBOOKS / "seek_gap_ppi_gerd.md")
    questions, _, _ = questions_for_topic(topic, list(demo.values()), pivot=cfg.sr.sr_overlap_pivot,
                                          update_after=cfg.sr.update_after_trials,
                                          min_trials=cfg.sr.min_eligible_trials)  # fmt: skip
    for question in questions:
        names = [outcome_name(o) for o in question.outcomes]
        assert len(names) == len(set(names)) and names == question.outcomes, (question.id, question.outcomes)
    assert "symptoms" in questions[0].outcomes
