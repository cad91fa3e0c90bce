"""ra's own systematic-review draft of a review question: its studies as the question's set holds them, PICO table,
PRISMA 2020 flow diagram and checklist, cited synthesis."""

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
from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.question_set import QuestionSet
from ra_agent.evidence.reports.common import (
    QuestionEvidence,
    cite,
    extractors,
    generated_line,
    pico_table,
    prisma_section,
    publish,
    question_evidence,
    short,
)
from ra_agent.evidence.synthesis import Synthesis, SynthesisQuestion, synthesise
from ra_agent.evidence.synthesis import report as quant
from ra_agent.evidence.synthesis.sheet import reviewer_data
from ra_agent.llm.base import Brain
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.topics.metrics import markdown_table
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

CONCLUSION_LABELS = re.compile(r"CONCLUSION|INTERPRETATION|IMPLICATION")
SENTENCE_CHARS = 320


# ----------------------------------------------------------------------------- SR draft


def _sources(papers: Sequence[Paper]) -> list[str]:
    """Where the question's records came from: each source (an import, a PubMed search, a baseline file) with the
    number of the question's reports it holds."""
    names = []
    for source, n in sorted(Counter(p.source for p in papers).items(), key=lambda kv: (-kv[1], kv[0])):
        held = f"{n} of its reports"
        kind, _, name = source.partition(":")
        if kind == "efetch":
            names.append(f"PubMed/MEDLINE via NCBI E-utilities (esearch/efetch): {held}")
        elif kind == "baseline":
            names.append(f"PubMed/MEDLINE baseline or update file {name}: {held}")
        elif kind == "import":
            names.append(f"search export {name} (PubMed records identified by PMID): {held}")
        else:
            names.append(f"{source or 'unknown source'}: {held}")
    return names


def _searches(store: Store, papers: Sequence[Paper]) -> list[str]:
    """The registered searches that found any of the question's reports, with their dates and counts."""
    pmids = [p.pmid for p in papers]
    keys: set[str] = set()
    for start in range(0, len(pmids), 500):
        chunk = pmids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        keys.update(r[0] for r in store.conn.execute(
            f"SELECT DISTINCT query_key FROM candidate_papers WHERE pmid IN ({marks})", chunk))  # fmt: skip
    rows = store.conn.execute(
        "SELECT query_key, query, count, fetched, offline, ran_ts FROM search_run ORDER BY ran_ts"
    )
    out = []
    for r in rows:
        if r["query_key"] not in keys:
            continue
        when = datetime.fromtimestamp(r["ran_ts"], UTC).strftime("%Y-%m-%d")
        where = "local corpus (offline full-text search)" if r["offline"] else "PubMed"
        out.append(f"`{r['query']}` on {when}: {r['count']} hits in {where}, {r['fetched']} records fetched")
    return out


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
        # each outcome the PICO fields name whole (a field lists several, "; "-separated; a clipped one says nothing)
        outcomes = Counter(o for p in members for o in dict.fromkeys(_outcome_phrases(records[p.pmid].O)))
        lead = f"{len(members)} randomised trial{'s' if len(members) > 1 else ''} studied {term}"
        if comparators and " vs " not in term:  # a comparison's label names its comparator already
            lead += f" against {'; '.join(c for c, _ in comparators.most_common(3))}"
        if outcomes:
            lead += f", reporting {'; '.join(o for o, _ in outcomes.most_common(3))}"
        lead += " " + " ".join(cite(p.pmid) for p in members) + "."
        body = [f"- {cite(p.pmid)} ({p.year or 'year unknown'}): {key_sentence(p)}" for p in members]
        out.append(f"#### {term[:1].upper() + term[1:]} ({len(members)})\n\n{lead}\n\n" + "\n".join(body))
    return "\n\n".join(out)


def _outcome_phrases(field: str, longest: int = 60) -> list[str]:
    """The outcomes a PICO outcome field lists, each as written, lower case, those longer than `longest` left out."""
    return [o.lower() for o in (part.strip(" .") for part in field.split(";")) if 3 <= len(o) <= longest]


