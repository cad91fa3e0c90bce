"""ra's own systematic-review draft of a cluster: PICO table, PRISMA 2020 flow diagram and checklist, cited synthesis."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from ra_agent.config import Config
from ra_agent.evidence.pico.extract import PicoRecord
from ra_agent.evidence.pico.terms import pico_field_terms
from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.prisma.check import PrismaResult
from ra_agent.evidence.prisma.checklist import CHECKLIST_MARKER, checklist_markdown, prisma_checklist, prisma_subitems
from ra_agent.evidence.prisma.flow import prisma_flow, prisma_flow_png
from ra_agent.evidence.reports.common import (
    ClusterEvidence,
    ReportError,
    cite,
    cluster_evidence,
    extractors,
    generated_line,
    pico_table,
    prisma_section,
    publish,
    short,
)
from ra_agent.evidence.sr.overlap import SrOverlap, load_sr_overlap
from ra_agent.evidence.synthesis import Synthesis, SynthesisQuestion, synthesise
from ra_agent.evidence.synthesis import report as quant
from ra_agent.evidence.synthesis.sheet import reviewer_data
from ra_agent.llm.base import Brain
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.expansion import expansion_history
from ra_agent.topics.metrics import markdown_table
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

CONCLUSION_LABELS = re.compile(r"CONCLUSION|INTERPRETATION|IMPLICATION")
SENTENCE_CHARS = 320


# ----------------------------------------------------------------------------- SR draft


def _sources(store: Store, papers: Sequence[Paper]) -> list[str]:
    """Each source of the corpus with its record count, and how many of them are in this cluster."""
    mine = Counter(p.source for p in papers)
    counts = Counter(dict(store.conn.execute("SELECT source, COUNT(*) FROM paper GROUP BY source").fetchall()))
    names = []
    for source, total in counts.most_common():
        n = f"{total} records ({mine.get(source, 0)} in this topic cluster)"
        kind, _, name = source.partition(":")
        if kind == "efetch":
            names.append(f"PubMed/MEDLINE via NCBI E-utilities (esearch/efetch): {n}")
        elif kind == "baseline":
            names.append(f"PubMed/MEDLINE baseline or update file {name}: {n}")
        elif kind == "import":
            names.append(f"search export {name} (PubMed records identified by PMID): {n}")
        else:
            names.append(f"{source or 'unknown source'}: {n}")
    return names


def _searches(store: Store) -> list[str]:
    rows = store.conn.execute("SELECT query, count, fetched, offline, ran_ts FROM search_run ORDER BY ran_ts")
    out = []
    for r in rows:
        when = datetime.fromtimestamp(r["ran_ts"], UTC).strftime("%Y-%m-%d")
        where = "local corpus (offline full-text search)" if r["offline"] else "PubMed"
        out.append(f"`{r['query']}` on {when}: {r['count']} hits in {where}, {r['fetched']} records fetched")
    return out


def _objective(terms: Mapping[str, Sequence[str]]) -> str:
    def part(key: str, fallback: str) -> str:
        return " or ".join(terms.get(key) or []) or fallback

    return (
        f"This review aims to assess the effects of {part('I', 'the interventions studied')} compared with "
        f"{part('C', 'the comparators used')} in {part('P', 'the populations studied')} on "
        f"{part('O', 'the outcomes reported')}."
    )


def key_sentence(paper: Paper) -> str:
    """The abstract's conclusion: the first sentence of a CONCLUSION(S)/INTERPRETATION section, else its last sentence."""
    sections = sections_of(paper)
    for section in reversed(sections):
        if CONCLUSION_LABELS.search(section.label) and section.text.strip():
            return short(sentences(section.text)[0], SENTENCE_CHARS)
    units = [s for section in sections for s in sentences(section.text)]
    return short(units[-1], SENTENCE_CHARS) if units else short(paper.title, SENTENCE_CHARS)


