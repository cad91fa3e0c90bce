"""Turn ra_agent result objects into Dagster materialisation metadata."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import dagster as dg


def scalars(obj: Any, skip: Iterable[str] = ()) -> dict[str, Any]:
    """The int/float/bool/str fields of a dataclass instance or dict, as metadata values."""
    raw: dict[str, Any] = obj if isinstance(obj, dict) else dataclasses.asdict(obj)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in skip or value is None:
            continue
        if isinstance(value, bool | int | float | str):
            out[key] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, bool | int | float | str) for v in value):
            out[key] = len(value) if key.endswith(("batches", "files", "problems", "pmids")) else str(value)[:500]
    return out


def content_version(parts: Iterable[bytes | str]) -> dg.DataVersion:
    """A data version from the output's content (streamed): downstream is stale only when this changes."""
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part.encode("utf-8") if isinstance(part, str) else part)
        digest.update(b"\0")
    return dg.DataVersion(digest.hexdigest()[:16])


def md_bullets(lines: Iterable[str], title: str = "") -> dg.MetadataValue:
    body = "\n".join(f"- {line}" for line in lines) or "_(none)_"
    return dg.MetadataValue.md(f"**{title}**\n\n{body}" if title else body)


def none_found(store, sql: str, what: str) -> dg.AssetCheckResult:
    """An asset check that passes when `sql` (a SELECT COUNT(*)) counts no row; the count is its metadata `what`."""
    with store.get_client() as db:
        found = db.conn.execute(sql).fetchone()[0]
    return dg.AssetCheckResult(passed=found == 0, metadata={what: found})


def rate(count: int, seconds: float, unit: str) -> dict[str, float]:
    """`seconds` and `<unit>_per_second` for a step's metadata (how long it took, how fast it went)."""
    return {"seconds": round(seconds, 3), f"{unit}_per_second": round(count / max(seconds, 1e-9), 2)}
