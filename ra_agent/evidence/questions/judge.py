"""The seam between review questions and whoever judges them: "is trial T eligible for question Q" and "does
review R answer Q", each answered with a verdict, the reason and who judged (the rules today; an LLM judge can
take the same place and must say so in `judged_by`); `RulesJudge` is the rule-based judge (`trials.eligibility`,
`review_asks.review_answers`)."""

from __future__ import annotations

from typing import Protocol

from ra_agent.evidence.questions.model import RULES, Eligibility, Judgement, ReviewQuestion
from ra_agent.evidence.questions.review_asks import review_answers
from ra_agent.evidence.questions.topic import Topic
from ra_agent.evidence.questions.trials import eligibility
from ra_agent.models import Paper


class QuestionJudge(Protocol):
    """What the review-question code asks of a judge (`RulesJudge` is the rule-based one)."""

    name: str

    def trial(self, paper: Paper, topic: Topic) -> Eligibility:
        """Is `paper` a trial eligible for the topic's question (with the reason and `judged_by`)?"""
        ...

    def review(self, review: Paper, question: ReviewQuestion, topic: Topic) -> Judgement:
        """Does `review`'s own question encompass `question`?"""
        ...


class RulesJudge:
    """The rule-based judge (`judge.QuestionJudge`): `trials.eligibility` and `review_asks.review_answers`."""

    name = RULES

    def trial(self, paper: Paper, topic: Topic) -> Eligibility:
        return eligibility(paper, topic)

    def review(self, review: Paper, question: ReviewQuestion, topic: Topic) -> Judgement:
        return review_answers(review, question, topic)
