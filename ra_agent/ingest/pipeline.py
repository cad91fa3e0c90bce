"""Ingest orchestration for the CLI, the Dagster assets and the agent tools: PubMed searches and Crossref references."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date

from ra_agent.config import Config
from ra_agent.ingest.crossref import CrossrefClient, cited_dois
from ra_agent.ingest.eutils import ESEARCH_MAX, EutilsClient, EutilsError, SearchHandle
from ra_agent.ingest.http import ApiRequestError, ApiUnavailable, failure_level
from ra_agent.models import Deletion, Paper, ParseProblem, is_doi_id
from ra_agent.store.db import Store
from ra_agent.store.schema import PROV_CROSSREF, PROV_PUBMED
from ra_agent.workspace import Workspace, query_key

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
SAMPLE_TITLES = 5
REF_GROUP = 50  # papers whose Crossref references are mapped DOI→PMID together


@dataclass
class SearchResult:
    """One search_pubmed run: what PubMed (or, offline, the local corpus) answered and what was stored."""

    query: str
    query_key: str
    count: int = 0  # hits PubMed reports (local hits when offline)
    fetched: int = 0  # records efetch returned
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    problems: int = 0  # records the parser skipped
    batches: list[str] = field(default_factory=list)  # ingest batches (embedding shards) created
    efetch_requests: int = 0
    pmids: list[int] = field(default_factory=list)  # candidates, best first (rows of candidate_papers)
    offline: bool = False  # answered from the local corpus (FTS5)
    offline_reason: str = ""  # "config" ([ingest] offline = true) or "api" (E-utilities failing)
    api_offline: bool = False  # E-utilities failed after the final retry during this run
    error: str = ""
    status: str = "ok"  # ok | partial | failed | offline (the search_run.status column)
    sample_titles: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def incomplete(self) -> bool:
        """True when PubMed did not give the whole answer (failed, partial, or offline because the API is down)."""
        return self.status in ("failed", "partial") or self.offline_reason == "api"

    def to_tool_result(self) -> dict:
        """The search_pubmed tool's answer: candidates and the api_offline flag."""
        out = {"query_key": self.query_key, "count": self.count, "candidates": len(self.pmids),
               "inserted": self.inserted, "offline": self.offline, "status": self.status}  # fmt: skip
        if self.api_offline:
            out["api_offline"] = True
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class RefResult:
    """One reference harvest: Crossref works read, cited DOIs mapped to PMIDs, edges added."""

    requested: int = 0  # PMIDs asked about
    candidates: int = 0  # with a DOI, no PubMed reference list and not harvested before
    harvested: int = 0  # papers whose Crossref record was read (cache or network)
    not_found: int = 0  # DOIs Crossref does not know
    rejected: int = 0  # DOIs Crossref refused (400)
    skipped: int = 0  # candidates left for a later run because an API was down
    ref_dois: int = 0  # cited DOIs read
    mapped: int = 0  # ... found in PubMed (edge to a PMID)
    unmapped: int = 0  # ... kept with dst=0
    edges_added: int = 0  # new rows in `ref`
    crossref_requests: int = 0
    cache_hits: int = 0
    crossref_offline: bool = False
    eutils_offline: bool = False
    sample_titles: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0


