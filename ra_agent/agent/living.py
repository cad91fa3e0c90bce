"""Living evidence where handbooks meet it: the changes of a handbook's latest evaluation (or of every evaluation
since a date) read from its history, for `ra questions HANDBOOK --changes` and the review_questions asset's check.
Evaluations are appended by `agent.questions.load_question_set` (docs/living_evidence.md)."""

from __future__ import annotations

from datetime import date

from ra_agent.agent.questions import questions_root
from ra_agent.config import Config
from ra_agent.evidence.living.changes import Changes, changes_since, compare
from ra_agent.evidence.living.history import History, history_path, read_history
from ra_agent.evidence.questions.question_set import QuestionSet


def set_history(cfg: Config, key: str) -> History:
    """The evaluations of the handbook with this key, oldest first, and the lines that could not be read."""
    return read_history(history_path(questions_root(cfg), key))


def set_changes(cfg: Config, qset: QuestionSet) -> tuple[Changes | None, list[str]]:
    """What changed in the evaluation that computed `qset` since the one before it (None when its history does not
    hold it: a set computed before its handbook's history was kept), and the history's unreadable lines."""
    history = set_history(cfg, qset.key)
    evaluation = history.find(qset.computed_ts)
    if evaluation is None:
        return None, history.problems
    return compare(history.previous_of(evaluation), evaluation), history.problems


def changes_lines(cfg: Config, qset: QuestionSet, since: date | None = None) -> tuple[list[str], list[str]]:
    """`ra questions HANDBOOK --changes`: the latest evaluation's changes in words (or each evaluation's on or
    after `since`), and the history's unreadable lines (one each, naming file and line)."""
    history = set_history(cfg, qset.key)
    found = changes_since(history.evaluations, since)
    if not found:
        when = f" on or after {since}" if since else ""
        return [f"{qset.key}: no evaluation{when} in {history.path}"], history.problems
    lines = []
    for changes in found:
        lines += [f"## {changes.after.evaluated_ts}: {changes.after.corpus}", *changes.lines(), ""]
    return lines[:-1], history.problems
