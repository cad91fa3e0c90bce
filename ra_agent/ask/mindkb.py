"""Mind-KB (seed 002): playbooks of successful tool-using runs, stored once, counted, and retrieved into planning prompts."""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ra_agent.config import Config
from ra_agent.embed.embedder import Embedder
from ra_agent.embed.tokens import count_tokens, encoder_for, truncate_tokens
from ra_agent.llm.protocol import NoAction, parse_action
from ra_agent.llm.structured import is_rules_brain
from ra_agent.store.vectors import model_slug

if TYPE_CHECKING:
    import tiktoken

    from ra_agent.store.db import Store

log = logging.getLogger(__name__)

KIND = "playbook"
COLLECTION = "Mind-KB"
SOURCES = ("ask", "agent_cycle")
BLOCK_OPEN, BLOCK_CLOSE = "<mind_kb_playbooks>", "</mind_kb_playbooks>"
ROLES = ("user", "assistant", "tool_result")
SEARCH_CHUNK_ROWS = 4096  # rows scored at a time by the SQLite backend
_READ_ONLY = "this playbook store was opened without an embedder (read-only: count and top only)"


_TOOL_OBJECT_RE = re.compile(r"""\{\s*["']?tool["']?\s*:""")


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the form playbook ids are computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _as_content(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


# ---------------------------------------------------------------------------- the playbook


@dataclass(frozen=True)
class Playbook:
    """A successful run as a canonical sequence: user prompt, (plan JSON, tool result JSON)..., final answer."""

    steps: tuple[dict[str, str], ...]
    source: str = "ask"
    source_session: str = ""
    count: int = 1
    created_ts: int = 0
    last_seen_ts: int = 0
    score: float | None = field(default=None, compare=False)
    kind: str = KIND
    brain: str = field(default="", compare=False)  # Brain.name of the run; "rules:..." marks a rule-brain playbook

    @property
    def from_rules(self) -> bool:
        """Made by a deterministic rule brain: LLM prompts leave such playbooks out (they teach rules, not reasoning)."""
        return is_rules_brain(self.brain)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"playbook source must be one of {SOURCES}, not {self.source!r}")
        if len(self.steps) < 2 or self.steps[0].get("role") != "user" or self.steps[-1].get("role") != "assistant":
            raise ValueError("a playbook starts with the user prompt and ends with the assistant's final answer")
        for step in self.steps:
            if set(step) != {"role", "content"} or step["role"] not in ROLES or not isinstance(step["content"], str):
                raise ValueError(f"bad playbook step {step!r}: needs role in {ROLES} and string content")

    @property
    def original_prompt(self) -> str:
        return self.steps[0]["content"]

    @property
    def final_answer(self) -> str:
        return self.steps[-1]["content"]

    @property
    def tool_steps(self) -> int:
        return sum(step["role"] == "tool_result" for step in self.steps)

    @property
    def sequence_json(self) -> str:
        return canonical_json(list(self.steps))

    @property
    def id(self) -> str:
        """sha256 of the canonical step sequence: identical runs share an id (deduplication)."""
        return hashlib.sha256(self.sequence_json.encode("utf-8")).hexdigest()

    @property
    def dense_text(self) -> str:
        """The document form that is embedded and shown to the planner (seed 002 §1.2)."""
        lines = [f"Playbook for: {self.original_prompt}", "---", "Steps:"]
        body = self.steps[1:]
        for n, step in enumerate(body, start=1):
            if step["role"] == "tool_result":
                label = "Tool returned"
            elif n == len(body):
                label = "Final answer"
            else:
                label = "Planner decided"
            lines.append(f"{n}) {label}: {step['content']}")
        return "\n".join(lines)

    @property
    def metadata(self) -> dict[str, str]:
        return {
            "collection": COLLECTION,
            "kind": self.kind,
            "source": self.source,
            "source_session": self.source_session,
            "original_prompt": self.original_prompt,
            "brain": self.brain,
        }


def extract_playbook(
    prompt: str,
    steps: Iterable[tuple[Any, Any]],
    final: str,
    *,
    source: str = "ask",
    session: str = "",
    brain: str = "",
) -> Playbook:
    """The canonical sequence of a run: `steps` are (planner decision, tool result) pairs, str or JSON-able."""
    sequence = [{"role": "user", "content": prompt.strip()}]
    for plan, result in steps:
        sequence.append({"role": "assistant", "content": _as_content(plan)})
        sequence.append({"role": "tool_result", "content": _as_content(result)})
    sequence.append({"role": "assistant", "content": final.strip()})
    return Playbook(tuple(sequence), source=source, source_session=session, brain=brain)


