"""What a review asks: its own question read from its title and its objective sentence, and whether that question
encompasses a review question (rules; `model.Judgement` with the reason)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ra_agent.evidence.classes import Agent, agents_in, classes_named, lineage
from ra_agent.evidence.questions.model import RULES, Judgement
from ra_agent.evidence.questions.reviews import REVIEW_JOURNAL, REVIEW_TEXT_CUE
from ra_agent.evidence.questions.topic import PLACEBO_ARM, Topic
from ra_agent.evidence.questions.trials import sentences
from ra_agent.models import Paper

OBJECTIVE = re.compile(
    r"^\W*(?:objectives?|aims?|purpose|goals?)\b\s*[:.]|\b(?:the )?(?:aims?|objectives?|purpose|goal) of (?:this|the|our)"
    r"\b|\bwe (?:aimed|sought|set out|reviewed|assessed|evaluated|compared|examined|summari[sz]ed)\b"
    r"|^\W*to (?:assess|evaluate|determine|compare|review|examine|investigate|summari[sz]e|quantify|systematically)\b",
    re.I,
)
# A review asking something else than a treatment's effects: guidance, costs, genetic associations or kinetics,
# diagnosis or its accuracy, how common a condition is, what predicts it or its course (prognosis).
OTHER_KIND = re.compile(
    r"\bguidelines?\b|\brecommendations?\b|\bconsensus\b|\bcost[- ]?(?:effective\w*|utility|benefit)|\beconomic\w*"
    r"|\bpharmacogene\w*|\bpharmacokinetic\w*|\bdiagnos\w*|\bprevalence\b|\bincidence\b|\brisk factors?\b"
    r"|\bpredict\w*|\bsurvey\b|\bpractice patterns?\b|\bpolymorphisms?\b|\bgen(?:e|es|etic|etics|otypes?)\b"
    r"|\balleles?\b|\bprognos\w*|\baccuracy\b|\bsensitivity and specificity\b|\bbiomarkers?\b",
    re.I,
)
# NLM's headings for such questions (major or not: a review of a treatment's effects is not indexed with them)
OTHER_KIND_MESH = ("Polymorphism, Single Nucleotide", "Polymorphism, Genetic", "Genotype", "Pharmacogenetics",
                   "Genetic Predisposition to Disease", "Prognosis", "Sensitivity and Specificity", "Prevalence",
                   "Cost-Benefit Analysis", "Costs and Cost Analysis", "Practice Guidelines as Topic")  # fmt: skip
# what an objective says when it asks about a treatment's effects ("to assess the effects of", "efficacy and safety")
EFFECT_WORDS = re.compile(r"\beffect(?:s|iveness)?\b|\befficacy\b|\bsafety\b|\bbenefits?\b|\bharms?\b", re.I)
NEGATED = re.compile(r"\b(?:other than|except|excluding|without|instead of|non-?)\s*(?:[\w-]+\s+){0,2}$", re.I)
# A review restricted to an age group, sex or pregnancy asks about part of the population
NARROWER_PEOPLE = re.compile(r"\b(?:child\w*|paediatric|pediatric|infants?|neonat\w*|newborns?|adolescents?|elderly"
                             r"|older (?:adults|people|patients)|women|men|pregnan\w*)\b", re.I)  # fmt: skip
EXACT, BROADER = 2, 1


@dataclass(frozen=True)
class ReviewAsks:
    """A review's own question: the words it asks in (title and objective sentence), the treatments it asks
    about (never one it excludes: "other than anticoagulants"), its comparators, and what kind of question it is."""

    pmid: int
    subject: str
    treatments: tuple[Agent, ...]
    comparators: tuple[Agent, ...]
    other_kind: str  # "" for a review of a treatment's effects, else the words that say what it asks instead
    narrower_people: str  # an age group, sex or pregnancy the review is restricted to, or ""
    systematic: bool


def objective_sentence(review: Paper) -> str:
    """The abstract's sentence stating the review's aim ("OBJECTIVES: To assess ..."), or ""."""
    return next((s for s in sentences(review.abstract) if OBJECTIVE.search(s)), "")


def read_review(review: Paper) -> ReviewAsks:
    """The review's own question from its title and objective sentence (see ReviewAsks)."""
    title = review.title or ""
    subject = f"{title} {objective_sentence(review)}".strip()
    arms = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to))\s+", subject, maxsplit=1, flags=re.I)
    treatments, comparators = [], []
    for position, part in enumerate(arms):
        for agent in agents_in(part):
            at = re.search(rf"\b{re.escape(agent.word)}\b", part, re.I)
            if at and NEGATED.search(part[: at.start()]):
                continue
            (comparators if position else treatments).append(agent)
    people = NARROWER_PEOPLE.search(title)
    narrower = people.group(0) if people and not re.search(r"\badults?\b", title, re.I) else ""
    objective = objective_sentence(review)
    kind = OTHER_KIND.search(title)
    if kind is None and objective and not EFFECT_WORDS.search(objective):
        kind = OTHER_KIND.search(objective)
    heading = next((h for h in OTHER_KIND_MESH if h in review.mesh), None)
    systematic = bool(
        {"Systematic Review", "Meta-Analysis"} & set(review.pub_types)
        or REVIEW_JOURNAL.search(review.journal or "")
        or REVIEW_TEXT_CUE.search(f"{title} {review.abstract}")
    )
    other = kind.group(0) if kind else (f"MeSH {heading}" if heading and not EFFECT_WORDS.search(subject) else "")
    return ReviewAsks(review.pmid, subject, tuple(treatments), tuple(comparators), other, narrower,
                      systematic)  # fmt: skip