def _synthesis(papers: Sequence[Paper], records: Mapping[int, PicoRecord], syn: Synthesis | None = None) -> str:
    """Per comparison, a summary sentence and each trial's conclusion quoted from its abstract, cited.

    A trial joins the comparison its extracted arm data support, else the one its PICO intervention and comparator
    name (`syn.comparison_of`); a trial with neither joins the group of the intervention term (shared by at least
    two included trials, `pico_field_terms`) its intervention field names first, else "other interventions"."""
    groups: dict[str, list[Paper]] = {}
    terms = pico_field_terms([records[p.pmid] for p in papers], [], max(len(papers), 1))["I"]
    for paper in papers:
        comparison = syn.comparison_of(paper.pmid) if syn else None
        text = records[paper.pmid].I.lower()
        found = [(m.start(), t) for t in terms if (m := re.search(r"\b" + re.escape(t) + r"\b", text))]
        term = comparison.label if comparison else (min(found)[1] if found else "other interventions")
        groups.setdefault(term, []).append(paper)
    out = []
    for term, members in sorted(groups.items(), key=lambda kv: (kv[0] == "other interventions", -len(kv[1]))):
        comparators = Counter(short(records[p.pmid].C, 60) for p in members if records[p.pmid].C.strip())
        outcomes = Counter(short(records[p.pmid].O, 60) for p in members if records[p.pmid].O.strip())
        lead = f"{len(members)} randomised trial{'s' if len(members) > 1 else ''} studied {term}"
        if comparators:
            lead += f" against {'; '.join(c for c, _ in comparators.most_common(3))}"
        if outcomes:
            lead += f", reporting {'; '.join(o for o, _ in outcomes.most_common(3))}"
        lead += " " + " ".join(cite(p.pmid) for p in members) + "."
        body = [f"- {cite(p.pmid)} ({p.year or 'year unknown'}): {key_sentence(p)}" for p in members]
        out.append(f"#### {term[:1].upper() + term[1:]} ({len(members)})\n\n{lead}\n\n" + "\n".join(body))
    return "\n\n".join(out)


def _span(ev: ClusterEvidence) -> str:
    years = sorted(p.year for p in ev.eligible if p.year)
    unknown = len(ev.eligible) - len(years)
    span = f"{years[0]}-{years[-1]}" if years else "in unknown years"
    return span + (f" ({unknown} without a year)" if years and unknown else "")


def _fill(item: int, ev: ClusterEvidence, searches: Sequence[str], sources: Sequence[str]) -> str:
    """An explicit statement of a PRISMA item from what ra holds (used when a check found the item missing)."""
    span = _span(ev)
    statements = {
        4: f"The objective of this review is stated above; it is answered with {len(ev.eligible)} trials.",
        5: "Studies were included if they were randomised controlled trials stating population, intervention and "
        "outcome; all other designs, reviews included, were excluded.",
        6: "Information sources: " + "; ".join(sources) + ".",
        7: "Search strategy: " + ("; ".join(searches) if searches else "no database search was run") + f"; included "
        f"trials were published {span}.",
        8: "Selection process: records were screened by rules over the extracted PICO fields; no human reviewer "
        "screened them.",
        9: f"Data collection: data were extracted from the abstracts by {extractors(ev)}.",
        10: "Data items: population, intervention, comparator, outcomes, design, age and sample size were sought.",
    }
    return statements.get(item, "")


