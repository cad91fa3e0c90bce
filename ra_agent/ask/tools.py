"""The ask flow's tools (seed 001): find_similar (MMR over the vector index), read_note, their schemas and result summaries."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ra_agent.ask.evidence import comparison, design_label, evidence_score
from ra_agent.ask.mindkb import (
    canonical_json,
)
from ra_agent.config import Config
from ra_agent.embed.embedder import Embedder
from ra_agent.embed.tokens import count_tokens, encoder_for, truncate_tokens
from ra_agent.hardware import ram_low
from ra_agent.llm.protocol import (
    ActionError,
    ArgSpec,
    NoAction,
    ParsedAction,
    ToolSpec,
    ValidAction,
    check_call,
)
from ra_agent.models import Paper
from ra_agent.store.ann import search as ann_search
from ra_agent.store.db import Store
from ra_agent.store.vectors import VectorStore, open_active

log = logging.getLogger(__name__)

NO_SUPPORT = "The local corpus holds no support for this question."


FINALIZE_TAG = "<finalize"


_FILTER_TYPES: dict[str, type] = {"year_from": int, "year_to": int, "article_type": str}

READ_NOTE_HARD_MAX = 20000  # characters, whatever max_chars the planner asks for
_WORD_RE = re.compile(r"[a-z0-9][a-z0-9\-]+")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below between
    both but by can could did do does doing down during each effect effects few for from further had has have having
    he her here hers how i if in into is it its itself just me more most my no nor not now of off on once only or
    other our out over own same she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why will with would you your
    versus vs compared patients patient study studies use used using""".split()
)


# ---------------------------------------------------------------------------- text helpers


def content_words(text: str) -> list[str]:
    """Lower-case content words of `text` (stop words dropped, plural -s folded), in order, deduplicated."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(text.lower()):
        if word in STOPWORDS or len(word) < 3 or word.isdigit():
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        seen.setdefault(word, None)
    return list(seen)


def sentences(text: str) -> list[str]:
    """Sentences of an abstract (split after . ! ? before a capital, digit or bracket)."""
    return [s.strip() for s in _SENTENCE_RE.split(text or "") if s.strip()]


def overlap(sentence: str, terms: set[str]) -> int:
    return len(terms.intersection(content_words(sentence)))


def clip(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most `limit` characters, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)].rsplit(" ", 1)[0]
    return cut + "…"


def best_sentence(text: str, terms: set[str], limit: int) -> str:
    """The sentence of `text` sharing the most terms (the first one on ties), clipped to `limit` characters."""
    parts = sentences(text)
    if not parts:
        return ""
    best = max(range(len(parts)), key=lambda i: (overlap(parts[i], terms), -i))
    return clip(parts[best], limit)


def keyword_variant(question: str) -> str:
    """The question's content words joined: a second, keyword-style query."""
    return " ".join(content_words(question))


# ---------------------------------------------------------------------------- the tools


def ask_specs(cfg: Config) -> dict[str, ToolSpec]:
    """find_similar and read_note as Action tools (kind "aux": not gated by [tools] switches)."""
    a = cfg.ask
    return {
        "find_similar": ToolSpec(
            "find_similar",
            {
                "queries": ArgSpec("str|list[str]", required=True, description=f"1-{a.max_queries} search queries"),
                "k": ArgSpec("int", default=a.k, minimum=1),
                "filter": ArgSpec("object"),
            },
            f"Nearest papers to 1-{a.max_queries} queries in the embedding index (MMR-diversified, k <= {a.max_k}; "
            "systematic reviews, randomised trials and, for 'A vs B', trials naming both come first); "
            "returns [{pmid, title, year, design, score, snippet}]. Optional filter keys: year_from, year_to (int), "
            'article_type (str, e.g. "Randomized Controlled Trial").',
            kind="aux",
        ),
        "read_note": ToolSpec(
            "read_note",
            {
                "pmid": ArgSpec("int", required=True, minimum=1),
                "max_chars": ArgSpec("int", default=a.read_note_chars, minimum=1),
            },
            "Read one paper of the corpus: title, abstract (clipped to max_chars) and metadata.",
            kind="aux",
        ),
    }


