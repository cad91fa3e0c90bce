"""Goal state: the goal_state.json model, its append-only history, LLM mutations and atomic persistence
(docs/architecture.md)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ra_agent.fileio import atomic_write
from ra_agent.workspace import Workspace

if TYPE_CHECKING:
    from ra_agent.store.db import Store

log = logging.getLogger(__name__)

PRIMARY_GOALS = ("seek_gap", "conduct_SR", "manual_task")
GOAL_STATUSES = ("in_progress", "stopped", "stopped_manual", "paused", "paused_api", "crashed", "error")
# a goal left crashed or paused_api resumes on the next launch (docs/operations.md, Logs, guards, recovery)
RESUMABLE_STATUSES = ("in_progress", "crashed", "paused_api")

# The LLM may change every top-level field except goal_id and history; handbook_path is fixed
# too (the handbook is the operator's contract). The executor's bookkeeping fields (cycle counter, brain,
# pending work, success list, timestamps) are not the LLM's to set either: writing pending_tool_calls or
# success_questions would bypass validation and the success test.
FIXED_FIELDS = ("goal_id", "history", "handbook_path")
LLM_MUTABLE_FIELDS = (
    "primary_goal",
    "topic",
    "status",
    "question_id",
    "questions_done",
    "cluster_id",
    "subgoals",
    "rejected_clusters",
    "pending_queries",
)
# the LLM may stop a goal or keep it running; paused/crashed/error/stopped_manual are set by the executor only
LLM_STATUSES = ("in_progress", "stopped")

# history event per changed field; a status change is named after the new status
FIELD_EVENTS = {
    "primary_goal": "pivoted",
    "topic": "topic_changed",
    "question_id": "question_selected",
    "questions_done": "questions_done",
    "cluster_id": "cluster_selected",
    "subgoals": "subgoals_changed",
    "rejected_clusters": "clusters_rejected",
    "pending_queries": "queries_queued",
}
STATUS_EVENTS = {
    "in_progress": "resumed",
    "stopped": "stopped",
    "stopped_manual": "stopped_manual",
    "paused": "paused",
    "paused_api": "paused_api",
    "crashed": "crashed",
    "error": "error",
}
HISTORY_KEYS = ("cycle", "ts", "brain", "event")

SAFE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # cluster ids end up in file names (pico/<cluster_id>.jsonl)
QUESTION_ID_RE = re.compile(r"^q-[0-9a-f]{10}$")  # a review question's id (evidence.questions.build.question_id)
LEGACY_FIELDS = ("success_clusters",)  # goal_state.json fields of earlier versions, dropped when read
GOAL_ID_RE = re.compile(r"^[0-9a-f]{12}$")
EVENT_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class GoalStateError(ValueError):
    """goal_state.json is malformed, or a write would rewrite its append-only history."""


class GoalMutationError(ValueError):
    """The LLM asked for a goal change it may not make; `forbidden` is True for fields it may never touch."""

    def __init__(self, message: str, *, forbidden: bool = False):
        super().__init__(message)
        self.forbidden = forbidden


def utc_now() -> str:
    """Current UTC time as ISO-8601 with microseconds (history and goal timestamps)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def goal_id_for(handbook_path: str, start_ts: str) -> str:
    """goal_id = sha1(handbook_path + start_ts)[:12]: stable for one start of one handbook."""
    return hashlib.sha1((handbook_path + start_ts).encode("utf-8")).hexdigest()[:12]


