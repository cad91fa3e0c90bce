"""Copy one store into another (e.g. a workspace's SQLite file into PostgreSQL): every table, row for row."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ra_agent.store.schema import POSTGRESQL

if TYPE_CHECKING:
    from ra_agent.store.db import Store

log = logging.getLogger(__name__)

COPY_ROWS = 5000  # rows per executemany (and per transaction)
# version bookkeeping, SQLite's FTS5 shadow tables and the MeSH index (both rebuilt by triggers as the papers arrive)
SKIPPED = ("ra_schema", "paper_fts", "paper_mesh", "sqlite_")


def copy_store(src: Store, dst: Store) -> dict[str, int]:
    """Copy every table of `src` into the empty, migrated `dst` (same schema version); returns rows per table.

    Columns are matched by name. On PostgreSQL the identity sequences are moved past the copied ids, and the
    full-text and MeSH indexes follow the rows by themselves.
    """
    if src.schema_version != dst.schema_version:
        raise ValueError(f"{src.where} is at schema {src.schema_version}, {dst.where} at {dst.schema_version}")
    tables = sorted(t for t in src.table_names() & dst.table_names() if not t.startswith(SKIPPED))
    copied: dict[str, int] = {}
    for table in tables:
        if dst.conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
            raise ValueError(f"{dst.where}: table {table} is not empty; copy into a fresh database")
        cursor = src.conn.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cursor.description]
        insert = f"INSERT INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        copied[table] = 0
        while rows := cursor.fetchmany(COPY_ROWS):
            with dst.transaction():
                dst.conn.executemany(insert, [tuple(r) for r in rows])
            copied[table] += len(rows)
        log.info("copied %d rows of %s", copied[table], table)
    if dst.dialect == POSTGRESQL:
        identities = dst.conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND is_identity = 'YES'"
        ).fetchall()
        for table, column in identities:
            dst.conn.execute(
                f"SELECT setval(pg_get_serial_sequence(?, ?), COALESCE(MAX({column}), 0) + 1, false) FROM {table}",
                (table, column),
            )
    return copied


__all__ = ["copy_store"]