def _span(ev: QuestionEvidence) -> str:
    years = sorted(p.year for p in ev.firsts if p.year)
    unknown = len(ev.firsts) - len(years)
    span = f"{years[0]}-{years[-1]}" if years else "in unknown years"
    return span + (f" ({unknown} without a year)" if years and unknown else "")


def _eligibility(ev: QuestionEvidence) -> str:
    """The eligibility criteria as the question's rules apply them, with what the handbook states."""
    q = ev.question
    versus = "any comparator" if q.comparator == "any" else q.comparator
    lines = [f"- Inclusion criteria: randomised trials in humans with {q.population} as the trial's subject, testing "
             f"{q.intervention} against {versus}, judged from the title, abstract, MeSH headings and publication "
             "types; reports of one trial (same registration number or acronym, or the same authors and sample) "
             "form one study.",
             "- Exclusion criteria: reviews, non-randomised designs, trials of another condition (the question's "
             "condition only as an adverse effect), and reports that are not of a trial's effects (instrument "
             "validation, economic evaluations, diagnostic accuracy, protocols without results)."]  # fmt: skip
    lines += [f"- The handbook states: {line}" for line in ev.qset.scope]
    return "\n".join(lines)


def _fill(item: int, ev: QuestionEvidence, searches: Sequence[str], sources: Sequence[str]) -> str:
    """An explicit statement of a PRISMA item from what ra holds (used when a check found the item missing)."""
    n = len(ev.firsts)
    statements = {
        4: f"The objective of this review is stated above; it is answered with {n} studies.",
        5: f"Studies were included if they were randomised trials of {ev.question.intervention} in people with "
        f"{ev.question.population}; all other designs, reviews included, were excluded.",
        6: "Information sources: " + "; ".join(sources) + ".",
        7: "Search strategy: " + ("; ".join(searches) if searches else "no database search was run") + f"; included "
        f"trials were published {_span(ev)}.",
        8: "Selection process: every record was screened by the review-question rules over its title, abstract, "
        "MeSH headings and publication types; no human reviewer screened them.",
        9: f"Data collection: data were extracted from the abstracts by {extractors(ev)}.",
        10: "Data items: population, intervention, comparator, outcomes, design, age and sample size were sought.",
    }
    return statements.get(item, "")


def _further_reports(ev: QuestionEvidence) -> str:
    """The reports beyond each study's first, named under their study."""
    lines = [f"- {sid}: {', '.join(cite(p) for p in reports[1:])} (further reports of {cite(reports[0])})"
             for sid, reports in ev.question.studies.items() if len(reports) > 1]  # fmt: skip
    return ("\n\nFurther reports of the included studies:\n\n" + "\n".join(lines)) if lines else ""


