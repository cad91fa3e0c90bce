"""The store (SQLite in WAL mode, or PostgreSQL): papers, references, searches, clusters and goals behind one interface."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
import sqlite3
import time
import typing
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ra_agent.models import AbstractSection, Paper, Reference
from ra_agent.store.dialect import tsquery_sql
from ra_agent.store.pg import PgConnection, is_postgres_url, transient
from ra_agent.store.schema import MIGRATIONS, POSTGRESQL, PROV_PUBMED, SQLITE, migration_sql

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WritePolicy:
    """How writers meet each other ([store] busy_timeout_s, write_retries, retry_wait_s in config.toml)."""

    busy_timeout_s: float = 30.0  # SQLite: wait this long for another writer's lock
    write_retries: int = 8  # attempts of an upsert chunk that clashed with a concurrent writer
    retry_wait_s: float = 0.05  # times the attempt number, between attempts


@dataclass(frozen=True)
class UpsertStats:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    batches: tuple[str, ...] = ()

    @property
    def seen(self) -> int:
        return self.inserted + self.updated + self.unchanged


_INSERT_PAPER = (
    "INSERT INTO paper(doi, title, abstract, journal, year, article_type, pub_types, mesh, sections, authors, "
    "other_ids, mesh_terms, language, pmid, source, batch_id, content_sha1, created_ts, updated_ts) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_UPDATE_PAPER = (
    "UPDATE paper SET doi=?, title=?, abstract=?, journal=?, year=?, article_type=?, pub_types=?, mesh=?, "
    "sections=?, authors=?, other_ids=?, mesh_terms=?, language=?, source=?, content_sha1=?, updated_ts=? WHERE pmid=?"
)
# existing-row columns are qualified (ref.prov): PostgreSQL finds a bare name in DO UPDATE ambiguous
_ADD_EDGE = (
    "INSERT INTO ref(src, dst, prov) VALUES (?,?,?) ON CONFLICT(src, dst) DO UPDATE SET prov = ref.prov | excluded.prov"
)
_ADD_DOI_EDGE = (
    "INSERT INTO ref_doi(src, doi, dst, prov) VALUES (?,?,?,?) ON CONFLICT(src, doi) DO UPDATE SET "
    "prov = ref_doi.prov | excluded.prov, dst = CASE WHEN excluded.dst > 0 THEN excluded.dst ELSE ref_doi.dst END"
)


def _content_sha1(p: Paper) -> str:
    blob = json.dumps(
        [
            p.doi,
            p.title,
            p.abstract,
            p.journal,
            p.year,
            p.pub_types,
            p.mesh,
            [(s.label, s.text) for s in p.sections],
            p.authors,
            p.other_ids,
            *([p.mesh_terms] if p.mesh_terms else []),  # absent when empty: hashes of records without it unchanged
            *([{"language": p.language}] if p.language else []),  # likewise (and never read as mesh_terms)
        ],
        ensure_ascii=False,
        sort_keys=True,
    )
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()


def _row_to_paper(row: sqlite3.Row) -> Paper:
    return Paper(
        pmid=row["pmid"],
        title=row["title"],
        abstract=row["abstract"],
        doi=row["doi"],
        journal=row["journal"],
        year=row["year"],
        pub_types=json.loads(row["pub_types"]),
        mesh=json.loads(row["mesh"]),
        sections=[AbstractSection(label, text) for label, text in json.loads(row["sections"])],
        authors=json.loads(row["authors"]),
        other_ids=json.loads(row["other_ids"]),
        mesh_terms=json.loads(row["mesh_terms"]),
        source=row["source"],
        language=json.loads(row["language"]),
    )


class Store:
    """The project database: papers, references, clusters, goals. One instance per thread.

    `target` is a SQLite file (embedded, the default) or a `postgresql://` URL. On PostgreSQL `conn` is a
    `PgConnection`: the part of the sqlite3 interface ra uses, translating ra's SQL (see store/dialect.py).
    """

    def __init__(self, target: str | Path, commit_every: int = 2000, policy: WritePolicy = WritePolicy()):
        self.commit_every = commit_every
        self.policy = policy
        self.conn: sqlite3.Connection
        if is_postgres_url(target):
            self.dialect, self.path, self.where = POSTGRESQL, None, _masked(str(target))
            self.conn = typing.cast(sqlite3.Connection, PgConnection(str(target)))
        else:
            self.dialect, self.path = SQLITE, Path(target)
            self.where = str(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                self.path, timeout=policy.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
        self.migrate()

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        if self.dialect == SQLITE:
            return self.conn.execute("PRAGMA user_version").fetchone()[0]
        if self.conn.execute("SELECT to_regclass('ra_schema')").fetchone()[0] is None:
            return 0
        return self.conn.execute("SELECT version FROM ra_schema WHERE id = 1").fetchone()[0]

    def _set_schema_version(self, number: int) -> None:
        if self.dialect == SQLITE:
            self.conn.execute(f"PRAGMA user_version = {int(number)}")
        else:
            self.conn.execute("UPDATE ra_schema SET version = ? WHERE id = 1", (number,))

    def lock(self, name: str) -> None:
        """Serialise this transaction with others taking the same lock (SQLite: BEGIN IMMEDIATE already does)."""
        if self.dialect == POSTGRESQL:
            self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (name,))

    def migrate(self) -> None:
        """Run the migrations this database does not have yet, each in one transaction, one process at a time."""
        if self.schema_version == len(MIGRATIONS):
            return
        while True:
            with self.transaction():
                self.lock("ra-schema")
                if self.dialect == POSTGRESQL:
                    self.conn.execute(
                        "CREATE TABLE IF NOT EXISTS ra_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version BIGINT NOT NULL)"
                    )
                    self.conn.execute("INSERT INTO ra_schema(id, version) VALUES (1, 0) ON CONFLICT DO NOTHING")
                current = self.schema_version
                if current > len(MIGRATIONS):
                    raise RuntimeError(
                        f"{self.where}: schema version {current} is newer than this ra ({len(MIGRATIONS)}); upgrade ra"
                    )
                if current == len(MIGRATIONS):
                    return
                script = migration_sql(MIGRATIONS[current], self.dialect)
                if self.dialect == POSTGRESQL:
                    self.conn.executescript(script)  # as written: function bodies hold semicolons
                else:
                    for statement in _split_sql(script):
                        self.conn.execute(statement)
                self._set_schema_version(current + 1)
            log.info("store %s migrated to schema %d", self.where, current + 1)

    def table_names(self) -> set[str]:
        if self.dialect == SQLITE:
            sql = "SELECT name FROM sqlite_master WHERE type='table'"
        else:
            sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        return {r[0] for r in self.conn.execute(sql)}

    def transient(self, exc: BaseException) -> bool:
        """A clash with a concurrent writer (busy file, deadlock, key race): retrying the transaction resolves it."""
        if self.dialect == SQLITE:
            return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))
        return transient(exc)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ papers
    def upsert_papers(
        self,
        papers: Iterable[Paper],
        *,
        source: str,
        query: str = "",
        batch_prefix: str | None = None,
        batch_size: int = 10000,
        on_progress=None,
    ) -> UpsertStats:
        """Insert new papers and update changed ones, `commit_every` rows per transaction.

        New papers are grouped into ingest batches of at most `batch_size` (the
        embedding shards); a batch is registered in the same transaction as its
        last rows, so a crash leaves only whole, committed chunks behind.
        """
        prefix = batch_prefix or _batch_prefix(source, query)
        inserted = updated = unchanged = 0
        batches: list[str] = []
        batch_id, batch_n = None, 0
        now = int(time.time())
        chunk: list[Paper] = []

        def new_batch() -> str:
            self.lock(f"ingest_batch:{prefix}")  # concurrent writers of one source number their batches in turn
            seq = self.conn.execute(
                "SELECT COUNT(*) FROM ingest_batch WHERE batch_id LIKE ?", (prefix + "-%",)
            ).fetchone()[0]
            return f"{prefix}-{seq:04d}"

        def register(bid: str, n: int) -> None:
            self.conn.execute(
                "INSERT INTO ingest_batch(batch_id, source, query, n_papers, created_ts) VALUES (?,?,?,?,?) "
                "ON CONFLICT(batch_id) DO UPDATE SET n_papers = excluded.n_papers",
                (bid, source, query, n, now),
            )

        def write_chunk() -> tuple[int, int, int]:
            nonlocal batch_id, batch_n
            new = changed = same = 0
            inserts: list[tuple] = []
            updates: list[tuple] = []
            with self.transaction():
                stored = self._content_hashes([p.pmid for p in chunk])
                for p in chunk:
                    sha = _content_sha1(p)
                    before = stored.get(p.pmid)
                    if before is None:
                        if batch_id is None:
                            batch_id, batch_n = new_batch(), 0
                            batches.append(batch_id)
                        inserts.append((*self._paper_values(p), p.pmid, p.source or source, batch_id, sha, now, now))
                        batch_n += 1
                        new += 1
                        if batch_n >= batch_size:
                            register(batch_id, batch_n)
                            batch_id = None
                    elif before != sha:
                        updates.append((*self._paper_values(p), p.source or source, sha, now, p.pmid))
                        changed += 1
                    else:
                        same += 1
                    stored[p.pmid] = sha  # a PMID twice in one chunk: the second is an update or unchanged
                self._write_papers(inserts, updates, chunk)
                if batch_id is not None:
                    register(batch_id, batch_n)
            return new, changed, same

        def flush() -> None:
            nonlocal inserted, updated, unchanged, batch_id, batch_n
            counts = (0, 0, 0)
            for attempt in itertools.count(1):
                saved = (batch_id, batch_n, len(batches))
                try:
                    counts = write_chunk()
                    break
                except Exception as exc:  # rolled back: a clash with another writer is retried from the start
                    if attempt >= self.policy.write_retries or not self.transient(exc):
                        raise
                    batch_id, batch_n = saved[:2]
                    del batches[saved[2] :]
                    log.info("store %s: concurrent writer (%s), retrying chunk (attempt %d)", self.where, exc, attempt)
                    time.sleep(self.policy.retry_wait_s * attempt)
            inserted, updated, unchanged = inserted + counts[0], updated + counts[1], unchanged + counts[2]
            chunk.clear()
            if on_progress:
                on_progress(inserted + updated + unchanged)

        for paper in papers:
            chunk.append(paper)
            if len(chunk) >= self.commit_every:
                flush()
        if chunk:
            flush()
        return UpsertStats(inserted, updated, unchanged, tuple(batches))

    def would_update(self, paper: Paper) -> bool:
        """True when a record of `paper.pmid` is stored and upserting `paper` would change it."""
        before = self._content_hashes([paper.pmid]).get(paper.pmid)
        return before is not None and before != _content_sha1(paper)

    def _content_hashes(self, pmids: list[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for i in range(0, len(pmids), 500):
            part = pmids[i : i + 500]
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT pmid, content_sha1 FROM paper WHERE pmid IN ({marks})", part))
        return out

    def _paper_values(self, p: Paper) -> tuple:
        return (
            p.doi, p.title, p.abstract, p.journal, p.year, p.article_type,
            json.dumps(p.pub_types, ensure_ascii=False), json.dumps(p.mesh, ensure_ascii=False),
            json.dumps([(s.label, s.text) for s in p.sections], ensure_ascii=False),
            json.dumps(p.authors, ensure_ascii=False), json.dumps(p.other_ids, ensure_ascii=False),
            json.dumps(p.mesh_terms, ensure_ascii=False), json.dumps(p.language),
        )  # fmt: skip

    def _write_papers(self, inserts: list[tuple], updates: list[tuple], papers: list[Paper]) -> None:
        """One chunk's new rows, changed rows and reference lists, each in one executemany (one round trip on
        PostgreSQL's pipeline)."""
        if inserts:
            self.conn.executemany(_INSERT_PAPER, inserts)
        if updates:
            self.conn.executemany(_UPDATE_PAPER, updates)
        self._add_edges([(p.pmid, r.pmid, PROV_PUBMED) for p in papers for r in p.references if r.pmid])
        self._add_doi_edges([(p.pmid, r.doi, 0, PROV_PUBMED) for p in papers for r in p.references
                             if not r.pmid and r.doi])  # fmt: skip

    def _add_edges(self, edges: list[tuple[int, int, int]]) -> None:
        if edges:
            self.conn.executemany(_ADD_EDGE, edges)

    def _add_doi_edges(self, rows: list[tuple[int, str, int, int]]) -> None:
        if rows:
            self.conn.executemany(_ADD_DOI_EDGE, rows)
        # a mapped DOI is also an edge; an unmapped one is kept in ref_doi only: it is no edge to a paper
        self._add_edges([(src, dst, prov) for src, _, dst, prov in rows if dst > 0])

    def add_refs(self, edges: Iterable[tuple[int, int, int]]) -> None:
        """Add (src, dst_pmid, prov) edges; an existing edge gets prov OR-merged."""
        with self.transaction():
            self._add_edges(list(edges))

    def add_doi_refs(self, src: int, doi_to_pmid: dict[str, int | None], prov: int) -> None:
        """Add a paper's cited DOIs; mapped ones become PMID edges, unmapped stay dst=0."""
        with self.transaction():
            self._add_doi_edges([(src, doi, pmid or 0, prov) for doi, pmid in doi_to_pmid.items()])

    def delete_citations(self, pmids: Sequence[int], source: str) -> int:
        """Apply a DeleteCitation: drop the papers and their outgoing edges, remember the deletion."""
        now = int(time.time())
        removed = 0
        with self.transaction():
            for pmid in pmids:
                removed += self.conn.execute("DELETE FROM paper WHERE pmid=?", (pmid,)).rowcount
                self.conn.execute("DELETE FROM ref WHERE src=?", (pmid,))
                self.conn.execute("DELETE FROM ref_doi WHERE src=?", (pmid,))
                self.conn.execute(
                    "INSERT INTO deleted_citation(pmid, source, deleted_ts) VALUES (?,?,?) ON CONFLICT(pmid) "
                    "DO UPDATE SET source = excluded.source, deleted_ts = excluded.deleted_ts",
                    (pmid, source, now),
                )
        return removed

    def paper(self, pmid: int) -> Paper | None:
        row = self.conn.execute("SELECT * FROM paper WHERE pmid=?", (pmid,)).fetchone()
        return _row_to_paper(row) if row else None

    def papers(self, pmids: Iterable[int]) -> list[Paper]:
        """Papers for the given PMIDs in the given order (missing ones skipped)."""
        wanted = list(pmids)
        found: dict[int, Paper] = {}
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            marks = ",".join("?" * len(part))
            for row in self.conn.execute(f"SELECT * FROM paper WHERE pmid IN ({marks})", part):
                found[row["pmid"]] = _row_to_paper(row)
        return [found[p] for p in wanted if p in found]

    def existing_pmids(self, pmids: Iterable[int]) -> set[int]:
        wanted = list(pmids)
        out: set[int] = set()
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            marks = ",".join("?" * len(part))
            out.update(r[0] for r in self.conn.execute(f"SELECT pmid FROM paper WHERE pmid IN ({marks})", part))
        return out

    def all_pmids(self) -> list[int]:
        return [r[0] for r in self.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]

    def pmids_for_batch(self, batch_id: str) -> list[int]:
        return [r[0] for r in self.conn.execute("SELECT pmid FROM paper WHERE batch_id=? ORDER BY pmid", (batch_id,))]

    def batches(self) -> list[dict]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM ingest_batch ORDER BY created_ts, batch_id")]

    def pmid_for_doi(self, doi: str) -> int | None:
        row = self.conn.execute("SELECT pmid FROM paper WHERE doi=?", (doi.lower(),)).fetchone()
        return row[0] if row else None

    def references_of(self, pmid: int) -> list[Reference]:
        return self.references_of_many([pmid])[pmid]

    def references_of_many(self, pmids: Iterable[int]) -> dict[int, list[Reference]]:
        """Each paper's stored references, cited PMIDs first, then its unmapped cited DOIs (two queries per 500)."""
        wanted = list(dict.fromkeys(pmids))
        out: dict[int, list[Reference]] = {p: [] for p in wanted}
        dois: dict[int, list[Reference]] = {p: [] for p in wanted}
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            marks = ",".join("?" * len(part))
            for src, dst in self.conn.execute(f"SELECT src, dst FROM ref WHERE src IN ({marks}) AND dst>0", part):
                out[src].append(Reference(pmid=dst))
            for src, doi in self.conn.execute(f"SELECT src, doi FROM ref_doi WHERE src IN ({marks}) AND dst=0", part):
                dois[src].append(Reference(doi=doi))
        return {p: out[p] + dois[p] for p in wanted}

    def search(self, query: str, limit: int = 100) -> list[int]:
        """Offline full-text search over titles and abstracts (FTS5 / tsvector, best match first)."""
        fts = _fts_query(query)
        if not fts:
            return []
        if self.dialect == POSTGRESQL:
            expr, terms = tsquery_sql(fts)
            rows = self.conn.execute(
                f"WITH q AS (SELECT {expr} AS q) SELECT pmid FROM paper_fts, q WHERE fts @@ q.q "
                "ORDER BY ts_rank_cd(fts, q.q) DESC, pmid LIMIT ?",
                (*terms, limit),
            )
        else:
            rows = self.conn.execute(
                "SELECT rowid FROM paper_fts WHERE paper_fts MATCH ? ORDER BY bm25(paper_fts), rowid LIMIT ?",
                (fts, limit),
            )
        return [r[0] for r in rows]

    def counts(self) -> dict[str, int]:
        tables = ("paper", "ref", "ref_doi", "ingest_batch", "deleted_citation", "cluster_manifest", "goal")
        out = {t: self.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
        out["paper_with_abstract"] = self.conn.execute("SELECT COUNT(*) FROM paper WHERE abstract != ''").fetchone()[0]
        out["ref_unmapped"] = self.conn.execute("SELECT COUNT(*) FROM ref_doi WHERE dst = 0").fetchone()[0]
        return out

    # ------------------------------------------------------------------ API health (offline mode)
    def api_state(self, api: str) -> dict:
        row = self.conn.execute("SELECT * FROM api_state WHERE api=?", (api,)).fetchone()
        return dict(row) if row else {"api": api, "consecutive_errors": 0, "offline": 0, "first_error_ts": None}

    def record_api_result(self, api: str, ok: bool, error: str = "", offline_after: int = 5) -> dict:
        """Count consecutive failures; at `offline_after` the API is marked offline until a success.

        Returns the new api_state row plus `was_offline`, the flag before this result.
        """
        now = int(time.time())
        state = self.api_state(api)
        if ok:
            errors, offline, first = 0, 0, None
        else:
            errors = state["consecutive_errors"] + 1
            offline = 1 if errors >= offline_after else state["offline"]
            first = state["first_error_ts"] or now
        with self.transaction():
            self.conn.execute(
                "INSERT INTO api_state(api, consecutive_errors, offline, first_error_ts, last_error, updated_ts) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(api) DO UPDATE SET consecutive_errors=excluded.consecutive_errors, "
                "offline=excluded.offline, first_error_ts=excluded.first_error_ts, last_error=excluded.last_error, "
                "updated_ts=excluded.updated_ts",
                (api, errors, offline, first, error[:500], now),
            )
        return {
            "api": api,
            "consecutive_errors": errors,
            "offline": offline,
            "first_error_ts": first,
            "last_error": error[:500],
            "updated_ts": now,
            "was_offline": state["offline"],
        }


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, buf = [], []
    for line in script.splitlines():
        if line.strip().startswith("--") or not line.strip():
            continue
        buf.append(line)
        joined = "\n".join(buf).strip()
        if joined.endswith(";") and (
            not joined.upper().startswith("CREATE TRIGGER") or joined.upper().endswith("END;")
        ):
            statements.append(joined)
            buf = []
    if buf:
        statements.append("\n".join(buf))
    return statements


def _masked(url: str) -> str:
    """A database URL fit for logs: the password replaced."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def _batch_prefix(source: str, query: str) -> str:
    kind = source.split(":", 1)[0] or "batch"
    digest = hashlib.sha1(f"{source}\n{query}".encode()).hexdigest()[:8]
    return f"{kind}-{digest}"


def _fts_query(query: str) -> str:
    """Turn a PubMed-style query into an FTS5 expression (AND/OR/NOT kept, field tags dropped)."""
    text = re.sub(r"\[[^\]]*\]", " ", query)
    tokens = re.findall(r'"[^"]+"|\(|\)|[A-Za-z0-9][\w\-]*', text)
    out: list[str] = []
    for tok in tokens:
        if tok.upper() in ("AND", "OR", "NOT") or tok in ("(", ")"):
            out.append(tok.upper())
        elif tok.startswith('"'):
            out.append(tok)
        else:
            out.append('"' + tok.replace('"', "") + '"')
    ops = ("AND", "OR", "NOT")
    # drop dangling operators the user's query may leave after tag removal, and empty groups
    cleaned: list[str] = []
    for tok in out:
        if tok in ops and (not cleaned or cleaned[-1] in (*ops, "(")):
            continue
        if tok == ")" and cleaned and cleaned[-1] == "(":
            cleaned.pop()
            continue
        cleaned.append(tok)
    while cleaned and cleaned[-1] in (*ops, "("):
        cleaned.pop()
    if cleaned.count("(") != cleaned.count(")"):
        cleaned = [t for t in cleaned if t not in ("(", ")")]
    # FTS5 ANDs adjacent phrases but not a phrase and a group ('"a" ("b")' is a syntax error): say AND
    joined: list[str] = []
    for tok in cleaned:
        after_operand = bool(joined) and joined[-1] not in (*ops, "(")  # a phrase or a closed group
        if after_operand and tok not in (*ops, ")") and (tok == "(" or joined[-1] == ")"):
            joined.append("AND")
        joined.append(tok)
    return " ".join(joined)
