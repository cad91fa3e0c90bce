"""Systematic-review checks of memo 70: find_existing_sr, prisma_check, propose_alternative_pico and spawned handbooks."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import json5
import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from ra_agent.agent.actions import repair_messages
from ra_agent.cluster import distinctive_terms
from ra_agent.cluster_view import (
    cluster_row,
    e_query_vector,
    member_pmids,
    pico_path,
    set_cluster_metrics,
)
from ra_agent.config import Config
from ra_agent.embed import Embedder, encode_batched
from ra_agent.fileio import atomic_write
from ra_agent.ingest.http import ApiError
from ra_agent.llm.base import BrainError
from ra_agent.models import Paper
from ra_agent.pico import PicoRecord, RuleExtractor, read_pico
from ra_agent.pico_rules import sections_of, sentences
from ra_agent.store.db import Store
from ra_agent.tokens import count_tokens, sample_for_prompt, sample_size, truncate_tokens
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

SYSTEMATIC_SUBSET = "systematic[sb]"
MAX_TERM_WORDS = 4  # a label piece longer than this is free text: its content words become separate terms
REVIEW_PUB_TYPES = ("Systematic Review", "Meta-Analysis", "Review")
REVIEW_TEXT_CUE = re.compile(r"\bsystematic(?:\s+literature)?\s+reviews?\b|\bmeta[\s-]?analy(?:sis|ses|tic)\b", re.I)
RULES_PRISMA = "rules:prisma-cues-v1"
RULES_ALT_PICO = "rules:leftover-pico-terms-v1"
FIX_JSON = "FIX JSON ONLY: reply with only the JSON object asked for, nothing else."
SNIPPET_CHARS = 200
QUERY_MAX_CHARS = 300


def _is_rules(brain: Any) -> bool:
    return brain is None or str(getattr(brain, "name", "")).startswith("rules:")


# ============================================================================ find_existing_sr


def label_terms(label: str, max_terms: int) -> list[str]:
    """Search terms of a cluster label, most distinctive first.

    A label is split at "·", ";", ",", "|" and "vs"/"versus"; stop words are trimmed from the ends of
    each piece; a piece of more than MAX_TERM_WORDS words (free-text labels) contributes its content
    words one by one. Case-insensitive duplicates are dropped; at most `max_terms` terms are kept.
    """
    terms: list[str] = []
    for piece in re.split(r"\s*(?:·|;|,|\||\bversus\b|\bvs\b\.?)\s*", label, flags=re.I):
        words = re.findall(r"[A-Za-z0-9][\w'-]*", piece)
        while words and words[0].lower() in ENGLISH_STOP_WORDS:
            words.pop(0)
        while words and words[-1].lower() in ENGLISH_STOP_WORDS:
            words.pop()
        if not words:
            continue
        parts = (
            [w for w in words if w.lower() not in ENGLISH_STOP_WORDS]
            if len(words) > MAX_TERM_WORDS
            else [" ".join(words)]
        )
        for part in parts:
            if part.lower() not in {t.lower() for t in terms}:
                terms.append(part)
    return terms[:max_terms]


def _term_clauses(terms: Sequence[str]) -> list[str]:
    """Every pair of terms ANDed (the single term when there is one): a review must match two label terms."""
    if not terms:
        raise ValueError("the cluster label yields no search terms")
    if len(terms) == 1:
        return [terms[0]]
    return [f"{a} AND {b}" for a, b in combinations(terms, 2)]


def pubmed_sr_query(terms: Sequence[str]) -> str:
    """PubMed query for reviews matching at least two label terms, each clause restricted to systematic[sb].

    Written as an OR of fully parenthesised AND-clauses, which PubMed and simple term evaluators
    read the same way, e.g. `(a AND b AND systematic[sb]) OR (a AND c AND systematic[sb])`.
    """
    return " OR ".join(f"({clause} AND {SYSTEMATIC_SUBSET})" for clause in _term_clauses(terms))


def local_sr_query(terms: Sequence[str]) -> str:
    """The same term rule for the local full-text index (Store.search), without the PubMed subset filter."""
    return " OR ".join(f"({clause})" for clause in _term_clauses(terms))


def review_reason(paper: Paper) -> str | None:
    """Why a paper counts as a review offline, or None.

    Offline rule: a paper is a review when its publication types include Systematic Review,
    Meta-Analysis or Review, or its title or abstract says "systematic review(s)" /
    "systematic literature review" or "meta-analysis/analyses/analytic" (also spelt
    "meta analysis", "metaanalysis").
    """
    for pub_type in REVIEW_PUB_TYPES:
        if pub_type in paper.pub_types:
            return f"publication type {pub_type}"
    for where, text in (("title", paper.title), ("abstract", paper.abstract)):
        match = REVIEW_TEXT_CUE.search(text or "")
        if match:
            return f"{where} says {match.group(0)!r}"
    return None


@dataclass
class SrOverlap:
    """find_existing_sr's answer: reviews found for a cluster and the share of them that overlap its centroid.

    `reviews` are all reviews found (best cosine first); `sr_pmids` those at or above `threshold`
    (the prior SRs that cover the cluster); `overlap` = len(sr_pmids) / n_reviews (0.0 without reviews).
    """

    cluster_id: str
    query: str
    overlap: float
    sr_pmids: list[int]
    n_reviews: int
    offline: bool
    cosines: dict[int, float] = field(default_factory=dict)
    reviews: list[int] = field(default_factory=list)
    threshold: float = 0.75
    pivot_at: float = 0.6
    searched: str = "pubmed"  # "pubmed" (live E-utilities) or "local corpus" (FTS5 offline rule)
    centroid_source: str = ""
    error: str = ""
    reasons: dict[int, str] = field(default_factory=dict)  # offline: why each paper counts as a review

    @property
    def covered(self) -> bool:
        """overlap > sr_overlap_pivot: an existing review covers the topic and the agent should pivot."""
        return self.overlap > self.pivot_at

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "query": self.query,
            "overlap": self.overlap,
            "sr_pmids": self.sr_pmids,
            "n_reviews": self.n_reviews,
            "offline": self.offline,
            "cosines": {str(k): v for k, v in self.cosines.items()},
            "reviews": self.reviews,
            "threshold": self.threshold,
            "pivot_at": self.pivot_at,
            "covered": self.covered,
            "searched": self.searched,
            "centroid_source": self.centroid_source,
            "error": self.error,
            "reasons": {str(k): v for k, v in self.reasons.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SrOverlap:
        values = {k: data[k] for k in ("cluster_id", "query", "overlap", "sr_pmids", "n_reviews", "offline")}
        extra = {k: data[k] for k in ("reviews", "threshold", "pivot_at", "searched", "centroid_source", "error")
                 if k in data}  # fmt: skip
        return cls(
            **values,
            **extra,
            cosines={int(k): float(v) for k, v in data.get("cosines", {}).items()},
            reasons={int(k): str(v) for k, v in data.get("reasons", {}).items()},
        )


def sr_result_path(cfg: Config, cluster_id: str) -> Path:
    """Where find_existing_sr keeps its answer for a cluster: <data_dir>/sr/<cluster_id>.json."""
    return Workspace.of(cfg).root / "sr" / f"{cluster_id}.json"


def load_sr_overlap(cfg: Config, cluster_id: str) -> SrOverlap | None:
    """The last find_existing_sr answer for a cluster, or None."""
    path = sr_result_path(cfg, cluster_id)
    return SrOverlap.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None


def _live_reviews(cfg: Config, store: Store, eutils: Any, query: str) -> list[Paper]:
    """esearch + efetch of the reviews PubMed returns for `query`, stored (source "efetch") so reports can cite them."""
    handle = eutils.esearch(query, retmax=cfg.sr.sr_retmax, usehistory=False)
    papers = eutils.efetch(handle.ids) if handle.ids else []
    store.upsert_papers(papers, source="efetch", query=query, batch_size=cfg.embedding.refresh_threshold)
    rank = {pmid: i for i, pmid in enumerate(handle.ids)}
    return sorted(papers, key=lambda p: rank.get(p.pmid, len(rank)))


def _local_reviews(cfg: Config, store: Store, query: str) -> tuple[list[Paper], dict[int, str]]:
    """Best-matching local papers for the label query that pass `review_reason`, at most sr_retmax."""
    total = store.conn.execute("SELECT COUNT(*) FROM paper").fetchone()[0]
    hits = store.search(query, limit=max(total, 1))
    found: list[Paper] = []
    reasons: dict[int, str] = {}
    for start in range(0, len(hits), 500):
        for paper in store.papers(hits[start : start + 500]):
            reason = review_reason(paper)
            if reason:
                found.append(paper)
                reasons[paper.pmid] = reason
                if len(found) >= cfg.sr.sr_retmax:
                    return found, reasons
    return found, reasons


def find_existing_sr(
    cfg: Config,
    store: Store,
    cluster_id: str,
    *,
    embedder: Embedder,
    eutils: Any = None,
    vectors: Any = None,
) -> SrOverlap:
    """Overlap of a cluster with prior systematic reviews (memo 70 §2.5), written to its latest metrics row.

    1. Terms from the cluster label (`label_terms`, at most [clustering] audit_label_terms).
    2. Online (an E-utilities client is given and the API is not marked offline): PubMed esearch of
       `pubmed_sr_query(terms)` (at least two label terms AND systematic[sb]), efetch of the hits,
       stored with source "efetch". Offline, or when the client fails (ApiUnavailable or an NCBI
       error): the local corpus via FTS5 over `local_sr_query(terms)`, keeping papers that pass
       `review_reason` (publication type Systematic Review / Meta-Analysis / Review, or the title or
       abstract says "systematic review" or "meta-analysis"), best match first.
    3. The reviews' titles are embedded and compared (cosine) with the cluster's E-space vector: the
       frozen centroid when the cluster was frozen on E vectors, else the centroid of its members' E
       vectors recomputed now (see `e_query_vector`, reported as `centroid_source`).
    4. overlap = share of reviews with cosine >= [sr] sr_cosine_threshold (0.0 without reviews);
       written as sr_overlap into the cluster's latest cluster_metrics row, and the whole answer to
       <data_dir>/sr/<cluster_id>.json.
    """
    from ra_agent.store.vectors import open_active

    vectors = vectors if vectors is not None else open_active(cfg)
    row = cluster_row(store, cluster_id)
    q = e_query_vector(store, cluster_id, vectors)
    if q.dim != embedder.dim:
        raise ValueError(f"embedder {embedder.model_id} gives {embedder.dim}-dim vectors; cluster vectors have {q.dim}")
    terms = label_terms(row["label"], cfg.clustering.audit_label_terms)
    query = pubmed_sr_query(terms)
    offline, error, reasons = True, "", {}
    papers: list[Paper] = []
    if eutils is not None and not store.api_state("eutils")["offline"]:
        if getattr(eutils, "store", None) is None:
            eutils.store = store  # its request outcomes drive the offline counter
        try:
            papers, offline = _live_reviews(cfg, store, eutils, query), False
        except ApiError as exc:
            error = str(exc)
            log.error("find_existing_sr %s: E-utilities failed (%s); searching the local corpus", cluster_id, exc)
    elif eutils is not None:
        error = "E-utilities marked offline"
    if offline:
        papers, reasons = _local_reviews(cfg, store, local_sr_query(terms))
    texts = [p.title or p.abstract[:SNIPPET_CHARS] for p in papers]
    encoded = encode_batched(embedder, texts, cfg.embedding.batch_size, halve_on_oom=cfg.hardware.gpu_batch_halving)
    kept = [papers[i] for i in encoded.kept]
    cos = q.cosines(encoded.vectors) if len(kept) else np.zeros(0)
    cosines = {p.pmid: round(float(c), 4) for p, c in zip(kept, cos, strict=True)}
    ranked = sorted(cosines, key=lambda pmid: (-cosines[pmid], pmid))
    threshold = cfg.sr.sr_cosine_threshold
    covering = [pmid for pmid in ranked if cosines[pmid] >= threshold]
    overlap = len(covering) / len(ranked) if ranked else 0.0
    result = SrOverlap(
        cluster_id=cluster_id,
        query=query if not offline else local_sr_query(terms),
        overlap=round(overlap, 4),
        sr_pmids=covering,
        n_reviews=len(ranked),
        offline=offline,
        cosines=cosines,
        reviews=ranked,
        threshold=threshold,
        pivot_at=cfg.sr.sr_overlap_pivot,
        searched="local corpus" if offline else "pubmed",
        centroid_source=q.source,
        error=error,
        reasons={p: reasons[p] for p in ranked if p in reasons},
    )
    set_cluster_metrics(store, cluster_id, sr_overlap=result.overlap)
    atomic_write(sr_result_path(cfg, cluster_id), json.dumps(result.as_dict(), indent=2) + "\n")
    log.info(
        "find_existing_sr %s (%s, %s): %d reviews, %d at cosine >= %.2f, overlap %.3f%s",
        cluster_id, row["label"], result.searched, result.n_reviews, len(covering), threshold, result.overlap,
        " -> covered, pivot" if result.covered else "",
    )  # fmt: skip
    return result


# ============================================================================ prisma_check

# PRISMA 2020 items (Page et al., BMJ 2021;372:n71), numbered as in the 2020 checklist, with the text
# cues that report them. The tool contract checks items 4-8; 9 and 10 are known for configs that ask.
PRISMA_ITEMS: dict[int, tuple[str, str, tuple[str, ...]]] = {
    4: (
        "Objectives",
        "an explicit statement of the objective(s) or question(s) the review addresses",
        (r"\bobjectives?\b", r"\baims?\b", r"\bwe aimed\b", r"\bpurpose\b", r"\breview question\b", r"\bPICO\b",
         r"\bto (?:assess|evaluate|compare|determine|examine|investigate|summari[sz]e|quantify|estimate)\b"),
    ),
    5: (
        "Eligibility criteria",
        "the inclusion and exclusion criteria for the review",
        (r"\b(?:inclusion|exclusion|eligibility|selection) criteria\b", r"\beligible (?:studies|trials|articles|reports)\b",
         r"\b(?:studies|trials|articles) were (?:included|eligible) if\b", r"\bwe included\b",
         r"\bincluded (?:only )?(?:randomi[sz]ed|controlled|prospective|double[- ]blind)\b"),
    ),
    6: (
        "Information sources",
        "all databases, registers and other sources searched or consulted, with dates",
        (r"\bMEDLINE\b", r"\bEMBASE\b", r"\bPubMed\b", r"\bCochrane (?:Library|Central|Controlled Trials|Database)",
         r"(?-i:\bCENTRAL\b)", r"\bWeb of Science\b", r"\bScopus\b", r"\bCINAHL\b", r"\bPsycINFO\b", r"\bLILACS\b",
         r"\b(?:data|information) sources?\b", r"\bdatabases?\b.{0,40}\bsearched\b", r"\bsearched\b.{0,60}\bdatabases?\b",
         r"\bhand[- ]?search", r"\breference lists\b", r"\btrials? regist(?:er|ry|ries)\b"),
    ),
    7: (
        "Search strategy",
        "the search strategies for the databases, including filters and limits used",
        (r"\bsearch strateg(?:y|ies)\b", r"\bsearch terms?\b", r"\bkey ?words?\b", r"\bMeSH\b",
         r"\b(?:literature|electronic|systematic|comprehensive|computeri[sz]ed|bibliographic) search(?:es)?\b",
         r"\bsearch(?:es)? (?:was|were) (?:conducted|performed|carried out|run)\b",
         r"\bsearched (?:from|up to|through|until|between)\b",
         r"\b(?:up to|until|through) (?:January|February|March|April|May|June|July|August|September|October|"
         r"November|December) (?:19|20)\d\d\b"),
    ),
    8: (
        "Selection process",
        "how it was decided whether a study met the inclusion criteria (reviewers, independence, tools)",
        (r"\bselection process\b", r"\bstudy selection\b", r"\bscreen(?:ed|ing)\b",
         r"\b(?:two|2|three|both) (?:independent )?(?:reviewers|authors|investigators|researchers)\b",
         r"\bindependently (?:screened|selected|assessed|reviewed|extracted)\b", r"\bin duplicate\b",
         r"\bdisagreements? (?:was|were) resolved\b", r"\bby consensus\b"),
    ),
    9: (
        "Data collection process",
        "how data were collected from reports (reviewers, independence, confirmation)",
        (r"\bdata (?:were |was )?extract(?:ed|ion)\b", r"\bextracted data\b", r"\bdata collection\b",
         r"\bdata abstraction\b"),
    ),
    10: (
        "Data items",
        "the outcomes and other variables for which data were sought",
        (r"\bdata items\b", r"\b(?:primary|secondary) (?:outcomes?|end ?points?)\b",
         r"\boutcomes? (?:of interest|sought|measures?)\b"),
    ),
}  # fmt: skip
_PRISMA_RES = {item: [re.compile(p, re.I) for p in cues] for item, (_, _, cues) in PRISMA_ITEMS.items()}


def checked_items(cfg: Config) -> list[int]:
    """The PRISMA items prisma_check tests: [sr] prisma_mandatory_items (items outside 4-10 are ignored, logged)."""
    items = sorted(set(cfg.sr.prisma_mandatory_items))
    unknown = [i for i in items if i not in PRISMA_ITEMS]
    if unknown:
        log.warning("prisma_check: PRISMA items %s have no cues and are not checked", unknown)
    return [i for i in items if i in PRISMA_ITEMS]


@dataclass(frozen=True)
class DocumentCheck:
    """Rule evidence for one text: item -> the sentence reporting it; the items nothing reports."""

    source: str  # "draft" or "PMID <n>"
    found: dict[int, str]
    missing: list[int]
    pmid: int | None = None


def rule_evidence(text: str, items: Sequence[int], source: str, pmid: int | None = None) -> DocumentCheck:
    """Which PRISMA items a text reports, by cue: each found item keeps the first sentence (trimmed) that says so."""
    units = [s.strip() for line in text.splitlines() for s in sentences(line) if s.strip()]
    found: dict[int, str] = {}
    for item in items:
        for at, unit in enumerate(units):
            match = next((m for rx in _PRISMA_RES[item] if (m := rx.search(unit))), None)
            if match:
                shown = unit  # a Markdown heading is shown with the sentence under it
                if unit.startswith("#") and at + 1 < len(units):
                    shown = f"{unit.lstrip('#').strip()}: {units[at + 1]}"
                found[item] = f"{match.group(0)!r} in: {shown[:SNIPPET_CHARS]}"
                break
    return DocumentCheck(source, found, [i for i in items if i not in found], pmid)


def review_text(paper: Paper) -> str:
    """Title and abstract with section labels ("DATA SOURCES: ..."), one section per line."""
    body = "\n".join(f"{s.label}: {s.text}" if s.label else s.text for s in sections_of(paper))
    return f"{paper.title}\n{body}".strip()


@dataclass
class PrismaResult:
    """prisma_check's answer; `as_dict()` is the memo-70 shape {"compliant": bool, "missing_items": [4, 7]}."""

    compliant: bool
    missing_items: list[int]
    evidence: dict[int, str]
    judged_by: str
    checked_items: list[int] = field(default_factory=list)
    source: str = "none"  # "draft", "prior_sr" or "none"
    documents: list[DocumentCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"compliant": self.compliant, "missing_items": self.missing_items}