def _names_class(agent: Agent) -> bool:
    return agent.cls in classes_named(agent.word)


def _relation(asks: ReviewAsks, wanted: tuple[str, ...]) -> tuple[int, Agent | None, str]:
    """How the review's treatments stand to the question's classes: EXACT (it names the class itself), BROADER (a
    broader class), or 0 with the narrower treatment it names (one agent, or a narrower class)."""
    best: tuple[int, Agent | None, str] = (0, None, "")
    for agent in asks.treatments:
        for cls in wanted:
            if agent.cls == cls and _names_class(agent):
                return EXACT, agent, "the question's class"
            if agent.cls != cls and agent.cls in lineage(cls) and best[0] < BROADER:
                best = (BROADER, agent, f"a broader class ({agent.cls})")
            if cls in lineage(agent.cls) and not best[2]:
                best = (0, agent, f"only {agent.word} ({agent.cls}), narrower than {cls}")
    return best


def review_answers(review: Paper, question, topic: Topic) -> Judgement:
    """Whether `review`'s own question encompasses `question` (a `model.ReviewQuestion`): it asks about a
    treatment's effects, in every population concept of the topic (its title or objective, or its MeSH headings),
    not in an age group or sex the question lacks, about the question's intervention class or a broader one (never
    an excluded one), and against the question's comparator when it names one. The rank orders the reviews that
    answer: the question's own class before a broader one, the population in its own words before MeSH headings only,
    systematic reviews before others, newer first."""
    asks = read_review(review)
    if asks.other_kind:
        return Judgement(False, f"asks something else than the treatment's effects ({asks.other_kind!r})", RULES)
    said = []
    for concept in topic.population:
        words = concept.find(asks.subject, review.mesh)
        if words is None:
            return Judgement(False, f"its title and objective do not name {concept.label!r}", RULES)
        said.append(repr(words))
    if asks.narrower_people and not NARROWER_PEOPLE.search(topic.seed_query):
        return Judgement(False, f"asks about part of the population only ({asks.narrower_people!r})", RULES)
    wanted = (question.intervention,) if question.comparator != "any" else topic.intervention
    relation, agent, how = _relation(asks, wanted)
    if agent is None:
        return Judgement(False, f"its title and objective name no {' or '.join(wanted)}", RULES)
    if relation == 0:
        return Judgement(False, f"asks about {how}", RULES)
    compared = [a.cls for a in asks.comparators if a.cls not in lineage(agent.cls)]
    if compared and question.comparator in ("any", PLACEBO_ARM):
        if question.comparator == "any" or "placebo" not in asks.subject.lower():
            return Judgement(False, f"asks about one comparison only ({agent.word} vs {compared[0]})", RULES)
    if (
        compared
        and question.comparator not in ("any", PLACEBO_ARM)
        and not any(c == question.comparator or question.comparator in lineage(c) for c in compared)
    ):
        return Judgement(False, f"compares with {compared[0]}, not {question.comparator}", RULES)
    why = (f"its own question (title/objective) names {', '.join(said)} and {agent.word!r}: {how}"
           + ("; a systematic review" if asks.systematic else ""))  # fmt: skip
    in_words = sum(not w.startswith("'MeSH ") for w in said)
    return Judgement(True, why, RULES, (relation, in_words, int(asks.systematic), review.year or 0, review.pmid))