@dataclass
class GoalState:
    """One goal's state; fields in goal_state.json order (the goal's own fields first, executor bookkeeping after)."""

    goal_id: str
    primary_goal: str
    topic: str
    handbook_path: str
    status: str = "in_progress"
    question_id: str | None = None  # the review question in focus (its handbook's QuestionSet)
    questions_done: list[str] = field(default_factory=list)  # questions the goal finished with (any outcome)
    cluster_id: str | None = None  # the cluster in focus: the retrieval layer (search expansion, split, merge)
    subgoals: list[Any] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    cycle: int = 0
    brain: str = ""
    started_ts: str = ""
    updated_ts: str = ""
    rejected_clusters: list[str] = field(default_factory=list)
    pending_queries: list[str] = field(default_factory=list)
    pending_asset_requests: list[dict[str, Any]] = field(default_factory=list)
    pending_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    success_questions: list[str] = field(default_factory=list)  # the questions that met Success
    owned_clusters: list[str] = field(default_factory=list)  # agent/ownership.py: the only clusters Success reads
    parent_goal: str | None = None  # the goal whose propose_alternative_pico spawned this one
    spawn_depth: int = 0  # 0 for a goal started from a handbook, parent's depth + 1 for a spawned goal

    @property
    def is_active(self) -> bool:
        return self.status == "in_progress"

    def stop_reason(self) -> str:
        """Why the goal is not running: the reason (or error) of its last status change, '' if none."""
        for h in reversed(self.history):
            if h["event"] in STATUS_EVENTS.values() and h.get("new", self.status) == self.status:
                reason = str(h.get("reason") or h.get("error") or ("set by the brain" if h.get("by") == "llm" else ""))
                if reason == "success" and h.get("questions"):
                    return f"success: {', '.join(h['questions'])} met {h.get('success', 'the handbook')}"
                return reason
        return ""

    def record(self, event: str, **details: Any) -> dict[str, Any]:
        """Append a history entry {cycle, ts, brain, event, **details} (the shape the cycle logs read) and return it."""
        if not EVENT_RE.match(event):
            raise GoalStateError(f"history event {event!r} is not a snake_case name")
        clash = sorted(set(details) & set(HISTORY_KEYS))
        if clash:
            raise GoalStateError(f"history details may not use the reserved keys {clash}")
        entry = {"cycle": self.cycle, "ts": utc_now(), "brain": self.brain, "event": event, **details}
        self.history.append(entry)
        return entry

    def set_status(self, status: str, **details: Any) -> dict[str, Any] | None:
        """Executor-side status change with its history entry (None when the status is unchanged)."""
        if status not in GOAL_STATUSES:
            raise GoalStateError(f"status {status!r} is not one of {', '.join(GOAL_STATUSES)}")
        if status == self.status:
            return None
        old, self.status = self.status, status
        return self.record(STATUS_EVENTS[status], old=old, new=status, **details)

    def begin_cycle(self, brain: str, reason: str = "") -> int:
        """Advance the cycle counter and note the brain that runs it (a brain switch is recorded)."""
        self.cycle += 1
        self.note_brain(brain, reason)
        return self.cycle

    def note_brain(self, brain: str, reason: str = "") -> None:
        """The brain that answers from now on; a switch is recorded (`brain_changed`, with why when known: the
        rules taking over from an LLM that failed under [llm] brain = "auto")."""
        if brain != self.brain:
            old, self.brain = self.brain, brain
            if old:
                self.record("brain_changed", old=old, new=brain, **({"reason": reason} if reason else {}))

    def events(self, event: str) -> list[dict[str, Any]]:
        return [h for h in self.history if h["event"] == event]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<goal_state>") -> GoalState:
        names = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k not in LEGACY_FIELDS}
        unknown = sorted(set(data) - names)
        if unknown:
            raise GoalStateError(f"{source}: unknown goal_state fields {unknown}")
        missing = [k for k in ("goal_id", "primary_goal", "topic", "handbook_path") if k not in data]
        if missing:
            raise GoalStateError(f"{source}: missing goal_state fields {missing}")
        state = cls(**copy.deepcopy(dict(data)))
        if state.status not in GOAL_STATUSES:
            raise GoalStateError(f"{source}: status {state.status!r} is not one of {', '.join(GOAL_STATUSES)}")
        if not isinstance(state.history, list) or not all(isinstance(h, dict) and "event" in h for h in state.history):
            raise GoalStateError(f"{source}: history must be a list of event objects")
        return state