# ---------------------------------------------------------------------------- the success heuristic


@runtime_checkable
class RunLike(Protocol):
    """What the success heuristic looks at (AskResult and RunSummary have these)."""

    @property
    def exited_early(self) -> bool: ...

    @property
    def final(self) -> str: ...

    @property
    def tool_steps(self) -> int: ...


@dataclass(frozen=True)
class RunSummary:
    """A run described for `is_success`: it ended by answering before its turn budget ran out, its final text, tool steps."""

    exited_early: bool
    final: str
    tool_steps: int


def is_tool_call(text: str) -> bool:
    """True when a reply holds an `Action:` block or a {"tool": ...} object."""
    return not isinstance(parse_action(text or ""), NoAction) or bool(_TOOL_OBJECT_RE.search(text or ""))


def is_success(run: RunLike) -> bool:
    """Seed 002 §3.1: the loop exited early, the final reply is not a tool call, and at least one tool ran."""
    return bool(run.exited_early) and not is_tool_call(run.final) and run.tool_steps >= 1


# ---------------------------------------------------------------------------- stores


@runtime_checkable
class PlaybookStore(Protocol):
    """Where playbooks live: `add` merges duplicates (count + 1), `search` ranks by cosine to the query."""

    def add(self, playbook: Playbook) -> str: ...

    def search(self, query: str, k: int) -> list[Playbook]: ...

    def count(self) -> int: ...

    def top(self, n: int) -> list[Playbook]: ...


