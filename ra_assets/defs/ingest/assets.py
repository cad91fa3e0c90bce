"""Ingest assets: PubMed searches, the local corpus, citation references and the weekly baseline."""

import logging
import time

import dagster as dg

from ra_agent.evidence import publication_kinds
from ra_agent.ingest import corpus_summary, import_pending
from ra_agent.workspace import registered_queries
from ra_assets.meta import md_bullets, rate, scalars
from ra_assets.partitions import baseline_week_partitions, search_query_partitions
from ra_assets.resources import RaConfigResource, StoreResource

PROGRESS_EVERY_S = 15.0  # a progress line at least this often while items move (and every `every` items)
progress_log = logging.getLogger("ra_assets.progress")  # the same lines for a non-Dagster console (the demo's)


def log_progress(context: dg.AssetExecutionContext, what: str, every: int = 500, seconds: float = PROGRESS_EVERY_S,
                 min_gap_s: float = 2.0):  # fmt: skip
    """A progress callback that logs "what: done/total (rate/s, about N s left)" every `seconds`, after `every`
    items (but not within `min_gap_s` of the last line: a fast step says little), and at the end."""
    state = {"last": 0, "t": time.monotonic(), "start": time.monotonic()}

    def progress(done: int, total: int | None = None) -> None:
        now = time.monotonic()
        due = done - state["last"] >= every and now - state["t"] >= min_gap_s
        if due or now - state["t"] >= seconds or (total and done >= total):
            state["last"], state["t"] = done, now
            rate = done / max(now - state["start"], 1e-9)
            eta = f", about {(total - done) / rate:.0f} s left" if total and rate > 0 and done < total else ""
            line = f"{what}: {done}" + (f"/{total}" if total else "") + f" ({rate:.1f}/s{eta})"
            context.log.info(line)
            progress_log.info(line)

    return progress


def log_stages(context: dg.AssetExecutionContext, what: str):
    """A stage callback `(step, steps, name)` for work without item counts (clustering): one line per stage."""
    started = time.monotonic()

    def stage(step: int, steps: int, name: str) -> None:
        line = f"{what}: step {step}/{steps}: {name} ({time.monotonic() - started:.0f} s so far)"
        context.log.info(line)
        progress_log.info(line)

    return stage


@dg.asset(
    partitions_def=search_query_partitions,
    group_name="ingest",
    kinds={"python", "sqlite"},
    code_version="1",
    pool="ncbi",
    check_specs=[
        dg.AssetCheckSpec(
            "search_complete",
            asset="pubmed_search",
            blocking=True,
            description="The search fetched every record PubMed counted (not cut short, not answered offline "
            "because the API was down); judged from the run's own outcome, so it runs with the search.",
        )
    ],
)
def pubmed_search(
    context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource
) -> dg.MaterializeResult:
    """One PubMed search (E-utilities esearch with the history server, efetch in batches of 200) stored in SQLite.

    Partition key = short hash of the query; the query text is in the metadata. After
    5 consecutive API errors the search answers offline from the local corpus (FTS5). A search that
    got no answer fails the run; one cut short (or answered offline because the API is down)
    materialises with a failing `search_complete` check. Both are recorded in search_run.status.
    """
    from ra_agent.ingest import search_and_ingest

    cfg = ra.get_config()
    with store.get_client() as db:
        wanted = registered_queries(db).get(context.partition_key)
        if wanted is None:
            raise dg.Failure(f"search partition {context.partition_key!r} has no registered query (ra ingest --query)")
        result = search_and_ingest(
            cfg, db, wanted["query"], since=wanted["since"], retmax=wanted["retmax"],
            progress=log_progress(context, "efetch records"),
        )  # fmt: skip
    if result.status == "failed":
        raise dg.Failure(f"search {wanted['query']!r} failed: {result.error}",
                         metadata={"query": wanted["query"], "error": result.error})  # fmt: skip
    if result.offline_reason == "api":
        context.log.warning("E-utilities unreachable: answered offline from the local corpus (FTS5)")
    elif result.offline:
        context.log.info("offline mode ([ingest] offline = true): answered from the local corpus (FTS5)")
    return dg.MaterializeResult(
        metadata={
            "query": wanted["query"],
            **scalars(result, skip=("query", "sample_titles")),
            "sample_titles": md_bullets(result.sample_titles[:5]),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name="search_complete",
                passed=not result.incomplete,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={
                    "status": result.status,
                    "count": result.count,
                    "fetched": result.fetched,
                    "error": result.error,
                },
            )  # fmt: skip
        ],
    )


