"""PRISMA check (memo 70 §2.4): items, rule cues and the LLM judge over a review's text or ra's own draft."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ra_agent.config import Config
from ra_agent.embed.tokens import count_tokens, truncate_tokens
from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.sr_search import SNIPPET_CHARS, _ask, _is_rules, _json_object, load_sr_overlap
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.view import cluster_row, set_cluster_metrics

log = logging.getLogger(__name__)
RULES_PRISMA = "rules:prisma-cues-v1"


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