def sr_draft(
    cfg: Config,
    store: Store,
    qset: QuestionSet,
    question: ReviewQuestion,
    *,
    goal_id: str,
    brain_name: str,
    prisma: PrismaResult | None,
    out_dir: Path | None = None,
    fill: Sequence[int] = (),
    synthesis_question: SynthesisQuestion | None = None,
    brain: Brain | None = None,
    arm_cache: dict | None = None,
) -> Path:
    """Write sr_draft_<question id>.md (in `out_dir`, default <data_dir>/reports) with its PRISMA flow PNG and its
    PRISMA 2020 checklist (sr_draft_<question id>_prisma_checklist.md) next to it.

    The draft answers the question as its set holds it: its studies (each by its first report, the further reports
    named under it) are the included studies; the flow counts are the set's (records screened = every record it
    judged, eligible = the reports eligible for the topic, included = the question's studies: `prisma_flow`).
    Sections follow PRISMA 2020: title and Objectives naming the question's intervention, comparator and population
    (`quant.review_title`, `quant.review_objective`), eligibility criteria (the question's rules and what the handbook
    states), information sources (where the question's records came from), search strategy (the searches that
    found them), selection and data collection, synthesis methods, the flow with its diagram, the PICO table, each
    trial's conclusion quoted per comparison citing [PMID:…], discussion, registration and data availability. `fill`
    lists PRISMA items a check found missing: each gets an explicit statement built from the same data. After
    CHECKLIST_MARKER come the PRISMA check (`prisma`) and the checklist of all 27 items, read off the text above.

    The quantitative synthesis (`synthesis.synthesise` over the studies' first reports, arm data read by `brain` when
    it is a language model, else by the rules; `arm_cache` keeps the LLM's answers between drafts) is tied to
    `synthesis_question` (default: the question without a population test) and gives the effect measures, synthesis
    methods, pooled estimates with forest plots (sr_draft_<question id>_forest_*.png) and heterogeneity, the
    comparisons outside the question, a summary-of-findings table and the limitations;
    sr_draft_<question id>_synthesis.json records the comparisons for the Dagster asset. Every cited PMID is checked
    against the store.
    """
    from ra_agent.evidence.synthesis.question import from_review_question

    ev = question_evidence(cfg, store, qset, question)
    reports = out_dir or Workspace.of(cfg).reports_dir
    stem = f"sr_draft_{question.id}"
    flow = prisma_flow(qset, question)
    png = prisma_flow_png(flow, reports / f"{stem}_prisma_flow.png")
    included = [ev.records[p.pmid] for p in ev.firsts]
    terms = pico_field_terms(included, [], cfg.sr.alt_pico_terms)
    searches, sources = _searches(store, ev.papers), _sources(ev.papers)
    fill = fill or (prisma.filled if prisma is not None else ())
    filled = {i: _fill(i, ev, searches, sources) for i in fill}
    extra = lambda *items: "".join(f"\n\n{filled[i]}" for i in items if filled.get(i))  # noqa: E731
    n = len(ev.firsts)
    studies = f"{n} studies ({len(ev.papers)} reports)" if len(ev.papers) != n else f"{n} studies"
    syn = synthesise(ev.firsts, question=synthesis_question or from_review_question(question), pico=ev.records,
                     forest_dir=reports, stem=f"{stem}_forest", brain=brain, cache=arm_cache,
                     method=cfg.sr.tau2_estimator, model=cfg.sr.pooling_model, reviewer=reviewer_data(cfg))  # fmt: skip
    objective = quant.review_objective(syn, question.outcomes) or ""
    parts = [
        f"# {quant.review_title(syn, terms)}",
        f"_Draft of review question `{question.id}` ({question.in_words}): {question.verdict}._",
        generated_line(goal_id, brain_name),
        "## Abstract\n\n"
        f"**Objectives.** {objective}\n\n"
        f"**Methods.** Every record of the corpus ({'; '.join(sources)} for this question) was judged by the "
        "review-question rules; randomised trials of the question's comparison were included, reports of one trial "
        "grouped into one study; PICO fields were extracted from the abstracts.\n\n"
        f"**Results.** {flow.identified} records identified, {flow.screened} screened, {studies} included. "
        f"{quant.abstract_results(syn)}\n\n"
        f"**Conclusions.** {quant.abstract_conclusion(syn)}",
        "## Introduction",
        "### Rationale\n\n" + _rationale(question),
        "### Objectives\n\n" + objective + f" {quant.question_statement(syn)}" + extra(4),
        "## Methods",
        "### Eligibility criteria\n\n" + _eligibility(ev) + extra(5),
        "### Information sources\n\n" + "\n".join(f"- {s}" for s in sources)
        + f"\n- Prior systematic reviews: the {qset.reviews_checked} reviews of the local corpus that may name "
        "the topic's population, each judged on whether its own question encompasses this one" + extra(6),
        "### Search strategy\n\n"
        + ("\n".join(f"- Search: {s}" for s in searches) if searches else "- No database search found these "
           "records; they come from the information sources above.")
        + "\n- Prior-review search: every review of the local corpus that may name the topic's population; in "
        f"PubMed: `({qset.seed_query}) AND systematic[sb]`\n- Included trials were published {_span(ev)}." + extra(7),
        "### Selection process\n\n"
        f"Each of the {flow.screened} records was judged by the review-question rules ({qset.judged_by}) over its "
        "title, abstract, MeSH headings and publication types; each included report keeps the reason it counts. No "
        "human reviewer screened the records." + extra(8),
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
        f"### Included studies ({studies})\n\n" + pico_table(ev.firsts, ev.records) + _further_reports(ev),
        "### Results of individual studies\n\n" + quant.individual_results(syn),
        "### Results of syntheses\n\n" + quant.syntheses_results(syn, reports),
        "### Summary of findings\n\n" + quant.summary_of_findings(syn),
        "### Synthesis of the abstracts\n\n" + _synthesis(ev.firsts, ev.records, syn),
        "## Discussion\n\n" + _discussion(question, syn),
        "## Other information",
        "### Registration and protocol\n\nThis review was not registered and no protocol was prepared.",
        f"### Availability of data\n\nThe question's set (`questions/{qset.key}/questions.json`), the PICO "
        f"extractions (`{ev.pico_file.name}`), the search log and the flow counts are kept in the ra workspace that "
        "produced this draft.",
        CHECKLIST_MARKER,
    ]  # fmt: skip
    body = "\n\n".join(parts) + "\n"
    items = prisma_checklist(body)
    checklist = checklist_markdown(items, prisma_subitems(body))
    checklist_path = reports / f"{stem}_prisma_checklist.md"
    tail = ["## PRISMA check\n\n" + prisma_section(prisma), "## PRISMA 2020 checklist\n\n" + checklist]
    publish(store, checklist_path, f"# PRISMA 2020 checklist: {question.in_words}\n\n{checklist}\n")
    path = reports / f"{stem}.md"
    quant.write_synthesis_record(syn, reports, reports / f"{stem}_synthesis.json")
    return publish(store, path, body + "\n" + "\n\n".join(tail) + "\n")