def _ask_arg_problem(action: ValidAction, cfg: Config) -> tuple[str, str] | None:
    """Limits the generic validator does not know: queries count, k ceiling, filter keys and types."""
    args = action.args
    if action.tool != "find_similar":
        return None
    queries = [args["queries"]] if isinstance(args["queries"], str) else args["queries"]
    if len(queries) > cfg.ask.max_queries:
        return "bad_arg", f"find_similar.queries takes at most {cfg.ask.max_queries} queries, got {len(queries)}"
    if args["k"] > cfg.ask.max_k:
        return "bad_arg", f"find_similar.k must be <= {cfg.ask.max_k}, got {args['k']}"
    for key, value in (args.get("filter") or {}).items():
        if key not in _FILTER_TYPES:
            return "extra_arg", f"find_similar.filter takes only {', '.join(_FILTER_TYPES)}, not {key!r}"
        wanted = _FILTER_TYPES[key]
        if value is not None and (not isinstance(value, wanted) or isinstance(value, bool)):
            return "bad_arg", f"find_similar.filter.{key} must be {wanted.__name__}, got {json.dumps(value)}"
    return None


def check_action(parsed: ParsedAction | NoAction | ActionError, cfg: Config) -> ValidAction | NoAction | ActionError:
    """Validate a parsed reply against the ask tools (generic schema, then the ask limits)."""
    if not isinstance(parsed, ParsedAction):
        return parsed
    checked = check_call(parsed, ask_specs(cfg), cfg.tools.allowed_hosts)
    if isinstance(checked, ValidAction):
        problem = _ask_arg_problem(checked, cfg)
        if problem:
            return ActionError(*problem, tool=checked.tool, raw=parsed.raw, repaired=parsed.repaired)
        if isinstance(checked.args.get("queries"), str):
            checked = replace(checked, args={**checked.args, "queries": [checked.args["queries"]]})
    return checked


def mmr_select(relevance: np.ndarray, vectors: np.ndarray, k: int, lam: float) -> list[int]:
    """Maximal marginal relevance: indices picked greedily by lam * relevance - (1 - lam) * max similarity to the picked."""
    n = len(relevance)
    picked: list[int] = []
    redundancy = np.full(n, -np.inf, dtype=np.float32)
    free = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        scores = np.where(free, lam * relevance - (1.0 - lam) * penalty, -np.inf)
        i = int(np.argmax(scores))
        picked.append(i)
        free[i] = False
        redundancy = np.maximum(redundancy, vectors @ vectors[i])
    return picked


@dataclass
class ToolRun:
    """One executed tool call: the full result, what the planner sees, the PMIDs it brought, its duration."""

    tool: str
    args: dict[str, Any]
    result: dict[str, Any]
    shown: dict[str, Any]
    pmids: list[int]
    took_ms: int

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))


