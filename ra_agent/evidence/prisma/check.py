"""PRISMA check (docs/architecture.md): items, rule cues and the LLM judge over a review's text or ra's own draft."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ra_agent.config import Config
from ra_agent.embed.tokens import count_tokens, truncate_tokens
from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.sr.search import SNIPPET_CHARS
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.structured import ask_json, is_rules_brain, json_object
from ra_agent.models import Paper
from ra_agent.store.db import Store

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
        (r"\bsearch strateg(?:y|ies)\b", r"\bsearch terms?\b", r"\bkey ?words?\b",
         r"\bsearch\w*\b.{0,80}\bMeSH\b|\bMeSH\b.{0,80}\bsearch\w*",  # MeSH named for the search, not as a field judged
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
    """Which PRISMA items a text reports, by cue: each found item keeps the first sentence (trimmed) that says so; in
    a Markdown text with a section named for the item ("### Objectives"), that section's first sentence (the item is
    reported there, whatever an earlier line happens to say)."""
    units = [s.strip() for line in text.splitlines() for s in sentences(line) if s.strip()]
    found: dict[int, str] = {}
    for item in items:
        name = PRISMA_ITEMS[item][0]
        section = next((at for at, unit in enumerate(units[:-1]) if unit.startswith("#") and not
                        units[at + 1].startswith("#") and unit.lstrip("#").strip().lower() == name.lower()),
                       None)  # fmt: skip
        if section is not None:
            found[item] = f"{name!r} in: {name}: {units[section + 1][:SNIPPET_CHARS]}"
            continue
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


COMPLIANT, NOT_COMPLIANT, UNDETERMINED = "true", "false", "undetermined"


@dataclass(frozen=True)
class ReviewCompliance:
    """PRISMA compliance of one prior review, from what its record holds.

    `status`: "true" when the text read reports every checked item; "false" when its full text (PMC)
    was read and misses some; "undetermined" when only the abstract was read and it misses some
    (abstracts rarely state eligibility, sources, search and selection, so silence proves nothing).
    """

    pmid: int
    status: str
    text: str  # what was read: "PMC<id> full text" or "abstract only: <why no full text>"
    missing: list[int]
    judged_by: str

    @property
    def full_text(self) -> bool:
        return self.text.endswith("full text")

    def as_dict(self) -> dict[str, Any]:
        return {"pmid": self.pmid, "status": self.status, "text": self.text, "missing": self.missing,
                "judged_by": self.judged_by}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReviewCompliance:
        return cls(int(data["pmid"]), str(data["status"]), str(data["text"]), [int(i) for i in data["missing"]],
                   str(data.get("judged_by", "")))  # fmt: skip


@dataclass
class PrismaResult:
    """prisma_check's answer; `as_dict()` is the tool's answer {"compliant": bool, "missing_items": [4, 7]}.

    For prior reviews `reviews` holds each review's status; `compliant` is True when one of them is
    compliant, else False, and `undetermined` lists the reviews whose compliance the record cannot show
    (a verdict that needs "no compliant review" is then provisional).
    """

    compliant: bool
    missing_items: list[int]
    evidence: dict[int, str]
    judged_by: str
    checked_items: list[int] = field(default_factory=list)
    source: str = "none"  # "draft", "prior_sr" or "none"
    documents: list[DocumentCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reviews: list[ReviewCompliance] = field(default_factory=list)
    filled: list[int] = field(default_factory=list)  # draft: items the draft was regenerated to state explicitly

    @property
    def undetermined(self) -> list[int]:
        return [r.pmid for r in self.reviews if r.status == UNDETERMINED]

    @property
    def compliance(self) -> bool | None:
        """PRISMA_compliant as Success and the dossier read it: for ra's draft, its check; without a covering review,
        False (nothing compliant covers the question); for covering reviews, True when one is compliant, None
        (unknown) while one is undetermined (abstract only), else False (each judged not compliant)."""
        if self.source != "prior_sr" or self.compliant:
            return self.compliant
        return None if self.undetermined else False

    @property
    def compliance_words(self) -> str:
        return {True: "compliant", False: "not compliant", None: "undetermined"}[self.compliance]

    def as_dict(self) -> dict[str, Any]:
        return {"compliant": self.compliant, "missing_items": self.missing_items}

    def to_json(self) -> dict[str, Any]:
        """Everything needed to rebuild the result (`from_json`) except the per-document rule evidence."""
        return {"compliant": self.compliant, "missing_items": self.missing_items,
                "evidence": {str(k): v for k, v in self.evidence.items()}, "judged_by": self.judged_by,
                "checked_items": self.checked_items, "source": self.source, "notes": self.notes,
                "reviews": [r.as_dict() for r in self.reviews], "undetermined": self.undetermined,
                "filled": self.filled}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PrismaResult:
        return cls(data["compliant"], data["missing_items"], {int(k): v for k, v in data["evidence"].items()},
                   data["judged_by"], data["checked_items"], data["source"], notes=data["notes"],
                   reviews=[ReviewCompliance.from_dict(r) for r in data.get("reviews", [])],
                   filled=[int(i) for i in data.get("filled", [])])  # fmt: skip


def _prisma_prompt(items: Sequence[int], texts: Sequence[str], draft: bool) -> list[dict[str, str]]:
    listing = "\n".join(f"{i}. {PRISMA_ITEMS[i][0]}: {PRISMA_ITEMS[i][1]}." for i in items)
    what = (
        "the draft systematic review below"
        if draft
        else "the prior systematic review below (its full text, or its abstract when that is all there is; "
        "'compliant' is true when it reports every item, 'missing_items' are the items it does not report)"
    )
    user = (
        f"Check {what} against these PRISMA 2020 items:\n{listing}\n\n"
        + "\n\n---\n\n".join(texts)
        + '\n\nReply with only one JSON object: {"compliant": true or false, "missing_items": [item numbers]}'
    )
    system = "You check systematic reviews against the PRISMA 2020 statement and answer with one JSON object."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _parse_verdict(reply: str, items: Sequence[int]) -> tuple[bool, list[int]] | None:
    obj = json_object(reply, "compliant")
    if obj is None or not isinstance(obj.get("compliant"), bool):
        return None
    raw = obj.get("missing_items", [])
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        return None
    missing = sorted({i for i in raw if i in items})
    # a verdict that calls a text compliant while naming missing items is read as not compliant
    return obj["compliant"] and not missing, missing


def _judge(
    cfg: Config, brain: Any, items: Sequence[int], doc: DocumentCheck, text: str, *, draft: bool
) -> tuple[tuple[bool, list[int]], str, list[str]]:
    """(compliant, missing), judged_by and notes for one text: the rule evidence with the rules brain, else
    the LLM's verdict (the rule verdict, labelled, when the LLM gives none)."""
    rules_verdict = (not doc.missing, list(doc.missing))
    if is_rules_brain(brain):
        return rules_verdict, f"{RULES_PRISMA} (rule evidence only; brain {getattr(brain, 'name', 'none')})", []
    verdict, why = _llm_prisma(cfg, brain, items, [text], draft=draft)
    if verdict is None:
        return rules_verdict, f"{RULES_PRISMA} (fallback: {why})", [why]
    notes = (
        []
        if verdict == rules_verdict
        else [f"{doc.source}: rule cues disagree: compliant={rules_verdict[0]}, missing={rules_verdict[1]}"]
    )
    return verdict, brain.name, notes