def _best(documents: Sequence[DocumentCheck]) -> DocumentCheck:
    """The most complete document (fewest missing items; the first among equals)."""
    return min(documents, key=lambda d: len(d.missing))


def _prisma_prompt(items: Sequence[int], texts: Sequence[str], draft: bool) -> list[dict[str, str]]:
    listing = "\n".join(f"{i}. {PRISMA_ITEMS[i][0]}: {PRISMA_ITEMS[i][1]}." for i in items)
    what = (
        "the draft systematic review below"
        if draft
        else "the abstracts of prior systematic reviews below ('compliant' is true when at least one of them "
        "reports every item; 'missing_items' are the items missing from the most complete one)"
    )
    user = (
        f"Check {what} against these PRISMA 2020 items:\n{listing}\n\n"
        + "\n\n---\n\n".join(texts)
        + '\n\nReply with only one JSON object: {"compliant": true or false, "missing_items": [item numbers]}'
    )
    system = "You check systematic reviews against the PRISMA 2020 statement and answer with one JSON object."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _json_object(reply: str, key: str) -> dict[str, Any] | None:
    """The last JSON(5) object in a reply that has `key` (top level, or inside an Action's "args")."""
    text = reply or ""
    for start in reversed([m.start() for m in re.finditer(r"\{", text)]):
        end = text.rfind("}")
        while end > start:
            try:
                obj = json5.loads(text[start : end + 1])
            except ValueError:
                end = text.rfind("}", start, end)
                continue
            if isinstance(obj, dict):
                if key in obj:
                    return obj
                if isinstance(obj.get("args"), dict) and key in obj["args"]:
                    return obj["args"]
            break
    return None


