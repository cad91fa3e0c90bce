"""The review question a synthesis answers: the narrow view of a review question that comparisons are tied to.

The synthesis needs four things of a question: a label to title the review with, whether a trial's condition is
inside its population, and the intervention and comparator classes it asks about. `SynthesisQuestion` holds
them; `from_topic` and `from_review_question` build it from what `evidence.questions` offers today (a goal's
`Topic`, read from its handbook's seed query, and a `ReviewQuestion`), reading only `Topic.population` (concepts
with `label` and `find`), `Topic.intervention` (class names) and `ReviewQuestion.population`/`intervention`/
`comparator`/`pico`, so that a change there touches these two functions only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ra_agent.evidence.classes import lineage

ANY = "any"


class _Concept(Protocol):
    label: str

    def find(self, text: str) -> str | None: ...


@dataclass(frozen=True)
class SynthesisQuestion:
    """A review question as the synthesis reads it: P (words and a test of a condition), I and C (class names)."""

    label: str  # "P: gastroesophageal reflux · I: proton pump inhibitor · C: any comparator"
    population: str  # "gastroesophageal reflux"
    intervention: tuple[str, ...] = ()  # class names (evidence.classes); empty: any treatment
    comparator: str = ANY  # a class name, "placebo", or "any"
    names_condition: Callable[[str], bool] | None = field(default=None, compare=False)  # None: every condition

    def covers_condition(self, condition: str) -> bool:
        """Whether a trial of `condition` is inside the question's population."""
        return self.names_condition is None or self.names_condition(condition)

    def covers_arms(self, intervention: str, comparator: str, kind: str) -> bool:
        """Whether a comparison of class `intervention` against class `comparator` (kind "class", "head-to-head" or
        "dose") answers the question: its intervention side is of (or below) one of the question's classes, and
        its comparator is the question's ("another <class>": head to head or doses within the class; "dose…": a
        dose comparison; any, when the question names none)."""
        if self.intervention and not any(c in lineage(intervention) for c in self.intervention):
            return False
        wanted = self.comparator
        if wanted == ANY:
            return True
        if wanted.startswith("another "):
            return kind != "class" and comparator == intervention
        if wanted.startswith("dose"):
            return kind == "dose"
        if wanted == "placebo" and comparator == "no treatment":  # "placebo or no treatment"
            return kind == "class"
        return kind == "class" and wanted in lineage(comparator)


def _names_condition(concepts: Sequence[_Concept]) -> Callable[[str], bool] | None:
    if not concepts:
        return None
    return lambda condition: all(c.find(condition) is not None for c in concepts)


def from_topic(topic: Any) -> SynthesisQuestion:
    """The topic's own question (its population × its intervention classes × any comparator), as
    `evidence.questions.build_questions` forms the root question."""
    concepts = tuple(topic.population)
    population = " and ".join(c.label for c in concepts) or "any population"
    intervention = tuple(topic.intervention)
    label = f"P: {population} · I: {' or '.join(intervention) or 'any treatment'} · C: any comparator"
    return SynthesisQuestion(label, population, intervention, ANY, _names_condition(concepts))


def from_review_question(question: Any, topic: Any = None) -> SynthesisQuestion:
    """A `ReviewQuestion` (its PICO line is the label); the population test comes from the topic's concepts."""
    comparator = str(question.comparator)
    if comparator.startswith("placebo"):
        comparator = "placebo"
    concepts = tuple(topic.population) if topic is not None else ()
    classes = tuple(c.strip() for c in str(question.intervention).split(" or ") if c.strip())
    return SynthesisQuestion(str(question.pico), str(question.population), classes, comparator,
                             _names_condition(concepts))  # fmt: skip


def as_question(question: SynthesisQuestion | str | None) -> SynthesisQuestion | None:
    """A caller's question: a SynthesisQuestion, a bare label (it titles the review; every comparison is in it), or
    None."""
    if question is None or isinstance(question, SynthesisQuestion):
        return question
    return SynthesisQuestion(question, "") if question.strip() else None
