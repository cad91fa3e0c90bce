"""The expansion boundary judge (docs/architecture.md): its prompt, its Action vocabulary and the checked verdict."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ra_agent.llm.base import BrainError, ReplySchema
from ra_agent.llm.protocol import (
    ActionError,
    ArgSpec,
    ParsedAction,
    ToolSpec,
    ValidAction,
    check_call,
    parse_with_repair,
    repair_asker,
)

log = logging.getLogger(__name__)

# The boundary judge answers with its own Action vocabulary.
BOUNDARY_SPECS = {
    "judge_boundary": ToolSpec(
        "judge_boundary",
        {"keep_pmids": ArgSpec("list[int]", required=True, minimum=1)},
        "Keep these candidate PMIDs in the cluster.",
        kind="aux",
    )
}
JUDGE_SYSTEM = (
    "You are the boundary judge of a topic cluster of biomedical papers. Keep a candidate only when it studies "
    "the cluster's topic (same population, intervention and question); reject off-topic or loosely related papers."
)


# ----------------------------------------------------------------------------- the boundary judge


@dataclass(frozen=True)
class Candidate:
    pmid: int
    title: str
    cosine: float
    abstract: str = ""  # already cut to [tokens] judge_abstract_tokens


@dataclass(frozen=True)
class Verdict:
    """The judge's keep list (restricted to the candidates shown) and what went wrong, if anything."""

    keep: list[int]
    error: str = ""
    ignored: list[int] = field(default_factory=list)  # PMIDs the judge named that were not shown


def judge_prompt(label: str, candidates: Sequence[Candidate], keep_hint: float) -> list[dict[str, str]]:
    """The boundary prompt: the cluster label, candidate titles with cosines, and the `<state>` block."""
    state = {
        "task": "boundary_judge",
        "cluster_label": label,
        "candidates": [{"pmid": c.pmid, "title": c.title, "cosine": round(c.cosine, 4)} for c in candidates],
        "keep_if_cosine_at_least": keep_hint,
    }
    listing = "\n".join(
        f"- PMID {c.pmid} (cosine {c.cosine:.3f}): {c.title}" + (f"\n  Abstract: {c.abstract}" if c.abstract else "")
        for c in candidates
    )
    user = (
        f"Cluster: {label}\n\nCandidates (cosine to the cluster centroid; as a rough guide, candidates below "
        f"{keep_hint} are usually off-topic):\n{listing}\n\n"
        "Give a short reason, then end with exactly one line:\n"
        'Action: {"tool": "judge_boundary", "args": {"keep_pmids": [PMIDs to keep]}}\n\n'
        f"<state>{json.dumps(state, ensure_ascii=False)}</state>"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def judge_schema(candidates: Sequence[Candidate]) -> ReplySchema:
    """The judge's reply as a schema: a reason, then judge_boundary keeping PMIDs from those shown (none is fine)."""
    from ra_agent.llm.structured import REASONING_CHARS

    pmids = sorted({c.pmid for c in candidates})
    keep = (
        {"type": "array", "items": {"enum": pmids}, "maxItems": len(pmids)}
        if pmids
        else {"type": "array", "maxItems": 0}
    )
    args = {
        "type": "object",
        "properties": {"keep_pmids": keep},
        "required": ["keep_pmids"],
        "additionalProperties": False,
    }
    action = {"type": "object", "properties": {"tool": {"enum": ["judge_boundary"]}, "args": args},
              "required": ["tool", "args"], "additionalProperties": False}  # fmt: skip
    reply = {"type": "object", "properties": {"reasoning": {"type": "string", "minLength": 1, "maxLength": REASONING_CHARS},
             "action": action}, "required": ["reasoning", "action"], "additionalProperties": False}  # fmt: skip
    return ReplySchema("boundary_judge", reply)


def ask_judge(judge: Any, label: str, candidates: Sequence[Candidate], keep_hint: float) -> Verdict:
    """One judge_boundary round: prompt, parse the Action (one repair turn), validate, keep only shown PMIDs.

    An empty keep list is a valid answer (zero kept). An unusable answer keeps nothing: no paper is
    admitted without the judge's approval.
    """
    from ra_agent.llm.structured import action_reply_text, ask_structured

    messages = judge_prompt(label, candidates, keep_hint)
    try:
        asked = ask_structured(judge, messages, judge_schema(candidates))
        reply = action_reply_text(asked.text) if asked.mode == "json_schema" else asked.text
        log.info("boundary judge %s: %s", judge.name, asked.note())
        parsed = parse_with_repair(reply, repair_asker(judge, messages, reply))
    except BrainError as exc:
        log.error("boundary judge %s unavailable: %s; nothing kept", judge.name, exc)
        return Verdict([], f"brain_error: {exc}")
    if isinstance(parsed, ParsedAction) and parsed.tool == "judge_boundary" and parsed.args.get("keep_pmids") == []:
        return Verdict([])
    valid = check_call(parsed, BOUNDARY_SPECS, ()) if isinstance(parsed, ParsedAction) else parsed
    if not isinstance(valid, ValidAction):
        why = f"{valid.kind}: {valid.message}" if isinstance(valid, ActionError) else f"no_action: {valid.reason}"
        log.warning("boundary judge %s: unusable reply (%s); nothing kept", judge.name, why)
        return Verdict([], why)
    shown = {c.pmid for c in candidates}
    named = list(dict.fromkeys(int(p) for p in valid.args["keep_pmids"]))
    ignored = [p for p in named if p not in shown]
    if ignored:
        log.warning("boundary judge %s named %d PMIDs it was not shown (ignored): %s", judge.name, len(ignored),
                    ignored[:10])  # fmt: skip
    return Verdict([p for p in named if p in shown], ignored=ignored)
