"""propose_alternative_pico (docs/handbooks.md): a new PICO theme from the papers a covering review leaves out."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from ra_agent.config import Config
from ra_agent.embed.tokens import count_tokens, sample_for_prompt, sample_size
from ra_agent.evidence.pico.extract import PicoRecord, default_extractor, read_pico
from ra_agent.evidence.pico.terms import PICO_FIELDS, has_word, pico_field_terms
from ra_agent.evidence.sr.search import QUERY_MAX_CHARS
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.structured import ask_json, is_rules_brain, json_object
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.view import cluster_row, member_pmids, pico_path

log = logging.getLogger(__name__)
RULES_ALT_PICO = "rules:leftover-pico-terms-v1"
# the LLM's answer: {"new_PICO": "P: ...; I: ...; C: ...; O: ...", "seed_query": "..."}, no other keys
ALTERNATIVE_SCHEMA = ReplySchema("alternative_pico", {
    "type": "object", "additionalProperties": False, "required": ["new_PICO", "seed_query"],
    "properties": {"new_PICO": {"type": "string", "minLength": 1, "maxLength": 400},
                   "seed_query": {"type": "string", "minLength": 1, "maxLength": QUERY_MAX_CHARS}}})  # fmt: skip


# ============================================================================ propose_alternative_pico

_CONTENT_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")


@dataclass
class AlternativePico:
    """propose_alternative_pico's answer: a new PICO theme and a PubMed seed query, with the papers behind it."""

    new_PICO: str  # noqa: N815 - the tool's output key
    seed_query: str
    basis_pmids: list[int]
    judged_by: str
    terms: dict[str, list[str]] = field(default_factory=dict)  # rule path: chosen terms per PICO field
    leftover: int = 0
    excluded: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"new_PICO": self.new_PICO, "seed_query": self.seed_query}


def pico_records_for(
    cfg: Config, store: Store, papers: Sequence[Paper], cluster_id: str | None
) -> dict[int, PicoRecord]:
    """PICO records of these papers: from pico/<cluster_id>.jsonl when present, the default extractor for the rest."""
    records: dict[int, PicoRecord] = {}
    path = pico_path(cfg, cluster_id) if cluster_id else None
    if path is not None and path.exists():
        wanted = {p.pmid for p in papers}
        records = {r.pmid: r for r in read_pico(path) if r.pmid in wanted}
    todo = [p for p in papers if p.pmid not in records]
    if todo:
        records.update({r.pmid: r for r in default_extractor(cfg).extract(todo)})
    return records


def _group(terms: Sequence[str]) -> str:
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"


def theme_text(terms: Mapping[str, Sequence[str]]) -> str:
    """ "P: a, b; I: c; C: d; O: e" ("unspecified" for a field without a term)."""
    return "; ".join(f"{k}: {', '.join(terms.get(k, [])) or 'unspecified'}" for k in PICO_FIELDS)


def seed_query_for(terms: Mapping[str, Sequence[str]]) -> str:
    """PubMed query of a theme: intervention AND population (AND comparator), terms ORed within a field."""
    groups = [_group(terms[k]) for k in ("I", "P", "C") if terms.get(k)]
    if not groups:
        groups = [_group(terms["O"])] if terms.get("O") else []
    if not groups:
        raise ValueError("no PICO term to build a seed query from")
    return " AND ".join(groups)


def clean_query(text: Any) -> str | None:
    """A seed query from an LLM as one line, or None when empty, too long, or shaped like a path or URL."""
    if not isinstance(text, str):
        return None
    query = " ".join(text.split())
    if not query or len(query) > QUERY_MAX_CHARS or re.search(r"://|[\\/]", query):
        return None
    return query


def _grounded(text: str, corpus: str) -> bool:
    """At least half of the content words of `text` occur in `corpus` (the leftover papers)."""
    words = [w for w in _CONTENT_WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS]
    return bool(words) and sum(w in corpus for w in words) * 2 >= len(words)


