"""The SR draft's quantitative sections, written from a `Synthesis`: title, effect measures, synthesis methods (PRISMA
13a-13f), results of individual studies and of syntheses (20a-20d), summary of findings, limitations, and a JSON
record of the comparisons for the Dagster asset. Every number printed is an extracted count or mean or computed from
them, and each is shown with the abstract sentence it came from and the trial's [PMID:…]."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ra_agent.evidence.synthesis import Synthesis
from ra_agent.evidence.synthesis.compare import H2RA, PPI, Comparison, OutcomeContrasts
from ra_agent.evidence.synthesis.extract import ArmDatum
from ra_agent.evidence.synthesis.pool import RR, Pooled, pool
from ra_agent.fileio import atomic_write
from ra_agent.topics.metrics import markdown_table

QUOTE_CHARS = 400


def _cite(pmid: int) -> str:
    return f"[PMID:{pmid}]"


def _cites(pmids: Sequence[int]) -> str:
    return " ".join(_cite(p) for p in pmids)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _class_plural(name: str) -> str:
    if name.startswith("another "):  # head to head within a class: "another proton pump inhibitor"
        return name
    if name in (PPI, H2RA) or name.endswith(("inhibitor", "antagonist", "agonist")):
        return name + "s"
    return name


def _versus(c: Comparison) -> str:
    return f"{_class_plural(c.intervention)} versus {_class_plural(c.comparator)}"


def _main_headline(syn: Synthesis) -> str:
    main = syn.main()
    return (f"{_versus(main.contrasts.comparison)} for {main.contrasts.outcome} in "
            f"{main.contrasts.comparison.condition}") if main else ""  # fmt: skip


def _asked(q) -> tuple[str, str]:
    """A question's intervention and comparator as the title and the objective both name them."""
    asked = " or ".join(_class_plural(c) for c in q.intervention) or "treatments"
    return asked, ("any comparator" if q.comparator == "any" else _class_plural(q.comparator))


def review_objective(syn: Synthesis, outcomes: Sequence[str]) -> str | None:
    """The Objectives sentence of a review with a question: the same intervention, comparator and population as its
    title (`review_title`), the outcomes the trials report, and the main comparison the title names; None without
    a question with a population."""
    q = syn.question
    if q is None or not q.population:
        return None
    asked, versus = _asked(q)
    sentence = (f"This review aims to assess the effects of {asked} compared with {versus} in people with "
                f"{q.population} on {', '.join(outcomes) or 'the outcomes the trials report'}.")  # fmt: skip
    headline = _main_headline(syn)
    return sentence + (f" Its main comparison: {headline}." if headline else "")


def review_title(syn: Synthesis, terms: Mapping[str, Sequence[str]]) -> str:
    """The question the review answers and its main comparison: the caller's question (its intervention, comparator
    and population; a bare label as given), else the main pooled comparison with its outcome and condition, else
    the objective's intervention and population terms."""
    q = syn.question
    headline = _main_headline(syn)
    if q is not None and q.population:
        asked, versus = _asked(q)
        title = f"Systematic review: {asked}{'' if q.comparator == 'any' else f' versus {versus}'} in {q.population}"
        return f"{title} (main comparison: {headline})" if headline else title
    if q is not None:
        return f"Systematic review: {q.label}" + (f" (main comparison: {headline})" if headline else "")
    if headline:
        return f"Systematic review: {headline}"
    population = " or ".join((terms.get("P") or ["the populations studied"])[:2])
    interventions = " or ".join((terms.get("I") or ["the interventions studied"])[:2])
    return f"Systematic review: {interventions} in {population}"