def new_goal(
    handbook_path: str, primary_goal: str, topic: str, *, start_ts: str | None = None, brain: str = ""
) -> GoalState:
    """A fresh goal with its `created` history entry (cycle 0)."""
    if primary_goal not in PRIMARY_GOALS:
        raise GoalStateError(f"primary_goal {primary_goal!r} is not one of {', '.join(PRIMARY_GOALS)}")
    start_ts = start_ts or utc_now()
    state = GoalState(
        goal_id=goal_id_for(handbook_path, start_ts),
        primary_goal=primary_goal,
        topic=topic,
        handbook_path=handbook_path,
        brain=brain,
        started_ts=start_ts,
        updated_ts=start_ts,
    )
    state.record("created", handbook_path=handbook_path, primary_goal=primary_goal, topic=topic)
    return state


# ---------------------------------------------------------------------------- LLM mutations


def _safe_id_list(field_name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and SAFE_ID_RE.match(v) for v in value):
        raise GoalMutationError(f"{field_name} must be a list of cluster ids (letters, digits, '_' or '-')")
    return list(dict.fromkeys(value))


def _text_list(field_name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise GoalMutationError(f"{field_name} must be a list of non-empty strings")
    return [v.strip() for v in value]


def _check_value(name: str, value: Any) -> Any:
    if name == "primary_goal":
        if value not in PRIMARY_GOALS:
            raise GoalMutationError(f"primary_goal {value!r} is not one of {', '.join(PRIMARY_GOALS)}")
    elif name == "status":
        if value not in LLM_STATUSES:
            hint = " (set by the executor only)" if value in GOAL_STATUSES else ""
            raise GoalMutationError(
                f"status {value!r} is not allowed{hint}; the LLM may set {' or '.join(LLM_STATUSES)}"
            )
    elif name == "topic":
        if not isinstance(value, str) or not value.strip():
            raise GoalMutationError("topic must be a non-empty string")
        return value.strip()
    elif name == "cluster_id":
        if value is not None and not (isinstance(value, str) and SAFE_ID_RE.match(value)):
            raise GoalMutationError("cluster_id must be null or a cluster id (letters, digits, '_' or '-')")
    elif name == "question_id":
        if value is not None and not (isinstance(value, str) and QUESTION_ID_RE.match(value)):
            raise GoalMutationError("question_id must be null or a question id ('q-' and 10 hex digits)")
    elif name == "questions_done":
        if not isinstance(value, list) or not all(isinstance(v, str) and QUESTION_ID_RE.match(v) for v in value):
            raise GoalMutationError("questions_done must be a list of question ids ('q-' and 10 hex digits)")
        return list(dict.fromkeys(value))
    elif name == "subgoals":
        if not isinstance(value, list):
            raise GoalMutationError("subgoals must be a list")
    elif name == "rejected_clusters":
        return _safe_id_list(name, value)
    elif name == "pending_queries":
        return _text_list(name, value)
    return value


def validate_changes(changes: Any) -> dict[str, Any]:
    """Check an LLM's goal changes without applying them; returns the normalised changes."""
    if not isinstance(changes, Mapping) or not changes:
        raise GoalMutationError("changes must be a non-empty JSON object of goal fields")
    checked: dict[str, Any] = {}
    executor_fields = {f.name for f in dataclasses.fields(GoalState)} - set(LLM_MUTABLE_FIELDS)
    for name, value in changes.items():
        if name in FIXED_FIELDS:
            raise GoalMutationError(
                f"the LLM may not change '{name}' ({', '.join(FIXED_FIELDS)} are fixed)", forbidden=True
            )
        if name in executor_fields:
            raise GoalMutationError(f"'{name}' is managed by the executor, not the LLM", forbidden=True)
        if name not in LLM_MUTABLE_FIELDS:
            raise GoalMutationError(
                f"unknown goal field '{name}' (the LLM may change: {', '.join(LLM_MUTABLE_FIELDS)})"
            )
        checked[name] = _check_value(name, value)
    return checked


def apply_llm_mutation(state: GoalState, changes: Any) -> list[dict[str, Any]]:
    """Apply an LLM's goal changes all-or-nothing; returns the history entries appended (one per changed field).

    A primary_goal change is recorded as `pivoted`, a status change under the new status's event
    (`stopped`, `resumed`), other fields as `<field>` events; every entry carries field, old, new, by="llm".
    Raises GoalMutationError (nothing applied) for forbidden fields or bad values.
    """
    entries = []
    for name, new in validate_changes(changes).items():
        old = getattr(state, name)
        if old == new:
            continue
        setattr(state, name, new)
        event = STATUS_EVENTS[new] if name == "status" else FIELD_EVENTS[name]
        entries.append(state.record(event, field=name, old=old, new=new, by="llm"))
    return entries


# ---------------------------------------------------------------------------- persistence


def _epoch(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp())


class GoalStore:
    """goals/<goal_id>/goal_state.json under the workspace, mirrored into the store's `goal` table."""

    def __init__(self, data_dir: str | Path, store: Store | None = None):
        self.root = Workspace(Path(data_dir)).goals_dir
        self.store = store

    def goal_dir(self, goal_id: str) -> Path:
        if not GOAL_ID_RE.match(goal_id):
            raise GoalStateError(f"{goal_id!r} is not a goal id (12 hex digits)")
        return self.root / goal_id

    def state_path(self, goal_id: str) -> Path:
        return self.goal_dir(goal_id) / "goal_state.json"

    def exists(self, goal_id: str) -> bool:
        return self.state_path(goal_id).exists()

    def create(
        self, handbook_path: str | Path, primary_goal: str, topic: str, *, start_ts: str | None = None, brain: str = ""
    ) -> GoalState:
        """Start a goal: new id, `created` history entry, first write."""
        state = new_goal(Path(handbook_path).as_posix(), primary_goal, topic, start_ts=start_ts, brain=brain)
        if self.exists(state.goal_id):
            raise GoalStateError(f"goal {state.goal_id} already exists at {self.state_path(state.goal_id)}")
        self.save(state)
        log.info("goal %s created from %s (%s: %s)", state.goal_id, state.handbook_path, primary_goal, topic)
        return state

    def load(self, goal_id: str) -> GoalState:
        path = self.state_path(goal_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise GoalStateError(f"{path}: no such goal") from None
        except json.JSONDecodeError as exc:
            raise GoalStateError(f"{path}: not valid JSON: {exc}") from exc
        return GoalState.from_dict(data, source=str(path))

    def save(self, state: GoalState) -> Path:
        """Persist atomically; refuses a state whose history does not extend the one on disk."""
        path = self.state_path(state.goal_id)
        if path.exists():
            on_disk = self.load(state.goal_id).history
            if state.history[: len(on_disk)] != on_disk:
                raise GoalStateError(f"{path}: history is append-only; the new state rewrites earlier entries")
        state.updated_ts = utc_now()
        atomic_write(path, state.to_json())
        if self.store is not None:
            self._mirror(self.store, state)
        return path

    @staticmethod
    def _mirror(store: Store, state: GoalState) -> None:
        with store.transaction() as conn:
            conn.execute(
                "INSERT INTO goal(goal_id, handbook_path, primary_goal, status, cycle, created_ts, updated_ts) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT(goal_id) DO UPDATE SET primary_goal=excluded.primary_goal, "
                "status=excluded.status, cycle=excluded.cycle, updated_ts=excluded.updated_ts",
                (state.goal_id, state.handbook_path, state.primary_goal, state.status, state.cycle,
                 _epoch(state.started_ts), _epoch(state.updated_ts)),
            )  # fmt: skip

    def goal_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.parent.name for p in self.root.glob("*/goal_state.json") if GOAL_ID_RE.match(p.parent.name))

    def states(self) -> list[GoalState]:
        return [self.load(goal_id) for goal_id in self.goal_ids()]


__all__ = [
    "FIXED_FIELDS",
    "GOAL_STATUSES",
    "LLM_MUTABLE_FIELDS",
    "LLM_STATUSES",
    "PRIMARY_GOALS",
    "QUESTION_ID_RE",
    "RESUMABLE_STATUSES",
    "SAFE_ID_RE",
    "GoalMutationError",
    "GoalState",
    "GoalStateError",
    "GoalStore",
    "apply_llm_mutation",
    "goal_id_for",
    "new_goal",
    "utc_now",
    "validate_changes",
]