def propose_alternative_pico(
    cfg: Config,
    store: Store,
    brain: Any,
    exclude_pmids: Iterable[int],
    *,
    cluster_id: str | None = None,
    pool: Sequence[int] | None = None,
    label: str = "",
) -> AlternativePico:
    """A new PICO theme from the papers left after excluding `exclude_pmids`.

    Leftover = the `pool` (a question's reports, named `label`; else the cluster's members, or the whole corpus
    without a cluster) minus `exclude_pmids`; covered = the excluded papers that are in that pool (all excluded
    papers in the store when none is). PICO records come from pico/<cluster_id>.jsonl, a question's from
    pico/<question id>.jsonl when `cluster_id` names the question.

    - LLM brain: one prompt with a token-aware sample of leftover titles (newest first) asks for
      {"new_PICO": "P: ...; I: ...; C: ...; O: ...", "seed_query": "..."}; the theme must be grounded
      (half of its content words occur in the leftover papers) or the rule path is used, labelled.
    - Rules: PICO records of the leftover and covered papers (pico/<cluster_id>.jsonl when present,
      else the default extractor) give, per field, the terms frequent among the leftover papers and not
      dominant among the covered ones (`pico_field_terms`); the seed query is I AND P (AND C).
    """
    exclude = {int(p) for p in exclude_pmids}
    if pool is None:
        pool = member_pmids(store, cluster_id) if cluster_id else store.all_pmids()
    leftover_ids = [p for p in pool if p not in exclude]
    if not leftover_ids:
        raise ValueError(f"no leftover papers: all {len(pool)} papers of the pool are excluded")
    covered_ids = [p for p in pool if p in exclude] or sorted(exclude)
    leftover, covered = store.papers(leftover_ids), store.papers(covered_ids)
    if is_rules_brain(brain):
        return _rule_alternative(cfg, store, leftover, covered, cluster_id)
    label = label or (cluster_row(store, cluster_id)["label"] if cluster_id else "the covered papers")
    messages, sample = _alternative_prompt(cfg, label, leftover)
    asked = ask_json(brain, messages, lambda r: (json_object(r, "new_PICO"), "no JSON object with new_PICO"),
                     ALTERNATIVE_SCHEMA, json_repair=False)  # fmt: skip
    answer, why = asked.value, asked.failure(brain.name)
    corpus = " ".join(f"{p.title} {p.abstract}" for p in leftover).lower()
    new_pico = " ".join(str(answer.get("new_PICO", "")).split()) if answer else ""
    if answer and new_pico and _grounded(new_pico, corpus):
        query = clean_query(answer.get("seed_query"))
        notes = [] if query else ["the LLM's seed query was unusable; the rule seed query is used"]
        if query is None:
            query = _rule_alternative(cfg, store, leftover, covered, cluster_id).seed_query
        return AlternativePico(new_pico, query, [p.pmid for p in sample], brain.name,
                               leftover=len(leftover), excluded=len(covered), notes=notes)  # fmt: skip
    why = why or f"{brain.name}'s theme is not grounded in the leftover papers: {new_pico[:120]!r}"
    rules = _rule_alternative(cfg, store, leftover, covered, cluster_id)
    rules.judged_by = f"{RULES_ALT_PICO} (fallback: {why})"
    rules.notes.append(why)
    return rules


def _alternative_prompt(cfg: Config, label: str, leftover: Sequence[Paper]) -> tuple[list[dict[str, str]], list[Paper]]:
    head = (
        f"Existing systematic reviews already cover the topic '{label}'. The titles below are papers of that area "
        "that those reviews leave over. Propose ONE new, narrower systematic-review question (PICO) these papers "
        "could answer, using only populations, interventions, comparators and outcomes named in the titles.\n\n"
        "Leftover titles:\n"
    )
    tail = (
        '\n\nReply with only one JSON object: {"new_PICO": "P: ...; I: ...; C: ...; O: ...", '
        '"seed_query": "<PubMed query for the new question>"}'
    )
    sample = sample_for_prompt(leftover, reserved=count_tokens(head + tail) + 16, cfg=cfg,
                               limit=sample_size(len(leftover), cfg), text=lambda p: f"- [PMID {p.pmid}] {p.title}")  # fmt: skip
    listing = "\n".join(f"- [PMID {p.pmid}] {p.title}" for p in sample.papers)
    system = "You design systematic-review questions from the papers you are shown and answer with one JSON object."
    return [{"role": "system", "content": system}, {"role": "user", "content": head + listing + tail}], sample.papers


def _rule_alternative(
    cfg: Config, store: Store, leftover: Sequence[Paper], covered: Sequence[Paper], cluster_id: str | None
) -> AlternativePico:
    records = pico_records_for(cfg, store, [*leftover, *covered], cluster_id)
    mine = [records[p.pmid] for p in leftover if p.pmid in records]
    theirs = [records[p.pmid] for p in covered if p.pmid in records]
    terms = pico_field_terms(mine, theirs, cfg.sr.alt_pico_terms)
    if not any(terms.values()):
        raise ValueError(f"the {len(leftover)} leftover papers share no PICO term that the covered papers lack")
    anchor = terms["I"] or terms["P"] or terms["O"] or terms["C"]
    key = next(k for k in ("I", "P", "O", "C") if terms[k] == anchor)
    basis = sorted(r.pmid for r in mine if any(has_word(getattr(r, key), t) for t in anchor))
    extractors = sorted({r.extractor for r in mine})
    return AlternativePico(
        new_PICO=theme_text(terms),
        seed_query=seed_query_for(terms),
        basis_pmids=basis,
        judged_by=RULES_ALT_PICO,
        terms=terms,
        leftover=len(leftover),
        excluded=len(covered),
        notes=[f"PICO records by {', '.join(extractors)}"],
    )