def sr_draft(
    cfg: Config,
    store: Store,
    cluster_id: str,
    *,
    goal_id: str,
    brain_name: str,
    prisma: PrismaResult | None,
    out_dir: Path | None = None,
    fill: Sequence[int] = (),
    question: SynthesisQuestion | str | None = None,
    brain: Brain | None = None,
    arm_cache: dict | None = None,
) -> Path:
    """Write sr_draft_<cluster_id>.md (in `out_dir`, default <data_dir>/reports) with its PRISMA flow PNG and its
    PRISMA 2020 checklist (sr_draft_<cluster_id>_prisma_checklist.md) next to it.

    Sections follow PRISMA 2020: title, structured abstract, rationale (the prior reviews found) and
    objectives (from the included trials' most frequent PICO terms), eligibility criteria, information
    sources (the stored records' provenance), search strategy (the search strings with their dates and the
    expansion runs), selection and data collection, synthesis methods, the flow counts (`prisma_flow`) with
    the diagram, the PICO table of the included trials, each trial's conclusion quoted per comparison citing
    [PMID:…], discussion, registration and data availability. `fill` lists PRISMA items a check found missing:
    each gets an explicit statement built from the same data. After CHECKLIST_MARKER come the PRISMA check
    (`prisma`) and the checklist of all 27 items, met or missing, read off the text above the marker.
    Every cited PMID is checked against the store.

    The quantitative synthesis (`synthesis.synthesise` over the included trials, arm data read by `brain` when it
    is a language model, else by the rules; `arm_cache` keeps the LLM's answers between drafts of one cluster)
    gives the title (the review `question` the caller has, a `SynthesisQuestion` or a bare label, with the main
    pooled comparison), the effect measures, the synthesis methods (PRISMA 13a-13f), each trial's extracted numbers
    with their source sentences, the pooled estimates of the comparisons inside the question with forest plots
    (sr_draft_<cluster_id>_forest_*.png) and heterogeneity (20a-20d), the comparisons outside it, a
    summary-of-findings table and the limitations; sr_draft_<cluster_id>_synthesis.json records the comparisons
    for the Dagster asset.
    """
    ev = cluster_evidence(cfg, store, cluster_id)
    if not ev.eligible:
        raise ReportError(f"cluster {cluster_id} has no eligible trial to synthesise")
    reports = out_dir or Workspace.of(cfg).reports_dir
    flow = prisma_flow(cfg, store, ev)
    png = prisma_flow_png(flow, reports / f"sr_draft_{cluster_id}_prisma_flow.png")
    included = [ev.records[p.pmid] for p in ev.eligible]
    terms = pico_field_terms(included, [], cfg.sr.alt_pico_terms)
    runs = expansion_history(cfg, cluster_id)
    searches, sources = _searches(store), _sources(store, ev.papers)
    sr = load_sr_overlap(cfg, cluster_id)
    judges = sorted({r.get("judge", "") for r in runs} - {""})
    fill = fill or (prisma.filled if prisma is not None else ())
    filled = {i: _fill(i, ev, searches, sources) for i in fill}
    extra = lambda *items: "".join(f"\n\n{filled[i]}" for i in items if filled.get(i))  # noqa: E731
    n = len(ev.eligible)
    syn = synthesise(ev.eligible, question=question, pico=ev.records, forest_dir=reports,
                     stem=f"sr_draft_{cluster_id}_forest", brain=brain, cache=arm_cache, method=cfg.sr.tau2_estimator,
                     model=cfg.sr.pooling_model, reviewer=reviewer_data(cfg))  # fmt: skip
    parts = [
        f"# {quant.review_title(syn, terms)}",
        f"_Draft of topic cluster `{cluster_id}` ({ev.label})._",
        generated_line(goal_id, brain_name),
        "## Abstract\n\n"
        f"**Objectives.** {_objective(terms)}\n\n"
        f"**Methods.** Records from {'; '.join(sources)} were clustered by topic; randomised trials stating "
        f"population, intervention and outcome were included; PICO fields were extracted from the abstracts.\n\n"
        f"**Results.** {flow.identified} records identified, {flow.assessed} assessed, {n} trials included. "
        f"{quant.abstract_results(syn)}\n\n"
        f"**Conclusions.** {quant.abstract_conclusion(syn)}",
        "## Introduction",
        "### Rationale\n\n" + _rationale(sr),
        "### Objectives\n\n" + _objective(terms) + " The objective is derived from the most frequent PICO terms of "
        f"the {n} included trials. {quant.question_statement(syn)}" + extra(4),
        "## Methods",
        "### Eligibility criteria\n\n"
        "- Inclusion criteria: randomised controlled trials (publication type, or a randomised design stated in the "
        f"abstract) belonging to the topic cluster '{ev.label}', whose abstract states the population, the "
        "intervention and at least one outcome.\n"
        "- Exclusion criteria: non-randomised designs (including reviews and observational studies) and trials "
        "whose abstract does not state population, intervention and outcome." + extra(5),
        "### Information sources\n\n" + "\n".join(f"- {s}" for s in sources)
        + (f"\n- Prior systematic reviews: {'PubMed' if not sr.offline else 'the local corpus only (offline)'} "
           f"({sr.n_reviews} reviews found)" if sr else "") + extra(6),
        "### Search strategy\n\n"
        + ("\n".join(f"- Search: {s}" for s in searches) if searches else "- No database search was run by ra; the "
           "records come from the information sources above.")
        + "".join(f"\n- Expansion ({r['mode']}): {len(r.get('candidates', []))} candidates, "
                  f"{len(r.get('accepted', []))} accepted, stopped by {r.get('halted_by')}" for r in runs)
        + (f"\n- Prior-review search: `{sr.query}`" if sr else "") + f"\n- Included trials were published {_span(ev)}."
        + extra(7),
        "### Selection process\n\n"
        f"Records were grouped by HDBSCAN clustering of title/abstract embeddings ({cfg.embedding.model_name}); the "
        f"cluster was audited by {ev.manifest['audit_by'] or 'the clustering rules'}"
        + (f"; expansion candidates were screened by the boundary judge ({', '.join(judges)})" if judges else "")
        + ". Eligibility was then decided per record by the rule above over the extracted PICO fields. No human "
        "reviewer screened the records." + extra(8),
        "### Data collection process\n\n"
        f"PICO fields (population, intervention, comparator, outcome, design, age, sample size) were extracted from "
        f"the abstracts by {extractors(ev)}; see `{ev.pico_file.name}`. Data items sought: the outcomes each trial "
        "reports as its primary or main outcome, with the arms compared and the number randomised." + extra(9, 10),
        "### Effect measures\n\n" + quant.EFFECT_MEASURES,
        "### Synthesis methods\n\n" + quant.synthesis_methods(syn) + "\n\nEach trial's conclusion is also quoted "
        "from its abstract, grouped by the comparison it reports.",
        "## Results",
        "### Study selection\n\n" + markdown_table(flow.rows(), ("stage", "n", "detail"))
        + f"\n\n![PRISMA flow diagram]({png.name})",
        f"### Included trials ({n})\n\n" + pico_table(ev.eligible, ev.records),
        "### Results of individual studies\n\n" + quant.individual_results(syn),
        "### Results of syntheses\n\n" + quant.syntheses_results(syn, reports),
        "### Summary of findings\n\n" + quant.summary_of_findings(syn),
        "### Synthesis of the abstracts\n\n" + _synthesis(ev.eligible, ev.records, syn),
        "## Discussion\n\n" + _discussion(sr, syn),
        "## Other information",
        "### Registration and protocol\n\nThis review was not registered and no protocol was prepared.",
        f"### Availability of data\n\nThe PICO extractions (`{ev.pico_file.name}`), the search log and the flow "
        "counts are kept in the ra workspace that produced this draft.",
        CHECKLIST_MARKER,
    ]  # fmt: skip
    body = "\n\n".join(parts) + "\n"
    items = prisma_checklist(body)
    checklist = checklist_markdown(items, prisma_subitems(body))
    checklist_path = reports / f"sr_draft_{cluster_id}_prisma_checklist.md"
    tail = ["## PRISMA check\n\n" + prisma_section(prisma, ev.metrics), "## PRISMA 2020 checklist\n\n" + checklist]
    publish(store, checklist_path, f"# PRISMA 2020 checklist: {ev.label}\n\n{checklist}\n")
    path = reports / f"sr_draft_{cluster_id}.md"
    quant.write_synthesis_record(syn, reports, reports / f"sr_draft_{cluster_id}_synthesis.json")
    return publish(store, path, body + "\n" + "\n\n".join(tail) + "\n")


