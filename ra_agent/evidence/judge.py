"""The seam between review questions and whoever judges them: "is trial T eligible for question Q" and "does
review R answer Q", each answered with a verdict, the reason and who judged (the rules today; an LLM judge can
take the same place and must say so in `judged_by`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ra_agent.evidence.questions import ReviewQuestion
    from ra_agent.evidence.topic import Topic
    from ra_agent.evidence.trials import Eligibility
    from ra_agent.models import Paper


@dataclass(frozen=True)
class Judgement:
    """Whether a review answers a question, why, who judged, and how well it matches (higher ranks first)."""

    verdict: bool
    reason: str
    judged_by: str
    rank: tuple = field(default=())


class QuestionJudge(Protocol):
    """What the review-question code asks of a judge (`questions.RulesJudge` is the rule-based one)."""

    name: str

    def trial(self, paper: Paper, topic: Topic) -> Eligibility:
        """Is `paper` a trial eligible for the topic's question (with the reason and `judged_by`)?"""
        ...

    def review(self, review: Paper, question: ReviewQuestion, topic: Topic) -> Judgement:
        """Does `review`'s own question encompass `question`?"""
        ...
