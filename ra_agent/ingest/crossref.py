"""Crossref REST client: /works/{doi} with the polite mailto, raw JSON cached per DOI, reference DOIs."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from ra_agent.config import Config
from ra_agent.fileio import atomic_write
from ra_agent.ingest.http import (
    ApiNotFound,
    BadResponse,
    HttpClient,
    RetryPolicy,
    require_content_type,
    shared_limiter,
    user_agent,
)
from ra_agent.models import normalise_doi

log = logging.getLogger(__name__)

API = "crossref"


def cache_name(doi: str) -> str:
    """The cache file name of a DOI: sha1 of the normalised DOI."""
    return hashlib.sha1((normalise_doi(doi) or doi).encode("utf-8")).hexdigest() + ".json"


def _work_body(resp: requests.Response) -> tuple[bytes, dict[str, Any]]:
    """The body of a 200 /works/{doi} answer and its `message`, after checking it is a Crossref `work`."""
    require_content_type(resp, "json")
    try:
        doc = json.loads(resp.content)
    except ValueError as exc:
        raise BadResponse(f"not JSON ({len(resp.content)} bytes): {exc}") from exc
    if not isinstance(doc, dict) or doc.get("message-type") != "work" or not isinstance(doc.get("message"), dict):
        raise BadResponse(f"not a Crossref work message (status={doc.get('status') if isinstance(doc, dict) else '?'})")
    return resp.content, doc["message"]


class CrossrefClient:
    """GET {crossref_base_url}/works/{doi}; answers cached under `cache_dir/crossref_json/`.

    Outcomes: a work (dict), None for 404 (logged, not retried), ApiRequestError for other
    4xx (a 400 validation failure, not retried), ApiUnavailable after the final retry of
    429/5xx/timeouts/broken bodies.
    """

    def __init__(self, cfg: Config, cache_dir: str | Path):
        self.cfg = cfg
        self.base_url = cfg.ingest.crossref_base_url.rstrip("/")
        self.cache_dir = Path(cache_dir) / "crossref_json"
        mailto = cfg.secrets.crossref_mailto
        self.params = {"mailto": mailto} if mailto else {}
        self.http = HttpClient(
            API,
            limiter=shared_limiter(API, self.base_url, cfg.ingest.crossref_max_qps),
            policy=RetryPolicy(
                cfg.ingest.crossref_retry,
                0.0,
                fixed_wait_s=cfg.ingest.crossref_wait_s,
                retry_after_cap_s=cfg.ingest.retry_after_cap_s,
            ),  # fmt: skip
            timeout_s=cfg.ingest.crossref_timeout_s,
            headers={"User-Agent": user_agent(mailto), "Accept": "application/json"},
        )
        self.requests_made = 0
        self.cache_hits = 0

    def cache_path(self, doi: str) -> Path:
        return self.cache_dir / cache_name(doi)

    def close(self) -> None:
        self.http.close()

    def work(self, doi: str) -> dict[str, Any] | None:
        """The Crossref `message` of a DOI (from the cache when present); None when Crossref does not know it."""
        key = normalise_doi(doi)
        if not key:
            return None
        path = self.cache_path(key)
        if path.exists():
            try:
                self.cache_hits += 1
                return json.loads(path.read_bytes())["message"]
            except (ValueError, KeyError) as exc:
                log.warning("crossref cache %s unreadable (%s); fetching again", path.name, exc)
        url = f"{self.base_url}/works/{quote(key, safe='/')}"
        self.requests_made += 1
        try:
            body, message = self.http.request("GET", url, _work_body, params=self.params)
        except ApiNotFound as exc:
            log.info("crossref: no record for DOI %s (%s)", key, exc.body or "404")
            return None
        atomic_write(path, body)
        return message

    def reference_dois(self, doi: str) -> list[str]:
        """Normalised DOIs of the works a DOI cites (`message.reference[].DOI`), in order, without repeats."""
        message = self.work(doi)
        return cited_dois(message) if message else []


def cited_dois(message: dict[str, Any]) -> list[str]:
    """The normalised `reference[].DOI` values of a Crossref work message, in order, without repeats."""
    refs = message.get("reference") or []
    dois = (normalise_doi(ref.get("DOI")) for ref in refs if isinstance(ref, dict))
    return list(dict.fromkeys(d for d in dois if d))


__all__ = ["CrossrefClient", "cache_name", "cited_dois"]