def review_compliance(
    cfg: Config, store: Store, paper: Paper, items: Sequence[int], brain: Any, eutils: Any = None
) -> tuple[ReviewCompliance, DocumentCheck, list[str]]:
    """PRISMA status of one prior review from its PMC full text when ra can read it, else its abstract
    (see ReviewCompliance for how the status follows from what was read)."""
    from ra_agent.evidence.prisma.fulltext import full_text

    found, why = full_text(cfg, store, paper, eutils)
    if found is not None:
        text, read = f"{paper.title}\n{found.text}", why
    else:
        text, read = review_text(paper), f"abstract only: {why}"
    doc = rule_evidence(text, items, f"PMID {paper.pmid}", paper.pmid)
    (compliant, missing), judged_by, notes = _judge(cfg, brain, items, doc, f"[PMID {paper.pmid}] {text}", draft=False)
    status = COMPLIANT if compliant else NOT_COMPLIANT if found is not None else UNDETERMINED
    return ReviewCompliance(paper.pmid, status, read, missing, judged_by), doc, notes


def check_draft(cfg: Config, brain: Any, draft_text: str) -> PrismaResult:
    """PRISMA 2020 items 4-8 ([sr] prisma_mandatory_items) of ra's own SR draft (conduct_SR's prisma_check).

    PRISMA edition: PRISMA 2020 (Page et al., BMJ 2021): 4 objectives, 5 eligibility criteria, 6 information
    sources, 7 search strategy, 8 selection process. Rule evidence (`rule_evidence`: text cues per item) is always
    computed; with an LLM brain its verdict decides (one prompt, one repair turn; on failure the rule verdict is
    used and labelled); with the rules brain (or none) the rule evidence decides and `judged_by` says so."""
    items = checked_items(cfg)
    doc = rule_evidence(draft_text, items, "draft")
    (compliant, missing), judged_by, notes = _judge(cfg, brain, items, doc, draft_text, draft=True)
    evidence = {i: f"draft: {text}" for i, text in doc.found.items()}
    result = PrismaResult(compliant, missing, evidence, judged_by, list(items), "draft", [doc], notes)
    log.info("prisma_check of the draft: compliant=%s missing=%s [%s]", compliant, missing, judged_by)
    return result


