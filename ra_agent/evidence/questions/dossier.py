"""A question's dossier: the Markdown a reviewer reads (its answer in plain words, PICO, verdict, each study with its
reports and why it counts, the reviews checked with why each answers the question or not, the trials since the
newest covering review, what was not checked), written beside questions.json in the set's folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ra_agent.evidence.questions.gap_map import GapMap, map_link
from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.question_set import QuestionSet
from ra_agent.models import Paper

NOT_ANSWERING_SHOWN = 12  # reviews that do not answer a question, listed by PMID order; the rest counted


def cite(pmid: int) -> str:
    return f"[PMID:{pmid}]"


def plural(n: int, word: str, many: str = "") -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def studies_words(question: ReviewQuestion) -> str:
    """ "12 studies (14 reports)", or "12 studies" when each study has one report."""
    n, reports = len(question.studies), len(question.trials)
    return plural(n, "study", "studies") + (f" ({plural(reports, 'report')})" if reports != n else "")


def review_words(review) -> str:
    """A review as the plain words name it: its title (without the closing period), year and PMID."""
    return f"{(review.title or 'untitled review').rstrip('. ')} ({review.year or 'year unknown'}) {cite(review.pmid)}"


def plain_verdict(question: ReviewQuestion) -> str:
    """The question's answer in plain words, as the closing block, the dossier's first lines and the README say
    it: "gap found: <question>: N studies, no review answers it", "covered by <review> (year)[; update warranted:
    N trials since]", or "too few trials: <question>: N studies"."""
    if question.verdict == "gap":
        return f"gap found: {question.in_words}: {studies_words(question)}, no review answers it"
    if question.verdict.startswith("covered") and question.covering is not None:
        text = f"covered by {review_words(question.covering)}"
        if question.verdict == "covered, update warranted":
            text += f"; update warranted: {plural(len(question.trials_since), 'trial')} since"
        return text
    return f"too few trials: {question.in_words}: {studies_words(question)} ({question.verdict_reason})"


def same_as_parent(question: ReviewQuestion, parent: ReviewQuestion | None) -> bool:
    """A narrower question with its parent's verdict on the same covering review and the same studies adds no
    dossier of its own."""
    return (
        parent is not None
        and question.verdict == parent.verdict
        and question.verdict.startswith("covered")
        and (question.covering and question.covering.pmid) == (parent.covering and parent.covering.pmid)
        and question.studies == parent.studies
    )


def _study_rows(question: ReviewQuestion, papers: Mapping[int, Paper]) -> list[str]:
    rows = ["| study | reports | year | title | why it counts |", "|---|---|---|---|---|"]
    for sid, reports in question.studies.items():
        first = reports[0]
        named = next((p for p in reports if sid == f"s-{p}"), first)  # the report the study is named after
        paper = papers.get(named)
        title = " ".join((paper.title if paper else "").replace("|", "/").split())[:120]
        listed = ", ".join(cite(p) for p in reports)
        rows.append(f"| {sid} | {listed} | {question.years.get(first) or ''} | {title} | {question.trials[named]} |")
    return rows


def _reviews_section(question: ReviewQuestion, qset: QuestionSet) -> list[str]:
    answering, other = question.reviews, sorted(question.not_answering)
    rest = max(qset.reviews_checked - len(answering) - len(other), 0)
    lines = [
        f"Reviews checked: {plural(qset.reviews_checked, 'review')} of the local corpus (every record that may name "
        "the topic's population and is a review by its publication type, or says 'systematic review' or "
        "'meta-analysis' in its title or abstract): "
        f"{len(answering)} answer the question, {len(other)} name its population but ask another question, "
        f"{rest} are about other topics. The same search in PubMed: `({qset.seed_query}) AND systematic[sb]`.",
        "",
        f"### Reviews whose own question encompasses it ({len(answering)})",
        "",
    ]
    if not answering:
        lines.append("None in the local corpus.")
    for review in answering:
        role = "covers it" if question.covering and review.pmid == question.covering.pmid else "does not cover it"
        lines.append(f"- {cite(review.pmid)} ({review.year}) {review.title[:120]}: {review.why}; could include "
                     f"{len(review.trials_covered)} of {plural(len(question.studies), 'study', 'studies')} "
                     f"({review.share:.0%}, by {review.basis}): {role}")  # fmt: skip
    shown = other[:NOT_ANSWERING_SHOWN]
    more = f"; {len(shown)} shown, by PMID" if len(shown) < len(other) else ""
    lines += ["", f"### Reviews naming its population that do not answer it ({len(other)}{more})", ""]
    lines += [f"- {cite(p)}: {question.not_answering[p]}" for p in shown] or ["None."]
    return lines


