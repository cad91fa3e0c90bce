"""Quantitative synthesis of a set of trials: arm-level data from the abstracts, comparisons, pooled risk ratios."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ra_agent.evidence.synthesis.compare import OutcomeContrasts, comparisons
from ra_agent.evidence.synthesis.extract import EXTRACTOR, ArmDatum, extract_arm_data
from ra_agent.evidence.synthesis.pool import Pooled, pool, slug
from ra_agent.models import Paper

log = logging.getLogger(__name__)

__all__ = ["EXTRACTOR", "ArmDatum", "OutcomeContrasts", "Pooled", "Synthesis", "extract_arm_data", "synthesise"]


@dataclass
class Synthesis:
    """What a set of trials gives: each trial's arm data, and every comparison × outcome × time point pooled or not."""

    question: str  # the question label the caller gave ("" when none)
    papers: list[Paper]
    data: dict[int, list[ArmDatum]]  # PMID → its arm data (empty list: none extracted)
    results: list[Pooled] = field(default_factory=list)
    method: str = "dl"
    extractor: str = EXTRACTOR

    @property
    def pooled(self) -> list[Pooled]:
        return [r for r in self.results if r.poolable]

    @property
    def with_data(self) -> list[int]:
        return [pmid for pmid, data in self.data.items() if data]

    def main(self) -> Pooled | None:
        """The pooled result with the most trials (then participants): the review's headline comparison."""
        pooled = self.pooled
        return max(pooled, key=lambda r: (r.trials, r.participants)) if pooled else None


def synthesise(
    papers: Sequence[Paper],
    *,
    question: str = "",
    method: str = "dl",
    forest_dir: Path | None = None,
    stem: str = "forest",
    max_results: int = 12,
) -> Synthesis:
    """Extract arm data from each trial's abstract, form the comparisons, and pool each comparison × outcome × time
    point (random effects by `method`, "dl" DerSimonian-Laird or "pm" Paule-Mandel). Forest plots go to
    `<forest_dir>/<stem>_<comparison>_<outcome>.png`. `max_results` bounds how many comparison × outcome × time
    points are kept (most trials first)."""
    data = {p.pmid: extract_arm_data(p) for p in papers}
    found = comparisons(d for rows in data.values() for d in rows)[:max_results]
    results = [
        pool(oc, method=method, forest_dir=forest_dir, stem=f"{stem}_{slug(oc.comparison.label)}_{slug(oc.label)}")
        for oc in found
    ]
    log.info("synthesis%s: %d of %d trials with arm data, %d comparisons × outcomes, %d pooled",
             f" of {question!r}" if question else "", sum(bool(v) for v in data.values()), len(papers), len(results),
             sum(r.poolable for r in results))  # fmt: skip
    return Synthesis(question, list(papers), data, results, method)