# ---------------------------------------------------------------------------- search
def search_and_ingest(
    cfg: Config,
    store: Store,
    query: str,
    *,
    since: str | date | None = None,
    retmax: int | None = None,
    progress: Progress | None = None,
    goal_id: str | None = None,
    client: EutilsClient | None = None,
) -> SearchResult:
    """esearch (history server) + efetch in batches into the store; offline answers from FTS5.

    New papers form ingest batches of `embedding.refresh_threshold`, committed every
    `ingest.insert_commit_every` rows. After `ingest.offline_after_errors` consecutive API
    failures the search answers from the local corpus (offline=True, api_offline=True); while
    offline each search probes the API once and a success ends offline mode. An NCBI ERROR
    answer (bad query) raises EutilsError.
    """
    started = time.monotonic()
    retmax = retmax or cfg.ingest.default_retmax
    if retmax > ESEARCH_MAX:
        log.warning("retmax %d above NCBI's limit of %d ids per search; capped", retmax, ESEARCH_MAX)
        retmax = ESEARCH_MAX
    result = SearchResult(query=query, query_key=query_key(query))
    client = client or EutilsClient(cfg, store=store)
    if client.store is None:
        client.store = store  # its request outcomes drive this store's offline counter
    if cfg.ingest.offline:  # configured offline (the bundled demo): no request at all
        result.error = "[ingest] offline = true"
        return _finish(cfg, store, result, [], retmax, goal_id, started)
    offline_before = bool(store.api_state("eutils")["offline"])
    try:
        handle = client.esearch(query, retmax=retmax, usehistory=True, mindate=since, probe=offline_before)
    except ApiUnavailable as exc:
        result.api_offline, result.error = True, str(exc)
        return _finish(cfg, store, result, [], retmax, goal_id, started)
    except EutilsError as exc:  # NCBI rejected the query: recorded as failed, then raised
        result.status, result.error = "failed", str(exc)
        _record_run(store, result)
        raise
    result.count = handle.count
    ranked = _ingest(cfg, store, client, handle, retmax, result, progress)
    target = min(handle.count, retmax, ESEARCH_MAX)
    if not result.error and result.fetched + result.problems < target:
        result.error = f"efetch returned {result.fetched + result.problems} of {target} records"
    if result.error:
        result.status = "partial"
    return _finish(cfg, store, result, ranked, retmax, goal_id, started)


def _record_run(store: Store, result: SearchResult) -> None:
    """The search_run row; a failed run keeps the counts of the last good one (0 when there was none)."""
    keep = result.status == "failed"
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO search_run(query_key, query, count, fetched, offline, ran_ts, status, error) "
            "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(query_key) DO UPDATE SET query=excluded.query, "
            + ("" if keep else "count=excluded.count, fetched=excluded.fetched, ")
            + "offline=excluded.offline, ran_ts=excluded.ran_ts, status=excluded.status, error=excluded.error",
            (result.query_key, result.query, result.count, result.fetched, int(result.offline), int(time.time()),
             result.status, result.error),
        )  # fmt: skip


def _ingest(
    cfg: Config, store: Store, client: EutilsClient, handle: SearchHandle, retmax: int, result: SearchResult,
    progress: Progress | None,
) -> list[int]:  # fmt: skip
    """Stream the search's records into the store; returns the stored PMIDs, esearch rank order first."""
    target = min(handle.count, retmax)
    arrived: list[int] = []

    def records() -> Iterator[Paper]:
        try:
            for chunk in client.efetch_history(handle, total=target):
                result.efetch_requests += 1
                for item in chunk:
                    if isinstance(item, Paper):
                        result.fetched += 1
                        arrived.append(item.pmid)
                        yield item
                    elif isinstance(item, ParseProblem):
                        result.problems += 1
                        log.warning("efetch record skipped: %s", item.reason)
                    elif isinstance(item, Deletion):
                        log.info("efetch returned a DeleteCitation for %d PMIDs; ignored", len(item.pmids))
                if progress:
                    progress(result.fetched, target)
        except ApiUnavailable as exc:
            # stop the stream cleanly: upsert_papers commits what already arrived
            result.api_offline, result.error = True, str(exc)
            log.log(failure_level(exc), "search %r: efetch failed after %d records; stored what arrived", handle.term,
                    result.fetched)  # fmt: skip

    stats = store.upsert_papers(records(), source="efetch", query=handle.term,
                                batch_size=cfg.embedding.refresh_threshold)  # fmt: skip
    result.inserted, result.updated, result.unchanged = stats.inserted, stats.updated, stats.unchanged
    result.batches = list(stats.batches)
    order = list(dict.fromkeys([*handle.ids[:target], *arrived]))
    present = store.existing_pmids(order)
    return [p for p in order if p in present]


