"""What changed between two evaluations of a handbook's questions, in plain words: per question its new eligible
studies (with their PMIDs), its verdict transition, the reviews that answer it now and did not before, the review
covering it; questions asked for the first time and questions no longer asked. `compare` reads two `Evaluation`s
of the history and judges nothing (docs/living_evidence.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from ra_agent.evidence.living.history import Evaluation, QuestionState

NEW, GONE, ASKED = "new question", "no longer asked", "asked before"


def _review(review: dict[str, Any] | None) -> str:
    if not review:
        return "none"
    year = f" ({review['year']})" if review.get("year") else ""
    return f"PMID {review['pmid']}{year}"


def _study(reports: Sequence[int]) -> str:
    return "PMID " + " + ".join(str(p) for p in reports)


@dataclass
class QuestionChange:
    """How one question changed: `kind` is NEW, GONE or ASKED (asked in both evaluations)."""

    id: str
    in_words: str
    kind: str
    verdict_before: str
    verdict_after: str
    new_studies: dict[str, list[int]] = field(default_factory=dict)
    new_reports: dict[str, list[int]] = field(default_factory=dict)  # new reports of studies counted before
    dropped_studies: dict[str, list[int]] = field(default_factory=dict)
    new_reviews: list[dict[str, Any]] = field(default_factory=list)
    covering_before: dict[str, Any] | None = None
    covering_after: dict[str, Any] | None = None
    newest_after: dict[str, Any] | None = None
    trials_since: list[int] = field(default_factory=list)  # after, when they changed
    trials_since_changed: bool = False

    @property
    def transition(self) -> bool:
        """A verdict changed, or the question is new or no longer asked."""
        return self.kind != ASKED or self.verdict_before != self.verdict_after

    @property
    def covering_changed(self) -> bool:
        return _pmid(self.covering_before) != _pmid(self.covering_after)

    @property
    def changed(self) -> bool:
        return (self.transition or self.covering_changed or self.trials_since_changed
                or bool(self.new_studies or self.new_reports or self.dropped_studies or self.new_reviews))  # fmt: skip

    def words(self) -> str:
        """The change in one line: "q-... <question>: covered -> covered, update warranted; 2 new studies: ..."."""
        parts = []
        if self.kind == NEW:
            parts.append(f"new question, {self.verdict_after}")
        elif self.kind == GONE:
            parts.append(f"no longer asked (no eligible study of it left); it was {self.verdict_before}")
        elif self.verdict_before != self.verdict_after:
            parts.append(f"{self.verdict_before} -> {self.verdict_after}")
        else:
            parts.append(f"still {self.verdict_after}")
        if self.new_studies:
            n = len(self.new_studies)
            parts.append(f"{n} new {'study' if n == 1 else 'studies'}: "
                         + "; ".join(_study(r) for r in self.new_studies.values()))  # fmt: skip
        if self.new_reports:
            parts.append("new reports of studies already counted: " + "; ".join(
                f"{_study(r)} (study {sid})" for sid, r in self.new_reports.items()))  # fmt: skip
        if self.dropped_studies:
            parts.append("no longer eligible: " + "; ".join(_study(r) for r in self.dropped_studies.values()))
        if self.new_reviews:
            parts.append("new reviews answering it: " + ", ".join(_review(r) for r in self.new_reviews))
        if self.kind != GONE and (self.covering_changed or self.kind == NEW) and self.covering_after:
            was = f" (was {_review(self.covering_before)})" if self.kind == ASKED else ""
            parts.append(f"covered by {_review(self.covering_after)}{was}")
        elif self.kind == ASKED and self.covering_changed:
            parts.append(f"no review covers it any more (was {_review(self.covering_before)})")
        if self.trials_since_changed and self.kind != GONE:
            if self.trials_since:
                n = len(self.trials_since)
                parts.append(f"{n} {'trial' if n == 1 else 'trials'} since {_review(self.newest_after)}: "
                             + ", ".join(f"PMID {p}" for p in self.trials_since))  # fmt: skip
            elif self.kind == ASKED:
                parts.append(f"no trial since {_review(self.newest_after)}")
        return f"{self.id} {self.in_words}: " + "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.in_words, "kind": self.kind, "verdict_before": self.verdict_before,
                "verdict_after": self.verdict_after, "new_studies": self.new_studies, "new_reports": self.new_reports,
                "dropped_studies": self.dropped_studies, "new_reviews": [r["pmid"] for r in self.new_reviews],
                "covering_before": _pmid(self.covering_before), "covering_after": _pmid(self.covering_after),
                "trials_since": self.trials_since, "words": self.words()}  # fmt: skip


def _pmid(review: dict[str, Any] | None) -> int | None:
    return int(review["pmid"]) if review else None


def _question_change(before: QuestionState | None, after: QuestionState | None) -> QuestionChange:
    some = after or before
    assert some is not None
    old_studies = before.studies if before else {}
    new_studies = after.studies if after else {}
    old_reports = {p for r in old_studies.values() for p in r}
    change = QuestionChange(
        some.id, some.in_words, NEW if before is None else GONE if after is None else ASKED,
        before.verdict if before else "", after.verdict if after else "",
        covering_before=before.covering if before else None, covering_after=after.covering if after else None,
        newest_after=after.newest if after else None, trials_since=list(after.trials_since) if after else [],
    )  # fmt: skip
    if after is None:
        return change
    for sid, reports in new_studies.items():
        added = [p for p in reports if p not in old_reports]
        if added == reports:  # every report of it is new: a new study
            change.new_studies[sid] = reports
        elif added:
            change.new_reports[sid] = added
    if before is not None:
        now = {p for r in new_studies.values() for p in r}
        change.dropped_studies = {s: r for s, r in old_studies.items() if s not in new_studies and not set(r) & now}
    known = {int(r["pmid"]) for r in before.reviews} if before else set()
    change.new_reviews = [r for r in after.reviews if int(r["pmid"]) not in known] if before else []
    change.trials_since_changed = before is None or before.trials_since != after.trials_since
    return change


@dataclass
class Changes:
    """What changed from evaluation `before` (None: the first evaluation) to `after`; `questions` holds only the
    questions that changed, in `after`'s order (then those no longer asked)."""

    before: Evaluation | None
    after: Evaluation
    questions: list[QuestionChange]

    @property
    def transitions(self) -> list[QuestionChange]:
        """Verdict changes, new questions and questions no longer asked (none for a first evaluation)."""
        return [c for c in self.questions if c.transition] if self.before is not None else []

    @property
    def new_studies(self) -> int:
        return len({s for c in self.questions for s in c.new_studies})

    def summary(self) -> str:
        """One line: what changed, or that nothing did, and since when."""
        if self.before is None:
            return (f"{self.after.key}: first evaluation, {len(self.after.questions)} questions on "
                    f"{self.after.records} records; nothing to compare with yet")  # fmt: skip
        verdicts = sum(c.kind == ASKED and c.transition for c in self.questions)
        new = sum(c.kind == NEW for c in self.questions)
        gone = sum(c.kind == GONE for c in self.questions)
        reviews = len({int(r["pmid"]) for c in self.questions for r in c.new_reviews})
        counts = [f"{verdicts} verdict{'' if verdicts == 1 else 's'} changed", f"{new} new question" + "s" * (new != 1)]
        counts += [f"{gone} no longer asked"] * bool(gone)
        counts += [f"{self.new_studies} new stud{'y' if self.new_studies == 1 else 'ies'}",
                   f"{reviews} new review{'' if reviews == 1 else 's'} answering a question"]  # fmt: skip
        what = ", ".join(counts) if self.questions else "nothing changed"
        return (f"{self.after.key}: {what} since {self.before.evaluated_ts} ({self.before.records} -> "
                f"{self.after.records} records)")  # fmt: skip

    def lines(self) -> list[str]:
        """The summary, then one line per question that changed (transitions first)."""
        if self.before is None:
            return [self.summary()]
        ordered = sorted(self.questions, key=lambda c: not c.transition)
        reviews = {int(r["pmid"]): r for c in self.questions for r in c.new_reviews}
        named = [f"- new review {_review(r)}: '{str(r.get('title', ''))[:120]}'" for r in reviews.values()]
        return [self.summary(), *named, *(f"- {c.words()}" for c in ordered)]

    def markdown(self) -> str:
        """changes.md: the corpus states compared and the changes in words."""
        head = [f"# What changed: {self.after.handbook}", "",
                f"- Now: {self.after.corpus}",
                f"- Before: {self.before.corpus if self.before else 'no earlier evaluation'}", ""]  # fmt: skip
        body = self.lines()
        return "\n".join([*head, body[0], "", *body[1:], ""]).rstrip() + "\n"

    def as_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "before": self.before.evaluated_ts if self.before else None,
                "after": self.after.evaluated_ts, "transitions": len(self.transitions),
                "questions": [c.as_dict() for c in self.questions]}  # fmt: skip


def compare(before: Evaluation | None, after: Evaluation) -> Changes:
    """The changes from `before` to `after` (every question is new when `before` is None)."""
    changed = [c for q in after.questions if (c := _question_change(before.question(q.id) if before else None, q))
               and (before is None or c.changed)]  # fmt: skip
    if before is not None:
        ids = {q.id for q in after.questions}
        changed += [_question_change(q, None) for q in before.questions if q.id not in ids]
    return Changes(before, after, changed)


def changes_since(evaluations: Sequence[Evaluation], since: date | None = None) -> list[Changes]:
    """The changes of each evaluation from the one before it, oldest first: of the latest only when `since` is
    None, else of every evaluation made on or after `since`."""
    if not evaluations:
        return []
    pairs = [(evaluations[i - 1] if i else None, e) for i, e in enumerate(evaluations)]
    if since is None:
        pairs = pairs[-1:]
    else:
        pairs = [(b, a) for b, a in pairs if datetime.fromisoformat(a.evaluated_ts).date() >= since]
    return [compare(b, a) for b, a in pairs]
