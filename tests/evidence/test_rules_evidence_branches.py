"""The rules brain by review questions: the topic's question first, too few trials skipped, PICO, reviews and PRISMA
checked per question, a covered question pivoted from once, ra's own draft for conduct_SR, a stop that says why."""

from __future__ import annotations

from ra_agent.llm.rules_brain import decide

SEED = "proton pump inhibitors AND gastroesophageal reflux"
TOPIC, PLACEBO, SURGERY = "q-9a6a3eaf13", "q-916d9137d6", "q-e6390f5722"


def question(qid: str, studies: int, verdict: str, parent: str | None = None, **done) -> dict:
    """One question as the <state> block shows it (agent.goal_questions.question_entries)."""
    covered = verdict.startswith("covered")
    return {"question_id": qid, "in_words": f"question {qid}", "in_scope": True, "parent": parent,
            "studies": studies, "reports": studies + 1, "verdict": verdict,
            "covering": "PMID 11683686 (2002)" if covered else None, "trials_since": 4 if covered else None,
            "pico_done": False, "sr_checked": False, "prisma_checked": None, "PRISMA_compliant": None,
            "alternative_proposed": False, "alternative_tried": False, "done": False, "focus": False, **done}  # fmt: skip


def state(primary: str, questions: list[dict], done: tuple[str, ...] = ()) -> dict:
    """A cycle's <state> block after the seed search."""
    tools = ["search_pubmed", "run_pico", "find_existing_sr", "prisma_check"]
    if primary == "seek_gap":
        tools.append("propose_alternative_pico")
    return {
        "goal": {"goal_id": "g", "primary_goal": primary, "question_id": None, "questions_done": list(done)},
        "handbook": {"primary_goal": primary, "seed_query": SEED, "tools_allowed": tools},
        "thresholds": {"min_eligible_trials": 6, "sr_overlap_pivot": 0.6},
        "searches": [{"query": SEED}],
        "questions": questions,
        "questions_note": "",
        "clusters": [],
    }


def test_seek_gap_works_the_topics_question_through_its_checks_then_pivots_once():
    checked = {"pico_done": True, "sr_checked": True}
    first = decide(state("seek_gap", [question(TOPIC, 40, "covered, update warranted")]))
    assert (first.tool, first.args) == ("run_pico", {"question_id": TOPIC})
    reviews = decide(state("seek_gap", [question(TOPIC, 40, "covered", pico_done=True)]))
    assert (reviews.tool, reviews.args) == ("find_existing_sr", {"question_id": TOPIC})
    prisma = decide(state("seek_gap", [question(TOPIC, 40, "covered", **checked)]))
    assert prisma.tool == "prisma_check" and "PMID 11683686" in prisma.reasoning[-1]
    pivot = decide(state("seek_gap", [question(TOPIC, 40, "covered", prisma_checked="prior_sr", **checked)]))
    assert (pivot.tool, pivot.args) == ("propose_alternative_pico", {"question_id": TOPIC})
    # one new goal per goal: the next covered question is done once checked, not pivoted from again
    after = [question(TOPIC, 40, "covered", alternative_proposed=True, alternative_tried=True, done=True),
             question(PLACEBO, 20, "covered", TOPIC, prisma_checked="prior_sr", **checked)]  # fmt: skip
    noted = decide(state("seek_gap", after, done=(TOPIC,)))
    assert noted.tool == "update_goal" and noted.args == {"changes": {"questions_done": [TOPIC, PLACEBO]}}


def test_a_gap_is_checked_for_prisma_and_left_to_success():
    gap = question(TOPIC, 12, "gap", pico_done=True, sr_checked=True)
    check = decide(state("seek_gap", [gap]))
    assert check.tool == "prisma_check" and "no review covers it" in check.reasoning[-1].lower()
    # checked and Success still does not hold (the executor stops a goal whose question meets it): next question
    done = decide(state("seek_gap", [{**gap, "prisma_checked": "none", "PRISMA_compliant": False}]))
    assert done.tool == "update_goal" and done.args == {"changes": {"questions_done": [TOPIC]}}


def test_too_few_trials_are_skipped_together_and_the_stop_says_no_question_has_enough():
    few = [question(TOPIC, 4, "too few trials"), question(SURGERY, 2, "too few trials", TOPIC)]
    skip = decide(state("seek_gap", few))
    assert skip.args == {"changes": {"questions_done": [TOPIC, SURGERY]}} and "1 more" in skip.reasoning[-1]
    stop = decide(state("seek_gap", [{**q, "done": True} for q in few], done=(TOPIC, SURGERY)))
    assert stop.args == {"changes": {"status": "stopped"}}
    assert stop.reasoning[0].startswith("No question with enough trials")


def test_conduct_sr_writes_and_checks_its_own_draft_even_when_a_review_covers_the_question():
    checked = {"pico_done": True, "sr_checked": True}
    # a prior-review check (seek_gap) left a result on the question: the draft is still written and checked
    first = decide(state("conduct_SR", [question(TOPIC, 40, "covered", prisma_checked="prior_sr", **checked)]))
    assert (first.tool, first.args) == ("prisma_check", {"question_id": TOPIC})
    passed = decide(state("conduct_SR", [question(TOPIC, 40, "covered", prisma_checked="draft",
                                                  PRISMA_compliant=True, **checked)]))  # fmt: skip
    assert passed.tool == "update_goal" and passed.args == {"changes": {"questions_done": [TOPIC]}}
    failed = decide(state("conduct_SR", [question(TOPIC, 40, "gap", prisma_checked="draft",
                                                  PRISMA_compliant=False, **checked)]))  # fmt: skip
    assert failed.tool == "update_goal" and failed.args == {"changes": {"status": "stopped"}}
    assert "checklist" in failed.reasoning[-1]


def test_without_questions_the_rules_stop_and_say_why():
    none = {**state("seek_gap", []), "questions": None, "questions_note": "the handbook has no Seed_query"}
    stop = decide(none)
    assert stop.args == {"changes": {"status": "stopped"}} and "no Seed_query" in stop.reasoning[0]