def _finish(
    cfg: Config, store: Store, result: SearchResult, ranked: list[int], retmax: int, goal_id: str | None,
    started: float,
) -> SearchResult:  # fmt: skip
    """Offline fallback when the API is marked offline, then the search_run and candidate_papers rows."""
    result.offline = cfg.ingest.offline or bool(store.api_state("eutils")["offline"])
    if result.offline:
        result.api_offline = True
        result.offline_reason = "config" if cfg.ingest.offline else "api"
        local = store.search(result.query, retmax)
        if cfg.ingest.offline:
            log.info("offline mode ([ingest] offline = true): %r answered from the local corpus: %d papers",
                     result.query, len(local))  # fmt: skip
        else:
            log.log(
                logging.INFO if "unreachable" in (result.error or "") else logging.ERROR,
                "OFFLINE MODE: E-utilities unreachable (%s); %r answered from the local corpus: %d papers",
                result.error or "marked offline", result.query, len(local),
            )  # fmt: skip
        if not ranked:
            result.count = len(local)
        ranked = list(dict.fromkeys([*ranked, *local]))[:retmax]
        result.status = "offline"
    elif result.api_offline and not result.fetched:
        result.status = "failed"
    elif result.api_offline:
        result.status = "partial"
    result.pmids = ranked
    now = int(time.time())
    _record_run(store, result)
    with store.transaction() as conn:
        if ranked or not result.api_offline:  # a failed online run keeps the previous candidates
            conn.execute("DELETE FROM candidate_papers WHERE query_key=?", (result.query_key,))
            conn.executemany(
                "INSERT INTO candidate_papers(query_key, pmid, rank, goal_id, added_ts) VALUES (?,?,?,?,?)",
                [(result.query_key, pmid, rank, goal_id, now) for rank, pmid in enumerate(ranked, start=1)],
            )
    result.sample_titles = [p.title for p in store.papers(ranked[:SAMPLE_TITLES])]
    result.elapsed_s = round(time.monotonic() - started, 3)
    log.info(
        "search %r (%s): count=%d fetched=%d inserted=%d updated=%d candidates=%d offline=%s api_offline=%s",
        result.query, result.query_key, result.count, result.fetched, result.inserted, result.updated,
        len(ranked), result.offline, result.api_offline,
    )  # fmt: skip
    return result


