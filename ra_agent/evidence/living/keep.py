"""Keeping an evaluation: `keep_evaluation` appends a newly computed set to its handbook's history and returns what
changed since the evaluation before it; `announce` sends those changes to the team ([living] in config.toml).
`agent.questions.load_question_set` calls both whenever it computes a set (never when it reads a stored one)."""

from __future__ import annotations

import logging
from pathlib import Path

from ra_agent.config import LivingConfig
from ra_agent.evidence.living.changes import Changes, compare
from ra_agent.evidence.living.history import Evaluation, append_evaluation, history_path
from ra_agent.evidence.living.notify import notify
from ra_agent.evidence.questions.question_set import QuestionSet

log = logging.getLogger(__name__)

CHANGES_FILE = "changes.md"  # beside the dossiers: what changed since the evaluation before


def keep_evaluation(root: Path, qset: QuestionSet) -> Changes:
    """Append `qset`'s evaluation to <root>/<key>.history.jsonl and compare it with the last evaluation read
    before it (a line that cannot be read is logged, skipped and kept)."""
    evaluation = Evaluation.of(qset)
    before = append_evaluation(history_path(root, qset.key), evaluation)
    changes = compare(before.latest, evaluation)
    log.info("questions %s: %s", qset.key, changes.summary())
    return changes


def announce(living: LivingConfig, changes: Changes) -> list[str]:
    """Send the changes to [living] webhook_url / webhook_command when there are any (a first evaluation has none
    to send); a failure is logged, never raised."""
    if changes.before is None or not changes.questions:
        return []
    try:
        return notify(changes, living.webhook_url, living.webhook_command, living.webhook_timeout_s)
    except Exception as exc:  # a message that cannot be sent never fails the evaluation
        log.warning("[living]: the changes of %s were not sent (%s: %s)", changes.after.key, type(exc).__name__, exc)
        return [f"failed ({type(exc).__name__}: {exc})"]
