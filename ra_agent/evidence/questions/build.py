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

from ra_agent.evidence.questions.judge import QuestionJudge, RulesJudge
from ra_agent.evidence.questions.model import CoveringReview, Eligibility, ReviewQuestion
from ra_agent.evidence.questions.reviews import is_review
from ra_agent.evidence.questions.topic import Topic, normalise
from ra_agent.models import Paper

MEDIAN_REVIEW_SURVIVAL = (
    "median survival of a review before it needs an update: 5.5 years (Shojania et al., Ann Intern Med 2007)"
)


# ============================================================================ questions


def question_id(population: str, intervention: str, comparator: str) -> str:
    """Stable id of a question: "q-" + the first 10 hex of sha1 over its normalised P|I|C."""
    key = "|".join(" ".join(normalise(part).split()) for part in (population, intervention, comparator))
    return "q-" + hashlib.sha1(key.encode()).hexdigest()[:10]


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


def _outcomes(papers: Iterable[Paper], limit: int = 5) -> list[str]:
    counts: dict[str, int] = {}
    for paper in papers:
        text = f"{paper.title} {paper.abstract}"
        for word in {m.group(1).lower() for pattern in (OUTCOME_CUES, OUTCOME_EVENT) for m in pattern.finditer(text)}:
            counts[word] = counts.get(word, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def build_questions(
    topic: Topic, papers: Sequence[Paper], judge: QuestionJudge | None = None
) -> tuple[list[ReviewQuestion], dict[int, Eligibility]]:
    """The topic's own question (every eligible trial) and the narrower ones beneath it (the narrowest class
    each trial tests × its comparator), with every record's eligibility answer."""
    judge = judge or RulesJudge()
    judged = {p.pmid: judge.trial(p, topic) for p in papers}
    by_pmid = {p.pmid: p for p in papers}
    population = " and ".join(c.label for c in topic.population)
    intervention = " or ".join(topic.intervention)
    versus = " or ".join(topic.comparator) or "any"
    root = ReviewQuestion(question_id(population, intervention, versus), population, intervention, versus,
                          judged_by=judge.name)  # fmt: skip
    narrower: dict[tuple[str, str], ReviewQuestion] = {}
    for pmid, answer in judged.items():
        if not answer.eligible:
            continue
        root.trials[pmid], root.years[pmid] = answer.reason, by_pmid[pmid].year
        cls = answer.agents[0].cls
        key = (cls, answer.comparator)
        if key not in narrower:
            narrower[key] = ReviewQuestion(question_id(population, cls, answer.comparator), population, cls,
                                           answer.comparator, parent=root.id, judged_by=judge.name)  # fmt: skip
        narrower[key].trials[pmid], narrower[key].years[pmid] = answer.reason, by_pmid[pmid].year
    below = [q for q in narrower.values() if q.id != root.id]
    questions = [root, *sorted(below, key=lambda q: (-len(q.trials), q.id))]
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
            if cited:
                basis, covered = "reference list", [p for p in question.trial_pmids if p in cited]
            else:
                basis = "publication year"
                covered = [p for p in question.trial_pmids if _no_later(question.years.get(p), review.year)]
            share = round(len(covered) / len(question.trials), 4) if question.trials else 0.0
            ranks[review.pmid] = answer.rank
            question.reviews.append(CoveringReview(review.pmid, review.year, review.title, basis, covered,
                                                   why=answer.reason, share=share))  # fmt: skip
        question.reviews.sort(key=lambda r: ranks[r.pmid], reverse=True)
        holding = [r for r in question.reviews if r.share >= pivot and question.trials]
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
        question.trials_since = [p for p in question.trial_pmids
                                 if year is not None and (question.years.get(p) or 0) > year]  # fmt: skip
        name = f"PMID {question.newest.pmid} ({year})"
        if len(question.trials_since) >= update_after:
            question.verdict = "covered, update warranted"
            question.verdict_reason = (f"{len(question.trials_since)} trials since {name} (update after "
                                       f"{update_after}; {MEDIAN_REVIEW_SURVIVAL})")  # fmt: skip
        else:
            first = question.covering
            question.verdict = "covered"
            question.verdict_reason = (f"PMID {first.pmid} ({first.year}) could include {len(first.trials_covered)} "
                                       f"of {len(question.trials)} trials; {len(question.trials_since)} since "
                                       f"{name}")  # fmt: skip
    elif len(question.trials) < min_trials:
        question.verdict, question.verdict_reason = "too few trials", f"{len(question.trials)} < {min_trials}"
    else:
        question.verdict = "gap"
        best = max(question.reviews, key=lambda r: r.share, default=None)
        question.verdict_reason = (
            f"{len(question.trials)} eligible trials; no review answering the question holds >= {pivot:.0%} of them"
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
) -> tuple[list[ReviewQuestion], dict[int, Eligibility], list[Paper]]:
    """A goal's questions over `papers` (its scope): the reviews among them (`is_review`), the topic with the MeSH
    headings and abbreviations its records give it, the questions built from the rest and their coverage by the
    reviews. Returns (questions, every record's eligibility, the reviews)."""
    reviews = [p for p in papers if is_review(p)]
    topic = topic.with_corpus(papers)
    questions, judged = build_questions(topic, papers, judge)
    assess_coverage(questions, reviews, topic, pivot=pivot, update_after=update_after, min_trials=min_trials,
                    references=references, judge=judge)  # fmt: skip
    return questions, judged, reviews