# ---------------------------------------------------------------------------- references
def _ref_candidates(store: Store, pmids: Sequence[int]) -> list[Paper]:
    """Papers among `pmids` with a DOI and no reference rows yet (neither PubMed's list nor a harvest)."""
    out: list[Paper] = []
    for start in range(0, len(pmids), 500):
        part = pmids[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = store.conn.execute(
            f"SELECT pmid, doi, title FROM paper p WHERE pmid IN ({marks}) AND coalesce(doi, '') != '' "
            "AND NOT EXISTS (SELECT 1 FROM ref r WHERE r.src = p.pmid) "
            "AND NOT EXISTS (SELECT 1 FROM ref_doi d WHERE d.src = p.pmid)",
            part,
        )
        by_pmid = {r["pmid"]: Paper(pmid=r["pmid"], title=r["title"], doi=r["doi"]) for r in rows}
        out += [by_pmid[p] for p in part if p in by_pmid]
    return out


def harvest_references(
    cfg: Config,
    store: Store,
    pmids: Iterable[int],
    *,
    progress: Progress | None = None,
    crossref: CrossrefClient | None = None,
    eutils: EutilsClient | None = None,
) -> RefResult:
    """Crossref references for papers with a DOI and no PubMed reference list, mapped DOI→PMID.

    Cited DOIs known locally map without a request; the rest go through E-utilities. Edges
    are stored with provenance 2 (OR-merged with PubMed's 1); unmapped DOIs stay with dst=0.
    Crossref down logs "crossref_offline" and skips the rest; E-utilities down leaves the
    group's papers for a later run. Neither raises.
    """
    started = time.monotonic()
    result = RefResult()
    wanted = list(dict.fromkeys(pmids))
    result.requested = len(wanted)
    todo = _ref_candidates(store, wanted)
    result.candidates = len(todo)
    if cfg.ingest.offline:
        result.crossref_offline = result.eutils_offline = True
        result.skipped = len(todo)
        log.info("references: [ingest] offline = true, %d candidates left for an online run", len(todo))
        return result
    crossref = crossref or CrossrefClient(cfg, Workspace.of(cfg).cache_dir)
    eutils = eutils or EutilsClient(cfg, store=store)
    if eutils.store is None:
        eutils.store = store
    edges_before = store.conn.execute("SELECT COUNT(*) FROM ref").fetchone()[0]
    done = 0
    for start in range(0, len(todo), REF_GROUP):
        group = todo[start : start + REF_GROUP]
        cited = _crossref_group(cfg, store, crossref, group, result)
        if result.crossref_offline:
            result.skipped += len(todo) - (result.harvested + result.not_found + result.rejected)
            _link_group(store, eutils, cited, result)  # what was read before Crossref went down
            break
        _link_group(store, eutils, cited, result)
        done += len(group)
        if progress:
            progress(done, len(todo))
    result.crossref_requests, result.cache_hits = crossref.requests_made, crossref.cache_hits
    result.edges_added = store.conn.execute("SELECT COUNT(*) FROM ref").fetchone()[0] - edges_before
    result.elapsed_s = round(time.monotonic() - started, 3)
    log.info(
        "references: %d candidates, %d harvested, %d cited DOIs (%d mapped, %d unmapped), %d new edges%s",
        result.candidates, result.harvested, result.ref_dois, result.mapped, result.unmapped, result.edges_added,
        " [crossref_offline]" if result.crossref_offline else "",
    )  # fmt: skip
    return result


def _crossref_group(
    cfg: Config, store: Store, crossref: CrossrefClient, group: Sequence[Paper], result: RefResult
) -> dict[int, tuple[Paper, list[str]]]:
    """pmid → (paper, cited DOIs) for the group; stops at the first Crossref outage."""
    cited: dict[int, tuple[Paper, list[str]]] = {}
    for paper in group:
        try:
            message = crossref.work(paper.doi or "")
        except ApiUnavailable as exc:
            result.crossref_offline = True
            store.record_api_result("crossref", False, str(exc), cfg.ingest.offline_after_errors)
            log.log(failure_level(exc), "crossref_offline: %s; reference harvest skips the remaining papers", exc)
            return cited
        except ApiRequestError as exc:
            result.rejected += 1
            log.warning("crossref rejected DOI %s of PMID %d: %s", paper.doi, paper.pmid, exc)
            continue
        if message is None:
            result.not_found += 1
            continue
        result.harvested += 1
        cited[paper.pmid] = (paper, cited_dois(message))
    if cited:
        store.record_api_result("crossref", True, "", cfg.ingest.offline_after_errors)
    return cited


def _link_group(store: Store, eutils: EutilsClient, cited: dict[int, tuple[Paper, list[str]]], result: RefResult):
    """Map the group's cited DOIs to PMIDs (store first, then E-utilities) and store the edges."""
    if not cited:
        return
    dois = list(dict.fromkeys(d for _, refs in cited.values() for d in refs))
    mapping: dict[str, int | None] = {d: store.pmid_for_doi(d) for d in dois}
    unknown = [d for d, pmid in mapping.items() if pmid is None]
    if unknown:
        try:
            mapping.update(eutils.doi_to_pmid(unknown))
        except ApiUnavailable as exc:
            result.eutils_offline = True
            result.skipped += len(cited)
            log.log(failure_level(exc), "DOI→PMID mapping failed (%s); %d papers left for a later run", exc, len(cited))
            return
    for pmid, (paper, refs) in cited.items():
        edges = {d: mapping.get(d) for d in refs}
        store.add_doi_refs(pmid, edges, PROV_CROSSREF)
        result.ref_dois += len(edges)
        result.mapped += sum(1 for v in edges.values() if v)
        result.unmapped += sum(1 for v in edges.values() if not v)
        if len(result.sample_titles) < SAMPLE_TITLES:
            result.sample_titles.append(paper.title)


@dataclass
class ParentFetch:
    """One lazy citation-graph fill: references fetched for papers that had none stored."""

    lacking: int = 0  # papers asked about with no reference rows (PubMed list, elink or Crossref)
    elink_edges: int = 0  # edges elink pubmed_pubmed_refs added
    crossref: RefResult | None = None  # the Crossref harvest of those still without references (DOI papers)
    offline: bool = False  # skipped ([ingest] offline) or stopped by an API failure
    error: str = ""


def lacking_references(store: Store, pmids: Sequence[int]) -> list[int]:
    """The PMIDs of `pmids` with no reference row stored (neither a PMID edge nor a cited DOI), in order."""
    out: list[int] = []
    for start in range(0, len(pmids), 500):
        part = list(pmids[start : start + 500])
        marks = ",".join("?" * len(part))
        have = {r[0] for r in store.conn.execute(
            f"SELECT src FROM ref WHERE src IN ({marks}) UNION SELECT src FROM ref_doi WHERE src IN ({marks})",
            part + part)}  # fmt: skip
        out += [p for p in part if p not in have]
    return out


def fetch_references(
    cfg: Config, store: Store, pmids: Iterable[int], *, eutils: EutilsClient | None = None,
    crossref: CrossrefClient | None = None,
) -> ParentFetch:  # fmt: skip
    """The citation graph on demand, for ripple's parents outside the Dagster `references` asset.

    Papers of `pmids` with no reference rows yet (an imported export carries none) get PubMed's
    reference list through elink pubmed_pubmed_refs (provenance 1); those still without one and
    with a DOI go through the Crossref harvest (provenance 2, DOIs mapped to PMIDs). Configured
    offline: nothing is asked. An API failure is logged and leaves the rest for later; never raises.
    """
    out = ParentFetch()
    todo = lacking_references(store, list(dict.fromkeys(pmids)))
    out.lacking = len(todo)
    if cfg.ingest.offline or not todo:
        out.offline = cfg.ingest.offline
        return out
    eutils = eutils or EutilsClient(cfg, store=store)
    in_pubmed = [p for p in todo if not is_doi_id(p)]  # DOI-hash ids have no PubMed record to link from
    try:
        links = eutils.references(in_pubmed) if in_pubmed else {}
    except (ApiUnavailable, ApiRequestError) as exc:
        out.offline, out.error = True, str(exc)
        log.log(failure_level(exc), "references on demand: elink failed (%s); ripple uses the stored citation edges",
                exc)  # fmt: skip
        return out
    edges = [(src, dst, PROV_PUBMED) for src, cited in links.items() for dst in cited if dst != src]
    before = store.counts()["ref"]
    store.add_refs(edges)
    out.elink_edges = store.counts()["ref"] - before
    still = lacking_references(store, todo)
    if still:
        out.crossref = harvest_references(cfg, store, still, crossref=crossref, eutils=eutils)
        out.offline = out.crossref.crossref_offline or out.crossref.eutils_offline
    log.info("references on demand: %d papers lacked references; elink added %d edges, Crossref %d",
             out.lacking, out.elink_edges, out.crossref.edges_added if out.crossref else 0)  # fmt: skip
    return out


__all__ = [
    "ParentFetch",
    "RefResult",
    "SearchResult",
    "fetch_references",
    "harvest_references",
    "lacking_references",
    "search_and_ingest",
]
