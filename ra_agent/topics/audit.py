"""Cluster Audit #1: cluster briefs, distinctive terms, the LLM and term auditors, decision validation
(docs/architecture.md)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from ra_agent.config import Config
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.structured import is_rules_brain
from ra_agent.store.db import Store
from ra_agent.topics.features import centroid
from ra_agent.topics.formation import Formation
from ra_agent.topics.metrics import ClusterMetrics, measure_cluster

if TYPE_CHECKING:
    from ra_agent.llm.base import Brain

log = logging.getLogger(__name__)
KEEP, MERGE_INTO, DISCARD = "keep", "merge_into", "discard"
AUDIT_ACTIONS = (KEEP, MERGE_INTO, DISCARD)

# Tokenisation of the rule-based labeller: words of two or more characters starting with a letter,
# unigrams and bigrams (so "helicobacter pylori" can be one term).
TERM_TOKEN_PATTERN = r"(?u)\b[^\W\d_][\w-]*\w\b"
TERM_NGRAMS = (1, 2)


class AuditError(ValueError):
    """Audit decisions that cannot be applied; the message says which decision and why."""


# ----------------------------------------------------------------------------- distinctive terms


def mesh_headings(mesh: Sequence[str]) -> list[str]:
    """Descriptor names of MeSH entries, without major-topic stars and /qualifiers."""
    return sorted({m.split("/")[0].replace("*", "").strip() for m in mesh} - {""})


def distinctive_terms(
    docs: Sequence[Any], labels: np.ndarray, n_clusters: int, n_terms: int, *, mesh: bool = False
) -> list[list[str]]:
    """Top `n_terms` class-based TF-IDF terms of each cluster 0..n_clusters-1 against the rest of the corpus.

    For cluster c with n_c papers, out of N: tf = share of c's papers containing the term and
    idf = ln((1 + N - n_c) / (1 + papers outside c containing it)), the rest being the other clusters
    and the noise (idf = 1 when nothing lies outside c). A term that is as common outside as inside
    scores about 0. Docs are texts (English stop words removed, uni- and bigrams; a term sharing a
    word with a better one is skipped) or, with `mesh`, lists of MeSH entries. Ties go alphabetically.
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import CountVectorizer

    if mesh:
        vectorizer = CountVectorizer(binary=True, analyzer=cast(Any, mesh_headings), lowercase=False)
    else:
        vectorizer = CountVectorizer(
            binary=True, stop_words="english", ngram_range=TERM_NGRAMS, token_pattern=TERM_TOKEN_PATTERN
        )
    try:
        counts = sparse.csr_matrix(vectorizer.fit_transform(docs))
    except ValueError:  # empty vocabulary: no words (or no MeSH) at all
        return [[] for _ in range(n_clusters)]
    classes = np.where(np.asarray(labels) >= 0, labels, n_clusters)
    indicator = sparse.csr_matrix(
        (np.ones(len(classes)), (classes, np.arange(len(classes)))), shape=(n_clusters + 1, len(classes))
    )
    per_class = sparse.csr_matrix(indicator @ counts, dtype=np.float64)  # papers containing each term, per class
    in_corpus = np.asarray(counts.sum(axis=0), dtype=np.float64).ravel()
    sizes = np.bincount(classes, minlength=n_clusters + 1)
    vocab = vectorizer.get_feature_names_out()
    out = []
    for c in range(n_clusters):
        row = per_class.getrow(c)
        rest = len(classes) - sizes[c]
        idf = np.log((1.0 + rest) / (1.0 + in_corpus[row.indices] - row.data)) if rest else 1.0
        scores = row.data / sizes[c] * idf
        ranked = row.indices[np.lexsort((vocab[row.indices], -scores))]
        out.append(_pick_terms((str(vocab[i]) for i in ranked), n_terms, share_words=mesh))
    return out