@dg.asset(
    partitions_def=baseline_week_partitions,
    group_name="ingest",
    kinds={"python", "sqlite"},
    code_version="1",
)
def baseline_snapshot(
    context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource
) -> dg.MaterializeResult:
    """Weekly PubMed baseline/update files (`<data_dir>/baseline/*.xml.gz`) loaded into SQLite, plus a frozen
    copy of the active embedding index under `artifacts/<week>/` (docs/operations.md, Offline and baseline mode).

    This is the offline mirror the agent falls back to when the APIs fail 5 times in a row.
    """
    from ra_agent.ingest import weekly_snapshot

    cfg = ra.get_config()
    with store.get_client() as db:
        result = weekly_snapshot(cfg, db, context.partition_key, progress=log_progress(context, "baseline records"))
    return dg.MaterializeResult(metadata=scalars(result))


@dg.asset(
    deps=[pubmed_search, baseline_snapshot],
    group_name="ingest",
    kinds={"python", "sqlite"},
    code_version="1",
)
def papers(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource) -> dg.MaterializeResult:
    """The local corpus: every search, baseline file and imported search export (the bundled demo
    corpus, CSV/RIS/MEDLINE files dropped in `<data_dir>/imports/`) in the `paper` table."""
    cfg = ra.get_config()
    with store.get_client() as db:
        started = time.monotonic()
        imported = import_pending(cfg, db, progress=log_progress(context, "imported records"))
        timing = rate(imported.inserted + imported.updated + imported.unchanged, time.monotonic() - started,
                      "imported_records")  # fmt: skip
        summary = corpus_summary(db)
        kinds = publication_kinds(db)
        pmid_only = db.conn.execute("SELECT COUNT(*) FROM paper WHERE trim(title) = '' AND trim(abstract) = ''")
        pmid_only = pmid_only.fetchone()[0]
    for problem in imported.problems[:20]:
        context.log.warning(problem)
    for rejected in imported.rejected:
        context.log.error(f"import rejected (file skipped): {rejected}")
    return dg.MaterializeResult(
        metadata={
            "papers": summary["paper"],
            "with_abstract": summary["paper_with_abstract"],
            "pmid_only": pmid_only,
            "ingest_batches": summary["ingest_batch"],
            "years": f"{summary['year_min']}–{summary['year_max']}",
            "imported_files": ", ".join(imported.files) or "none new",
            "import_inserted": imported.inserted,
            **timing,
            "import_problems": len(imported.problems),
            "import_rejected": dg.MetadataValue.md("\n".join(f"- {r}" for r in imported.rejected) or "none"),
            "sample_titles": md_bullets(summary["sample_titles"]),
            "article_types": count_table(kinds["article_type"], "article_type"),
            "publication_kinds_by_rule": count_table(kinds["kind"], "kind"),
        }
    )


def count_table(counts: dict[str, int], label: str) -> dg.MetadataValue:
    """Every (label, papers) count as a table, largest first."""
    schema = dg.TableSchema(columns=[dg.TableColumn(label, "string"), dg.TableColumn("papers", "int")])
    rows = [dg.TableRecord({label: key, "papers": n}) for key, n in counts.items()]
    return dg.MetadataValue.table(rows, schema=schema)


@dg.asset(
    deps=[papers],
    group_name="ingest",
    kinds={"python", "sqlite"},
    code_version="1",
    pool="ncbi",
)
def references(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource) -> dg.MaterializeResult:
    """The citation graph: PubMed reference lists plus Crossref `/works/{doi}` references mapped DOI→PMID
    (unmapped DOIs kept as dst=0), provenance OR-merged per edge."""
    from ra_agent.ingest import harvest_references

    cfg = ra.get_config()
    with store.get_client() as db:
        result = harvest_references(cfg, db, db.all_pmids(), progress=log_progress(context, "papers checked"))
        counts = db.counts()
    if cfg.ingest.offline:
        context.log.info("offline mode ([ingest] offline = true): no Crossref or E-utilities call this run")
    elif getattr(result, "crossref_offline", False):
        context.log.warning("crossref_offline: Crossref unreachable, references skipped this run")
    return dg.MaterializeResult(
        metadata={**scalars(result), "ref_edges": counts["ref"], "ref_unmapped_dois": counts["ref_unmapped"]}
    )
