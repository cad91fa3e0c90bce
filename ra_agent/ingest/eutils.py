"""NCBI E-utilities client: esearch (history server), efetch in batches, DOI→PMID mapping and elink."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import requests
from lxml import etree  # pyright: ignore[reportAttributeAccessIssue]

from ra_agent.config import Config
from ra_agent.ingest.http import (
    ApiRequestError,
    BadResponse,
    HttpClient,
    RetryPolicy,
    require_content_type,
    shared_limiter,
    user_agent,
)
from ra_agent.ingest.medline import ARTICLE_SET_TAGS, XmlItem, iter_pubmed_tree
from ra_agent.models import Paper, normalise_doi

if TYPE_CHECKING:
    from ra_agent.store.db import Store

log = logging.getLogger(__name__)

API = "eutils"
ESEARCH_MAX = 10_000  # NCBI serves at most the first 10 000 ids of a PubMed search
POST_ABOVE_CHARS = 1_500  # longer parameter sets go in a POST body, as NCBI asks
LINK_REFS = "pubmed_pubmed_refs"  # the papers a PMID cites
LINK_CITEDIN = "pubmed_pubmed_citedin"  # the papers citing a PMID
_PLAIN_DOI = re.compile(r"^[0-9a-z._/:;-]+$")
_XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)


class EutilsError(ApiRequestError):
    """NCBI answered with an ERROR document (bad database, bad query, unknown history session)."""


class HistoryExpired(EutilsError):
    """The WebEnv/query_key of a search is no longer on the history server."""


@dataclass(frozen=True)
class SearchHandle:
    """An esearch answer: hit count, the first ids, and the history-server session when asked for."""

    term: str
    count: int
    ids: list[int]
    webenv: str | None = None
    query_key: str | None = None
    retstart: int = 0
    query_translation: str = ""
    errors: list[str] = field(default_factory=list)  # ErrorList entries (e.g. PhraseNotFound)
    warnings: list[str] = field(default_factory=list)

    @property
    def has_history(self) -> bool:
        return bool(self.webenv and self.query_key)


def parse_xml(resp: requests.Response, *roots: str) -> etree._Element:
    """The parsed body, or BadResponse when it is HTML, not well-formed, or not one of the expected roots.

    A top-level <ERROR> is NCBI rejecting the request (EutilsError), except backend
    failures, which are transient and retried.
    """
    require_content_type(resp, "xml")
    body = resp.content
    if not body.strip():
        raise BadResponse("empty body")
    try:
        root = etree.fromstring(body, _XML_PARSER)
    except etree.XMLSyntaxError as exc:
        raise BadResponse(f"not well-formed XML ({len(body)} bytes): {exc}") from exc
    error = root.findtext("ERROR")
    if error is not None:
        message = " ".join(error.split())
        if "backend" in message.lower() or "temporarily" in message.lower():
            raise BadResponse(f"NCBI backend error: {message}")
        if "unable to obtain query" in message.lower():
            raise HistoryExpired(API, message, status=resp.status_code, body=message)
        raise EutilsError(API, message, status=resp.status_code, body=message)
    if root.tag not in roots:
        raise BadResponse(f"unexpected XML root <{root.tag}> (wanted {'/'.join(roots)})")
    return root


def _efetch_records(resp: requests.Response) -> list[XmlItem]:
    """The records of an efetch answer, parsed once, after checking it is a whole PubmedArticleSet
    (truncation is retried)."""
    return list(iter_pubmed_tree(parse_xml(resp, *ARTICLE_SET_TAGS), source_name="efetch"))


def _ints(nodes: Iterable[Any]) -> list[int]:
    out = []
    for node in nodes:
        text = (node.text or "").strip()
        if text.isdigit():
            out.append(int(text))
    return out


def _entrez_date(value: str | date | datetime) -> str:
    if isinstance(value, datetime | date):
        return value.strftime("%Y/%m/%d")
    return value.strip().replace("-", "/")


def doi_term(doi: str) -> str:
    """An esearch clause matching one DOI in the [doi] field (quoted unless plain)."""
    return f"{doi}[doi]" if _PLAIN_DOI.match(doi) else f'"{doi}"[doi]'


class EutilsClient:
    """E-utilities over HTTP: `tool`, `email` and `api_key` on every request, ≤3 (10 with a key) per second.

    With a `store`, every request outcome feeds the API-health counter behind offline mode
    (`Store.record_api_result("eutils", ...)`).
    """

    def __init__(self, cfg: Config, store: Store | None = None):
        self.cfg = cfg
        self.base_url = cfg.ingest.eutils_base_url.rstrip("/")
        self.store = store
        self._store_lock = threading.Lock()
        secrets = cfg.secrets
        qps = cfg.ingest.max_qps_with_key if secrets.ncbi_api_key else cfg.ingest.max_qps
        self.base_params: dict[str, str] = {"tool": cfg.ingest.tool}
        if secrets.ncbi_email:
            self.base_params["email"] = secrets.ncbi_email
        if secrets.ncbi_api_key:
            self.base_params["api_key"] = secrets.ncbi_api_key
        self.http = HttpClient(
            API,
            limiter=shared_limiter(API, self.base_url, qps),
            policy=RetryPolicy(
                cfg.ingest.retry_attempts, cfg.ingest.backoff_factor, retry_after_cap_s=cfg.ingest.retry_after_cap_s
            ),  # fmt: skip
            timeout_s=cfg.ingest.request_timeout_s,
            headers={"User-Agent": user_agent()},
            on_result=self._record,
        )

    # ------------------------------------------------------------------ plumbing
    def _record(self, ok: bool, error: str) -> None:
        if self.store is None:
            return
        unreachable = not ok and self.http.offline  # the host is not there: offline at once (http said so)
        with self._store_lock:
            after = self.store.record_api_result(
                API, ok, error, 1 if unreachable else self.cfg.ingest.offline_after_errors
            )
        if after["offline"] and not after["was_offline"] and not unreachable:
            log.error(
                "E-UTILITIES OFFLINE: %d consecutive failed requests (last: %s); searches answer from the local "
                "corpus until a request succeeds",
                after["consecutive_errors"], error,
            )  # fmt: skip
        elif after["was_offline"] and not after["offline"]:
            log.warning("E-utilities reachable again: leaving offline mode")

    def _call(self, endpoint: str, params: dict[str, Any], parse, *, retries: int | None = None):
        params = {**params, **self.base_params}
        url = f"{self.base_url}/{endpoint}"
        size = sum(len(str(v)) for v in params.values())
        if size > POST_ABOVE_CHARS:
            return self.http.request("POST", url, parse, data=params, retries=retries)
        return self.http.request("GET", url, parse, params=params, retries=retries)

    def close(self) -> None:
        self.http.close()

    # ------------------------------------------------------------------ esearch
    def esearch(
        self,
        term: str,
        *,
        db: str = "pubmed",
        retmax: int = 20,
        retstart: int = 0,
        usehistory: bool = True,
        mindate: str | date | None = None,
        maxdate: str | date | None = None,
        datetype: str = "edat",
        sort: str | None = None,
        probe: bool = False,
    ) -> SearchHandle:
        """Run a search; with `usehistory` the hits stay on the history server (WebEnv/query_key).

        `mindate` alone searches up to tomorrow. `probe=True` makes one attempt only (used in
        offline mode to notice the API is back). Raises EutilsError for an NCBI ERROR answer and
        ApiUnavailable after the final retry.
        """
        params: dict[str, Any] = {"db": db, "term": term, "retmax": min(retmax, ESEARCH_MAX), "retstart": retstart}
        if usehistory:
            params["usehistory"] = "y"
        if mindate or maxdate:
            params["datetype"] = datetype
            params["mindate"] = _entrez_date(mindate or "1800/01/01")
            params["maxdate"] = _entrez_date(maxdate or date.today() + timedelta(days=1))
        if sort:
            params["sort"] = sort
        root = self._call("esearch.fcgi", params, lambda r: parse_xml(r, "eSearchResult"), retries=0 if probe else None)
        handle = SearchHandle(
            term=term,
            count=int(root.findtext("Count") or 0),
            ids=_ints(root.iterfind("IdList/Id")),
            webenv=root.findtext("WebEnv"),
            query_key=root.findtext("QueryKey"),
            retstart=int(root.findtext("RetStart") or 0),
            query_translation=root.findtext("QueryTranslation") or "",
            errors=[f"{e.tag}: {e.text}" for e in root.iterfind("ErrorList/*")],
            warnings=[f"{e.tag}: {e.text}" for e in root.iterfind("WarningList/*")],
        )
        if handle.errors:
            log.warning("esearch %r: NCBI reports %s (count %d)", term, "; ".join(handle.errors), handle.count)
        return handle

    # ------------------------------------------------------------------ efetch
    def _efetch(self, params: dict[str, Any]) -> list[XmlItem]:
        return self._call("efetch.fcgi", {"db": "pubmed", "retmode": "xml", **params}, _efetch_records)

    def efetch_history(self, handle: SearchHandle, total: int | None = None, batch: int | None = None):
        """Yield the parsed records of a history-server search, one list per efetch of `batch` records.

        Falls back to fetching by id (the handle's ids) when the session has no WebEnv or expired.
        """
        total = min(handle.count, total if total is not None else handle.count, ESEARCH_MAX)
        batch = batch or self.cfg.ingest.pubmed_batch
        if not handle.has_history:
            yield from self.efetch_batches(handle.ids[:total], batch=batch)
            return
        for retstart in range(0, total, batch):
            params = {"WebEnv": handle.webenv, "query_key": handle.query_key, "retstart": retstart,
                      "retmax": min(batch, total - retstart)}  # fmt: skip
            try:
                yield self._efetch(params)
            except HistoryExpired:
                log.warning("history session of %r expired at %d; fetching the remaining ids directly", handle.term,
                            retstart)  # fmt: skip
                yield from self.efetch_batches(handle.ids[retstart:total], batch=batch)
                return

    def efetch_batches(self, pmids: Sequence[int], batch: int | None = None) -> Iterator[list[XmlItem]]:
        """Yield the parsed records for `pmids`, one list per efetch of `batch` ids (unknown ids are absent)."""
        batch = batch or self.cfg.ingest.pubmed_batch
        ids = list(dict.fromkeys(int(p) for p in pmids))
        for start in range(0, len(ids), batch):
            yield self._efetch({"id": ",".join(map(str, ids[start : start + batch]))})

    def efetch(self, pmids: Sequence[int]) -> list[Paper]:
        """The papers for `pmids` (batched); PMIDs PubMed does not know are simply absent."""
        return [item for chunk in self.efetch_batches(pmids) for item in chunk if isinstance(item, Paper)]

    # ------------------------------------------------------------------ DOI -> PMID
    def doi_to_pmid(self, dois: Iterable[str]) -> dict[str, int | None]:
        """Map DOIs to PMIDs: esearch `"<doi>"[doi] OR ...` per batch, then efetch the hits to see which is which.

        Keys are the normalised DOIs; None where PubMed has no record with that DOI.
        """
        wanted = list(dict.fromkeys(d for d in (normalise_doi(x) for x in dois) if d and '"' not in d))
        mapping: dict[str, int | None] = dict.fromkeys(wanted)
        step = self.cfg.ingest.elink_batch
        for start in range(0, len(wanted), step):
            part = wanted[start : start + step]
            handle = self.esearch(" OR ".join(doi_term(d) for d in part), retmax=2 * len(part) + 10,
                                  usehistory=False)  # fmt: skip
            if not handle.ids:
                continue
            part_set = set(part)
            for paper in self.efetch(handle.ids):
                found = [normalise_doi(paper.doi)] + [normalise_doi(v) for k, v in paper.other_ids.items()
                                                      if k.lower() == "doi"]  # fmt: skip
                for doi in found:
                    if doi in part_set:
                        known = mapping[doi]
                        mapping[doi] = paper.pmid if known is None else min(known, paper.pmid)
        mapped = sum(1 for v in mapping.values() if v)
        log.info("DOI→PMID: %d of %d DOIs found in PubMed", mapped, len(mapping))
        return mapping

    # ------------------------------------------------------------------ elink
    def elink(self, pmids: Sequence[int], linkname: str) -> dict[int, list[int]]:
        """PMID → linked PMIDs for one link name (one-to-one: one LinkSet per PMID), batched."""
        ids = list(dict.fromkeys(int(p) for p in pmids))
        out: dict[int, list[int]] = {p: [] for p in ids}
        step = self.cfg.ingest.elink_batch
        for start in range(0, len(ids), step):
            part = ids[start : start + step]
            params = {"dbfrom": "pubmed", "db": "pubmed", "linkname": linkname, "cmd": "neighbor", "id": part}
            root = self._call("elink.fcgi", params, lambda r: parse_xml(r, "eLinkResult"))
            for linkset in root.iterfind("LinkSet"):
                if (err := linkset.findtext("ERROR")) is not None:
                    log.warning("elink %s: %s", linkname, " ".join(err.split()))
                sources = _ints(linkset.iterfind("IdList/Id"))
                links: list[int] = []
                for db in linkset.iterfind("LinkSetDb"):
                    if db.findtext("LinkName") == linkname:
                        links.extend(_ints(db.iterfind("Link/Id")))
                for src in sources:
                    if src in out:
                        out[src].extend(x for x in links if x not in out[src])
        return out

    def references(self, pmids: Sequence[int]) -> dict[int, list[int]]:
        """PMID → PMIDs it cites (elink pubmed_pubmed_refs)."""
        return self.elink(pmids, LINK_REFS)

    def cited_by(self, pmids: Sequence[int]) -> dict[int, list[int]]:
        """PMID → PMIDs citing it (elink pubmed_pubmed_citedin)."""
        return self.elink(pmids, LINK_CITEDIN)


__all__ = [
    "LINK_CITEDIN",
    "LINK_REFS",
    "EutilsClient",
    "EutilsError",
    "HistoryExpired",
    "SearchHandle",
    "doi_term",
    "parse_xml",
]