def _unit_vector(embedder: Embedder | None, text: str) -> np.ndarray:
    if embedder is None:
        raise RuntimeError(_READ_ONLY)
    vector = np.asarray(embedder.encode([text])[0], dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class _EmbeddedPlaybooks:
    """What both backends share: the query is embedded with `embedder` and the `k` nearest are asked of `_nearest`."""

    embedder: Embedder | None

    def count(self) -> int:
        raise NotImplementedError

    def _nearest(self, q: np.ndarray, k: int, total: int) -> list[Playbook]:
        raise NotImplementedError

    def search(self, query: str, k: int) -> list[Playbook]:
        total = self.count()
        if k <= 0 or total == 0:
            return []
        return self._nearest(_unit_vector(self.embedder, query), k, total)


class SqlitePlaybookStore(_EmbeddedPlaybooks):
    """The default backend: table mind_kb of the project database, float16 vectors, cosine search in chunks.

    `embedder` may be None for read-only use (`count`, `top`, e.g. `ra status`); `add` and `search` need it.
    Rows embedded with another model than `embedder`'s are not searched (logged once per store).
    """

    def __init__(self, db: Store, embedder: Embedder | None = None, collection: str = COLLECTION):
        self.db = db
        self.embedder = embedder
        self.collection = collection
        self._warned = False

    @property
    def model(self) -> str:
        if self.embedder is None:
            raise RuntimeError(_READ_ONLY)
        return model_slug(self.embedder.model_id, self.embedder.version)

    def add(self, playbook: Playbook) -> str:
        pid, now = playbook.id, int(time.time())
        with self.db.transaction():
            merged = self.db.conn.execute(
                "UPDATE mind_kb SET count = count + 1, last_seen_ts = ? WHERE id = ?", (now, pid)
            ).rowcount
        if merged:
            log.info("Mind-KB: playbook %s seen again", pid[:12])
            return pid
        vector = _unit_vector(self.embedder, playbook.dense_text)
        meta = {**playbook.metadata, "collection": self.collection}
        with self.db.transaction():
            self.db.conn.execute(
                "INSERT INTO mind_kb(id, collection, kind, source, source_session, original_prompt, steps, dense_text, "
                "model, dim, vector, metadata, count, created_ts, last_seen_ts) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET count = mind_kb.count + 1, last_seen_ts = excluded.last_seen_ts",
                (
                    pid, self.collection, playbook.kind, playbook.source, playbook.source_session,
                    playbook.original_prompt, playbook.sequence_json, playbook.dense_text, self.model, len(vector),
                    vector.astype(np.float16).tobytes(), canonical_json(meta), max(1, playbook.count), now, now,
                ),
            )  # fmt: skip
        log.info("Mind-KB: stored playbook %s (%d tool steps)", pid[:12], playbook.tool_steps)
        return pid

    def _nearest(self, q: np.ndarray, k: int, total: int) -> list[Playbook]:
        best: list[tuple[float, str]] = []
        scanned = 0
        cursor = self.db.conn.execute(
            "SELECT id, vector FROM mind_kb WHERE collection = ? AND model = ? AND dim = ?",
            (self.collection, self.model, len(q)),
        )
        while rows := cursor.fetchmany(SEARCH_CHUNK_ROWS):
            matrix = np.frombuffer(b"".join(r["vector"] for r in rows), dtype=np.float16).reshape(len(rows), len(q))
            scores = matrix.astype(np.float32) @ q
            scanned += len(rows)
            for row, score in zip(rows, scores.tolist(), strict=True):
                heapq.heappush(best, (score, row["id"]))
                if len(best) > k:
                    heapq.heappop(best)
        if scanned < total and not self._warned:
            self._warned = True
            log.info(
                "Mind-KB: %d playbooks embedded with another model than %s are not searched",
                total - scanned,
                self.model,
            )
        ranked = sorted(best, key=lambda item: (-item[0], item[1]))
        by_id = self._load([pid for _, pid in ranked])
        return [replace(by_id[pid], score=round(score, 4)) for score, pid in ranked if pid in by_id]

    def count(self) -> int:
        row = self.db.conn.execute("SELECT COUNT(*) FROM mind_kb WHERE collection = ?", (self.collection,)).fetchone()
        return int(row[0])

    def top(self, n: int) -> list[Playbook]:
        rows = self.db.conn.execute(
            "SELECT * FROM mind_kb WHERE collection = ? ORDER BY count DESC, last_seen_ts DESC, id LIMIT ?",
            (self.collection, max(0, n)),
        )
        return [_playbook_from(dict(r)) for r in rows]

    def _load(self, ids: Sequence[str]) -> dict[str, Playbook]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.db.conn.execute(f"SELECT * FROM mind_kb WHERE id IN ({marks})", list(ids))
        return {r["id"]: _playbook_from(dict(r)) for r in rows}


def _playbook_from(record: Mapping[str, Any]) -> Playbook:
    """A Playbook from a mind_kb row (as a dict) or a Chroma metadata dict."""
    return Playbook(
        steps=tuple(json.loads(record["steps"])),
        source=record.get("source", "ask"),
        source_session=record.get("source_session", ""),
        count=int(record.get("count", 1)),
        created_ts=int(record.get("created_ts", 0)),
        last_seen_ts=int(record.get("last_seen_ts", 0)),
        brain=str(record.get("brain") or json.loads(record.get("metadata") or "{}").get("brain", "")),
    )


class ChromaPlaybookStore(_EmbeddedPlaybooks):
    """Optional backend: a Chroma collection "Mind-KB" (metadata kind=playbook, cosine space); chromadb imported lazily."""

    def __init__(self, path: str | Path, embedder: Embedder | None, collection: str = COLLECTION):
        import chromadb  # pyright: ignore[reportMissingImports]  # optional: pip install 'ra[chroma]'

        self.embedder = embedder
        self._client = chromadb.PersistentClient(path=str(path))
        self._coll = self._client.get_or_create_collection(
            name=collection, metadata={"kind": KIND, "hnsw:space": "cosine"}
        )

    def add(self, playbook: Playbook) -> str:
        pid, now = playbook.id, int(time.time())
        found = self._coll.get(ids=[pid], include=["metadatas"])
        if found["ids"]:
            meta = dict(found["metadatas"][0])
            meta.update(count=int(meta.get("count", 1)) + 1, last_seen_ts=now)
            self._coll.update(ids=[pid], metadatas=[meta])
            return pid
        meta = {
            **playbook.metadata,
            "steps": playbook.sequence_json,
            "count": max(1, playbook.count),
            "created_ts": now,
            "last_seen_ts": now,
        }
        vector = _unit_vector(self.embedder, playbook.dense_text)
        self._coll.add(ids=[pid], documents=[playbook.dense_text], embeddings=[vector.tolist()], metadatas=[meta])
        return pid

    def _nearest(self, q: np.ndarray, k: int, total: int) -> list[Playbook]:
        res = self._coll.query(
            query_embeddings=[q.tolist()], n_results=min(k, total), include=["metadatas", "distances"]
        )
        pairs = zip(res["metadatas"][0], res["distances"][0], strict=True)
        return [replace(_playbook_from(meta), score=round(1.0 - float(dist), 4)) for meta, dist in pairs]

    def count(self) -> int:
        return int(self._coll.count())

    def top(self, n: int) -> list[Playbook]:
        metas = self._coll.get(include=["metadatas"])["metadatas"] or []
        books = [_playbook_from(m) for m in metas]
        return sorted(books, key=lambda b: (-b.count, -b.last_seen_ts, b.id))[: max(0, n)]


def open_playbook_store(cfg: Config, db: Store, embedder: Embedder | None) -> PlaybookStore:
    """The configured backend: Chroma when [mindkb] backend = "chroma" and chromadb is importable, else SQLite."""
    if cfg.mindkb.backend == "chroma":
        try:
            return ChromaPlaybookStore(cfg.data_dir / cfg.mindkb.chroma_dir, embedder, cfg.mindkb.collection)
        except ImportError:
            log.warning('[mindkb] backend = "chroma" but chromadb is not installed: using the SQLite table mind_kb')
    return SqlitePlaybookStore(db, embedder, cfg.mindkb.collection)


# ---------------------------------------------------------------------------- retrieval into prompts


def select_playbooks(
    store: PlaybookStore,
    query: str,
    k: int,
    token_budget: int,
    *,
    min_score: float = -1.0,
    enc: tiktoken.Encoding | None = None,
    exclude_rules: bool = False,
) -> tuple[str, list[Playbook]]:
    """The `<mind_kb_playbooks>` block of the best-matching playbooks within `token_budget` tokens, and those playbooks.

    Playbooks go in best first; the last one that does not fit whole is cut (marked " …"), the
    rest are left out. No playbook (or none that fits) gives ("", []). `exclude_rules` leaves out
    playbooks a rule brain made (an LLM prompt should learn from LLM runs); `enc` should be the
    configured encoding (`encoder_for(cfg)`).
    """
    if k <= 0:
        return "", []
    found = [p for p in store.search(query, k) if (p.score is None or p.score >= min_score)
             and not (exclude_rules and p.from_rules)]  # fmt: skip
    enc = enc or encoder_for()
    head, tail = BLOCK_OPEN + "\n", BLOCK_CLOSE
    parts = [
        f"Playbook {i} (succeeded {p.count}x, similarity {p.score if p.score is not None else 'n/a'}):\n{p.dense_text}\n"
        for i, p in enumerate(found, start=1)
    ]
    while parts:
        block = head + "".join(parts) + tail
        excess = count_tokens(block, enc) - token_budget
        if excess <= 0:
            return block, found[: len(parts)]
        last = parts[-1]
        size = count_tokens(last, enc)
        keep = size - excess - 4  # room for the " …" marker
        cut = truncate_tokens(last, keep, enc).rstrip() + " …\n" if keep >= 16 else ""
        if cut and count_tokens(cut, enc) < size:
            parts[-1] = cut
        else:
            parts.pop()
    return "", []


def playbooks_block(store: PlaybookStore, query: str, k: int, token_budget: int, **options: Any) -> str:
    """`<mind_kb_playbooks>` with the best-matching playbooks, trimmed to `token_budget` tokens ("" when none fit).

    `options` are select_playbooks' min_score, enc and exclude_rules.
    """
    return select_playbooks(store, query, k, token_budget, **options)[0]


def record_agent_cycle_playbook(
    store: PlaybookStore,
    goal_prompt: str,
    steps: Iterable[tuple[Any, Any]],
    final: str,
    *,
    session: str = "",
    exited_early: bool = True,
    brain: str = "",
) -> str | None:
    """Store an agent cycle's (plan, result) steps as a playbook when the success heuristic holds; its id or None."""
    steps = list(steps)
    if not is_success(RunSummary(exited_early, final, len(steps))):
        log.debug("agent cycle not stored in Mind-KB: not a success by the seed heuristic")
        return None
    return store.add(extract_playbook(goal_prompt, steps, final, source="agent_cycle", session=session, brain=brain))


__all__ = [
    "BLOCK_CLOSE",
    "BLOCK_OPEN",
    "COLLECTION",
    "KIND",
    "ChromaPlaybookStore",
    "Playbook",
    "PlaybookStore",
    "RunLike",
    "RunSummary",
    "SqlitePlaybookStore",
    "canonical_json",
    "extract_playbook",
    "is_success",
    "is_tool_call",
    "open_playbook_store",
    "playbooks_block",
    "record_agent_cycle_playbook",
    "select_playbooks",
]
