"""RulesBrain: a deterministic, clearly labelled policy that follows the handbook when no LLM runs.

It reads the same prompt the LLM reads (the `<state>` JSON block the cycle puts at
the end of every user message) and answers like an LLM would: a few lines of
reasoning and one `Action:` block. Its rules use real fields only (cluster
metrics, publication-type and abstract-cue trial counts, PICO eligibility, SR
overlap, PRISMA result); it never invents content.
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


def _ranked_clusters(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Open clusters, most promising first: most trials among the goal's own search hits (on-topic trials), then
    most search hits, then most trial candidates, then recency (ERS), then size; only the goal's own clusters
    (older prompts carry no flag). For conduct_SR a cluster covered by prior reviews stays open (the review cites them rather than
    abandoning the topic)."""
    open_clusters = [c for c in state["clusters"] if not c.get("rejected") and c.get("owned", True)
                     and (_conduct_sr(state) or not c.get("covered_by_sr"))]  # fmt: skip
    return sorted(
        open_clusters,
        key=lambda c: (-(c.get("hit_trials") or 0), -(c.get("search_hits") or 0), -(c.get("trial_candidates") or 0),
                       -(c.get("ers") or 0.0), -c["size"], c["cluster_id"]),
    )  # fmt: skip


def decide(state: dict[str, Any]) -> Decision:
    """The policy: search the seed query, run PICO on the most promising cluster, check for an
    existing SR, pivot when one covers the topic, check PRISMA for conduct_SR, stop when done."""
    goal, handbook = state["goal"], state["handbook"]
    searched = {s["query"].strip().lower() for s in state.get("searches", [])}
    seed = (handbook.get("seed_query") or "").strip()
    if seed and seed.lower() not in searched and _allowed(state, "search_pubmed"):
        return Decision([f"The seed query {seed!r} has not been searched yet."], "search_pubmed", {"query": seed})
    for query in goal.get("pending_queries", []):
        if query.strip().lower() not in searched and _allowed(state, "search_pubmed"):
            return Decision([f"The alternative theme {query!r} has not been searched yet."], "search_pubmed",
                            {"query": query})  # fmt: skip

    min_trials = state["thresholds"]["min_eligible_trials"]
    pivot_at = state["thresholds"]["sr_overlap_pivot"]
    for covered in state["clusters"]:
        if covered.get("covered_by_sr") and not covered.get("alternative_proposed") and not covered.get("rejected"):
            # the covering reviews' PMIDs as the state lists them (integers only; the tool adds any left out)
            reviews = [p for p in covered.get("sr_pmids") or [] if isinstance(p, int) and not isinstance(p, bool)]
            pivot = {"exclude_pmids": reviews}
            if (reviews and _allowed(state, "propose_alternative_pico") and not _conduct_sr(state)
                    and action_form("propose_alternative_pico", pivot) not in _ended_forms(state)):  # fmt: skip
                return Decision(
                    [f"Cluster {covered['cluster_id']} ({covered['label']!r}) is covered by existing reviews "
                     f"(overlap {covered['sr_overlap']:.2f} > {pivot_at}).",
                     "Pivot: propose an alternative PICO from the papers those reviews leave out."],
                    "propose_alternative_pico", pivot,
                )  # fmt: skip
    ranked = _ranked_clusters(state)
    if not ranked:
        return Decision(
            ["No open cluster is left to examine (none formed, or all covered by existing reviews)."],
            "update_goal",
            {"changes": {"status": "stopped"}},
        )
    focus = next((c for c in ranked if c["cluster_id"] == goal.get("cluster_id")), ranked[0])
    cid = focus["cluster_id"]
    why = (
        f"Cluster {cid} ({focus['label']!r}, {focus['size']} papers, "
        f"{focus.get('search_hits') or 0} hits of this goal's searches, {focus.get('trial_candidates') or 0} trial "
        "candidates) is the most promising open cluster."
    )
    too_broad = focus.get("corpus_share", 0.0) > state["thresholds"]["rules_split_share"]
    splittable = focus["size"] >= state["thresholds"]["split_min_size"] and not focus.get("split_attempted")
    if (focus.get("unstable") or too_broad) and splittable:
        cause = (
            "it is flagged unstable (dispersion)"
            if focus.get("unstable")
            else (f"it holds {focus['corpus_share']:.0%} of the corpus, too broad to be one topic")
        )
        return Decision([why, f"Split it first: {cause}."], "split_cluster", {"cluster_id": cid})
    if not focus.get("pico_done") and _allowed(state, "run_pico"):
        return Decision([why, "Its PICO fields are not extracted yet."], "run_pico", {"cluster_id": cid})
    eligible = focus.get("eligible_trials") or 0
    if eligible < min_trials:
        return Decision(
            [why, f"Only {eligible} eligible trials (< {min_trials}); this cluster cannot meet the handbook."],
            "update_goal",
            {"changes": {"rejected_clusters": [*goal.get("rejected_clusters", []), cid]}},
        )
    if focus.get("sr_overlap") is None and _allowed(state, "find_existing_sr"):
        return Decision([why, f"{eligible} eligible trials; check whether a systematic review already covers it."],
                        "find_existing_sr", {"cluster_id": cid})  # fmt: skip
    if _conduct_sr(state):
        return _conduct_sr_step(state, focus, why)
    # seek_gap judges the covering reviews: a stored check of ra's own draft (conduct_SR) does not count
    prior_checked = focus.get("prisma_checked") in ("prior_sr", "none") or (
        "prisma_checked" not in focus and focus.get("PRISMA_compliant") is not None
    )
    if not prior_checked and _allowed(state, "prisma_check"):
        overlap = focus.get("sr_overlap") or 0.0
        return Decision([why, f"Existing reviews cover {overlap:.0%} of its eligible trials (≤ {pivot_at:.0%}); "
                         "check whether a covering review is PRISMA-compliant (items 4–8)."],
                        "prisma_check", {"cluster_id": cid})  # fmt: skip
    if goal.get("primary_goal") == "seek_gap" and handbook.get("primary_goal") == "conduct_SR":
        return Decision([why, "The handbook asks for a full review of this gap."], "update_goal",
                        {"changes": {"primary_goal": "conduct_SR", "cluster_id": cid}})  # fmt: skip
    return Decision(
        [why, "Every check the handbook names has run for this cluster; the success test decides now."],
        "update_goal",
        {"changes": {"cluster_id": cid}},
    )


def _conduct_sr_step(state: dict[str, Any], focus: dict[str, Any], why: str) -> Decision:
    """conduct_SR: ra's own draft is written and judged by prisma_check (which fills what it can); a draft
    that passes leaves the decision to the success test, one that still misses items stops the goal."""
    cid = focus["cluster_id"]
    if focus.get("prisma_checked") != "draft" and _allowed(state, "prisma_check"):
        return Decision([why, "Write the SR draft (PICO table, PRISMA flow diagram, checklist) and check it "
                         "against PRISMA 2020 items 4–8."], "prisma_check", {"cluster_id": cid})  # fmt: skip
    if focus.get("PRISMA_compliant") is False:
        return Decision([why, "The SR draft still misses PRISMA items after its missing items were filled from "
                         "the data; stop with the draft and its checklist for a human reviewer."],
                        "update_goal", {"changes": {"status": "stopped"}})  # fmt: skip
    return Decision([why, "The SR draft is written and passes the PRISMA check; the success test decides now."],
                    "update_goal", {"changes": {"cluster_id": cid}})  # fmt: skip