class AskTools:
    """find_similar and read_note over one store, the active embedding index and an embedder."""

    def __init__(self, cfg: Config, store: Store, embedder: Embedder):
        self.cfg = cfg
        self.store = store
        self.embedder = embedder
        self.enc = encoder_for(cfg)
        self.result_tokens = cfg.ask.tool_result_tokens  # ask() lowers it so that every result fits the prompt budget
        self._vectors: VectorStore | None = None

    def vectors(self) -> VectorStore:
        if self._vectors is None:
            self._vectors = open_active(self.cfg)
        return self._vectors

    def run(self, action: ValidAction) -> ToolRun:
        t0 = time.perf_counter()
        handler = {"find_similar": self.find_similar, "read_note": self.read_note}[action.tool]
        result = handler(**action.args)
        took = int((time.perf_counter() - t0) * 1000)
        if "data" in result:
            pmids = [item["pmid"] for item in result["data"]]
        else:
            pmids = [result["meta"]["pmid"]] if "meta" in result else []
        shown = summarise_result(result, self.result_tokens, self.enc)
        return ToolRun(action.tool, dict(action.args), result, shown, pmids, took)

    def find_similar(self, queries: list[str], k: int, filter: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The k papers nearest the queries: k * overfetch candidates per query, the filter, then MMR.

        Relevance is a paper's best cosine over the queries, less the short-abstract penalty; the
        reported score is the cosine. A filter applies to the over-fetched candidates, so a
        narrow one may return fewer than k papers. Low RAM turns the over-fetch off.
        """
        a = self.cfg.ask
        try:
            vectors = self.vectors()
        except FileNotFoundError as exc:
            return {"ok": False, "error": f"no embedding index in this workspace (run `ra embed`): {exc}"}
        if (vectors.model, vectors.version) != (self.embedder.model_id, self.embedder.version):
            return {
                "ok": False,
                "error": f"the active index holds {vectors.model}@{vectors.version} vectors, the embedder is "
                f"{self.embedder.model_id}@{self.embedder.version}",
            }
        fetch = k if ram_low(self.cfg) else k * a.overfetch
        query_vectors = self.embedder.encode(list(queries))
        cosine: dict[int, float] = {}
        for q in query_vectors:
            top = ann_search(vectors, q, fetch, self.cfg.ann)  # the ANN index when current, else exact
            for pmid, score in zip(top.pmids.tolist(), top.scores.tolist(), strict=True):
                cosine[pmid] = max(score, cosine.get(pmid, -1.0))
        ranked = sorted(cosine, key=lambda p: (-cosine[p], p))
        papers = [p for p in self.store.papers(ranked) if _passes(p, filter or {})]
        if not papers:
            return {"ok": True, "queries": list(queries), "data": []}
        compared = next((c for q in queries if (c := comparison(q))), None)
        relevance = np.array(
            [cosine[p.pmid] - self._short_penalty(p) + evidence_score(p, compared, weight=a.evidence_weight,
                                                                       head_to_head=a.head_to_head_bonus)
             for p in papers], dtype=np.float32,
        )  # fmt: skip
        order = mmr_select(relevance, vectors.get([p.pmid for p in papers]), k, a.mmr_lambda)
        if a.evidence_weight or a.head_to_head_bonus:  # MMR picks which k; they are listed best evidence first
            order.sort(key=lambda i: -float(relevance[i]))
        terms = set(content_words(" ".join(queries)))
        data = [
            {
                "pmid": papers[i].pmid,
                "title": papers[i].title,
                "year": papers[i].year,
                "design": design_label(papers[i]),
                "score": round(cosine[papers[i].pmid], 4),
                "snippet": best_sentence(papers[i].abstract, terms, a.snippet_chars)
                or clip(papers[i].title, a.snippet_chars),
            }
            for i in order
        ]
        return {"ok": True, "queries": list(queries), "data": data}

    def _short_penalty(self, paper: Paper) -> float:
        floor = self.cfg.ask.min_chunk_chars
        chars = len(paper.abstract or "")
        if floor <= 0 or chars >= floor:
            return 0.0
        return self.cfg.ask.short_chunk_penalty * (1.0 - chars / floor)

    def read_note(self, pmid: int, max_chars: int) -> dict[str, Any]:
        """A paper's abstract (clipped to max_chars) and metadata; ok:false for a PMID the store does not hold."""
        paper = self.store.paper(pmid)
        if paper is None:
            return {"ok": False, "error": f"PMID {pmid} is not in the local corpus"}
        limit = min(max_chars, READ_NOTE_HARD_MAX)
        text = paper.abstract or "(no abstract)"
        meta = {
            "pmid": paper.pmid,
            "title": paper.title,
            "year": paper.year,
            "journal": paper.journal,
            "design": design_label(paper),
            "article_type": paper.article_type,
            "doi": paper.doi,
            "mesh": paper.mesh[:8],
        }
        return {"ok": True, "meta": meta, "text": clip(text, limit), "truncated": len(text) > limit}


def _passes(paper: Paper, flt: Mapping[str, Any]) -> bool:
    year_from, year_to, kind = flt.get("year_from"), flt.get("year_to"), flt.get("article_type")
    if (year_from is not None or year_to is not None) and paper.year is None:
        return False
    if year_from is not None and paper.year < year_from:
        return False
    if year_to is not None and paper.year > year_to:
        return False
    if kind:
        wanted = kind.strip().lower()
        return wanted == paper.article_type.lower() or wanted in (t.lower() for t in paper.pub_types)
    return True


def summarise_result(result: dict[str, Any], budget: int, enc: Any) -> dict[str, Any]:
    """A tool result within `budget` tokens: shorter snippets, then fewer items (top kept), or a clipped text."""
    if count_tokens(canonical_json(result), enc) <= budget:
        return result
    out = {**result, "summarised": True}
    if isinstance(result.get("data"), list):
        items = [
            {**item, "snippet": clip(item["snippet"], 120), "title": clip(item["title"], 160)}
            for item in result["data"]
        ]
        omitted = 0
        while items and count_tokens(canonical_json({**out, "data": items, "omitted": omitted}), enc) > budget:
            items.pop()
            omitted += 1
        return {**out, "data": items, "omitted": omitted}
    if isinstance(result.get("text"), str):
        overhead = count_tokens(canonical_json({**out, "text": ""}), enc) + 4
        return {**out, "text": truncate_tokens(result["text"], max(0, budget - overhead), enc).rstrip() + " …"}
    return out