def _pick_terms(ranked: Iterator[str], n_terms: int, *, share_words: bool) -> list[str]:
    picked: list[str] = []
    used: set[str] = set()
    for term in ranked:
        words = set(term.lower().split())
        if not share_words and words & used:
            continue
        picked.append(term)
        used |= words
        if len(picked) == n_terms:
            break
    return picked


@dataclass(frozen=True)
class ClusterBrief:
    """What an auditor sees of one provisional cluster."""

    idx: int
    size: int
    terms: tuple[str, ...]  # distinctive title/abstract terms, best first
    mesh_terms: tuple[str, ...]  # distinctive MeSH headings (empty without MeSH)
    sample_titles: tuple[str, ...]  # titles of the members nearest the centroid
    year_min: int | None
    year_max: int | None
    metrics: ClusterMetrics


@dataclass(frozen=True)
class AuditDecision:
    """One auditor verdict: keep (with label + summary), merge_into target_idx, or discard."""

    idx: int
    action: str
    target_idx: int | None = None
    label: str = ""
    summary: str = ""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> AuditDecision:
        """From the audit's JSON shape, e.g. {"idx": 1, "action": "merge_into", "target_idx": 0}."""
        target = obj.get("target_idx")
        return cls(
            idx=int(obj["idx"]),
            action=str(obj["action"]),
            target_idx=None if target is None else int(target),
            label=str(obj.get("label") or ""),
            summary=str(obj.get("summary") or ""),
        )


class ClusterAuditor(Protocol):
    """Judges provisional clusters; `name` is recorded as the manifest's `audit_by`."""

    name: str

    def audit(self, briefs: Sequence[ClusterBrief]) -> list[AuditDecision]: ...


class TermAuditor:
    """Deterministic rule-based auditor (no language model): keeps every cluster and names it by its distinctive terms.

    The label joins the best MeSH headings and title/abstract terms (interleaved, MeSH first);
    the summary is one sentence built from those terms, the size and the year range.
    """

    name = "rules:distinctive-terms"

    def __init__(self, cfg: Config):
        self.n_terms = cfg.clustering.audit_label_terms

    def audit(self, briefs: Sequence[ClusterBrief]) -> list[AuditDecision]:
        return [AuditDecision(b.idx, KEEP, label=self.label(b), summary=self.summary(b)) for b in briefs]

    def label(self, brief: ClusterBrief) -> str:
        terms: list[str] = []
        for pair in _round_robin(brief.mesh_terms, brief.terms):
            for term in pair:
                if not any(term.lower() in t.lower() or t.lower() in term.lower() for t in terms):
                    terms.append(term)
        if not terms:
            return brief.sample_titles[0] if brief.sample_titles else f"cluster {brief.idx}"
        return " · ".join(terms[: self.n_terms])

    def summary(self, brief: ClusterBrief) -> str:
        years = f"{brief.year_min}–{brief.year_max}" if brief.year_min is not None else "years unknown"
        text = f"{brief.size} papers ({years})"
        if brief.terms:
            text += f" whose most distinctive title/abstract terms are {_join_words(brief.terms)}"
        if brief.mesh_terms:
            text += f"; leading MeSH headings: {', '.join(brief.mesh_terms)}"
        if not brief.terms and not brief.mesh_terms and brief.sample_titles:
            text += f"; most central title: {brief.sample_titles[0]}"
        return text + "."


