"""RulesBrain: a deterministic, clearly labelled policy that follows the handbook when no LLM runs.

It reads the same prompt the LLM reads (the `<state>` JSON block the cycle puts at
the end of every user message) and answers like an LLM would: a few lines of
reasoning and one `Action:` block. Its rules use real fields only (the handbook's
review questions with their studies, verdicts and covering reviews, what the goal
checked of them, the PRISMA result); it never invents content.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ra_agent.llm.protocol import action_form

STATE_RE = re.compile(r"<state>\s*(\{.*\})\s*</state>", re.S)
RULES_BRAIN_NAME = "rules:handbook-policy-v1"


def read_state(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The `<state>` JSON of the last user message that has one."""
    for message in reversed(messages):
        if message.get("role") == "user":
            match = STATE_RE.search(message.get("content", ""))
            if match:
                return json.loads(match.group(1))
    raise ValueError("RulesBrain: the prompt carries no <state> block")


@dataclass(frozen=True)
class Decision:
    reasoning: list[str]
    tool: str | None = None
    args: dict[str, Any] | None = None

    def reply(self) -> str:
        lines = [f"[{RULES_BRAIN_NAME}] deterministic rule-based brain (no LLM)."]
        lines += [f"- {r}" for r in self.reasoning]
        if self.tool is None:
            return "\n".join(lines)
        action = json.dumps({"tool": self.tool, "args": self.args or {}}, ensure_ascii=False)
        return "\n".join([*lines, f"Action: {action}"])


class RulesBrain:
    """The rule-based brain; `name` is written into every log, history entry and report."""

    name = RULES_BRAIN_NAME

    def label(self) -> str:
        return f"{self.name} (deterministic rules, no LLM)"

    def chat(self, messages: list[dict[str, str]]) -> str:
        if _is_repair_request(messages):
            # the rules never emit malformed JSON, but answer a repair turn with the last action verbatim
            return _last_action_json(messages)
        state = read_state(messages)
        task = state.get("task", "cycle")
        if task == "boundary_judge":
            return self._judge_boundary(state)
        if task == "confirm":
            return self._confirm(state)
        return without_ended(state, without_noop(state, decide(state))).reply()

    # -- auxiliary prompts (expansion boundary judge, run_pico confirmation)
    def _judge_boundary(self, state: dict[str, Any]) -> str:
        """Keep candidates whose cosine to the cluster centroid clears the configured gate."""
        gate = state["keep_if_cosine_at_least"]
        keep = [c["pmid"] for c in state["candidates"] if c["cosine"] >= gate]
        return (
            f"[{self.name}] keep candidates with cosine >= {gate} to the frozen centroid.\n"
            f"Action: {json.dumps({'tool': 'judge_boundary', 'args': {'keep_pmids': keep}})}"
        )

    def _confirm(self, state: dict[str, Any]) -> str:
        size, limit = state["size"], state["limit"]
        yes = size <= 2 * limit  # the rules accept up to twice the guard, never more
        return f"[{self.name}] {'yes' if yes else 'no'}: {size} abstracts against a guard of {limit}."


def _is_repair_request(messages: list[dict[str, str]]) -> bool:
    last = messages[-1] if messages else {}
    return last.get("role") == "user" and "FIX JSON ONLY" in last.get("content", "")