def review_statuses(cfg: Config, store: Store, pmids: Sequence[int], brain: Any, eutils: Any = None) -> PrismaResult:
    """seek_gap's prisma_check: the PRISMA status of each review covering a question (`pmids`; PMC full text when ra
    has it or can fetch it, else the abstract: `review_compliance`) and the answer over them: compliant when one
    review is; otherwise not, the reviews left undetermined listed. No review: not compliant (none exists to
    comply), every item missing, and a note says why."""
    items = checked_items(cfg)
    return _prior_result(items, [review_compliance(cfg, store, p, items, brain, eutils) for p in store.papers(pmids)])


def _prior_result(
    items: Sequence[int], checked: Sequence[tuple[ReviewCompliance, DocumentCheck, list[str]]]
) -> PrismaResult:
    """The answer from the reviews' statuses: compliant when one review is; the most complete review's missing items
    and evidence otherwise."""
    if not checked:
        note = "no review covers the question: no review exists to comply"
        return PrismaResult(False, list(items), {}, RULES_PRISMA, list(items), "none", notes=[note])
    reviews = [c[0] for c in checked]
    best = next((c for c in checked if c[0].status == COMPLIANT), None) or min(checked, key=lambda c: len(c[0].missing))
    evidence = {i: f"{best[1].source}: {text}" for i, text in best[1].found.items()}
    notes = [n for c in checked for n in c[2]]
    undetermined = [r.pmid for r in reviews if r.status == UNDETERMINED]
    if undetermined:
        notes.append(
            f"compliance undetermined for PMID {', '.join(map(str, undetermined))}: only the abstract was "
            "read, and an abstract's silence on an item does not show the full report misses it"
        )
    judges = sorted({r.judged_by for r in reviews})
    compliant = best[0].status == COMPLIANT
    return PrismaResult(compliant, [] if compliant else list(best[0].missing), evidence, "; ".join(judges),
                        list(items), "prior_sr", [c[1] for c in checked], notes, reviews)  # fmt: skip


def _llm_prisma(
    cfg: Config, brain: Any, items: Sequence[int], texts: Sequence[str], *, draft: bool
) -> tuple[tuple[bool, list[int]] | None, str]:
    """The LLM's verdict on one text (truncated to the prompt's token budget)."""
    overhead = count_tokens(_prisma_prompt(items, [], draft)[1]["content"])
    budget = max(cfg.tokens.token_soft_cap - overhead, 1)
    shown = [truncate_tokens(texts[0], budget)]
    asked = ask_json(brain, _prisma_prompt(items, shown, draft),
                     lambda r: (_parse_verdict(r, items), "no usable compliant/missing_items verdict"),
                     prisma_schema(items), json_repair=False)  # fmt: skip
    return asked.value, asked.failure(brain.name)


def prisma_schema(items: Sequence[int]) -> ReplySchema:
    """The verdict as a schema: {"compliant": bool, "missing_items": item numbers of those asked about}."""
    missing = {"type": "array", "items": {"enum": list(items)}, "maxItems": len(items)}
    return ReplySchema("prisma_verdict", {"type": "object", "additionalProperties": False,
                                          "required": ["compliant", "missing_items"],
                                          "properties": {"compliant": {"type": "boolean"}, "missing_items": missing}})  # fmt: skip