def question_statement(syn: Synthesis) -> str:
    """The review question as the draft states it (PICO line), or that none was given."""
    if syn.question is None:
        return "No review question was given: every comparison the trials report is synthesised."
    return f"Review question: {syn.question.label}. Comparisons outside it are listed, not pooled."


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
    more = "more patients reached" if main.measure == RR else "the mean was higher for"
    fewer = "fewer patients reached" if main.measure == RR else "the mean was lower for"
    if main.ci_low > main.null:
        direction = f"{more} {c.outcome} with {c.comparison.intervention}"
    elif main.ci_high < main.null:
        direction = f"{fewer} {c.outcome} with {c.comparison.intervention}"
    else:
        direction = f"the trials do not show a difference in {c.outcome}"
    return (f"In {_plural(main.trials, 'trial')} comparing {c.comparison.label}, {direction} ({c.label}); risk of "
            "bias and certainty of the evidence were not assessed (abstracts only).")  # fmt: skip


EFFECT_MEASURES = (
    "Dichotomous outcomes (healing, relapse, remission, symptom relief, eradication) are summarised as the risk "
    "ratio (RR) of the intervention arm over the comparator arm with its 95% confidence interval; RR > 1 means more "
    "patients with the outcome on the intervention. Continuous outcomes (mean and standard deviation per arm) are "
    "summarised as the standardised mean difference (SMD, Hedges' g) of the intervention minus the comparator."
)


def synthesis_methods(syn: Synthesis) -> str:
    """PRISMA 2020 item 13a-13f, each stated from what the synthesis did."""
    method = "Paule-Mandel" if syn.method == "pm" else "DerSimonian-Laird"
    other = "DerSimonian-Laird" if syn.method == "pm" else "Paule-Mandel"
    asked = (f" A comparison was synthesised when it answers the review question ({syn.question.label}); the "
             "others are listed." if syn.question else "")  # fmt: skip
    return "\n\n".join([
        "**Eligibility for each synthesis (13a).** Trials were grouped by comparison within the condition each "
        "trial studies (read from its title, PICO population, subject headings and abstract): drug class against drug "
        f"class (proton pump inhibitor, H2-receptor antagonist, placebo, ...), two drugs of one class head to head, "
        f"or two doses of one drug; a trial was eligible for a synthesis when its abstract gave events and totals "
        f"(or means, SDs and numbers) for both sides at the same outcome and time point.{asked} A trial whose "
        "abstract gives no usable numbers is listed under the comparison its PICO intervention and comparator name.",
        f"**Data preparation (13b).** Arm-level data were extracted by {syn.extractor}: counts stated as x/y or x of "
        "y; a percentage was converted to a count only with the arm size stated in the abstract and only when a "
        "whole number of patients reproduces the printed percentage; a standard error was converted to a standard "
        "deviation (SE × √n), an unlabelled ± was not pooled; a trial's intention-to-treat result was used before a "
        "per-protocol one; arms of the same class in one trial were combined (events and totals summed); 0.5 "
        "was added to each cell of a trial with a zero cell." + _reviewer_sentence(syn),
        "**Tabulation and display (13c).** Each trial's extracted numbers are tabulated with the sentence they come "
        "from; pooled results appear in a summary-of-findings table and as a forest plot per comparison and outcome.",
        "**Synthesis (13d).** Risk ratios (log scale) and standardised mean differences were pooled with "
        + (f"a random-effects model ({method} estimate of the between-trial variance)" if syn.model == "random" else
           "a fixed-effect (inverse-variance) model") + " using statsmodels (`stats.meta_analysis.combine_effects`); "
        "comparisons with fewer than two trials were not pooled.",
        "**Heterogeneity (13e).** Between-trial heterogeneity is reported as I² and tau²; outcomes are pooled "
        "separately per condition and time point, and no subgroup analysis or meta-regression was done.",
        f"**Sensitivity analyses (13f).** The main comparison was re-estimated with the {other} estimator of tau²."
        if syn.main() is not None else "**Sensitivity analyses (13f).** None: no comparison could be pooled.",
    ])  # fmt: skip


def _reviewer_sentence(syn: Synthesis) -> str:
    if not syn.reviewer_rows:
        return ""
    return (f" {_plural(syn.reviewer_rows, 'number set')} (study × outcome × time point × arm) were given or "
            "corrected by the review team in the extraction sheet (`ra extract`); they replace ra's, are named "
            "'reviewer (sheet, row)' in the table of individual results and marked † in the forest plots.")  # fmt: skip


