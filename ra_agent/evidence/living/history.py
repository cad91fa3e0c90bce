"""A handbook's evaluations, append-only: one JSON line per evaluation of its questions in
<data_dir>/questions/<key>.history.jsonl (beside the set's folder, which is swapped on every write; the history
never is).

A line holds, per question id, its verdict, studies (study id -> report PMIDs), the reviews answering it, the covering
and newest review and the trials since, with the corpus state the set was judged on (record count, newest record
update) and when. `append_evaluation` writes a line with one write and an fsync under the key's history lock, so two
evaluations at once never interleave and a killed run leaves at most a torn last line. `read_history` reads every
line it can and names each one it cannot (file and line); the next append starts on a new line, so a torn or corrupt
line is skipped and kept, never rewritten (docs/living_evidence.md).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ra_agent.evidence.questions.model import CoveringReview, ReviewQuestion
from ra_agent.evidence.questions.question_set import QuestionSet
from ra_agent.fileio import exclusive_lock

log = logging.getLogger(__name__)

HISTORY_FORMAT = 1
HISTORY_SUFFIX = ".history.jsonl"


def history_path(root: Path, key: str) -> Path:
    """<root>/<key>.history.jsonl: the evaluations of the handbook with this key (root: <data_dir>/questions)."""
    return root / f"{key}{HISTORY_SUFFIX}"


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def _review(review: CoveringReview | None) -> dict[str, Any] | None:
    return {"pmid": review.pmid, "year": review.year, "title": review.title} if review else None


@dataclass(frozen=True)
class QuestionState:
    """One question as an evaluation saw it."""

    id: str
    in_words: str
    verdict: str
    in_scope: bool
    studies: dict[str, list[int]]  # study id -> its report PMIDs, first report first
    reviews: list[dict[str, Any]]  # every review answering it: pmid, year, title (best match first)
    covering: dict[str, Any] | None
    newest: dict[str, Any] | None
    trials_since: list[int]

    @classmethod
    def of(cls, q: ReviewQuestion) -> QuestionState:
        return cls(q.id, q.in_words, q.verdict, q.in_scope, {s: list(r) for s, r in q.studies.items()},
                   [{"pmid": r.pmid, "year": r.year, "title": r.title} for r in q.reviews], _review(q.covering), _review(q.newest),
                   list(q.trials_since))  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "in_words": self.in_words, "verdict": self.verdict, "in_scope": self.in_scope,
                "studies": self.studies, "study_count": len(self.studies), "reviews": self.reviews,
                "covering": self.covering, "newest": self.newest, "trials_since": self.trials_since}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QuestionState:
        return cls(str(d["id"]), str(d["in_words"]), str(d["verdict"]), bool(d.get("in_scope", True)),
                   {str(s): [int(p) for p in r] for s, r in d["studies"].items()},
                   [dict(r) for r in d.get("reviews", [])], d.get("covering"), d.get("newest"),
                   [int(p) for p in d.get("trials_since", [])])  # fmt: skip


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a handbook's questions: when, on what corpus, judged by whom, and each question's state."""

    evaluated_ts: str  # the set's computed_ts
    handbook: str
    key: str
    records: int
    newest_update: str  # the newest record update of the store, ISO date-time ("" for an empty store)
    judged_by: str
    questions: list[QuestionState] = field(default_factory=list)
    line: int = 0  # its line in the history file (0: not read from one)

    @classmethod
    def of(cls, qset: QuestionSet) -> Evaluation:
        newest = qset.state.newest_update
        stamp = datetime.fromtimestamp(newest, UTC).isoformat(timespec="seconds") if newest else ""
        return cls(qset.computed_ts, qset.handbook, qset.key, qset.state.records, stamp, qset.judged_by,
                   [QuestionState.of(q) for q in qset.questions])  # fmt: skip

    @property
    def corpus(self) -> str:
        """The corpus state in words: "420 records (newest update 2024-05-01T10:00:00+00:00), judged <ts>"."""
        newest = f" (newest update {self.newest_update})" if self.newest_update else ""
        return f"{self.records} records{newest}, judged {self.evaluated_ts}"

    def question(self, question_id: str) -> QuestionState | None:
        return next((q for q in self.questions if q.id == question_id), None)

    def as_dict(self) -> dict[str, Any]:
        return {"format": HISTORY_FORMAT, "evaluated_ts": self.evaluated_ts, "handbook": self.handbook,
                "key": self.key, "corpus": {"records": self.records, "newest_update": self.newest_update},
                "judged_by": self.judged_by, "questions": [q.as_dict() for q in self.questions]}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any], line: int = 0) -> Evaluation:
        if d.get("format") != HISTORY_FORMAT:
            raise ValueError(f"format {d.get('format')!r} is not {HISTORY_FORMAT}")
        corpus = d["corpus"]
        return cls(str(d["evaluated_ts"]), str(d["handbook"]), str(d["key"]), int(corpus["records"]),
                   str(corpus.get("newest_update", "")), str(d.get("judged_by", "")),
                   [QuestionState.from_dict(q) for q in d["questions"]], line)  # fmt: skip


@dataclass
class History:
    """The evaluations read from a history file, oldest first, and one line per line that could not be read."""

    path: Path
    evaluations: list[Evaluation]
    problems: list[str]

    @property
    def latest(self) -> Evaluation | None:
        return self.evaluations[-1] if self.evaluations else None

    def previous_of(self, evaluation: Evaluation) -> Evaluation | None:
        """The evaluation read just before `evaluation` (the last one with its time stamp), None for the first."""
        for i in range(len(self.evaluations) - 1, -1, -1):
            if self.evaluations[i].evaluated_ts == evaluation.evaluated_ts:
                return self.evaluations[i - 1] if i else None
        return None

    def find(self, evaluated_ts: str) -> Evaluation | None:
        """The last evaluation made at `evaluated_ts` (a set's computed_ts)."""
        return next((e for e in reversed(self.evaluations) if e.evaluated_ts == evaluated_ts), None)


def read_history(path: Path) -> History:
    """Every evaluation `path` holds (none when it does not exist). A line that is not a whole evaluation (torn by a
    killed run, edited by hand) is skipped and named in `problems` as "<file>:<line>: ..." (one line each)."""
    evaluations, problems = [], []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return History(path, [], [])
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        torn = number == len(lines)  # the last piece has no newline: a write that never finished
        try:
            evaluations.append(Evaluation.from_dict(json.loads(raw.decode("utf-8")), number))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            what = "a torn last line (no newline: a write that never finished)" if torn else "not an evaluation"
            problems.append(f"{path}:{number}: {what} ({str(exc)[:120]}); skipped, kept as it is")
    return History(path, evaluations, problems)


def append_evaluation(path: Path, evaluation: Evaluation) -> History:
    """Append `evaluation` as one line (one write, then fsync) under the file's lock, after a newline when the file
    ends in a torn line; returns the history as it was before the append (read under the same lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(evaluation.as_dict(), sort_keys=True, separators=(",", ":")) + "\n"
    with exclusive_lock(_lock_path(path)):
        before = read_history(path)
        for problem in before.problems:
            log.warning("%s", problem)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            torn = size and _last_byte(path, size) != b"\n"
            data = (("\n" if torn else "") + line).encode("utf-8")
            while data:  # one write; a regular file takes it whole unless a signal cuts it short
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    return before


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as fh:
        fh.seek(size - 1)
        return fh.read(1)