def _rationale(sr: SrOverlap | None) -> str:
    if sr is None:
        return "No search for prior systematic reviews has run for this topic."
    where = "PubMed" if not sr.offline else "the local corpus only (offline; PubMed was not searched)"
    covering = ", ".join(cite(c.pmid) for c in sr.covering)
    if not sr.covering:
        return (
            f"A search of {where} found {sr.n_reviews} reviews, none close enough to this topic to cover it "
            f"(cosine < {sr.threshold}): no systematic review of these {sr.trials_total} trials is known."
        )
    newer = sr.trials_total - sr.trials_covered
    return (f"A search of {where} found {sr.n_reviews} reviews; {len(sr.covering)} "
            f"{'covers' if len(sr.covering) == 1 else 'cover'} this topic ({covering}) and could have included "
            f"{sr.trials_covered} of the {sr.trials_total} trials counted (overlap {sr.overlap:.2f}). This draft "
            f"re-synthesises the randomised evidence as it stands in the corpus, including the {newer} trial(s) "
            "no covering review could have included.")  # fmt: skip


def _discussion(sr: SrOverlap | None, syn: Synthesis) -> str:
    main = syn.main()
    finding = f"Main finding: {quant.abstract_conclusion(syn)}\n\n" if main else ""
    prior = ""
    if sr and sr.covering:
        against = (f"; their pooled estimates should be compared with this draft's ({main.estimate()})" if main
                   else "; their conclusions should be compared with the trials above")  # fmt: skip
        prior = ("Prior reviews on this topic: " + "; ".join(f"{cite(c.pmid)} ({c.year or 'year unknown'})"
                 for c in sr.covering) + f"{against}.\n\n")  # fmt: skip
    return finding + prior + quant.limitations(syn)