def _result(d: ArmDatum) -> str:
    if d.continuous:
        return f"mean {d.mean:g} (SD {d.sd:g}), n = {d.total}"
    return f"{d.events}/{d.total}"


def individual_results(syn: Synthesis) -> str:
    """PRISMA item 19: every extracted number with its trial, the trial's condition and the source sentence(s)."""
    rows = []
    for paper in syn.papers:
        for d in syn.data.get(paper.pmid, []):
            source = _cell(d.sentence) + (f" — arm size: {_cell(d.size_sentence)}" if d.size_sentence else "")
            rows.append({"trial": _cite(d.pmid), "condition": syn.conditions.get(d.pmid, ""), "arm": d.arm,
                         "outcome": d.outcome, "time": f"{d.weeks:g} wk" if d.weeks is not None else "not stated",
                         "result": _result(d), "source sentence": source, "extracted by": d.extractor})  # fmt: skip
    none = [p.pmid for p in syn.papers if not syn.data.get(p.pmid)]
    lead = (f"Arm-level data extracted by {syn.extractor} from {len(syn.with_data)} of {len(syn.papers)} abstracts; "
            f"{len(none)} state no result with both its numbers (count and arm size)"
            + (f": {_cites(none)}." if none else "."))  # fmt: skip
    if not rows:
        return lead
    columns = ("trial", "condition", "arm", "outcome", "time", "result", "source sentence", "extracted by")
    return lead + "\n\n" + markdown_table(rows, columns)


def _sensitivity(syn: Synthesis, r: Pooled) -> Pooled:
    return pool(r.contrasts, method="dl" if syn.method == "pm" else "pm", model="random")


def _effect_name(r: Pooled) -> str:
    return "risk ratio" if r.measure == RR else "standardised mean difference"


def _pooled_paragraph(syn: Synthesis, r: Pooled, reports: Path) -> str:
    c = r.contrasts
    text = (f"**{c.comparison.label}: {c.label}.** {_plural(r.trials, 'trial')} {_cites([t.pmid for t in c.trials])} "
            f"with {r.participants} participants contribute ({c.comparison.kind} comparison; risk of bias not "
            f"assessed). Pooled {_effect_name(r)} {r.effect:.2f} (95% CI {r.ci_low:.2f} to {r.ci_high:.2f}; "
            f"{r.model[:1].lower() + r.model[1:]}). Heterogeneity: I² {100 * (r.i2 or 0):.0f}%, tau² {r.tau2:.3f}, "
            f"Chi² {r.q:.2f} on {r.trials - 1} df (P {'< 0.001' if r.q_p < 0.001 else f'= {r.q_p:.3f}'}); test for "
            f"the overall effect Z = {abs(r.z):.2f} (P {'< 0.001' if r.z_p < 0.001 else f'= {r.z_p:.3f}'}).")  # fmt: skip
    if r.reviewer:
        text += f" Numbers of {_cites(sorted(r.reviewer))} were given by the review team (extraction sheet)."
    if r is syn.main():
        s = _sensitivity(syn, r)
        text += (f" Sensitivity analysis: with the {s.method} estimator the pooled {_effect_name(s)} is {s.effect:.2f} "
                 f"(95% CI {s.ci_low:.2f} to {s.ci_high:.2f}).")  # fmt: skip
    if r.forest_png is not None:
        text += f"\n\n![Forest plot: {c.comparison.label}, {c.label}]({_relative(r.forest_png, reports)})"
    return text


