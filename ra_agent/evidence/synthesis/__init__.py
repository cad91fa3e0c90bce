"""Quantitative synthesis of a set of trials: arm-level data from the abstracts, comparisons within the review
question and each trial's condition, pooled risk ratios (standardised mean differences for continuous data)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra_agent.evidence.synthesis.compare import Comparison, OutcomeContrasts, comparisons, planned_comparisons, slug
from ra_agent.evidence.synthesis.condition import condition_of
from ra_agent.evidence.synthesis.extract import EXTRACTOR, ArmDatum, extract_arm_data
from ra_agent.evidence.synthesis.llm_extract import PaperExtraction, extract_all
from ra_agent.evidence.synthesis.pool import Pooled, pool
from ra_agent.evidence.synthesis.question import SynthesisQuestion, as_question
from ra_agent.evidence.synthesis.sheet import ReviewerData
from ra_agent.llm.base import Brain
from ra_agent.models import Paper

log = logging.getLogger(__name__)

__all__ = ["EXTRACTOR", "ArmDatum", "OutcomeContrasts", "Pooled", "Synthesis", "SynthesisQuestion",
           "extract_arm_data", "synthesis_code_version", "synthesise"]  # fmt: skip

REPORT_VERSION = "4"  # the draft's synthesis sections (v4: forest plots as reviews print them, reviewer numbers)


def synthesis_code_version() -> str:
    """What an SR draft's numbers depend on: the report layout, the rules extractor and the LLM prompt versions."""
    from ra_agent.evidence.synthesis.llm_extract import PROMPT_VERSION

    return f"{REPORT_VERSION}+{EXTRACTOR}+{PROMPT_VERSION}"


@dataclass
class Synthesis:
    """What a set of trials gives: each trial's arm data and condition, every comparison × outcome × time point of
    the review question pooled or not, the comparisons outside the question, and the trials without usable numbers
    placed in the comparison their PICO names."""

    question: SynthesisQuestion | None
    papers: list[Paper]
    data: dict[int, list[ArmDatum]]  # PMID → its arm data (empty list: none extracted)
    conditions: dict[int, str] = field(default_factory=dict)  # PMID → the condition it studies
    results: list[Pooled] = field(default_factory=list)  # inside the question
    outside: list[OutcomeContrasts] = field(default_factory=list)  # data outside the question: reported, not pooled
    unextracted: dict[Comparison, list[int]] = field(default_factory=dict)  # no usable numbers, by PICO I/C
    method: str = "dl"
    extractors: dict[int, str] = field(default_factory=dict)  # PMID → the extractor that read its arm data
    model: str = "random"  # "random" (random effects, tau² by `method`) or "fixed" (inverse variance)
    reviewer_rows: int = 0  # numbers a reviewer gave in an extraction sheet that this synthesis used

    @property
    def label(self) -> str:
        return self.question.label if self.question else ""

    @property
    def extractor(self) -> str:
        """The extractors used, with how many trials each read ("rules:arm-numbers-v2" when only the rules)."""
        used = Counter(self.extractors.values())
        if not used:
            return EXTRACTOR
        if len(used) == 1:
            return next(iter(used))
        return "; ".join(f"{name} ({n} trial{'' if n == 1 else 's'})" for name, n in used.most_common())

    @property
    def pooled(self) -> list[Pooled]:
        return [r for r in self.results if r.poolable]

    @property
    def with_data(self) -> list[int]:
        return [pmid for pmid, data in self.data.items() if data]

    @property
    def usable(self) -> set[int]:
        """Trials whose numbers enter a comparison (inside or outside the question)."""
        return {t.pmid for oc in [*(r.contrasts for r in self.results), *self.outside] for t in oc.trials}

    def main(self) -> Pooled | None:
        """The pooled result inside the question with the most trials (then participants): the headline comparison."""
        pooled = self.pooled
        return max(pooled, key=lambda r: (r.trials, r.participants)) if pooled else None

    def comparison_of(self, pmid: int) -> Comparison | None:
        """The first comparison a trial belongs to: one its numbers enter (most trials first), else its PICO's."""
        for oc in [*(r.contrasts for r in self.results), *self.outside]:
            if any(t.pmid == pmid for t in oc.trials):
                return oc.comparison
        return next((c for c, pmids in self.unextracted.items() if pmid in pmids), None)

    def in_question(self, comparison: Comparison) -> bool:
        q = self.question
        return q is None or (q.covers_condition(comparison.condition) and
                             q.covers_arms(comparison.intervention_class, comparison.comparator_class, comparison.kind))  # fmt: skip


