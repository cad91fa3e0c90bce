"""Where every artefact lives under the workspace directory (DESIGN §4), and opening the store."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ra_agent.config import Config

if TYPE_CHECKING:
    from ra_agent.store.db import Store


@dataclass(frozen=True)
class Workspace:
    """Paths of one workspace; nothing is created until asked for."""

    root: Path

    @classmethod
    def of(cls, cfg: Config) -> Workspace:
        return cls(cfg.data_dir)

    @property
    def db_path(self) -> Path:
        return self.root / "ra.sqlite"

    @property
    def emb_dir(self) -> Path:
        return self.root / "emb"

    @property
    def pico_dir(self) -> Path:
        return self.root / "pico"

    @property
    def goals_dir(self) -> Path:
        return self.root / "goals"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def imports_dir(self) -> Path:
        """Search exports (CSV, RIS, MEDLINE) dropped here are imported by the `papers` asset."""
        return self.root / "imports"

    @property
    def artifacts_dir(self) -> Path:
        return self.root / "artifacts"

    @property
    def plots_dir(self) -> Path:
        return self.root / "plots"


def open_store(cfg: Config) -> Store:
    """Open (and migrate) the store: `[store] url` (PostgreSQL) when set, else the workspace's SQLite file."""
    from ra_agent.config import ConfigError
    from ra_agent.store.db import Store, WritePolicy
    from ra_agent.store.pg import is_postgres_url

    if cfg.store.url and not is_postgres_url(cfg.store.url):
        raise ConfigError(f"{cfg.source}: [store] url must be empty (SQLite) or a postgresql:// URL")
    policy = WritePolicy(cfg.store.busy_timeout_s, cfg.store.write_retries, cfg.store.retry_wait_s)
    return Store(cfg.store.url or Workspace.of(cfg).db_path, cfg.ingest.insert_commit_every, policy)


def query_key(query: str) -> str:
    """Stable short key of a search query (whitespace- and case-insensitive): a partition key."""
    normalised = re.sub(r"\s+", " ", query.strip().lower())
    return "q" + hashlib.sha1(normalised.encode("utf-8")).hexdigest()[:10]


def register_query(
    store: Store, query: str, since: str | None = None, retmax: int | None = None, origin: str = "user"
) -> str:
    """Record a search the user (origin "user") or a goal (origin = goal_id) asked for.

    In Dagster, user searches become partitions through the search sensor and goal
    searches through the agent sensor, so each search runs once.
    """
    key = query_key(query)
    with store.transaction():
        store.conn.execute(
            "INSERT INTO search_query(query_key, query, since, retmax, origin, created_ts) VALUES (?,?,?,?,?,?) "
            "ON CONFLICT(query_key) DO UPDATE SET since=excluded.since, retmax=excluded.retmax",
            (key, query.strip(), since, retmax, origin, int(time.time())),
        )
    return key


def registered_queries(store: Store, origin: str | None = None) -> dict[str, dict]:
    """query_key -> {query, since, retmax, origin} for every registered search (optionally of one origin)."""
    sql = "SELECT query_key, query, since, retmax, origin FROM search_query"
    rows = store.conn.execute(sql + (" WHERE origin=?" if origin else "") + " ORDER BY created_ts",
                              (origin,) if origin else ())  # fmt: skip
    return {r["query_key"]: dict(r) for r in rows}


def query_runs(store: Store) -> dict[str, dict]:
    """Every registered search with its last run: query_key -> {query, since, retmax, origin, count, fetched,
    ran_ts, status, error} (run fields None when it never ran)."""
    rows = store.conn.execute(
        "SELECT q.query_key, q.query, q.since, q.retmax, q.origin, r.count, r.fetched, r.ran_ts, r.status, r.error "
        "FROM search_query q LEFT JOIN search_run r ON r.query_key = q.query_key ORDER BY q.created_ts"
    )
    return {r["query_key"]: dict(r) for r in rows}


def unregister_query(store: Store, key: str) -> str | None:
    """Forget a registered search (its papers and last run stay); returns its query text, None if unknown."""
    row = store.conn.execute("SELECT query FROM search_query WHERE query_key=?", (key,)).fetchone()
    if row is None:
        return None
    with store.transaction():
        store.conn.execute("DELETE FROM search_query WHERE query_key=?", (key,))
    return row["query"]
