"""What a goal knows of its handbook's review questions: the stored `QuestionSet` as the goal sees it (each question
with what this goal did to it), the metrics a Success expression reads of a question, the questions that meet it,
and the goal's answer in plain words.

A question's studies, counts and verdict are its set's, never recomputed here. What the goal adds is what it
measured itself: sr_overlap and trials_since_review once it called find_existing_sr on the question, PRISMA_compliant
once it called prisma_check on it (`PrismaResult.compliance`: false when no review covers the question, unknown
while the covering review could be read in its abstract only). eligible_trials (the question's studies) and
newest_trial are known from the set.
"""

from __future__ import annotations

from typing import Any

from ra_agent.agent.goal import GoalState
from ra_agent.agent.handbook import Handbook, recorded_handbook
from ra_agent.agent.stages import StageRequest
from ra_agent.config import Config
from ra_agent.evidence.questions.dossier import plain_verdict
from ra_agent.evidence.questions.question_set import QuestionSet
from ra_agent.store.db import Store

QUESTION_TOOLS = ("run_pico", "find_existing_sr", "prisma_check", "propose_alternative_pico")
SUCCESS_KEYS = ("eligible_trials", "sr_overlap", "PRISMA_compliant", "newest_trial", "trials_since_review")
NO_QUESTION = "no question with enough trials"


def questions_request(cfg: Config, handbook: Handbook, reason: str) -> list[StageRequest]:
    """The stage that (re)computes the handbook's questions (the review_questions asset of its key); none for a
    handbook without a seed query (it has no question)."""
    from ra_agent.agent.questions import register_handbook

    if not handbook.seed_query:
        return []
    return [StageRequest("questions", register_handbook(cfg, handbook.path), reason)]


def seed_searched(state: GoalState, handbook: Handbook) -> bool:
    """Whether the goal has searched its handbook's seed query: its questions are judged over what that brought in,
    so the cycle waits for them only from then on."""
    seed = " ".join((handbook.seed_query or "").lower().split())
    return any(" ".join(str((h.get("args") or {}).get("query", "")).lower().split()) == seed
               for h in state.events("tool_call") if h.get("tool") == "search_pubmed")  # fmt: skip


def goal_question_set(
    cfg: Config, store: Store, state: GoalState, handbook: Handbook
) -> tuple[QuestionSet | None, str]:
    """(the handbook's current set, "") or (None, why there is none now: "stale" when it must be computed first, else
    the handbook's problem in one line)."""
    from ra_agent.agent.questions import current_question_set, handbook_topic

    if not handbook.seed_query:
        return None, "the handbook has no Seed_query: no review question"
    try:
        handbook_topic(handbook.path)
        qset = current_question_set(cfg, store, handbook.path)
    except (OSError, ValueError) as exc:  # HandbookError, QuestionSetError: one line naming the file
        return None, str(exc)
    return (qset, "") if qset is not None else (None, "stale")


def goal_calls(state: GoalState, *, failed: bool = False) -> dict[str, list[str]]:
    """Tool -> the question ids this goal called it on, in order (calls that returned an error left out unless
    `failed`)."""
    calls: dict[str, list[str]] = {tool: [] for tool in QUESTION_TOOLS}
    for h in state.events("tool_call"):
        qid = (h.get("args") or {}).get("question_id")
        if h.get("tool") in calls and qid and (failed or "error" not in (h.get("result") or {})):
            calls[h["tool"]].append(qid)
    return calls


def covering_pmids(cfg: Config, question) -> list[int]:
    """The reviews that cover a question: those answering it that could include at least [sr] sr_overlap_pivot of
    its studies, best match first (the covering review first)."""
    if question.covering is None:
        return []
    return [r.pmid for r in question.reviews if r.share >= cfg.sr.sr_overlap_pivot]


