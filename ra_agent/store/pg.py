"""PostgreSQL behind the sqlite3 interface ra's modules use: execute/executemany/executescript, sqlite3.Row-like rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ra_agent.store.dialect import to_postgres

PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(PG_SCHEMES)


class Row(tuple):
    """A result row addressable by index and by column name, like sqlite3.Row (so `dict(row)` works)."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor):
    names: dict[str, int] = {d.name: i for i, d in enumerate(cursor.description or ())}
    return lambda values: Row(values, names)


def _params(params: Sequence[Any] | None) -> tuple:
    """sqlite3 stores a bool as 0/1 in an INT column; PostgreSQL refuses a boolean there."""
    if not params:
        return ()  # still a tuple: psycopg then reads `%%` (see dialect._placeholders) as `%`
    return tuple(int(p) if isinstance(p, bool) else p for p in params)


class PgConnection:
    """A psycopg 3 connection in autocommit mode (transactions are explicit BEGIN/COMMIT, as in ra's SQLite use)."""

    def __init__(self, url: str, *, connect_timeout: int = 30):
        import psycopg

        self.url = url
        self.raw = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout, row_factory=_row_factory)
        self._keys: dict[str, tuple[str, ...]] = {}

    def primary_key(self, table: str) -> tuple[str, ...]:
        """The table's primary-key columns, read once from the catalogue."""
        if table not in self._keys:
            rows = self.raw.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
                (table,),
            ).fetchall()
            if not rows:
                raise ValueError(f"table {table} has no primary key to translate INSERT OR REPLACE against")
            self._keys[table] = tuple(r[0] for r in rows)
        return self._keys[table]

    def sql(self, statement: str) -> str:
        return to_postgres(statement, self.primary_key)

    def execute(self, statement: str, params: Sequence[Any] | None = None):
        return self.raw.execute(self.sql(statement), _params(params))  # type: ignore[arg-type]

    def executemany(self, statement: str, seq: Iterable[Sequence[Any]]):
        cursor = self.raw.cursor()
        cursor.executemany(self.sql(statement), [_params(p) for p in seq])  # type: ignore[arg-type]
        return cursor

    def executescript(self, script: str):
        """Several statements without parameters in one round trip (sent as they are: no translation)."""
        return self.raw.execute(script)  # type: ignore[arg-type]

    def commit(self) -> None:
        self.raw.execute("COMMIT")

    def rollback(self) -> None:
        self.raw.execute("ROLLBACK")

    def close(self) -> None:
        self.raw.close()


def transient(exc: BaseException) -> bool:
    """A conflict between concurrent writers that a retry of the whole transaction resolves."""
    import psycopg.errors as e

    return isinstance(exc, (e.DeadlockDetected, e.SerializationFailure, e.UniqueViolation, e.LockNotAvailable))


__all__ = ["PG_SCHEMES", "PgConnection", "Row", "is_postgres_url", "transient"]