def _parse_verdict(reply: str, items: Sequence[int]) -> tuple[bool, list[int]] | None:
    obj = _json_object(reply, "compliant")
    if obj is None or not isinstance(obj.get("compliant"), bool):
        return None
    raw = obj.get("missing_items", [])
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        return None
    missing = sorted({i for i in raw if i in items})
    # a verdict that calls a text compliant while naming missing items is read as not compliant
    return obj["compliant"] and not missing, missing


def _ask(brain: Any, messages: list[dict[str, str]], parse) -> tuple[Any, str]:
    """(parsed, "") from the brain, with one FIX JSON ONLY turn; (None, why) when no usable answer comes."""
    try:
        reply = brain.chat(messages)
        parsed = parse(reply)
        if parsed is None:
            log.warning("%s: reply unusable; asking once to fix the JSON", brain.name)
            reply = brain.chat(repair_messages(messages, reply, FIX_JSON))
            parsed = parse(reply)
    except BrainError as exc:
        return None, f"{brain.name} unavailable: {exc}"
    return (parsed, "") if parsed is not None else (None, f"{brain.name} gave no usable answer after one repair turn")


def prisma_check(
    cfg: Config,
    store: Store,
    cluster_id: str,
    brain: Any,
    *,
    draft_text: str | None = None,
    sr_pmids: Sequence[int] | None = None,
) -> PrismaResult:
    """PRISMA 2020 items 4-8 ([sr] prisma_mandatory_items) for a cluster; prisma_compliant (0/1) is written
    into its latest metrics row.

    PRISMA edition: PRISMA 2020 (Page et al., BMJ 2021): 4 objectives, 5 eligibility criteria,
    6 information sources, 7 search strategy, 8 selection process.

    - conduct_SR: `draft_text` (the SR draft) is checked.
    - seek_gap: the abstracts of the cluster's prior SRs (`sr_pmids`, default: the overlapping reviews
      find_existing_sr stored) are checked; compliant when one of them reports every item.
    - Neither: compliant False, every item missing, and the evidence says why.

    Rule evidence (`rule_evidence`: text cues per item) is always computed. With an LLM brain its
    verdict decides (one prompt, one repair turn; on failure the rule verdict is used and labelled);
    with the rules brain (or none) the rule evidence decides and `judged_by` says so.
    """
    cluster_row(store, cluster_id)
    items = checked_items(cfg)
    if draft_text is not None:
        documents, source, texts = [rule_evidence(draft_text, items, "draft")], "draft", [draft_text]
    else:
        if sr_pmids is None:
            found = load_sr_overlap(cfg, cluster_id)
            sr_pmids = found.sr_pmids if found else []
        papers = store.papers(sr_pmids)
        documents = [rule_evidence(review_text(p), items, f"PMID {p.pmid}", p.pmid) for p in papers]
        source, texts = ("prior_sr" if papers else "none"), [f"[PMID {p.pmid}] {review_text(p)}" for p in papers]
    if not documents:
        result = PrismaResult(
            compliant=False,
            missing_items=list(items),
            evidence={},
            judged_by=RULES_PRISMA,
            checked_items=list(items),
            source="none",
            notes=[
                "no prior systematic review overlaps this cluster and no draft was given: nothing reports "
                "any PRISMA item"
            ],  # fmt: skip
        )
    else:
        best = _best(documents)
        evidence = {i: f"{best.source}: {text}" for i, text in best.found.items()}
        rules_verdict = (not best.missing, list(best.missing))
        notes: list[str] = []
        if _is_rules(brain):
            verdict, judged_by = (
                rules_verdict,
                f"{RULES_PRISMA} (rule evidence only; brain {getattr(brain, 'name', 'none')})",
            )
        else:
            verdict, why = _llm_prisma(cfg, brain, items, texts, draft=source == "draft")
            if verdict is None:
                verdict, judged_by = rules_verdict, f"{RULES_PRISMA} (fallback: {why})"
                notes.append(why)
            else:
                judged_by = brain.name
                if verdict != rules_verdict:
                    notes.append(f"rule cues disagree: compliant={rules_verdict[0]}, missing={rules_verdict[1]}")
        result = PrismaResult(verdict[0], verdict[1], evidence, judged_by, list(items), source, documents, notes)
    set_cluster_metrics(store, cluster_id, prisma_compliant=result.compliant)
    log.info("prisma_check %s (%s, %d texts): compliant=%s missing=%s [%s]", cluster_id, result.source,
             len(result.documents), result.compliant, result.missing_items, result.judged_by)  # fmt: skip
    return result