def _round_robin(*seqs: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """Round-robin tuples over sequences of unequal length, dropping exhausted ones."""
    for i in range(max((len(s) for s in seqs), default=0)):
        yield tuple(s[i] for s in seqs if i < len(s))


def _join_words(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def describe_clusters(
    store: Store, formation: Formation, cfg: Config, *, now: datetime | None = None
) -> list[ClusterBrief]:
    """Briefs for the auditor: distinctive terms (vs the rest of `formation`), central titles, years, metrics."""
    ccfg = cfg.clustering
    feats = formation.features
    papers = {p.pmid: p for p in store.papers(feats.pmids.tolist())}
    if len(papers) < len(feats):
        log.warning("%d clustered PMIDs have no paper row; they count as empty text", len(feats) - len(papers))
    records = [papers.get(int(pmid)) for pmid in feats.pmids]
    texts = [f"{p.title} {p.abstract}" if p else "" for p in records]
    k = formation.n_clusters
    words = distinctive_terms(texts, formation.labels, k, ccfg.audit_label_terms)
    mesh = distinctive_terms(
        [p.mesh if p else [] for p in records], formation.labels, k, ccfg.audit_label_terms, mesh=True
    )
    briefs = []
    for idx in range(k):
        rows = formation.member_rows(idx)
        x = feats.matrix[rows]
        c = centroid(x)
        central = rows[np.argsort(-(x @ c), kind="stable")[: ccfg.audit_sample_titles]]
        years = [records[r].year for r in rows if records[r] and records[r].year is not None]
        briefs.append(
            ClusterBrief(
                idx=idx,
                size=len(rows),
                terms=tuple(words[idx]),
                mesh_terms=tuple(mesh[idx]),
                sample_titles=tuple(records[r].title for r in central if records[r]),
                year_min=min(years) if years else None,
                year_max=max(years) if years else None,
                metrics=measure_cluster(store, feats.pmids[rows], x, c, cfg, het=feats.het_families(rows), now=now),
            )
        )
    return briefs


def validate_decisions(decisions: Sequence[AuditDecision], n_clusters: int) -> dict[int, list[int]]:
    """Check one decision per provisional cluster; return kept idx -> [idx, idx merged into it...].

    merge_into may chain (a into b into c) but must end at a kept cluster.
    """
    by_idx: dict[int, AuditDecision] = {}
    for d in decisions:
        if not 0 <= d.idx < n_clusters:
            raise AuditError(f"idx {d.idx} is not a provisional cluster (0..{n_clusters - 1})")
        if d.idx in by_idx:
            raise AuditError(f"idx {d.idx} has more than one decision")
        if d.action not in AUDIT_ACTIONS:
            raise AuditError(f"idx {d.idx}: action {d.action!r} is not one of {', '.join(AUDIT_ACTIONS)}")
        if d.action == KEEP and not d.label.strip():
            raise AuditError(f"idx {d.idx}: keep needs a label")
        by_idx[d.idx] = d
    missing = sorted(set(range(n_clusters)) - set(by_idx))
    if missing:
        raise AuditError(f"no decision for idx {missing}")
    groups = {i: [i] for i in sorted(by_idx) if by_idx[i].action == KEEP}
    for i in sorted(by_idx):
        if by_idx[i].action != MERGE_INTO:
            continue
        seen, j = {i}, by_idx[i].target_idx
        while True:
            if j is None or not 0 <= j < n_clusters:
                raise AuditError(f"idx {i}: merge_into needs a target_idx in 0..{n_clusters - 1}")
            if j in seen:
                raise AuditError(f"idx {i}: merge_into chain loops back to idx {j}")
            if by_idx[j].action == DISCARD:
                raise AuditError(f"idx {i}: merge_into target idx {j} is discarded")
            if by_idx[j].action == KEEP:
                groups[j].append(i)
                break
            seen.add(j)
            j = by_idx[j].target_idx
    return groups


# ----------------------------------------------------------------------------- the LLM auditor

AUDIT_SYSTEM = """You audit provisional topic clusters of biomedical papers (Cluster Audit #1). For every cluster \
decide one action:
- "keep" with a "label" (at most 10 words naming the clinical question, e.g. "PPI vs H2RA healing of erosive \
oesophagitis") and a "summary" (at most 50 words);
- "merge_into" with "target_idx", when it is the same clinical question as another cluster;
- "discard", when it has no coherent clinical question.
Reply with ONLY a JSON array, one object per cluster, e.g.
[{"idx": 0, "action": "keep", "label": "...", "summary": "..."}, {"idx": 1, "action": "merge_into", "target_idx": 0}, \
{"idx": 2, "action": "discard"}]"""
_FENCE_RE = re.compile(r"^```[A-Za-z0-9]*[ \t]*\n?|\n?```\s*$", re.M)
LABEL_WORDS, SUMMARY_WORDS = 10, 50


def _brief_text(brief: ClusterBrief) -> str:
    m = brief.metrics
    years = f"{brief.year_min}-{brief.year_max}" if brief.year_min is not None else "unknown"
    facts = {
        "ERS": getattr(m, "ers", None),
        "CVGR": getattr(m, "cvgr", None),
        "het_numeric": getattr(m, "het_numeric", None),
    }
    shown = ", ".join(f"{k} {v:.2f}" for k, v in facts.items() if isinstance(v, float))
    return "\n".join([
        f"## Cluster idx {brief.idx}: {brief.size} papers, years {years}{', ' + shown if shown else ''}",
        f"Distinctive terms: {', '.join(brief.terms) or 'none'}",
        f"MeSH: {', '.join(brief.mesh_terms) or 'none'}",
        "Central titles:", *(f"- {t}" for t in brief.sample_titles),
    ])  # fmt: skip


def audit_messages(briefs: Sequence[ClusterBrief], cfg: Config) -> list[dict[str, str]]:
    """The Audit #1 prompt within the prompt budget: each cluster's brief cut to an equal share of it."""
    from ra_agent.embed.tokens import cap_tokens, count_tokens, encoder_for, prompt_budget

    enc = encoder_for(cfg)
    tail = f"Decide for all {len(briefs)} clusters (idx 0..{len(briefs) - 1}). JSON array only."
    left = prompt_budget(cfg) - count_tokens(AUDIT_SYSTEM, enc) - count_tokens(tail, enc) - 64
    share = max(24, left // max(1, len(briefs)) - 4)
    blocks = [cap_tokens(_brief_text(b), share, enc, "cluster brief") for b in briefs]
    return [{"role": "system", "content": AUDIT_SYSTEM}, {"role": "user", "content": "\n\n".join([*blocks, tail])}]


def _words(text: Any, n: int) -> str:
    return " ".join(str(text or "").split()[:n])


def parse_decisions(reply: str, n_clusters: int, max_chars: int) -> list[AuditDecision]:
    """The JSON array of an audit reply (fences, prose around it and json5 slips tolerated), validated;
    AuditError says what is wrong (size, syntax, nesting, a bad decision)."""
    import json5

    if len(reply) > max_chars:
        raise AuditError(f"the reply is {len(reply):,} characters, over the {max_chars:,} the agent reads")
    text = _FENCE_RE.sub("", reply)
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end < start:
        raise AuditError("the reply holds no JSON array")
    raw = text[start : end + 1]
    try:
        try:
            items = json.loads(raw)
        except ValueError:
            items = json5.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise AuditError(f"invalid JSON: {str(exc)[:200]}") from exc
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise AuditError("the JSON must be an array of objects")
    try:
        decisions = [AuditDecision.from_dict(i) for i in items]
    except (KeyError, TypeError, ValueError) as exc:
        raise AuditError(f"a decision lacks idx/action or has a non-integer idx: {exc}") from exc
    decisions = [AuditDecision(d.idx, d.action, d.target_idx, _words(d.label, LABEL_WORDS), _words(d.summary, SUMMARY_WORDS))
                 for d in decisions]  # fmt: skip
    validate_decisions(decisions, n_clusters)
    return decisions


def audit_schema(n_clusters: int) -> ReplySchema:
    """The audit reply as a schema: {"decisions": [one decision per cluster]}, each keep (label, summary),
    merge_into (a target idx) or discard; idx values are the clusters shown (validate_decisions still checks
    that each cluster is decided once and merge targets are kept)."""
    idx = {"enum": list(range(n_clusters))}

    def decision(action: str, **extra: dict[str, Any]) -> dict[str, Any]:
        props = {"idx": idx, "action": {"enum": [action]}, **extra}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    words = {"type": "string", "minLength": 1}
    options = [decision(KEEP, label={**words, "maxLength": 12 * LABEL_WORDS}, summary={**words, "maxLength": 8 * SUMMARY_WORDS}),
               decision(MERGE_INTO, target_idx=idx), decision(DISCARD)]  # fmt: skip
    decisions = {"type": "array", "items": {"anyOf": options}, "minItems": n_clusters, "maxItems": n_clusters}
    return ReplySchema("cluster_audit", {"type": "object", "properties": {"decisions": decisions},
                                         "required": ["decisions"], "additionalProperties": False})  # fmt: skip


class LLMAuditor:
    """Cluster Audit #1 by a language model: keep / merge_into / discard with labels and summaries.

    The reply is validated (validate_decisions); a faulty one gets one repair turn naming the problem. When
    the brain cannot answer or the repair fails too, the deterministic TermAuditor decides and `name` says so
    (recorded as the manifest's audit_by). A kept cluster without a summary gets the term auditor's.
    """

    def __init__(self, brain: Brain, cfg: Config):
        self.brain = brain
        self.cfg = cfg
        self.terms = TermAuditor(cfg)
        self.name = f"{brain.name} (LLM audit)"
        self.turns: list[tuple[str, str]] = []  # (prompt, reply) of every turn, for logs and tests

    def audit(self, briefs: Sequence[ClusterBrief]) -> list[AuditDecision]:
        from ra_agent.llm.structured import ask_json

        messages = audit_messages(briefs, self.cfg)
        limit = self.cfg.llm.max_reply_chars

        def parse(reply: str) -> tuple[list[AuditDecision] | None, str]:
            # a constrained reply is {"decisions": [...]}: parse_decisions reads its array
            try:
                return parse_decisions(reply, len(briefs), limit), ""
            except AuditError as exc:
                return None, str(exc)

        asked = ask_json(self.brain, messages, parse, audit_schema(len(briefs)),
                         label=f"LLM cluster audit by {self.brain.name}",
                         fix=lambda why: f"FIX JSON ONLY. Your audit was rejected: {why}. Return ONLY the corrected "
                                         "JSON array.")  # fmt: skip
        self.turns += asked.turns
        decisions = asked.value
        if decisions is None:
            log.warning("LLM cluster audit by %s failed (%s): the term auditor decides", self.brain.name,
                        asked.error or asked.problem)  # fmt: skip
            self.name = f"{self.terms.name} (fallback: LLM audit failed)"
            return self.terms.audit(briefs)
        by_idx = {b.idx: b for b in briefs}
        return [d if d.action != KEEP or d.summary else AuditDecision(d.idx, KEEP, label=d.label,
                summary=self.terms.summary(by_idx[d.idx])) for d in decisions]  # fmt: skip


def auditor_for(cfg: Config, brain: Brain | None = None) -> ClusterAuditor:
    """The LLM auditor when [clustering] llm_audit and an LLM brain answers (the configured backend is probed
    when no brain is given), else the labelled rule-based TermAuditor."""
    if not cfg.clustering.llm_audit or cfg.llm.brain == "rules":
        return TermAuditor(cfg)
    if brain is None:
        from ra_agent.llm.select import llm_brain

        candidate = llm_brain(cfg)
        reason = candidate.unavailable_reason()
        if reason is not None:
            log.info("Cluster Audit #1 by the term auditor: %s", reason)
            return TermAuditor(cfg)
        brain = candidate
    return TermAuditor(cfg) if is_rules_brain(brain) else LLMAuditor(brain, cfg)