def _reviews_answer(n: int) -> str:
    return f"{n} review answers" if n == 1 else f"{n} reviews answer"


def _rationale(question: ReviewQuestion) -> str:
    reviews = question.reviews
    if not reviews:
        return (f"No review of the local corpus answers this question: no systematic review of its "
                f"{len(question.studies)} studies is known.")  # fmt: skip
    answering = ", ".join(f"{cite(r.pmid)} ({r.year or 'year unknown'})" for r in reviews)
    if question.covering is None:
        return (f"{_reviews_answer(len(reviews))} this question ({answering}), none holding enough of its "
                f"{len(question.studies)} studies to cover it. This draft synthesises the randomised evidence as "
                "it stands in the corpus.")  # fmt: skip
    since = len(question.trials_since)
    return (f"{_reviews_answer(len(reviews))} this question ({answering}); {cite(question.covering.pmid)} covers "
            f"it, and could have included {len(question.covering.trials_covered)} of its {len(question.studies)} "
            f"studies. This draft re-synthesises the randomised evidence as it stands in the corpus, including the "
            f"{since} stud{'y' if since == 1 else 'ies'} published since the newest covering review.")  # fmt: skip


def _discussion(question: ReviewQuestion, syn: Synthesis) -> str:
    main = syn.main()
    finding = f"Main finding: {quant.abstract_conclusion(syn)}\n\n" if main else ""
    prior = ""
    if question.reviews:
        against = (f"; their pooled estimates should be compared with this draft's ({main.estimate()})" if main
                   else "; their conclusions should be compared with the trials above")  # fmt: skip
        prior = ("Prior reviews answering this question: " + "; ".join(f"{cite(r.pmid)} ({r.year or 'year unknown'})"
                 for r in question.reviews) + f"{against}.\n\n")  # fmt: skip
    return finding + prior + quant.limitations(syn)