def _llm_prisma(
    cfg: Config, brain: Any, items: Sequence[int], texts: Sequence[str], *, draft: bool
) -> tuple[tuple[bool, list[int]] | None, str]:
    overhead = count_tokens(_prisma_prompt(items, [], draft)[1]["content"])
    budget = max(cfg.tokens.token_soft_cap - overhead, 1)
    if draft:
        shown = [truncate_tokens(texts[0], budget)]
    else:  # fit whole abstracts, best-covering first, until the budget is used
        shown, used = [], 0
        for text in texts:
            n = count_tokens(text)
            if shown and used + n > budget:
                break
            shown.append(truncate_tokens(text, budget - used))
            used += n
    return _ask(brain, _prisma_prompt(items, shown, draft), lambda r: _parse_verdict(r, items))


# ============================================================================ propose_alternative_pico

PICO_FIELDS = ("P", "I", "C", "O")
# words that name doses, schedules, arms or study mechanics rather than a population, treatment or outcome
GENERIC_PICO_WORDS = frozenset(
    "mg mcg µg ml kg daily day days week weeks month months year years twice once dose doses dosing bid od qd tid "
    "patients patient subjects participants people group groups arm arms randomized randomised study studies trial "
    "trials mean versus vs compared comparison hours hour h min treatment treated therapy regimen regimens given "
    "received receiving oral orally intravenous iv total rate rates efficacy effect effects results".split()
)
_CONTENT_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")


