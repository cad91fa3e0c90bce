"""The SR draft's quantitative sections, written from a `Synthesis`: title, effect measures, synthesis methods (PRISMA
13a-13f), results of individual studies and of syntheses (20a-20d), summary of findings, limitations, and a JSON
record of the comparisons for the Dagster asset. Every number printed is an extracted count or computed from them,
and each count is shown with the abstract sentence it came from and the trial's [PMID:…]."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ra_agent.evidence.synthesis import Synthesis
from ra_agent.evidence.synthesis.compare import PPI
from ra_agent.evidence.synthesis.pool import Pooled, pool
from ra_agent.fileio import atomic_write
from ra_agent.topics.metrics import markdown_table

QUOTE_CHARS = 400


def _cite(pmid: int) -> str:
    return f"[PMID:{pmid}]"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _class_plural(name: str) -> str:
    return {PPI: "proton pump inhibitors", "H2-receptor antagonist": "H2-receptor antagonists"}.get(name, name)


def review_title(question: str, syn: Synthesis | None, terms: Mapping[str, Sequence[str]]) -> str:
    """The question the review answers: the caller's question label, else the main pooled comparison with its outcome
    and the population's most frequent PICO term, else the objective's intervention and population terms."""
    population = " or ".join((terms.get("P") or ["the populations studied"])[:2])
    if question:
        return f"Systematic review: {question}"
    main = syn.main() if syn else None
    if main is not None:
        c = main.contrasts.comparison
        return (f"Systematic review: {_class_plural(c.intervention)} versus {_class_plural(c.comparator)} for "
                f"{main.contrasts.outcome} in {population}")  # fmt: skip
    interventions = " or ".join((terms.get("I") or ["the interventions studied"])[:2])
    return f"Systematic review: {interventions} in {population}"


def abstract_results(syn: Synthesis) -> str:
    main = syn.main()
    lead = f"Arm-level data were extracted from {len(syn.with_data)} of {len(syn.papers)} trial abstracts."
    if main is None:
        return lead + " No comparison had two trials with usable data: no effect estimate was pooled."
    return f"{lead} {_headline(main)}"


def _headline(r: Pooled) -> str:
    c = r.contrasts
    return (f"For {c.comparison.label}, {c.label}: {r.estimate()} ({_plural(r.trials, 'trial')}, "
            f"{r.participants} participants).")  # fmt: skip


def abstract_conclusion(syn: Synthesis) -> str:
    main = syn.main()
    if main is None or main.ci_low is None or main.ci_high is None:
        return "The abstracts do not give arm-level data for a pooled estimate; the trials' conclusions are quoted."
    c = main.contrasts
    if main.ci_low > 1:
        direction = f"more patients reached {c.outcome} with {c.comparison.intervention}"
    elif main.ci_high < 1:
        direction = f"fewer patients reached {c.outcome} with {c.comparison.intervention}"
    else:
        direction = f"the trials do not show a difference in {c.outcome}"
    return (f"In {_plural(main.trials, 'trial')} comparing {c.comparison.label}, {direction} ({c.label}); risk of "
            "bias and certainty of the evidence were not assessed (abstracts only).")  # fmt: skip


EFFECT_MEASURES = (
    "Dichotomous outcomes (healing, relapse, remission, symptom relief) are summarised as the risk ratio (RR) of the "
    "intervention arm over the comparator arm with its 95% confidence interval; RR > 1 means more patients with the "
    "outcome on the intervention."
)


def synthesis_methods(syn: Synthesis) -> str:
    """PRISMA 2020 item 13a-13f, each stated from what the synthesis did."""
    method = "Paule-Mandel" if syn.method == "pm" else "DerSimonian-Laird"
    other = "DerSimonian-Laird" if syn.method == "pm" else "Paule-Mandel"
    return "\n\n".join([
        "**Eligibility for each synthesis (13a).** Trials were grouped by comparison: drug class against drug class "
        "(proton pump inhibitor, H2-receptor antagonist, placebo), two proton pump inhibitors head to head, or two "
        "doses of one drug; a trial was eligible for a synthesis when its abstract gave events and totals for both "
        "sides at the same outcome and time point.",
        f"**Data preparation (13b).** Arm-level data were extracted by {syn.extractor}: counts stated as x/y or x of "
        "y; a percentage was converted to a count only with the arm size stated in the abstract and only when a "
        "whole number of patients reproduces the printed percentage; arms of the same class in one trial were "
        "combined (events and totals summed); 0.5 was added to each cell of a trial with a zero cell.",
        "**Tabulation and display (13c).** Each trial's extracted counts are tabulated with the sentence they come "
        "from; pooled results appear in a summary-of-findings table and as a forest plot per comparison and outcome.",
        f"**Synthesis (13d).** Risk ratios were pooled on the log scale with a random-effects model ({method} "
        "estimate of the between-trial variance) using statsmodels (`stats.meta_analysis.combine_effects`); "
        "comparisons with fewer than two trials were not pooled.",
        "**Heterogeneity (13e).** Between-trial heterogeneity is reported as I² and tau²; outcomes are pooled "
        "separately per time point, and no subgroup analysis or meta-regression was done.",
        f"**Sensitivity analyses (13f).** The main comparison was re-estimated with the {other} estimator of tau²."
        if syn.main() is not None else "**Sensitivity analyses (13f).** None: no comparison could be pooled.",
    ])  # fmt: skip


def individual_results(syn: Synthesis) -> str:
    """PRISMA item 19: every extracted count with its trial and source sentence(s)."""
    rows = []
    for paper in syn.papers:
        for d in syn.data.get(paper.pmid, []):
            source = _cell(d.sentence) + (f" — arm size: {_cell(d.size_sentence)}" if d.size_sentence else "")
            rows.append({"trial": _cite(d.pmid), "arm": d.arm, "outcome": d.outcome,
                         "time": f"{d.weeks:g} wk" if d.weeks is not None else "not stated",
                         "events/total": f"{d.events}/{d.total}", "source sentence": source})  # fmt: skip
    none = [p.pmid for p in syn.papers if not syn.data.get(p.pmid)]
    lead = (f"Arm-level data extracted by {syn.extractor} from {len(syn.with_data)} of {len(syn.papers)} abstracts; "
            f"{len(none)} state no result with both its numbers (count and arm size)"
            + (f": {' '.join(_cite(p) for p in none)}." if none else "."))  # fmt: skip
    if not rows:
        return lead
    return lead + "\n\n" + markdown_table(rows, ("trial", "arm", "outcome", "time", "events/total", "source sentence"))


def _sensitivity(syn: Synthesis, r: Pooled) -> Pooled:
    return pool(r.contrasts, method="dl" if syn.method == "pm" else "pm")


def syntheses_results(syn: Synthesis, reports: Path) -> str:
    """PRISMA item 20: per comparison × outcome, trials and participants (20a), the pooled estimate (20b), the
    heterogeneity (20c) and, for the main comparison, the sensitivity analysis (20d); then what was not poolable."""
    if not syn.results:
        return "No trial abstract gave arm-level data for both sides of a comparison: no synthesis was possible."
    main = syn.main()
    parts = []
    for r in syn.pooled:
        c = r.contrasts
        trials = " ".join(_cite(t.pmid) for t in c.trials)
        text = (f"**{c.comparison.label}: {c.label}.** {_plural(r.trials, 'trial')} {trials} with {r.participants} "
                f"participants contribute ({c.comparison.kind} comparison; risk of bias not assessed). Pooled "
                f"risk ratio {r.rr:.2f} (95% CI {r.ci_low:.2f} to {r.ci_high:.2f}; random effects, {r.method}). "
                f"Heterogeneity: I² {100 * (r.i2 or 0):.0f}%, tau² {r.tau2:.3f}.")  # fmt: skip
        if r is main:
            s = _sensitivity(syn, r)
            text += (f" Sensitivity analysis: with the {s.method} estimator the pooled risk ratio is {s.rr:.2f} "
                     f"(95% CI {s.ci_low:.2f} to {s.ci_high:.2f}).")  # fmt: skip
        if r.forest_png is not None:
            text += f"\n\n![Forest plot: {c.comparison.label}, {c.label}]({_relative(r.forest_png, reports)})"
        parts.append(text)
    single = [r for r in syn.results if not r.poolable]
    if single:
        lines = [f"- {r.contrasts.comparison.label}, {r.contrasts.label}: {' '.join(_cite(t.pmid) for t in r.contrasts.trials)} "
                 f"— not poolable ({r.not_poolable})" for r in single]  # fmt: skip
        parts.append("Not pooled:\n\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def summary_of_findings(syn: Synthesis) -> str:
    rows = []
    for r in syn.results:
        c = r.contrasts
        e1 = sum(t.intervention.events for t in c.trials)
        n1 = sum(t.intervention.total for t in c.trials)
        e2 = sum(t.comparator.events for t in c.trials)
        n2 = sum(t.comparator.total for t in c.trials)
        rows.append({"comparison": c.comparison.label, "outcome": c.label, "trials": r.trials,
                     "participants": r.participants, "intervention": f"{e1}/{n1}", "comparator": f"{e2}/{n2}",
                     "RR (95% CI)": f"{r.rr:.2f} ({r.ci_low:.2f} to {r.ci_high:.2f})" if r.poolable else "not pooled",
                     "I²": f"{100 * (r.i2 or 0):.0f}%" if r.poolable else "",
                     "certainty": "not assessed"})  # fmt: skip
    if not rows:
        return "No comparison had extracted arm-level data."
    return markdown_table(rows, ("comparison", "outcome", "trials", "participants", "intervention", "comparator",
                                 "RR (95% CI)", "I²", "certainty"))  # fmt: skip


def limitations(syn: Synthesis) -> str:
    missing = len(syn.papers) - len(syn.with_data)
    return (
        "Limitations: screening, eligibility and extraction were automated over titles and abstracts only. Abstracts "
        "cannot give what a review needs from full texts: risk of bias (randomisation, allocation concealment, "
        "blinding, attrition) was not assessed, reporting biases and certainty of evidence were not assessed, and "
        f"full outcome data are missing — {missing} of {len(syn.papers)} included abstracts state no result with both "
        "its count and its arm size, so they do not contribute to any pooled estimate. Percentages are converted to "
        "counts with the arm size the abstract states, which mixes intention-to-treat and per-protocol denominators "
        "and treats life-table rates as proportions; the pooled estimates are therefore provisional."
    )


def synthesis_record(syn: Synthesis, reports: Path) -> dict[str, Any]:
    """The comparisons, pooled estimates and forest plots as plain data (JSON sidecar; Dagster metadata)."""
    main = syn.main()
    return {
        "question": syn.question,
        "extractor": syn.extractor,
        "method": syn.method,
        "trials": len(syn.papers),
        "trials_with_arm_data": len(syn.with_data),
        "main": _headline(main) if main else "",
        "comparisons": [
            {
                "comparison": r.contrasts.comparison.label,
                "kind": r.contrasts.comparison.kind,
                "outcome": r.contrasts.outcome,
                "weeks": r.contrasts.weeks,
                "trials": [t.pmid for t in r.contrasts.trials],
                "participants": r.participants,
                "rr": r.rr,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "i2": r.i2,
                "tau2": r.tau2,
                "not_poolable": r.not_poolable,
                "forest_png": _relative(r.forest_png, reports) if r.forest_png else None,
            }
            for r in syn.results
        ],  # fmt: skip
        "arm_data": [d.as_dict() for rows in syn.data.values() for d in rows],
    }


def write_synthesis_record(syn: Synthesis, reports: Path, path: Path) -> Path:
    atomic_write(path, json.dumps(synthesis_record(syn, reports), indent=1, ensure_ascii=False) + "\n")
    return path


def synthesis_record_path(draft: Path) -> Path:
    return draft.with_name(f"{draft.stem}_synthesis.json")


def drafts_synthesis(paths: Sequence[str | Path]) -> dict[str, Any]:
    """What the SR drafts among `paths` pooled, for the reports asset's metadata: every comparison × outcome with its
    estimate, a Markdown table of the pooled ones, the forest plot paths and each draft's main comparison."""
    comparisons: list[dict[str, Any]] = []
    forests: list[str] = []
    mains: list[str] = []
    for path in map(Path, paths):
        record_path = synthesis_record_path(path)
        if not path.name.startswith("sr_draft_") or not record_path.exists():
            continue
        record = json.loads(record_path.read_text(encoding="utf-8"))
        mains += [f"{path.name}: {record['main']}"] if record.get("main") else []
        for c in record["comparisons"]:
            comparisons.append({"draft": path.name, **{k: v for k, v in c.items() if k != "forest_png"}})
            if c.get("forest_png"):
                forests.append((path.parent / c["forest_png"]).as_posix())
    rows = [{"comparison": c["comparison"], "outcome": c["outcome"], "weeks": c["weeks"], "trials": len(c["trials"]),
             "participants": c["participants"],
             "RR (95% CI)": f"{c['rr']:.2f} ({c['ci_low']:.2f} to {c['ci_high']:.2f})", "I²": f"{100 * c['i2']:.0f}%"}
            for c in comparisons if c.get("rr") is not None]  # fmt: skip
    table = markdown_table(rows, ("comparison", "outcome", "weeks", "trials", "participants", "RR (95% CI)", "I²"))
    return {"comparisons": comparisons, "pooled_md": table if rows else "no pooled estimate", "forest_plots": forests,
            "main": mains}  # fmt: skip