def dossier_markdown(
    question: ReviewQuestion,
    papers: Mapping[int, Paper],
    qset: QuestionSet,
    additions: Sequence[str] = (),
    checked: Sequence[str] = (),
) -> str:
    """The question's dossier (module text); `papers` holds at least its reports. A goal's dossier adds its own
    sections (`additions`, before "Not checked by this run") and drops from that list what it did check (`checked`:
    items starting with these words)."""
    m = question.metrics
    parent = next((q for q in qset.questions if q.id == question.parent), None)
    lines = [
        f"# Review question: {question.in_words}",
        "",
        f"{plain_verdict(question)[:1].upper()}{plain_verdict(question)[1:]}.",
        "",
        f"- Question id: {question.id}",
        f"- PICO: {question.pico}",
        *([f"- Narrower than: {parent.id} ({parent.in_words})"] if parent else []),
        *([] if question.in_scope else ["- Outside the handbook's scope: a comparison its prose leaves out"]),
        f"- Topic (handbook seed query): {qset.topic}",
        *(f"- The handbook states: {line}" for line in qset.scope),
        *(
            [
                f"- The handbook's prose holds {plural(len(qset.scope_not_applied), 'further statement')} of "
                "eligibility the rules do not apply; check the list against "
                f"{'it' if len(qset.scope_not_applied) == 1 else 'them'}:",
                *(f'  - "{words}"' for words in qset.scope_not_applied),
            ]
            if qset.scope_not_applied
            else []
        ),
        f"- **Verdict: {question.verdict}.** {question.verdict_reason}",
        f"- Counts: {studies_words(question)}; newest trial {m['newest_trial'] or 'none'}; sr_overlap "
        f"{m['sr_overlap']:.2f}; trials since the newest covering review {m['trials_since_review']}",
        f"- Outcomes the trials report: {', '.join(question.outcomes) or 'none found'}",
        f"- Judged by: {question.judged_by}",
        "",
        f"## Studies ({studies_words(question)})",
        "",
        *(_study_rows(question, papers) if question.studies else ["None."]),
        "",
        "## Reviews checked",
        "",
        *_reviews_section(question, qset),
        "",
        "## Trials since the newest covering review",
        "",
    ]
    if question.newest is None:
        lines.append("No review covers the question.")
    else:
        since = ", ".join(cite(p) for p in question.trials_since) or "none"
        lines.append(f"Since {cite(question.newest.pmid)} ({question.newest.year}): "
                     f"{plural(len(question.trials_since), 'study', 'studies')}: {since}")  # fmt: skip
    unchecked = [item for item in question.unchecked if not item.startswith(tuple(checked))]
    lines += ["", *(f"{section}\n" for section in additions), "## Not checked by this run", "",
              *(f"- {item}" for item in unchecked), ""]  # fmt: skip
    return "\n".join(lines)


def short_dossier(question: ReviewQuestion, parent: ReviewQuestion) -> str:
    """The dossier of a narrower question with its parent's answer (`same_as_parent`): a pointer to the parent's."""
    return (f"# Review question: {question.in_words}\n\n{plain_verdict(question)[:1].upper()}"
            f"{plain_verdict(question)[1:]}.\n\n- Question id: {question.id}\n- PICO: {question.pico}\n"
            f"- **Verdict: {question.verdict}.** {question.verdict_reason}\n- Counts: {studies_words(question)}\n"
            f"- Same verdict on the same review and the same studies as its parent question: see "
            f"[{parent.id}]({parent.id}.md)\n")  # fmt: skip


def set_dossiers(qset: QuestionSet, papers: Mapping[int, Paper], gap_map: GapMap | None = None) -> dict[str, str]:
    """File name -> Markdown of every question's dossier in a set; with `gap_map` (drawn into the set's folder),
    each dossier ends with its cell on the map (`gap_map.map_link`)."""
    by_id = {q.id: q for q in qset.questions}
    out = {}
    for question in qset.questions:
        parent = by_id.get(question.parent or "")
        if parent is not None and same_as_parent(question, parent):
            out[f"{question.id}.md"] = short_dossier(question, parent)
        else:
            out[f"{question.id}.md"] = dossier_markdown(question, papers, qset)
        link = map_link(gap_map, question.id) if gap_map else None
        if link:  # the question's cell on the map drawn into the same folder
            out[f"{question.id}.md"] = f"{out[f'{question.id}.md'].rstrip()}\n\n{link.markdown}"
    return out


def set_table(qset: QuestionSet) -> str:
    """Every question of a set as one Markdown table (id, the question in words, studies, reports, verdict, covering
    review): the review_questions asset's metadata, the same numbers `ra questions` prints."""
    rows = ["| id | question | studies | reports | verdict | covering review |", "|---|---|---|---|---|---|"]
    for q in qset.questions:
        words = q.in_words + ("" if q.in_scope else " (outside the handbook's scope)")
        covering = review_words(q.covering).replace("|", "/") if q.covering else ""
        rows.append(f"| {q.id} | {words} | {len(q.studies)} | {len(q.trials)} | {q.verdict} | {covering} |")
    return "\n".join(rows)
