"""A handbook's questions as one stored unit (`QuestionSet`): the questions with their studies, counts and verdicts,
the eligibility of every record judged, and the corpus state and handbook they were judged on.

On disk a set is the folder <data_dir>/questions/<key>/ (`question_set_key`: the handbook's file stem and a hash of
its path, relative to the project root when inside it, so a copy of a handbook elsewhere never shares a folder): questions.json and one dossier per
question (<question id>.md). `write_question_set` writes the folder as one unit (a temporary folder swapped in by
renames under a lock): no dossier of a question that no longer exists survives, and an interrupted write leaves the
previous folder whole. `read_question_set` reads it back. Who computes a set, and when a stored one is still current,
is `agent.questions.load_question_set`'s business (docs/review_questions.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ra_agent.evidence.questions.model import VERDICTS, ReviewQuestion
from ra_agent.fileio import exclusive_lock, fsync_dir
from ra_agent.store.db import Store

log = logging.getLogger(__name__)

QUESTIONS_FILE = "questions.json"
SET_FORMAT = 1  # questions.json's layout; a file of another format is computed again
SAFE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
QUESTION_ID = re.compile(r"q-[0-9a-f]{10}")


class QuestionSetError(ValueError):
    """A handbook whose questions cannot be kept (an unsafe file name), or a question id the set does not hold."""


def handbook_identity(handbook_path: str | Path, root: str | Path | None = None) -> str:
    """A handbook's identity: its path relative to the project `root` when inside it (a copied or moved project
    keeps its questions), else its resolved absolute path; POSIX separators."""
    path = Path(handbook_path).resolve()
    if root is not None:
        try:
            return path.relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return path.as_posix()


def question_set_key(handbook_path: str | Path, root: str | Path | None = None) -> str:
    """The folder name of a handbook's questions: "<file stem>-<first 8 hex of sha1(`handbook_identity`)>", so a copy
    of a handbook in another folder has its own; a stem that is not a safe folder name (letters, digits, '.', '_',
    '-', starting with a letter or digit) is refused."""
    path = Path(handbook_path).resolve()
    if not SAFE_STEM.fullmatch(path.stem):
        raise QuestionSetError(f"{handbook_path}: file name: {path.stem!r} is not a safe folder name for its "
                               "questions (letters, digits, '.', '_' or '-', starting with a letter or digit)")  # fmt: skip
    return f"{path.stem}-{hashlib.sha1(handbook_identity(path, root).encode()).hexdigest()[:8]}"


@cache
def rules_version() -> str:
    """A digest of the code that judges questions (evidence/questions and the class table of evidence/classes): a
    set stored by other rules is judged again, and the review_questions asset's code version changes with it."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha1()
    for path in sorted([*here.glob("*.py"), *(here.parent / "classes").glob("*.py")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"questions@{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class CorpusState:
    """What a set was judged on: the store's record count, its newest record update and reference count, and
    digests of the handbook file and of the knobs that change a verdict ([sr], and who judges)."""

    records: int
    newest_update: int
    references: int
    handbook_sha1: str
    knobs_sha1: str


def corpus_state(store: Store, handbook_path: str | Path, knobs: Mapping[str, Any]) -> CorpusState:
    """The state a set computed now would be judged on (three indexed aggregate reads and two digests)."""
    records, newest = store.conn.execute("SELECT COUNT(*), COALESCE(MAX(updated_ts), 0) FROM paper").fetchone()
    references = store.conn.execute("SELECT COUNT(*) FROM ref").fetchone()[0]
    handbook = hashlib.sha1(Path(handbook_path).read_bytes()).hexdigest()
    digest = hashlib.sha1(json.dumps(knobs, sort_keys=True, default=str).encode()).hexdigest()
    return CorpusState(int(records), int(newest), int(references), handbook, digest)


@dataclass
class QuestionSet:
    """A handbook's questions over the corpus, computed once (`agent.questions.load_question_set`) and read by
    everything: `ra questions`, the dossiers, the review_questions asset, the goal's tools and Success, the reports.

    `questions[0]` is the topic's own question; `eligibility` maps each judged record's PMID to {"eligible",
    "reason"}; `reason` says why no question has a trial ("" when one has)."""

    handbook: str  # the handbook's identity (`handbook_identity`: relative to the project root when inside it)
    key: str
    topic: str  # the topic in words (`Topic.describe`)
    seed_query: str
    scope: list[str]  # the eligibility statements of the handbook the rules apply (`Statement.line`)
    judged_by: str
    questions: list[ReviewQuestion]
    eligibility: dict[int, dict[str, Any]]
    state: CorpusState
    computed_ts: str
    reason: str = ""
    topic_terms: list[str] = field(default_factory=list)
    reviews_checked: int = 0  # the reviews among the candidates (records that may name the population), each judged
    scope_not_applied: list[str] = field(default_factory=list)  # the handbook's other statements, in its words

    @property
    def topic_question(self) -> ReviewQuestion:
        return self.questions[0]

    @property
    def eligible_reports(self) -> int:
        return sum(bool(e.get("eligible")) for e in self.eligibility.values())

    def question(self, question_id: str) -> ReviewQuestion:
        """The question with this id; QuestionSetError naming the handbook and the ids it holds otherwise."""
        for question in self.questions:
            if question.id == question_id:
                return question
        known = ", ".join(q.id for q in self.questions[:12])
        raise QuestionSetError(f"{self.handbook}: no question {question_id!r} among its questions ({known})")

    def children(self, question_id: str) -> list[ReviewQuestion]:
        """The narrower questions right below one question."""
        return [q for q in self.questions if q.parent == question_id]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": SET_FORMAT, "handbook": self.handbook, "key": self.key, "topic": self.topic,
            "seed_query": self.seed_query, "topic_terms": self.topic_terms, "scope": self.scope,
            "judged_by": self.judged_by, "computed_ts": self.computed_ts, "reason": self.reason,
            "reviews_checked": self.reviews_checked, "scope_not_applied": self.scope_not_applied,
            "state": asdict(self.state), "questions": [q.as_dict() for q in self.questions],
            "eligibility": {str(k): v for k, v in sorted(self.eligibility.items())},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuestionSet:
        if data.get("format") != SET_FORMAT:
            raise ValueError(f"format {data.get('format')!r} is not {SET_FORMAT}")
        return cls(
            handbook=str(data["handbook"]), key=str(data["key"]), topic=str(data["topic"]),
            seed_query=str(data.get("seed_query", "")), scope=[str(s) for s in data.get("scope", [])],
            judged_by=str(data["judged_by"]), questions=[ReviewQuestion.from_dict(q) for q in data["questions"]],
            eligibility={int(k): dict(v) for k, v in data.get("eligibility", {}).items()},
            state=CorpusState(**data["state"]), computed_ts=str(data["computed_ts"]),
            reason=str(data.get("reason", "")), topic_terms=[str(t) for t in data.get("topic_terms", [])],
            reviews_checked=int(data.get("reviews_checked", 0)),
            scope_not_applied=[str(s) for s in data.get("scope_not_applied", [])],
        )  # fmt: skip


# ============================================================================ the folder


def _leftovers(root: Path, key: str) -> list[Path]:
    return sorted(root.glob(f".{key}.tmp-*")) + sorted(root.glob(f".{key}.old-*"))


def _recover(root: Path, key: str) -> None:
    """Under the lock: a swap interrupted between its two renames left no folder but the previous one renamed
    aside: put it back. Then remove every leftover of interrupted writes (temporary and previous folders)."""
    folder = root / key
    if not folder.exists():
        olds = sorted(root.glob(f".{key}.old-*"), key=lambda p: p.stat().st_mtime)
        if olds:
            os.replace(olds[-1], folder)
            log.warning("questions %s: an interrupted write left the previous folder aside; restored", key)
    for path in _leftovers(root, key):
        shutil.rmtree(path, ignore_errors=True)


def _lock_path(root: Path, key: str) -> Path:
    return root / f".{key}.lock"


def write_question_set(
    root: Path, qset: QuestionSet, dossiers: Mapping[str, str], also: Callable[[Path], object] | None = None
) -> Path:
    """Write <root>/<key>/ as one unit: questions.json and `dossiers` (file name -> Markdown) into a temporary
    folder (`also` writes more into it: the evidence-gap map), then swap it in by two renames under the key's lock.
    Returns the folder."""
    folder = root / qset.key
    root.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(_lock_path(root, qset.key)):
        _recover(root, qset.key)
        tmp = Path(tempfile.mkdtemp(prefix=f".{qset.key}.tmp-", dir=root))
        try:
            for name, text in [*dossiers.items(), (QUESTIONS_FILE, json.dumps(qset.as_dict(), indent=1) + "\n")]:
                with open(tmp / name, "w", encoding="utf-8") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
            if also is not None:
                also(tmp)
            fsync_dir(tmp)
            old = root / f".{qset.key}.old-{uuid.uuid4().hex[:8]}"
            if folder.exists():
                os.replace(folder, old)
            os.replace(tmp, folder)
            fsync_dir(root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)
    return folder


def read_question_set(root: Path, key: str) -> QuestionSet | None:
    """The set stored in <root>/<key>/, or None when there is none or it cannot be read (it is then computed
    again; the reason is logged). A write interrupted mid-swap is repaired first."""
    folder = root / key
    if not folder.exists() and not _leftovers(root, key):
        return None
    with exclusive_lock(_lock_path(root, key)):
        _recover(root, key)
        path = folder / QUESTIONS_FILE
        if not path.exists():
            return None
        try:
            return QuestionSet.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s: unreadable (%s); the questions are computed again", path, exc)
            return None


def question_set_problems(folder: Path, store: Store) -> tuple[int, list[str]]:
    """Structural check of a stored set: (questions read, problems). Each question has a well-formed id, a known
    verdict, its dossier file, a reason for each report, studies made of its reports, and reports and reviews that
    are papers of the store; the folder holds no dossier of a question the set does not hold."""
    path = folder / QUESTIONS_FILE
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return 0, [f"{path}: unreadable ({exc})"]
    problems: list[str] = []
    ids = set()
    for q in payload.get("questions", []):
        where = f"{folder.name}/{q.get('id')}"
        ids.add(str(q.get("id")))
        if not QUESTION_ID.fullmatch(str(q.get("id", ""))):
            problems.append(f"{where}: malformed id")
        if q.get("verdict") not in VERDICTS:
            problems.append(f"{where}: unknown verdict {q.get('verdict')!r}")
        if not (folder / f"{q.get('id')}.md").exists():
            problems.append(f"{where}: no dossier file")
        if any(not str(why).strip() for why in q.get("trials", {}).values()):
            problems.append(f"{where}: a report without its reason")
        reports = {int(p) for p in q.get("trials", {})}
        if {int(p) for r in q.get("studies", {}).values() for p in r} != reports:
            problems.append(f"{where}: its studies are not made of its reports")
        pmids = reports | {int(r["pmid"]) for r in q.get("reviews", [])}
        missing = sorted(pmids - store.existing_pmids(pmids))
        if missing:
            problems.append(f"{where}: PMIDs not in the store {missing[:5]}")
    stray = sorted(p.name for p in folder.glob("q-*.md") if p.stem not in ids)
    if stray:
        problems.append(f"{folder.name}: dossiers of questions the set does not hold: {', '.join(stray[:5])}")
    return len(ids), problems
