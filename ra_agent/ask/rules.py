"""The rule-based ask planner: an honest keyword policy over the tools, used when no LLM answers."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ra_agent.ask.mindkb import (
    canonical_json,
)
from ra_agent.ask.tools import FINALIZE_TAG, NO_SUPPORT, clip, content_words, keyword_variant, overlap, sentences
from ra_agent.config import Config
from ra_agent.llm.base import Message
from ra_agent.llm.protocol import (
    REPAIR_PROMPT,
    NoAction,
    ParsedAction,
    parse_action,
)

log = logging.getLogger(__name__)

RULES_ASK_NAME = "rules:ask-v1"
_BUDGET_RE = re.compile(r'<budget tool_calls_left="(\d+)"/>')
_QUESTION_RE = re.compile(r"<question>(.*?)</question>", re.S)
_RESULT_RE = re.compile(r'<tool_result tool="([a-z_]+)" call="\d+">(.*?)</tool_result>', re.S)


# ---------------------------------------------------------------------------- the rules planner


class AskRulesBrain:
    """Deterministic planner (no LLM): search, read the top hits, answer with the abstracts' best-matching sentences.

    It reads the same conversation an LLM reads: the `<question>`, the `<tool_result>` blocks and the
    `<budget>` tag. Its answers quote the corpus; when the best cosine is below [ask] support_floor it
    says the corpus holds no support.
    """

    name = RULES_ASK_NAME

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def label(self) -> str:
        return f"{self.name} (deterministic extractive planner, no LLM)"

    def chat(self, messages: list[Message]) -> str:
        last = messages[-1]["content"] if messages else ""
        if last.startswith(REPAIR_PROMPT):
            action = parse_action(messages[-2]["content"]) if len(messages) > 1 else NoAction()
            return (
                canonical_json({"tool": action.tool, "args": action.args}) if isinstance(action, ParsedAction) else "{}"
            )
        question = next((m.group(1) for msg in messages if (m := _QUESTION_RE.search(msg["content"]))), "")
        results = [
            (t, json.loads(body))
            for msg in messages
            if msg["role"] == "user"
            for t, body in _RESULT_RE.findall(msg["content"])
        ]
        budgets = _BUDGET_RE.findall(last)
        left = int(budgets[-1]) if budgets else 0
        if FINALIZE_TAG in last or left == 0:
            return self._answer(question, results)
        searches = [r for t, r in results if t == "find_similar"]
        if not searches:
            queries = [question]
            variant = keyword_variant(question)
            if variant and variant.lower() != question.lower().strip(" ?"):
                queries.append(variant)
            return self._act(["no search yet: search the index with the question and its keywords"],
                             "find_similar", {"queries": queries[: self.cfg.ask.max_queries]})  # fmt: skip
        hits = searches[-1].get("data", []) if searches[-1].get("ok") else []
        if not hits or max(h["score"] for h in hits) < self.cfg.ask.support_floor:
            return self._answer(question, results)
        read = {r["meta"]["pmid"] for t, r in results if t == "read_note" and r.get("ok")}
        todo = [h["pmid"] for h in hits[: self.cfg.ask.rules_read_top] if h["pmid"] not in read]
        if todo:
            return self._act([f"read the top hit PMID {todo[0]} in full"], "read_note", {"pmid": todo[0]})
        return self._answer(question, results)

    def _act(self, reasons: list[str], tool: str, args: dict[str, Any]) -> str:
        lines = [f"[{self.name}] deterministic rule-based planner (no LLM).", *(f"- {r}" for r in reasons)]
        return "\n".join([*lines, f"Action: {canonical_json({'tool': tool, 'args': args})}"])

    def _answer(self, question: str, results: list[tuple[str, dict[str, Any]]]) -> str:
        searches = [r for t, r in results if t == "find_similar"]
        last = searches[-1] if searches else {}
        if not last.get("ok"):
            why = last.get("error", "the index was not searched")
            return f"Final answer:\n{NO_SUPPORT} The corpus could not be searched: {why}"
        hits = last.get("data", [])
        floor = self.cfg.ask.support_floor
        if not hits:
            return f"Final answer:\n{NO_SUPPORT} The search returned no paper."
        top = max(hits, key=lambda h: h["score"])
        if top["score"] < floor:
            return (
                f"Final answer:\n{NO_SUPPORT} The closest paper, PMID {top['pmid']} ({clip(top['title'], 120)}), "
                f"has cosine {top['score']:.2f} with the question, below the support floor {floor:.2f}."
            )
        notes = [r for t, r in results if t == "read_note" and r.get("ok")]
        source = {h["pmid"]: (h.get("design", ""), h.get("year")) for h in hits}
        source.update({n["meta"]["pmid"]: (n["meta"].get("design", ""), n["meta"].get("year")) for n in notes})
        texts = [(n["meta"]["pmid"], n["text"]) for n in notes] or [(h["pmid"], h["snippet"]) for h in hits[:2]]
        terms = set(content_words(question))
        scored = [
            (overlap(s, terms), bool(_RESULT.search(s)), -rank, -pos, s, pmid)
            for rank, (pmid, text) in enumerate(texts)
            for pos, s in enumerate(sentences(text))
            if len(s) >= 20
        ]
        ranked = sorted((x for x in scored if x[0] > 0), reverse=True)
        firsts: dict[int, tuple] = {}  # each paper's best sentence goes in before any paper's second one
        for x in ranked:
            firsts.setdefault(x[5], x)
        rest = [x for x in ranked if x not in firsts.values()]
        picked = sorted([*firsts.values(), *rest][: self.cfg.ask.rules_answer_sentences], key=lambda x: x[2:4],
                        reverse=True)  # fmt: skip
        if not picked:  # no shared word: each paper's closing (usually concluding) sentence
            closing = {x[5]: x for x in sorted(scored, key=lambda x: (x[2], x[3]), reverse=True)}
            picked = list(closing.values())[: self.cfg.ask.rules_answer_sentences]
        lines = [f'- {_source(*source.get(pmid, ("", None)))} [PMID:{pmid}]: "{s}"' for *_, s, pmid in picked]
        head = (f"Extractive answer ({self.name}, no LLM): the abstract sentences that share the most words with the "
                "question, from the sources read in evidence order (systematic reviews and randomised trials first; "
                "for a comparison, trials naming both treatments).")  # fmt: skip
        return "Final answer:\n" + "\n".join([head, *lines])


# A sentence that reports a result (a figure, a significance statement): preferred among equally matching ones.
_RESULT = re.compile(r"\d|signific|\bP\s*[<=>]|\bCI\b", re.I)


def _source(design: str, year: int | None) -> str:
    """ "RCT, 2001": a cited source's design (ra's PICO rules) and year."""
    return f"{design or 'design not stated'}, {year or 'n.d.'}"
