"""Corpus checks, each runnable on its own from the UI: titles present, deleted citations absent, references' sources."""

import dagster as dg

from ra_assets.defs.ingest.assets import papers, references
from ra_assets.meta import none_found
from ra_assets.resources import StoreResource


@dg.asset_check(asset=papers, blocking=True)
def no_empty_titles(store: StoreResource) -> dg.AssetCheckResult:
    """Every paper with an abstract has a title: an abstract without one means an importer lost a field (error,
    blocks downstream). PMID-only rows (a screening export without text, as in the Cohen CSV) lost nothing: they are
    kept, never embedded, and counted in the check's description and metadata (it passes)."""
    with store.get_client() as db:
        untitled = db.conn.execute(
            "SELECT COUNT(*) FROM paper WHERE trim(title) = '' AND trim(abstract) != ''"
        ).fetchone()[0]
        pmid_only = [
            r[0] for r in db.conn.execute("SELECT pmid FROM paper WHERE trim(title) = '' AND trim(abstract) = ''")
        ]
    said = []
    if untitled:
        said.append(f"{untitled} papers have an abstract but no title (an importer lost the field)")
    if pmid_only:
        said.append(f"{len(pmid_only)} rows carry only a PMID (no title, no abstract, as in the bundled Cohen export): "
                    "nothing lost, kept and never embedded")  # fmt: skip
    return dg.AssetCheckResult(
        passed=untitled == 0,
        description="; ".join(said)
        if untitled
        else "every paper with text has a title" + "".join(f"; {s}" for s in said),
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "abstract_without_title": untitled,
            "pmid_only": len(pmid_only),
            "pmid_only_sample": str(pmid_only[:20]),
        },  # fmt: skip
    )


@dg.asset_check(asset=papers)
def deleted_citations_absent(store: StoreResource) -> dg.AssetCheckResult:
    """No paper PubMed deleted (baseline/update deletion lists, `deleted_citation`) is back in the corpus."""
    sql = "SELECT COUNT(*) FROM paper p JOIN deleted_citation d ON d.pmid = p.pmid"
    return none_found(store, sql, "deleted_but_present")


@dg.asset_check(asset=references, blocking=True)
def ref_src_in_paper(store: StoreResource) -> dg.AssetCheckResult:
    """Every citation edge starts at a paper of the corpus (no orphan `ref.src`)."""
    return none_found(store, "SELECT COUNT(*) FROM ref WHERE src NOT IN (SELECT pmid FROM paper)", "orphan_edges")