def _last_action_json(messages: list[dict[str, str]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "assistant" and "Action:" in message.get("content", ""):
            return message["content"].rsplit("Action:", 1)[1].strip()
    return "{}"


def without_noop(state: dict[str, Any], decision: Decision) -> Decision:
    """Guard over `decide`: never repeat a no-op. An update_goal whose changes all equal the goal's current
    values, or a repeat of the goal's last tool call with the same arguments while the last results show
    nothing new, becomes a stop with the reason in the reasoning."""
    if decision.tool is None:
        return decision
    goal = state.get("goal", {})
    changes = (decision.args or {}).get("changes", {}) if decision.tool == "update_goal" else None
    if changes is not None and changes and all(goal.get(k) == v for k, v in changes.items()):
        why = f"update_goal {json.dumps(changes)} would change nothing (the goal already holds these values)."
    else:
        calls = [h for h in state.get("last_results", []) if h.get("event") == "tool_call"]
        last = calls[-1] if calls else None
        repeat = last is not None and last.get("tool") == decision.tool and last.get("args") == decision.args
        if not repeat or (state.get("last_results") or [None])[-1] is not last:
            return decision  # different action, or a stage has reported back since the last call
        why = f"{decision.tool} {json.dumps(decision.args)} is the last call again with nothing new since."
    if changes == {"status": "stopped"}:
        return decision
    return Decision([*decision.reasoning, why, "Rule: never repeat a no-op; stop the goal."], "update_goal",
                    {"changes": {"status": "stopped"}})  # fmt: skip


def _ended_forms(state: dict[str, Any]) -> dict[str, str]:
    """The action forms the loop guard ended (rejected twice in the same form) → the stated reason."""
    return {e["form"]: e.get("reason", "") for e in state.get("ended_lines", []) if e.get("form")}


def without_ended(state: dict[str, Any], decision: Decision) -> Decision:
    """Guard over `decide`: never propose an action whose line the loop guard ended; stop with its reason."""
    ended = _ended_forms(state)
    form = action_form(decision.tool, decision.args or {}) if decision.tool else None
    if form is None or form not in ended:
        return decision
    return Decision([*decision.reasoning, f"{decision.tool} in this form was ended by the loop guard: {ended[form]}",
                     "Rule: never propose an ended line of action again; stop the goal."], "update_goal",
                    {"changes": {"status": "stopped"}})  # fmt: skip


def _allowed(state: dict[str, Any], tool: str) -> bool:
    return tool in state["handbook"]["tools_allowed"]


def _conduct_sr(state: dict[str, Any]) -> bool:
    return state["goal"].get("primary_goal") == "conduct_SR"


def _stop(reasons: list[str]) -> Decision:
    return Decision(reasons, "update_goal", {"changes": {"status": "stopped"}})


def _done(state: dict[str, Any], reasons: list[str], *question_ids: str) -> Decision:
    """Finish with questions (any outcome) and go on with the next."""
    done = list(dict.fromkeys([*state["goal"].get("questions_done", []), *question_ids]))
    return Decision(reasons, "update_goal", {"changes": {"questions_done": done}})


def _nothing_left(questions: list[dict[str, Any]], min_trials: int) -> Decision:
    """Stop when no question is left, saying which way the questions ended."""
    scoped = [q for q in questions if q["in_scope"]]
    enough = [q for q in scoped if q["studies"] >= min_trials]
    if not enough:
        top = questions[0]
        return _stop([f"No question with enough trials: the topic's question ({top['in_words']}) has "
                      f"{top['studies']} studies, every in-scope question fewer than {min_trials}."])  # fmt: skip
    covered = sum(q["verdict"].startswith("covered") for q in enough)
    return _stop([f"No question is left to examine: {len(enough)} in-scope questions with enough trials were "
                  f"examined ({covered} covered by a review), {len(scoped) - len(enough)} had too few trials."])  # fmt: skip


def decide(state: dict[str, Any]) -> Decision:
    """The policy, by the handbook's review questions (the same set `ra questions` prints): search the seed query;
    take the question in focus, else the topic's question, then the in-scope narrower questions by studies; skip
    one with fewer studies than [sr] min_eligible_trials; run_pico, find_existing_sr and prisma_check on it; pivot
    when a review covers it; stop when no question is left (Success stops the goal before, in the executor)."""
    goal, handbook = state["goal"], state["handbook"]
    searched = {s["query"].strip().lower() for s in state.get("searches", [])}
    seed = (handbook.get("seed_query") or "").strip()
    if seed and seed.lower() not in searched and _allowed(state, "search_pubmed"):
        return Decision([f"The seed query {seed!r} has not been searched yet."], "search_pubmed", {"query": seed})
    for query in goal.get("pending_queries", []):
        if query.strip().lower() not in searched and _allowed(state, "search_pubmed"):
            return Decision([f"The alternative theme {query!r} has not been searched yet."], "search_pubmed",
                            {"query": query})  # fmt: skip
    questions = state.get("questions")
    if questions is None:
        return _stop([f"No review question to work on: {state.get('questions_note') or 'none judged'}."])
    min_trials = state["thresholds"]["min_eligible_trials"]
    open_questions = [q for q in questions if q["in_scope"] and not q["done"]]
    if not open_questions:
        return _nothing_left(questions, min_trials)
    focus = next((q for q in open_questions if q["focus"]), open_questions[0])
    qid = focus["question_id"]
    which = "the topic's question" if qid == questions[0]["question_id"] else "the next in-scope question"
    why = (f"Question {qid} ({focus['in_words']}: {focus['studies']} studies, {focus['reports']} reports; "
           f"{focus['verdict']}) is {which}.")  # fmt: skip
    if focus["studies"] < min_trials:  # skip it with every other open question that has too few
        few = [q["question_id"] for q in open_questions if q["studies"] < min_trials]
        return _done(state, [why, f"Only {focus['studies']} studies (< {min_trials}): too few trials for a review; "
                     f"skip it{f' and {len(few) - 1} more with too few' if len(few) > 1 else ''}."], *few)  # fmt: skip
    if not focus["pico_done"] and _allowed(state, "run_pico"):
        return Decision([why, "Its studies' PICO fields are not extracted yet."], "run_pico", {"question_id": qid})
    if not focus["sr_checked"] and _allowed(state, "find_existing_sr"):
        return Decision([why, "Check which reviews answer it and whether one covers it."], "find_existing_sr",
                        {"question_id": qid})  # fmt: skip
    if _conduct_sr(state):
        return _conduct_sr_step(state, focus, why)
    if focus["prisma_checked"] is None and _allowed(state, "prisma_check"):
        what = (f"check whether its covering review ({focus['covering']}) reports PRISMA items 4-8" if focus["covering"]
                else "no review covers it: record that no compliant review exists")  # fmt: skip
        return Decision([why, f"{what[:1].upper()}{what[1:]}."], "prisma_check", {"question_id": qid})
    covered = focus["verdict"].startswith("covered")
    open_below = any(q["parent"] == qid and q["verdict"] == "gap" for q in open_questions)
    spawned = any(q["alternative_proposed"] for q in questions)  # one new goal per goal: the first covered question's
    if (
        covered
        and not focus["alternative_tried"]
        and (open_below or not spawned)
        and _allowed(state, "propose_alternative_pico")
    ):
        return Decision([why, f"A review covers it ({focus['covering']}): pivot to a narrower question it leaves "
                         "open, or to the trials it leaves out."], "propose_alternative_pico", {"question_id": qid})  # fmt: skip
    if covered and spawned:
        return _done(state, [why, f"A review covers it ({focus['covering']}); this goal already pivoted to a new "
                     "goal, so go on with the next question."], qid)  # fmt: skip
    if goal.get("primary_goal") == "seek_gap" and handbook.get("primary_goal") == "conduct_SR" and not covered:
        return Decision([why, "The handbook asks for a full review of this gap."], "update_goal",
                        {"changes": {"primary_goal": "conduct_SR", "question_id": qid}})  # fmt: skip
    return _done(state, [why, "Every check the handbook names has run for it and Success does not hold; go on "
                 "with the next question."], qid)  # fmt: skip


def _conduct_sr_step(state: dict[str, Any], focus: dict[str, Any], why: str) -> Decision:
    """conduct_SR: ra's own draft of the question is written and judged by prisma_check (which fills what it can); a
    draft that passes leaves the decision to the success test, one that still misses items stops the goal."""
    qid = focus["question_id"]
    if focus["prisma_checked"] != "draft" and _allowed(state, "prisma_check"):
        return Decision([why, "Write the SR draft of this question (PICO table, PRISMA flow diagram, checklist) and "
                         "check it against PRISMA 2020 items 4-8."], "prisma_check", {"question_id": qid})  # fmt: skip
    if focus["PRISMA_compliant"] is False:
        return _stop([why, "The SR draft still misses PRISMA items after its missing items were filled from the "
                      "data; stop with the draft and its checklist for a human reviewer."])  # fmt: skip
    return _done(state, [why, "The SR draft is written and checked; Success does not hold for this question."], qid)
