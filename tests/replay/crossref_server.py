"""Loopback Crossref REST API replaying every recorded answer of tests/fixtures/crossref/index.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from .base import FIXTURES, ReplayServer, Reply

CROSSREF_DIR = FIXTURES / "crossref"
IGNORED_PARAMS = frozenset({"mailto"})
UNKNOWN_DOI_FILE = "errors/works_10.1371_notarealdoi.404.txt"


@dataclass(frozen=True)
class Recorded:
    file: Path
    status: int
    content_type: str
    url: str

    def reply(self) -> Reply:
        return Reply(self.status, self.file.read_bytes(), self.content_type)


def _key(path: str, params: dict[str, list[str]]) -> tuple[str, tuple]:
    kept = tuple(sorted((k, tuple(v)) for k, v in params.items() if k not in IGNORED_PARAMS))
    return unquote(path).lower().rstrip("/"), kept


def load_recorded() -> dict[tuple[str, tuple], Recorded]:
    entries = json.loads((CROSSREF_DIR / "index.json").read_text(encoding="utf-8"))
    out = {}
    for entry in entries:
        parts = urlsplit(entry["url"])
        key = _key(parts.path, parse_qs(parts.query, keep_blank_values=True))
        out[key] = Recorded(CROSSREF_DIR / entry["file"], entry["status"], entry["content_type"], entry["url"])
    return out


class CrossrefReplayServer(ReplayServer):
    """Crossref on loopback; `base_url` is what [ingest] crossref_base_url should be.

    Requests match on the decoded path (case-insensitive, as DOIs are) plus the query parameters
    other than `mailto`; the recorded status, content type and body are replayed as-is (including
    404 bodies that are the plain text "Resource not found." under a JSON content type). An
    unrecorded /works/{doi} gets Crossref's recorded 404 for an unknown DOI.
    """

    def __init__(self) -> None:
        super().__init__()
        self.recorded = load_recorded()
        self.unknown_doi = next(r for r in self.recorded.values() if r.file.as_posix().endswith(UNKNOWN_DOI_FILE))

    @property
    def base_url(self) -> str:
        return self.root_url

    def recorded_work_dois(self) -> list[str]:
        """DOIs with a recorded 200 /works/{doi} answer."""
        out = []
        for (path, params), rec in self.recorded.items():
            if rec.status == 200 and not params and path.startswith("/works/"):
                out.append(json.loads(rec.file.read_bytes())["message"]["DOI"].lower())
        return sorted(out)

    def respond(self, method: str, path: str, params: dict[str, list[str]]) -> Reply:
        found = self.recorded.get(_key(path, params))
        if found is not None:
            return found.reply()
        if unquote(path).lower().startswith("/works/"):
            return self.unknown_doi.reply()
        return Reply(404, b"Resource not found.", "text/plain")