@dataclass
class AlternativePico:
    """propose_alternative_pico's answer: a new PICO theme and a PubMed seed query, with the papers behind it."""

    new_PICO: str  # noqa: N815 - the memo-70 output key
    seed_query: str
    basis_pmids: list[int]
    judged_by: str
    terms: dict[str, list[str]] = field(default_factory=dict)  # rule path: chosen terms per PICO field
    leftover: int = 0
    excluded: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"new_PICO": self.new_PICO, "seed_query": self.seed_query}


def _has_word(text: str, term: str) -> bool:
    return re.search(r"\b" + re.escape(term.lower()) + r"\b", text.lower()) is not None


def _share(values: Sequence[str], term: str) -> float:
    return sum(_has_word(v, term) for v in values) / len(values) if values else 0.0


def pico_field_terms(
    records: Sequence[PicoRecord], contrast: Sequence[PicoRecord], n_terms: int
) -> dict[str, list[str]]:
    """Per P/I/C/O field, up to `n_terms` terms frequent in `records` and not dominant in `contrast`.

    Terms are class-based TF-IDF terms of the field values (cluster.distinctive_terms: records vs
    contrast), without dose/schedule/arm words (GENERIC_PICO_WORDS), kept only when more of `records`
    than of `contrast` mention them. With no contrast this is plain document frequency.
    """
    out: dict[str, list[str]] = {}
    for name in PICO_FIELDS:
        mine = [getattr(r, name) for r in records]
        theirs = [getattr(r, name) for r in contrast]
        labels = np.array([0] * len(mine) + [-1] * len(theirs))
        ranked = distinctive_terms([*mine, *theirs], labels, 1, n_terms * 10)[0] if any(mine) else []
        picked: list[str] = []
        for term in ranked:
            words = term.lower().split()
            if any(w in GENERIC_PICO_WORDS or len(w) < 3 for w in words):
                continue
            share = _share(mine, term)
            if share * len(mine) < 2 or share <= _share(theirs, term):
                continue
            picked.append(term)
            if len(picked) == n_terms:
                break
        out[name] = picked
    return out


