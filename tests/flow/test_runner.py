"""Whole goals through the local runner with the RulesBrain on the real demo workspace."""

from __future__ import annotations

from pathlib import Path

from ra_agent.agent.goal import GoalStore
from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.questions import load_question_set
from ra_agent.agent.runner import run_goal, start_goal
from ra_agent.evidence.pico.extract import read_pico
from ra_agent.evidence.reports.common import cited_pmids, verify_citations
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import Workspace, open_store

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"


class RecordingBrain(RulesBrain):
    """The rules brain, keeping every prompt it was shown."""

    def __init__(self):
        self.prompts: list[list[dict]] = []

    def chat(self, messages):
        self.prompts.append(messages)
        return super().chat(messages)


def run(cfg, project: Path, brain=None, handbook: str = HANDBOOK):
    brain = brain or RulesBrain()
    with open_store(cfg) as store:
        goal = start_goal(cfg, store, project / handbook, brain.name)
        return run_goal(cfg, store, goal.goal_id, brain)


# The gap path: a review covers a question only when it could include 95% of its studies, which no demo review does for
# the topic's question (at the default 60% the 2002 review PMID 11683686 covers it: tests/flow/test_question_goals.py).
UNCOVERED = {"sr": {"sr_overlap_pivot": 0.95}}


def test_seek_gap_ends_in_a_dossier_whose_citations_and_counts_match_the_store(demo_any_store, demo_project):
    demo = demo_any_store.with_overrides(**UNCOVERED)
    state = run(demo, demo_project)
    assert state.status == "stopped" and len(state.success_questions) == 1
    assert [h["tool"] for h in state.events("tool_call")] == [
        "search_pubmed", "run_pico", "find_existing_sr", "prisma_check",
    ]  # fmt: skip
    (question_id,) = state.success_questions
    assert state.question_id == question_id and state.stop_reason().startswith(f"success: {question_id} met ")
    (written,) = state.events("report_written")
    assert written["path"] == f"reports/{state.goal_id}/gap_dossier_{question_id}.md"  # relative to the workspace
    dossier = demo.data_dir / written["path"]
    text = dossier.read_text(encoding="utf-8")
    assert "rules:handbook-policy-v1" in text  # the brain is named in the report
    with open_store(demo) as store:
        assert verify_citations(store, dossier) == []
        question = load_question_set(demo, store, demo_project / HANDBOOK).question(question_id)
    assert question.verdict == "gap" and len(question.studies) >= demo.sr.min_eligible_trials
    assert text.splitlines()[4] == f"Gap found: {question.in_words}: {len(question.studies)} studies " \
                                   f"({len(question.trials)} reports), no review answers it."  # fmt: skip
    assert "- Result: **not compliant**" not in text  # no review covers it: nothing was judged non-compliant
    records = read_pico(Workspace.of(demo).pico_dir / f"{question_id}.jsonl")  # run_pico read its reports
    assert sorted(r.pmid for r in records) == question.trial_pmids
    assert set(question.trial_pmids) <= cited_pmids(text)


def test_a_successful_goal_becomes_a_playbook_retrieved_by_the_next_goal(demo, demo_project):
    demo = demo.with_overrides(**UNCOVERED)
    first = run(demo, demo_project)
    (recorded,) = first.events("playbook_recorded")
    brain = RecordingBrain()
    run(demo, demo_project, brain, handbook="handbooks/conduct_sr_ppi.md")  # same topic, not yet met
    first_prompt = next(p for p in brain.prompts if "<mind_kb_playbooks>" in p[-1]["content"])[-1]["content"]
    block = first_prompt.split("<mind_kb_playbooks>")[1].split("</mind_kb_playbooks>")[0]
    assert "search_pubmed" in block and "find_existing_sr" in block
    with open_store(demo) as store:
        rows = store.conn.execute("SELECT id, source FROM mind_kb").fetchall()
    assert [tuple(r) for r in rows][0] == (recorded["playbook_id"], "agent_cycle")


def test_a_covered_question_pivots_once_to_a_new_goal_with_a_new_handbook(demo, demo_project):
    state = run(demo, demo_project)  # the default 60%: the 2002 review covers the topic's question
    (pivot,) = state.events("alternative_proposed")
    assert state.status == "stopped" and state.success_questions == []
    with open_store(demo) as store:
        goals = {s.goal_id: s for s in GoalStore(demo.data_dir, store).states()}
        qset = load_question_set(demo, store, demo_project / HANDBOOK)
    assert pivot["question_id"] == qset.topic_question.id and pivot["question_id"] in state.questions_done
    child = goals[pivot["new_goal"]]
    assert child.events("spawned_from")[0]["parent_goal"] == state.goal_id
    handbook = load_handbook(child.handbook_path)
    assert handbook.seed_query and handbook.seed_query != load_handbook(demo_project / HANDBOOK).seed_query
    # the covered question's dossier is on record, named by the question, saying it in plain words
    (dossier,) = [h for h in state.events("report_written") if h["question_id"] == pivot["question_id"]]
    text = (demo.data_dir / dossier["path"]).read_text(encoding="utf-8")
    assert text.splitlines()[4].startswith("Covered by Systematic review of proton pump inhibitors for the acute")
