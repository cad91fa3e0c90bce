"""The evidence-gap dossier of a cluster: trials, prior reviews and their PRISMA status, and a verdict with its reasons."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ra_agent.config import Config
from ra_agent.evidence.prisma.check import PrismaResult
from ra_agent.evidence.reports.common import (
    ClusterEvidence,
    cite,
    cluster_evidence,
    extractors,
    generated_line,
    metrics_table,
    pico_table,
    prisma_section,
    publish,
    short,
    trial_list,
)
from ra_agent.evidence.sr.overlap import SrOverlap, load_sr_overlap
from ra_agent.store.db import Store
from ra_agent.topics.metrics import markdown_table
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)


def _status_of(prisma: PrismaResult | None) -> dict[int, str]:
    """PMID -> PRISMA status words for the reviews the check read ("not checked" for the others)."""
    if prisma is None:
        return {}
    return {r.pmid: f"{r.status} ({r.text})" for r in prisma.reviews}


def _sr_section(sr: SrOverlap | None, store: Store, prisma: PrismaResult | None) -> str:
    if sr is None:
        return "find_existing_sr has not run for this cluster."
    where = ("**the local corpus only (offline)**: PubMed was not searched, so reviews outside this corpus are "
             "unknown; rule: review publication types or review cues in title/abstract") if sr.offline \
        else "PubMed (live E-utilities, systematic[sb])"  # fmt: skip
    lines = [
        f"- Searched: {where}" + (f"; note: {sr.error}" if sr.error else ""),
        f"- Query: `{sr.query}`",
        f"- Reviews checked: {sr.n_reviews}; covering the cluster ({covers_rule(sr)}): {len(sr.sr_pmids)}",
        *([f"- Review question (the goal's): {sr.question}"] if sr.question else []),
        *(f"- Why {cite(p)} covers: {sr.why[p]}" for p in sr.sr_pmids if p in sr.why),
        *(
            [f"- Trials since the newest covering review: {', '.join(map(str, sr.trials_since)) or 'none'}"]
            if sr.decided_by == "review question" and sr.sr_pmids
            else []
        ),
        f"- Overlap definition: {sr.definition}.",
        f"- Trials counted: {sr.trials_total} ({sr.trial_basis or 'not recorded'}); could have been included by a "
        f"covering review: {sr.trials_covered}",
        f"- Overlap: **{sr.overlap:.3f}** (pivot above {sr.pivot_at}: {'covered' if sr.covered else 'not covered'})",
    ]
    status = _status_of(prisma)
    covering = {c.pmid: c for c in sr.covering}
    listed = list(dict.fromkeys([*sr.reviews, *sr.sr_pmids]))
    papers = {p.pmid: p for p in store.papers(listed)}
    rows = [{"PMID": cite(pmid), "year": papers[pmid].year, "cosine": sr.cosines.get(pmid, "n/a"),
             "covers": f"yes: {len(covering[pmid].trials_covered)} trials ({covering[pmid].basis})"
             if pmid in covering else "no",
             "PRISMA": status.get(pmid, "not checked" if pmid in covering else "n/a (not covering)"),
             "title": short(papers[pmid].title, 110)}
            for pmid in listed if pmid in papers]  # fmt: skip
    if rows:
        lines += ["", markdown_table(rows, ("PMID", "year", "cosine", "covers", "PRISMA", "title"))]
    if sr.not_answering:
        shown = sorted(sr.not_answering)[:12]
        lines += ["", f"Reviews naming the question's population that do not answer it ({len(sr.not_answering)}; "
                  f"{len(shown)} shown):", *(f"- {cite(p)}: {sr.not_answering[p]}" for p in shown)]  # fmt: skip
    return "\n".join(lines)


# ----------------------------------------------------------------------------- gap dossier


@dataclass(frozen=True)
class Verdict:
    """The dossier's verdict: "gap", "covered" (pivot), "compliant review exists", "too few trials" or
    "not judged", with the reasons it rests on and why it is provisional (empty when it is not)."""

    kind: str
    headline: str
    reasons: list[str]
    provisional_because: list[str]

    @property
    def provisional(self) -> bool:
        return bool(self.provisional_because)

    def markdown(self) -> str:
        tag = " (provisional)" if self.provisional else ""
        out = [f"**Verdict: {self.kind}{tag}.** {self.headline}", "", "Reasons:", *[f"- {r}" for r in self.reasons]]
        if self.provisional:
            out += ["", "Provisional because:", *[f"- {r}" for r in self.provisional_because]]
        return "\n".join(out)


def covers_rule(sr: SrOverlap) -> str:
    """How find_existing_sr decided which reviews cover the cluster, in words."""
    if sr.decided_by == "review question":
        return (f"the review's own question encompasses the goal's and it could include >= {sr.pivot_at} of the "
                "question's trials; title cosine shown for information")  # fmt: skip
    return f"title cosine >= {sr.threshold} to the cluster centroid, {sr.centroid_source}"


def _reviews(pmids: list[int], sr: SrOverlap) -> str:
    years = {c.pmid: c.year for c in sr.covering}

    def cosine(pmid: int) -> str:
        return f"cosine {sr.cosines[pmid]:.2f}" if pmid in sr.cosines else "found by the review question"

    return ", ".join(f"{cite(p)} ({years.get(p) or 'year unknown'}, {cosine(p)})" for p in pmids)


def gap_verdict(
    eligible: int,
    need: int,
    sr: SrOverlap | None,
    prisma: PrismaResult | None,
    metrics: Mapping[str, Any],
    update_after: int | None = None,
) -> Verdict:
    """The verdict from the numbers: trials (never reviews), SR coverage, PRISMA. A covered cluster or question
    with `update_after` or more trials after its covering review is "covered, update warranted" (the same rule as
    `questions.build.assess_coverage`; by the review question, its own verdict is taken as it is)."""
    enough = eligible >= need
    rule = (f"judged per trial by {sr.judged_by or 'the review-question rules'} for the question {sr.question}: "
            "randomised, in humans with its condition as the trial's subject, testing its intervention for treatment "
            "(not as a device part or a diagnostic test); reviews, animal, healthy-volunteer and pharmacokinetic "
            "studies are not trials" if sr is not None and sr.question else
            "by the evidence.pico rules: randomised, population, intervention and outcome stated; reviews, "
            "meta-analyses and other non-trial designs are not trials")  # fmt: skip
    reasons = [f"{eligible} eligible randomised trials {'≥' if enough else '<'} the {need} required (eligibility "
               f"{rule})."]  # fmt: skip
    caveats: list[str] = []
    if sr is None:
        return Verdict("not judged", "find_existing_sr has not run, so coverage by existing reviews is unknown.",
                       reasons, ["no systematic-review search has run"])  # fmt: skip
    if sr.offline:
        caveats.append(
            "the systematic-review search covered only the local corpus (offline): a review indexed in "
            "PubMed but absent from this corpus would not have been seen. Re-run find_existing_sr online."
        )
    reasons.append(f"{sr.n_reviews} reviews checked, {len(sr.sr_pmids)} covering the cluster ({covers_rule(sr)}); they could have included {sr.trials_covered} of {sr.trials_total} trials: "
                   f"overlap {sr.overlap:.3f} {'>' if sr.covered else '≤'} pivot {sr.pivot_at}.")  # fmt: skip
    if sr.covered:
        since = sr.trials_since if sr.decided_by == "review question" else []
        newer = len(since) if sr.decided_by == "review question" else sr.trials_total - sr.trials_covered
        warranted = (sr.verdict == "covered, update warranted" if sr.decided_by == "review question"
                     else update_after is not None and newer >= update_after)  # fmt: skip
        headline = (f"Covered by {_reviews(sr.sr_pmids[:1], sr)}"
                    + (f" (and {len(sr.sr_pmids) - 1} more reviews answering it)" if len(sr.sr_pmids) > 1 else "")
                    + " → pivot: propose an alternative PICO from the trials these reviews leave out")  # fmt: skip
        if warranted:
            reasons.append(
                f"{newer} eligible trials after the covering review"
                + (f" ({sr.verdict_reason})" if sr.verdict_reason else f" (update after {update_after})")
            )
            return Verdict("covered, update warranted", headline + f"; {newer} trials since it: an update of the "
                           "review is warranted.", reasons, caveats)  # fmt: skip
        return Verdict("covered by an existing review", headline + f" ({newer} trials since it, fewer than "
                       "the update threshold).", reasons, caveats)  # fmt: skip
    if not enough:
        return Verdict("too few trials", "Not a gap yet: the cluster lacks the trials a review would need.",
                       reasons, caveats)  # fmt: skip
    compliant = prisma.compliant if prisma is not None else metrics.get("prisma_compliant")
    if compliant is None:
        caveats.append("the PRISMA check of the covering reviews has not run.")
    elif compliant:
        best = [r.pmid for r in prisma.reviews if r.status == "true"] if prisma is not None else []
        reasons.append("A covering review reports every checked PRISMA item" + (f": {_reviews(best, sr)}" if best
                       else "") + ".")  # fmt: skip
        return Verdict("compliant review exists", "Not a gap: a PRISMA-compliant review covers part of the cluster; "
                       "an update of that review may still be warranted.", reasons, caveats)  # fmt: skip
    elif not sr.sr_pmids:
        nearest = (f" (nearest: {cite(sr.reviews[0])}, cosine {sr.cosines[sr.reviews[0]]:.2f} < {sr.threshold})"
                   if sr.reviews and sr.decided_by == "title cosine" else "")  # fmt: skip
        reasons.append(f"No review covers the cluster{nearest}, so no compliant review exists.")
    else:
        reasons.append("No covering review passes the PRISMA check"
                       + (f" (most complete misses items {prisma.missing_items})" if prisma and prisma.missing_items
                          else "") + ".")  # fmt: skip
    if prisma is not None and prisma.undetermined:
        caveats.append(
            f"the PRISMA compliance of covering review(s) {_reviews(prisma.undetermined, sr)} is "
            "undetermined: only the abstract could be read (no PMC full text); the gap holds only if "
            "their full reports also miss the items."
        )
    return Verdict(
        "evidence gap", "The trials exist and no covering review is known to be PRISMA-compliant.", reasons, caveats
    )


def gap_dossier(
    cfg: Config,
    store: Store,
    cluster_id: str,
    *,
    goal_id: str,
    brain_name: str,
    sr: SrOverlap | None,
    prisma: PrismaResult | None,
    out_dir: Path | None = None,
) -> Path:
    """Write gap_dossier_<cluster_id>.md (in `out_dir`, default <data_dir>/reports): the verdict first (gap /
    covered by review X → pivot / covered, update warranted / too few trials, provisional when the review search
    was local-only or a covering review's compliance is undetermined) with its reasons, then the evidence.

    When find_existing_sr decided by the goal's review question the dossier is about that question: titled by its
    PICO in words, each eligible trial with the reason it is eligible, the reviews that answer it with why, those
    considered that do not, the trials since the newest covering review and what the run could not check; the
    cluster is only the organising layer it was found in. Otherwise (the older cluster-cosine rule) it is about the
    cluster. `sr` defaults to the stored find_existing_sr answer. Every cited PMID is checked against the store.
    """
    ev = cluster_evidence(cfg, store, cluster_id)
    sr = sr if sr is not None else load_sr_overlap(cfg, cluster_id)
    by_question = sr is not None and sr.decided_by == "review question"
    if sr is not None and by_question:  # the dossier is about the goal's question
        wanted = set(sr.question_trials)
        ev.eligible = [p for p in ev.papers if p.pmid in wanted]
    verdict = gap_verdict(len(ev.eligible), cfg.sr.min_eligible_trials, sr, prisma, ev.metrics,
                          update_after=cfg.sr.update_after_trials)  # fmt: skip
    pico = (f"## PICO extracted from each eligible trial\n\nFrom `{ev.pico_file.name}` (extractor: {extractors(ev)}); "
            "which trials are eligible is the review question's rule above, not this extraction.\n\n"
            if by_question else
            f"## PICO of the eligible trials\n\nFrom `{ev.pico_file.name}` ({len(ev.records)} records; extractor: "
            f"{extractors(ev)}). Eligible trial = randomised (publication type or study design) with population, "
            f"intervention and outcome stated; no review counts as a trial.\n\n")  # fmt: skip
    eligible = [p for p in ev.eligible if p.pmid in ev.records]
    if sr is not None and by_question:
        parts = [
            f"# Evidence-gap dossier: {sr.question_words or sr.question}",
            generated_line(goal_id, brain_name),
            _question_section(sr, ev),
            "## Verdict\n\n" + verdict.markdown(),
            f"## Eligible randomised trials ({len(ev.eligible)})\n\n" + (_trial_reasons(ev.eligible, sr) or "None."),
            "## Reviews that answer the question, and those that do not\n\n" + _sr_section(sr, store, prisma),
            "## Trials since the newest covering review\n\n" + _since(sr),
            "## PRISMA check of the covering reviews\n\n" + prisma_section(prisma, ev.metrics),
            "## Not checked by this run\n\n" + "\n".join(f"- {item}" for item in sr.unchecked),
            pico + (pico_table(eligible, ev.records) if eligible else "None."),
            "## The cluster it was found in (organising layer)",
            metrics_table(ev),
        ]
    else:
        parts = [
            f"# Evidence-gap dossier: {ev.label}",
            generated_line(goal_id, brain_name),
            "## Verdict\n\n" + verdict.markdown(),
            "## Cluster",
            metrics_table(ev),
            pico + (pico_table(eligible, ev.records) if eligible else "None."),
            f"## Eligible randomised trials ({len(ev.eligible)})\n\n" + (trial_list(ev.eligible) or "None."),
            "## Existing systematic reviews\n\n" + _sr_section(sr, store, prisma),
            "## PRISMA check of the covering reviews\n\n" + prisma_section(prisma, ev.metrics),
        ]
    path = (out_dir or Workspace.of(cfg).reports_dir) / f"gap_dossier_{cluster_id}.md"
    return publish(store, path, "\n\n".join(parts) + "\n")


def _question_section(sr: SrOverlap, ev: ClusterEvidence) -> str:
    return "\n".join([
        "## Review question",
        "",
        f"- Question id: {sr.question_id}",
        f"- PICO: {sr.question}",
        f"- Judged by: {sr.judged_by or 'rules'}",
        f"- Found in cluster {ev.cluster_id} ({ev.label}); the verdict is about the question, not the cluster",
    ])  # fmt: skip


def _trial_reasons(papers, sr: SrOverlap) -> str:
    rows = [{"PMID": cite(p.pmid), "year": p.year, "title": short(p.title, 100),
             "why eligible": sr.trial_reasons.get(p.pmid, "")} for p in papers]  # fmt: skip
    return markdown_table(rows, ("PMID", "year", "title", "why eligible")) if rows else ""


def _since(sr: SrOverlap) -> str:
    if not sr.sr_pmids:
        return "No review answering the question covers it."
    years = {c.pmid: c.year for c in sr.covering}
    newest = max(sr.sr_pmids, key=lambda p: (years.get(p) or 0, p))
    listed = ", ".join(cite(p) for p in sr.trials_since) or "none"
    return f"Since {cite(newest)} ({years.get(newest) or 'year unknown'}): {len(sr.trials_since)} trials: {listed}"