def pico_records_for(
    cfg: Config, store: Store, papers: Sequence[Paper], cluster_id: str | None
) -> dict[int, PicoRecord]:
    """PICO records of these papers: from pico/<cluster_id>.jsonl when present, the rule extractor for the rest."""
    records: dict[int, PicoRecord] = {}
    path = pico_path(cfg, cluster_id) if cluster_id else None
    if path is not None and path.exists():
        wanted = {p.pmid for p in papers}
        records = {r.pmid: r for r in read_pico(path) if r.pmid in wanted}
    todo = [p for p in papers if p.pmid not in records]
    if todo:
        records.update({r.pmid: r for r in RuleExtractor(cfg.sr.pico_batch_size).extract(todo)})
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


def _clean_query(text: Any) -> str | None:
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
) -> AlternativePico:
    """A new PICO theme from the papers left after excluding `exclude_pmids` (memo 70 §2.6, memo 80 §7).

    Leftover = the cluster's members (or the whole corpus without a cluster) minus `exclude_pmids`;
    covered = the excluded papers that are in that pool (all excluded papers in the store when none is).

    - LLM brain: one prompt with a token-aware sample of leftover titles (newest first) asks for
      {"new_PICO": "P: ...; I: ...; C: ...; O: ...", "seed_query": "..."}; the theme must be grounded
      (half of its content words occur in the leftover papers) or the rule path is used, labelled.
    - Rules: PICO records of the leftover and covered papers (pico/<cluster_id>.jsonl when present,
      else the rule extractor) give, per field, the terms frequent among the leftover papers and not
      dominant among the covered ones (`pico_field_terms`); the seed query is I AND P (AND C).
    """
    exclude = {int(p) for p in exclude_pmids}
    pool = member_pmids(store, cluster_id) if cluster_id else store.all_pmids()
    leftover_ids = [p for p in pool if p not in exclude]
    if not leftover_ids:
        raise ValueError(f"no leftover papers: all {len(pool)} papers of the pool are excluded")
    covered_ids = [p for p in pool if p in exclude] or sorted(exclude)
    leftover, covered = store.papers(leftover_ids), store.papers(covered_ids)
    if _is_rules(brain):
        return _rule_alternative(cfg, store, leftover, covered, cluster_id)
    label = cluster_row(store, cluster_id)["label"] if cluster_id else "the covered papers"
    messages, sample = _alternative_prompt(cfg, label, leftover)
    answer, why = _ask(brain, messages, lambda r: _json_object(r, "new_PICO"))
    corpus = " ".join(f"{p.title} {p.abstract}" for p in leftover).lower()
    new_pico = " ".join(str(answer.get("new_PICO", "")).split()) if answer else ""
    if answer and new_pico and _grounded(new_pico, corpus):
        query = _clean_query(answer.get("seed_query"))
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
    basis = sorted(r.pmid for r in mine if any(_has_word(getattr(r, key), t) for t in anchor))
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