def syntheses_results(syn: Synthesis, reports: Path) -> str:
    """PRISMA item 20: per comparison × outcome inside the question, trials and participants (20a), the pooled
    estimate (20b), the heterogeneity (20c) and, for the main comparison, the sensitivity analysis (20d); then what
    was not poolable, the trials without usable numbers by comparison, and the comparisons outside the question."""
    parts = [_pooled_paragraph(syn, r, reports) for r in syn.pooled]
    single = [r for r in syn.results if not r.poolable]
    if single:
        parts.append("Not pooled:\n\n" + "\n".join(
            f"- {r.contrasts.comparison.label}, {r.contrasts.label}: {_cites([t.pmid for t in r.contrasts.trials])} "
            f"— not poolable ({r.not_poolable})" for r in single))  # fmt: skip
    unextracted = {c: p for c, p in syn.unextracted.items() if syn.in_question(c)}
    if unextracted:
        parts.append("No usable numbers in the abstract (placed by their PICO intervention and comparator):\n\n"
                     + "\n".join(f"- {c.label}: {_cites(p)}" for c, p in unextracted.items()))  # fmt: skip
    outside = _outside(syn)
    if outside:
        parts.append("Outside the review question (another condition or comparison; reported, not pooled):\n\n"
                     + "\n".join(outside))  # fmt: skip
    if not parts:
        return "No trial abstract gave arm-level data for both sides of a comparison: no synthesis was possible."
    return "\n\n".join(parts)


def _outside(syn: Synthesis) -> list[str]:
    lines: dict[Comparison, list[int]] = {}
    for oc in syn.outside:
        lines.setdefault(oc.comparison, []).extend(
            t.pmid for t in oc.trials if t.pmid not in lines.get(oc.comparison, [])
        )
    for c, pmids in syn.unextracted.items():
        if not syn.in_question(c):
            lines.setdefault(c, []).extend(pmids)
    return [f"- {c.label}: {_cites(sorted(set(p)))}" for c, p in lines.items()]


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _arm_totals(contrasts: OutcomeContrasts, side: str) -> str:
    sides = [getattr(t, side) for t in contrasts.trials]
    if contrasts.continuous:
        return f"n = {sum(s.total for s in sides)}"
    return f"{sum(s.events for s in sides)}/{sum(s.total for s in sides)}"


def summary_of_findings(syn: Synthesis) -> str:
    rows = []
    for r in syn.results:
        c = r.contrasts
        rows.append({"comparison": c.comparison.label, "outcome": c.label, "trials": r.trials,
                     "participants": r.participants, "intervention": _arm_totals(c, "intervention"),
                     "comparator": _arm_totals(c, "comparator"),
                     "effect (95% CI)": f"{r.measure} {r.effect:.2f} ({r.ci_low:.2f} to {r.ci_high:.2f})"
                     if r.poolable else "not pooled",
                     "I²": f"{100 * (r.i2 or 0):.0f}%" if r.poolable else "",
                     "certainty": "not assessed"})  # fmt: skip
    if not rows:
        return "No comparison inside the review question had extracted arm-level data."
    return markdown_table(rows, ("comparison", "outcome", "trials", "participants", "intervention", "comparator",
                                 "effect (95% CI)", "I²", "certainty"))  # fmt: skip


def limitations(syn: Synthesis) -> str:
    missing = len(syn.papers) - len(syn.with_data)
    return (
        "Limitations: screening, eligibility and extraction were automated over titles and abstracts only. Abstracts "
        "cannot give what a review needs from full texts: risk of bias (randomisation, allocation concealment, "
        "blinding, attrition) was not assessed, reporting biases and certainty of evidence were not assessed, and "
        f"full outcome data are missing — {missing} of {len(syn.papers)} included abstracts state no result with both "
        "its count and its arm size, so they do not contribute to any pooled estimate. Percentages are converted to "
        "counts with the arm size the abstract states, which mixes intention-to-treat and per-protocol denominators "
        "where the abstract does not say which it uses, and life-table or cumulative rates are not read, so trials "
        "reporting only those do not contribute; each trial's condition is read by rules from its title and "
        "abstract; the pooled estimates are therefore provisional."
    )


