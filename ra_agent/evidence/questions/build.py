"""Building a topic's review questions, their coverage and verdict: a goal's eligible trials grouped as a reviewer
would write them (P × I × C), and whether a review already answers each one.

A `Topic` (`topic.py`) is what a goal is about: the population, intervention and comparator concepts of its
handbook's seed query, with terms from general sources (the handbook's prose, the records' MeSH headings and
abbreviations, the class table of `evidence.classes`). Inside it:

- the judge (`judge.QuestionJudge`; `judge.RulesJudge`: `trials.eligibility` and `review_asks.review_answers`) says
  whether a record is a trial a reviewer would accept for the topic's question and whether a review answers a
  question, each with its reason and who judged;
- `build_questions` groups the eligible trials into the topic's own question (the topic's population ×
  intervention class × its comparator, "any" when the seed query names none) and the narrower questions beneath it
  (a narrower class × one comparator), each a plain `model.ReviewQuestion` with a stable id (hash of its P, I and C);
- `assess_coverage` asks of every review whether its own question (read from its title and objective sentence)
  encompasses the question, and what share of the question's trials it could have included (its reference list
  when the store holds it, else the trials published no later than it). The reviews that answer are ranked (the
  question's own class before a broader one, systematic reviews first, newer first); the first holding at least
  [sr] sr_overlap_pivot of the trials covers it. Trials published after the newest covering review are counted:
  from [sr] update_after_trials on, the verdict is "covered, update warranted" (a review's median survival before
  it needs an update is 5.5 years: Shojania KG et al., Ann Intern Med 2007;147:224-33).

All judgements here are rules over real fields (title, abstract, MeSH headings, publication types, year,
references) and name themselves "rules" in every output (`model.RULES`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ra_agent.evidence.questions.judge import QuestionJudge, RulesJudge
from ra_agent.evidence.questions.model import NOT_NAMED, CoveringReview, Eligibility, ReviewQuestion, comparator_kind
from ra_agent.evidence.questions.not_trials import not_a_trial_report
from ra_agent.evidence.questions.reviews import as_read, is_review
from ra_agent.evidence.questions.scope import Scope
from ra_agent.evidence.questions.studies import further_reports, group_studies
from ra_agent.evidence.questions.topic import CorpusStatistics, Topic, normalise
from ra_agent.models import Paper

MEDIAN_REVIEW_SURVIVAL = (
    "median survival of a review before it needs an update: 5.5 years (Shojania et al., Ann Intern Med 2007)"
)


# ============================================================================ questions


def question_id(population: str, intervention: str, comparator: str, definition: str = "") -> str:
    """Stable id of a question: "q-" + the first 10 hex of sha1 over its normalised P|I|C, and the definition the
    handbook's prose adds (`definition`: its synonyms and its stated eligibility) when it adds any: one id, one
    question, whichever handbook asks it."""
    parts = (population, intervention, comparator, *([definition] if definition else []))
    key = "|".join(" ".join(normalise(part).split()) for part in parts)
    return "q-" + hashlib.sha1(key.encode()).hexdigest()[:10]


def definition(topic: Topic, scope: Scope) -> str:
    """What a handbook's prose adds to its seed query's question (`Topic.definition`, `Scope.definition`)."""
    return " | ".join(part for part in (topic.definition(), scope.definition()) if part)


def topic_question(topic: Topic, scope: Scope, judged_by: str = RulesJudge.name) -> ReviewQuestion:
    """The topic's own question, before any record is judged: the topic's population × its intervention class × its
    comparator (the scope's comparison kinds when the seed query names none), with its stable id."""
    population = " and ".join(c.label for c in topic.population)
    intervention = " or ".join(topic.intervention)
    versus = topic.versus() or scope.comparators_label()
    return ReviewQuestion(question_id(population, intervention, versus, definition(topic, scope)), population,
                          intervention, versus, judged_by=judged_by)  # fmt: skip


# Outcome cues: the core outcome domains of COMET's taxonomy (Dodd et al., J Clin Epidemiol 2018: mortality,
# clinical events and symptoms, function and quality of life, resource use, adverse events), and the event a trial
# says it prevents or measures ("prevention of catheter-related thrombosis" -> thrombosis).
OUTCOME_CUES = re.compile(
    r"\b(mortality|death|survival|relapse|recurrence|remission|response|healing|symptom\w*|pain|function\w*"
    r"|quality of life|hospitali[sz]ation|adverse events?|side effects?|bleeding|h[a]?emorrhage|infection)\b",
    re.I,
)
OUTCOME_EVENT = re.compile(r"\b(?:prevention|incidence|rates?|risk|occurrence|relief|reduction) of (?:[\w-]+ ){0,2}?"
                           r"([a-z][\w-]{4,}(?:is|sis|ia|ion|ing|ence|ure|ty|th|ain))\b", re.I)  # fmt: skip


# one name per outcome however a record words it ("symptom", "symptomatic" -> "symptoms"; "death" -> "mortality")
OUTCOME_NAMES = ((re.compile(r"^symptom"), "symptoms"), (re.compile(r"^function"), "function"),
                 (re.compile(r"^death$"), "mortality"), (re.compile(r"^adverse event"), "adverse events"),
                 (re.compile(r"^side effect"), "side effects"), (re.compile(r"^h(?:a)?emorrhage$"), "haemorrhage"),
                 (re.compile(r"^hospitali[sz]ation$"), "hospitalisation"))  # fmt: skip


def outcome_name(word: str) -> str:
    """The name the question lists an outcome word under (lower case, one name per word family)."""
    word = word.lower()
    return next((name for pattern, name in OUTCOME_NAMES if pattern.search(word)), word)


def _outcomes(papers: Iterable[Paper], limit: int = 5) -> list[str]:
    """The outcomes most of the question's records name, each record counted once per outcome."""
    counts: dict[str, int] = {}
    for paper in papers:
        text = f"{paper.title} {paper.abstract}"
        for word in {outcome_name(m.group(1)) for pattern in (OUTCOME_CUES, OUTCOME_EVENT)
                     for m in pattern.finditer(text)}:  # fmt: skip
            counts[word] = counts.get(word, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def _scoped(paper: Paper, answer: Eligibility, scope: Scope, topic: Topic) -> Eligibility:
    """An eligible trial the handbook's prose leaves out (population, design, duration, outcomes) is ineligible,
    saying why; the comparison itself is judged per question (`Scope.allows`)."""
    if answer.eligible and (why := scope.outside(as_read(paper), answer, topic.population)):
        return replace(answer, eligible=False, reason=f"outside the handbook's eligibility: {why}")
    return answer


# reports that are not trial reports of their own but may report on an eligible trial (secondary analyses)
FURTHER_REPORT_REASONS = ("about trials", "not a randomised trial", "not randomised")


def _further_reports(topic: Topic, judged, studies, by_pmid, agents) -> dict:
    """`studies.further_reports` over the records the rules turned down only for their design words."""
    from ra_agent.evidence.classes import agents_in, lineage

    candidates = [by_pmid[p] for p, a in judged.items() if not a.eligible and a.reason.startswith(FURTHER_REPORT_REASONS)
                  and not not_a_trial_report(by_pmid[p])
                  and all(c.find(f"{by_pmid[p].title} {by_pmid[p].abstract}", by_pmid[p].mesh) for c in topic.population)]  # fmt: skip
    words = dict(agents)
    for paper in candidates:
        words[paper.pmid] = {a.word for a in agents_in(f"{paper.title} {paper.abstract}")
                             if any(c in lineage(a.cls) for c in topic.intervention)}  # fmt: skip
    reports = [by_pmid[r] for s in studies for r in s.reports]
    return further_reports(studies, candidates, reports, words)


def build_questions(
    topic: Topic, papers: Sequence[Paper], judge: QuestionJudge | None = None, scope: Scope | None = None
) -> tuple[list[ReviewQuestion], dict[int, Eligibility]]:
    """The topic's own question and the tree beneath it, with every record's eligibility answer.

    The topic's question takes the eligible trials whose comparison the scope allows (`Scope`: every kind but
    doses and schedules of one agent unless the handbook says otherwise). Beneath it, one question per comparator
    (the same intervention versus placebo, versus another agent of the class, versus each other class or non-drug
    comparator, doses or schedules), and beneath those the narrower class a trial tests when it is narrower than
    the topic's. Reports of one trial are grouped into studies (`studies.group_studies`) and every question counts
    studies."""
    judge = judge or RulesJudge()
    scope = scope or Scope()
    by_pmid = {p.pmid: p for p in papers}
    judged = {p.pmid: _scoped(p, judge.trial(p, topic), scope, topic) for p in papers}
    eligible = {pmid: a for pmid, a in judged.items() if a.eligible}
    agents = {p: {a.word for a in e.agents} for p, e in eligible.items()}
    studies = group_studies([by_pmid[p] for p in eligible], agents)
    study_of = {report: study for study in studies for report in study.reports}
    for pmid, (study, why) in _further_reports(topic, judged, studies, by_pmid, agents).items():
        first = eligible[study.reports[0]]
        judged[pmid] = eligible[pmid] = replace(first, pmid=pmid, reason=why)
        study.reports = sorted([*study.reports, pmid], key=lambda p: (by_pmid[p].year or 9999, p))
        study_of[pmid] = study
    root = topic_question(topic, scope, judged_by=judge.name)
    population, intervention, defined = root.population, root.intervention, definition(topic, scope)
    nodes: dict[tuple[str, str], ReviewQuestion] = {}

    def node(cls: str, comparator: str, parent: str) -> ReviewQuestion:
        key = (cls, comparator)
        if key not in nodes:
            nodes[key] = ReviewQuestion(question_id(population, cls, comparator, defined), population, cls, comparator,
                                        parent=parent, judged_by=judge.name,
                                        in_scope=scope.allows(comparator_kind(comparator)))  # fmt: skip
        return nodes[key]

    for pmid in sorted(eligible, key=lambda p: (by_pmid[p].year or 9999, p)):
        answer = eligible[pmid]
        targets = [root] if any(scope.allows(k) for k in answer.kinds) else []
        for comparator in answer.comparators or (answer.comparator,):
            if comparator == NOT_NAMED:
                continue
            level = node(intervention, comparator, root.id)
            targets.append(level)
            cls = answer.agents[0].cls
            if cls not in topic.intervention:
                targets.append(node(cls, comparator, level.id))
        for question in targets:
            question.trials[pmid], question.years[pmid] = answer.reason, by_pmid[pmid].year
            question.studies.setdefault(study_of[pmid].id, []).append(pmid)
            if study_of[pmid].links:
                question.study_links[study_of[pmid].id] = study_of[pmid].links
    below = [q for q in nodes.values() if q.id != root.id]
    questions = [root, *sorted(below, key=lambda q: (not q.in_scope, -len(q.studies), q.id))]
    for question in questions:
        question.outcomes = _outcomes(by_pmid[p] for p in question.trials)
    return questions, judged


# ============================================================================ coverage


def _no_later(year: int | None, than: int | None) -> bool:
    return year is not None and than is not None and year <= than


def _mentions(review: Paper, topic: Topic) -> int:
    """How many of the topic's concepts a review's title/abstract/MeSH names (to list the near misses)."""
    text = f"{review.title} {review.abstract}"
    return sum(c.find(text, review.mesh) is not None for c in topic.population)


def assess_coverage(
    questions: Sequence[ReviewQuestion],
    reviews: Sequence[Paper],
    topic: Topic,
    *,
    pivot: float,
    update_after: int,
    min_trials: int,
    references: Mapping[int, set[int]] | None = None,
    judge: QuestionJudge | None = None,
) -> None:
    """Fill each question's reviews, covering review, trials since the newest one and verdict (module text)."""
    references = references or {}
    judge = judge or RulesJudge()
    for question in questions:
        question.reviews, question.not_answering, ranks = [], {}, {}
        for review in reviews:
            answer = judge.review(review, question, topic)
            if not answer.verdict:
                if _mentions(review, topic) == len(topic.population):
                    question.not_answering[review.pmid] = answer.reason
                continue
            cited = references.get(review.pmid, set())
            if cited:  # a study is covered when the review cites any of its reports
                basis = "reference list"
                covered = [r[0] for r in question.studies.values() if any(p in cited for p in r)]
            else:  # ... or, without its reference list, when the study's first report is no later than the review
                basis = "publication year"
                covered = [r[0] for r in question.studies.values() if _no_later(question.years.get(r[0]), review.year)]
            share = round(len(covered) / len(question.studies), 4) if question.studies else 0.0
            ranks[review.pmid] = answer.rank
            question.reviews.append(CoveringReview(review.pmid, review.year, review.title, basis, covered,
                                                   why=answer.reason, share=share))  # fmt: skip
        question.reviews.sort(key=lambda r: ranks[r.pmid], reverse=True)
        holding = [r for r in question.reviews if r.share >= pivot and question.studies]
        question.covering = holding[0] if holding else None
        question.newest = max(holding, key=lambda r: (r.year or 0, r.pmid)) if holding else None
        question.unchecked = ["PRISMA compliance of the covering reviews (no full text offline)",
                              "trials and reviews outside the local corpus (PubMed was not searched again)",
                              "each trial's full text (eligibility read from title, abstract and MeSH)",
                              "the reviews' own inclusion lists, unless the store holds their reference lists"]  # fmt: skip
        _verdict(question, pivot=pivot, update_after=update_after, min_trials=min_trials)


def _verdict(question: ReviewQuestion, *, pivot: float, update_after: int, min_trials: int) -> None:
    if question.covering is not None and question.newest is not None:
        year = question.newest.year
        question.trials_since = sorted(r[0] for r in question.studies.values()
                                       if year is not None and (question.years.get(r[0]) or 0) > year)  # fmt: skip
        name = f"PMID {question.newest.pmid} ({year})"
        if len(question.trials_since) >= update_after:
            question.verdict = "covered, update warranted"
            question.verdict_reason = (f"{len(question.trials_since)} trials since {name} (update after "
                                       f"{update_after}; {MEDIAN_REVIEW_SURVIVAL})")  # fmt: skip
        else:
            first = question.covering
            question.verdict = "covered"
            question.verdict_reason = (f"PMID {first.pmid} ({first.year}) could include {len(first.trials_covered)} "
                                       f"of {len(question.studies)} trials; {len(question.trials_since)} since "
                                       f"{name}")  # fmt: skip
    elif len(question.studies) < min_trials:
        question.verdict, question.verdict_reason = "too few trials", f"{len(question.studies)} < {min_trials}"
    else:
        question.verdict = "gap"
        best = max(question.reviews, key=lambda r: r.share, default=None)
        question.verdict_reason = (
            f"{len(question.studies)} eligible trials; no review answering the question holds >= {pivot:.0%} of them"
            + (f" (best: PMID {best.pmid}, {best.share:.0%})" if best else " (none found)")
        )


def questions_for_topic(
    topic: Topic,
    papers: Sequence[Paper],
    *,
    pivot: float,
    update_after: int,
    min_trials: int,
    references: Mapping[int, set[int]] | None = None,
    judge: QuestionJudge | None = None,
    scope: Scope | None = None,
    corpus: CorpusStatistics | None = None,
) -> tuple[list[ReviewQuestion], dict[int, Eligibility], list[Paper]]:
    """A goal's questions over `papers` (its scope): the reviews among them (`is_review`), the topic with the MeSH
    headings and abbreviations the corpus's records give it (`corpus`, e.g. the store's indexes when `papers` are the
    candidates read through them; None: `papers` themselves), the questions built from the rest and their coverage
    by the reviews. Returns (questions, every record's eligibility, the reviews)."""
    reviews = [p for p in papers if is_review(p)]
    topic = topic.with_statistics(corpus) if corpus is not None else topic.with_corpus(papers)
    questions, judged = build_questions(topic, papers, judge, scope)
    assess_coverage(questions, reviews, topic, pivot=pivot, update_after=update_after, min_trials=min_trials,
                    references=references, judge=judge)  # fmt: skip
    return questions, judged, reviews