# ============================================================================ spawned handbooks


def spawn_handbook(
    cfg: Config, parent_handbook_path: str | Path, new_seed_query: str, out_dir: str | Path, *, new_pico: str = ""
) -> Path:
    """Write a handbook for the alternative theme: the parent's front matter with Seed_query replaced (or added
    after Primary_goal), then prose saying where it came from, then the parent's prose. Returns its path
    (<out_dir>/<parent>__alt_<hash>.md); the file is validated with load_handbook before it is published.
    """
    from ra_agent.agent.handbook import load_handbook, parse_handbook

    parent_path = Path(parent_handbook_path)
    parent = load_handbook(parent_path)
    query = _clean_query(new_seed_query)
    if query is None:
        raise ValueError(f"unusable seed query {new_seed_query!r}")
    lines = parent_path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i].rstrip() == "---")
    seed_line = f"Seed_query: {json.dumps(query, ensure_ascii=False)}"
    front = lines[start + 1 : end]
    at = next((i for i, line in enumerate(front) if re.match(r"Seed_query\s*:", line)), None)
    if at is not None:
        front[at] = seed_line
    else:
        goal_at = next(i for i, line in enumerate(front) if re.match(r"Primary_goal\s*:", line))
        front.insert(goal_at + 1, seed_line)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    origin = (
        f"# Alternative theme spawned by propose_alternative_pico from {parent_path.name}\n\n"
        f"This handbook was written by ra on {now}: an existing systematic review covers the parent's topic, so "
        f"the work continues on a theme drawn from the papers those reviews leave over.\n\n"
        + (f"- New PICO: {new_pico}\n" if new_pico else "")
        + f"- Seed query: `{query}`\n- Parent handbook: {parent_path.name} (Primary_goal {parent.primary_goal})\n"
    )
    text = "\n".join(["---", f"# spawned from {parent_path.name} on {now}", *front, "---", "", origin])
    if parent.prose:
        text += f"\n## Instructions carried over from {parent_path.name}\n\n{parent.prose}\n"
    digest = hashlib.sha1(f"{parent_path.resolve()}\n{query}".encode()).hexdigest()[:8]
    path = Path(out_dir) / f"{parent_path.stem}__alt_{digest}.md"
    parse_handbook(text, path)  # never publish a handbook that does not load
    atomic_write(path, text)
    log.info("spawned handbook %s (Seed_query %r) from %s", path, query, parent_path)
    return path


__all__ = [
    "PRISMA_ITEMS",
    "RULES_ALT_PICO",
    "RULES_PRISMA",
    "AlternativePico",
    "DocumentCheck",
    "PrismaResult",
    "SrOverlap",
    "checked_items",
    "find_existing_sr",
    "label_terms",
    "load_sr_overlap",
    "local_sr_query",
    "pico_field_terms",
    "pico_records_for",
    "prisma_check",
    "propose_alternative_pico",
    "pubmed_sr_query",
    "review_reason",
    "rule_evidence",
    "seed_query_for",
    "set_cluster_metrics",
    "spawn_handbook",
    "sr_result_path",
    "theme_text",
]