def _comparison_record(r: Pooled | OutcomeContrasts, reports: Path, *, in_question: bool) -> dict[str, Any]:
    oc = r.contrasts if isinstance(r, Pooled) else r
    pooled = r if isinstance(r, Pooled) else None
    return {
        "comparison": oc.comparison.label,
        "arms": oc.comparison.arms,
        "condition": oc.comparison.condition,
        "kind": oc.comparison.kind,
        "in_question": in_question,
        "outcome": oc.outcome,
        "weeks": oc.weeks,
        "outcome_label": oc.label,
        "trials": [t.pmid for t in oc.trials],
        "participants": sum(t.intervention.total + t.comparator.total for t in oc.trials),
        "measure": pooled.measure if pooled else ("SMD" if oc.continuous else RR),
        "effect": pooled.effect if pooled else None,
        "ci_low": pooled.ci_low if pooled else None,
        "ci_high": pooled.ci_high if pooled else None,
        "i2": pooled.i2 if pooled else None,
        "tau2": pooled.tau2 if pooled else None,
        "not_poolable": pooled.not_poolable if pooled else "outside the review question",
        "forest_png": _relative(pooled.forest_png, reports) if pooled and pooled.forest_png else None,
    }


def synthesis_record(syn: Synthesis, reports: Path) -> dict[str, Any]:
    """The comparisons, pooled estimates and forest plots as plain data (JSON sidecar; Dagster metadata)."""
    main = syn.main()
    return {
        "question": syn.label,
        "extractor": syn.extractor,
        "method": syn.method,
        "trials": len(syn.papers),
        "trials_with_arm_data": len(syn.with_data),
        "main": _headline(main) if main else "",
        "comparisons": [_comparison_record(r, reports, in_question=True) for r in syn.results]
        + [_comparison_record(oc, reports, in_question=False) for oc in syn.outside],
        "no_usable_numbers": [
            {"comparison": c.label, "in_question": syn.in_question(c), "trials": p} for c, p in syn.unextracted.items()
        ],  # fmt: skip
        "conditions": {str(k): v for k, v in syn.conditions.items()},
        "arm_data": [d.as_dict() for rows in syn.data.values() for d in rows],
    }


def write_synthesis_record(syn: Synthesis, reports: Path, path: Path) -> Path:
    atomic_write(path, json.dumps(synthesis_record(syn, reports), indent=1, ensure_ascii=False) + "\n")
    return path


def synthesis_record_path(draft: Path) -> Path:
    return draft.with_name(f"{draft.stem}_synthesis.json")


def drafts_synthesis(paths: Sequence[str | Path]) -> dict[str, Any]:
    """What the SR drafts among `paths` pooled, for the reports asset's metadata: every comparison × outcome with its
    estimate, a Markdown table of the pooled ones, the forest plot paths (and as Markdown images) and each draft's
    main comparison."""
    comparisons: list[dict[str, Any]] = []
    forests: list[tuple[str, str]] = []
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
                forests.append(((path.parent / c["forest_png"]).as_posix(), f"{c['comparison']}: {c['outcome_label']}"))
    rows = [{"comparison": c["comparison"], "outcome": c["outcome_label"], "trials": len(c["trials"]),
             "participants": c["participants"],
             "effect (95% CI)": f"{c['measure']} {c['effect']:.2f} ({c['ci_low']:.2f} to {c['ci_high']:.2f})",
             "I²": f"{100 * c['i2']:.0f}%"} for c in comparisons if c.get("effect") is not None]  # fmt: skip
    table = markdown_table(rows, ("comparison", "outcome", "trials", "participants", "effect (95% CI)", "I²"))
    return {"comparisons": comparisons, "pooled_md": table if rows else "no pooled estimate",
            "forest_plots": [p for p, _ in forests], "forest_md": forest_markdown(forests), "main": mains}  # fmt: skip


def forest_markdown(forests: Sequence[tuple[str, str]]) -> str:
    """The forest plots as Markdown images (one per line, captioned), or that there are none."""
    return "\n\n".join(f"![{caption}]({path})" for path, caption in forests) or "no forest plot"