def question_entries(cfg: Config, state: GoalState, qset: QuestionSet) -> list[dict[str, Any]]:
    """Each question of the set as the goal's state shows it (the prompt, the rules brain, Success), in the set's
    order (the topic's question, then in-scope narrower questions by studies)."""
    from ra_agent.evidence.prisma.store import load_prisma
    from ra_agent.topics.view import pico_path

    calls, tried = goal_calls(state), goal_calls(state, failed=True)
    entries = []
    for q in qset.questions:
        measured = q.id in calls["find_existing_sr"]
        prisma = load_prisma(cfg, q.id) if q.id in calls["prisma_check"] else None
        m = q.metrics
        entries.append({
            "question_id": q.id, "in_words": q.in_words, "in_scope": q.in_scope, "parent": q.parent,
            "studies": len(q.studies), "reports": len(q.trials), "verdict": q.verdict,
            "covering": f"PMID {q.covering.pmid} ({q.covering.year})" if q.covering else None,
            "covering_pmids": covering_pmids(cfg, q)[:20],
            "trials_since": len(q.trials_since) if q.covering else None,
            "eligible_trials": len(q.studies), "newest_trial": m["newest_trial"],
            "sr_overlap": m["sr_overlap"] if measured else None,
            "trials_since_review": m["trials_since_review"] if measured else None,
            "PRISMA_compliant": prisma.compliance if prisma is not None else None,
            "prisma_checked": prisma.source if prisma is not None else None,
            "pico_done": q.id in calls["run_pico"] and pico_path(cfg, q.id).exists(),
            "sr_checked": measured,
            "alternative_proposed": q.id in calls["propose_alternative_pico"],
            "alternative_tried": q.id in tried["propose_alternative_pico"],
            "done": q.id in state.questions_done,
            "focus": q.id == state.question_id,
        })  # fmt: skip
    return entries


def question_metrics(entry: dict[str, Any]) -> dict[str, Any]:
    """The metrics a Success expression reads of one question entry (`question_entries`)."""
    return {k: entry.get(k) for k in SUCCESS_KEYS}


def successful_questions(handbook: Handbook, questions: list[dict[str, Any]], min_trials: int) -> list[str]:
    """The in-scope questions that meet Success, in the set's order; never one with fewer studies than [sr]
    min_eligible_trials (whatever the expression says: "too few trials" for a review, covered or not)."""
    return [q["question_id"] for q in questions if q["in_scope"] and q["studies"] >= min_trials
            and q["verdict"] != "too few trials" and handbook.success_met(question_metrics(q))]  # fmt: skip


def goal_answer(cfg: Config, state: GoalState) -> str:
    """The goal's answer in plain words (the closing block, `ra status`): each question that met Success
    (`plain_verdict`), else the covered questions it pivoted from, else "no question with enough trials" when no
    in-scope question has them, else why it stopped."""
    from ra_agent.agent.questions import handbook_key, questions_root
    from ra_agent.evidence.questions.question_set import QuestionSetError, read_question_set

    try:
        qset = read_question_set(questions_root(cfg), handbook_key(cfg, recorded_handbook(cfg, state.handbook_path)))
    except QuestionSetError:
        qset = None
    if qset is None:
        return state.stop_reason() or state.status
    by_id = {q.id: q for q in qset.questions}
    named = [by_id[q] for q in state.success_questions if q in by_id]
    if not named:
        pivoted = goal_calls(state)["propose_alternative_pico"] + goal_calls(state)["find_existing_sr"]
        named = [by_id[q] for q in dict.fromkeys(pivoted) if q in by_id and by_id[q].verdict.startswith("covered")]
    if named:
        return "; ".join(plain_verdict(q) for q in (named if state.success_questions else named[:1]))
    if not any(q.in_scope and q.verdict != "too few trials" for q in qset.questions):
        return f"{NO_QUESTION} ({qset.topic_question.in_words}: {len(qset.topic_question.studies)} studies)"
    return state.stop_reason() or state.status