def _surname(author: str) -> str:
    """ "van Zyl JH" (MEDLINE), "Dekkers, C P" or "G Bianchi Porro" → the surname ("van Zyl", "Dekkers", "Bianchi Porro")."""
    if "," in author:
        return author.split(",")[0].strip()
    words = author.split()
    initials = [w for w in words if w.isupper() and len(w.replace(".", "")) <= 3]
    if len(words) > 1 and words[-1] in initials:
        return " ".join(words[:-1])
    if len(words) > 1 and words[0] in initials:
        return " ".join(w for w in words if w not in initials)
    return author.strip()


def study_name(paper: Paper) -> str:
    """How a forest plot names a study: "Smith 1997 (PMID 9354207)", else "PMID 9354207 (1997)"."""
    surname = _surname(paper.authors[0]) if paper.authors else ""
    if surname and paper.year:
        return f"{surname} {paper.year} (PMID {paper.pmid})"
    return f"PMID {paper.pmid}" + (f" ({paper.year})" if paper.year else "")


def synthesise(
    papers: Sequence[Paper],
    *,
    question: SynthesisQuestion | str | None = None,
    pico: Mapping[int, Any] | None = None,
    method: str = "dl",
    model: str = "random",
    forest_dir: Path | None = None,
    stem: str = "forest",
    max_results: int = 12,
    brain: Brain | None = None,
    cache: dict[int, PaperExtraction] | None = None,
    reviewer: ReviewerData | None = None,
) -> Synthesis:
    """Extract arm data from each trial's abstract (through `brain` when it is a language model, each value checked
    against its sentence, else by the rules: `llm_extract.extract_all`, with its `cache`), read each trial's
    condition (title, PICO population `pico[pmid].P`, MeSH, abstract), form the comparisons, and pool each
    comparison × outcome × time point inside the `question` (`model` "random": random effects with tau² by `method`,
    "dl" DerSimonian-Laird or "pm" Paule-Mandel; "fixed": inverse variance); comparisons outside it are kept, not
    pooled. Trials without usable numbers are placed in
    the comparison their PICO intervention and comparator fields name (else their title). Forest plots go to
    `<forest_dir>/<stem>_<comparison>_<outcome>.png`; `max_results` bounds how many comparison × outcome × time
    points are pooled (most trials first). `reviewer`: the numbers a review team gave in an extraction sheet
    (`sheet.ReviewerData`): they replace or add to the extracted data, each named as the reviewer's."""
    q = as_question(question)
    pico = pico or {}
    data, found_by = extract_all(papers, brain, cache)
    conditions = {p.pmid: condition_of(p.title, getattr(pico.get(p.pmid), "P", ""), p.mesh, p.abstract) for p in papers}
    first = q.intervention if q else ()
    if reviewer is not None:
        data, found_by, syn_rows = reviewer.apply(data, found_by)
    else:
        syn_rows = 0
    syn = Synthesis(q, list(papers), dict(data), conditions, method=method, extractors=found_by, model=model,
                    reviewer_rows=syn_rows)  # fmt: skip
    found = comparisons((d for rows in data.values() for d in rows), conditions, first)
    inside = [oc for oc in found if syn.in_question(oc.comparison)]
    syn.outside = [oc for oc in found if not syn.in_question(oc.comparison)]
    names = {p.pmid: study_name(p) for p in papers}
    syn.results = [
        pool(oc, method=method, model=model, forest_dir=forest_dir, names=names,
             stem=f"{stem}_{slug(oc.comparison.label)}_{slug(oc.label)}")
        for oc in inside[:max_results]
    ]  # fmt: skip
    usable = syn.usable
    for paper in papers:
        if paper.pmid in usable:
            continue
        record = pico.get(paper.pmid)
        planned = planned_comparisons(record.I, record.C, conditions[paper.pmid], first) if record else []
        for comparison in (planned or planned_comparisons(paper.title, "", conditions[paper.pmid], first))[:1]:
            syn.unextracted.setdefault(comparison, []).append(paper.pmid)
    log.info("synthesis%s: %d of %d trials with usable arm data, %d comparisons × outcomes in the question (%d "
             "pooled), %d outside it, %d trials placed by their PICO", f" of {q.label!r}" if q else "", len(usable),
             len(papers), len(syn.results), len(syn.pooled), len(syn.outside),
             sum(len(v) for v in syn.unextracted.values()))  # fmt: skip
    return syn
