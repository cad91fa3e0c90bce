"""Embedding checks, each runnable on its own from the UI: shards behind the configured model, the index's health."""

import dagster as dg
import numpy as np

from ra_agent.embed import shards_behind
from ra_agent.store import configured_slug, missing_vectors, open_active
from ra_assets.defs.embeddings.assets import embedding_index, embedding_shards
from ra_assets.resources import RaConfigResource, StoreResource


@dg.asset_check(asset=embedding_shards)
def shards_on_configured_model(ra: RaConfigResource, store: StoreResource) -> dg.AssetCheckResult:
    """Every embedding shard (ingest batch) has its vectors in the configured model's folder. After a model bump
    (`[embedding] model_version`) it fails and lists the shards behind; materialise the embeddings group (one
    backfill over all shards, then the index switch) to catch up."""
    cfg = ra.get_config()
    with store.get_client() as db:
        behind = shards_behind(cfg, db)
        shards = len(db.batches())
    rows = [dg.TableRecord(row) for row in behind]
    schema = dg.TableSchema(columns=[dg.TableColumn("batch_id", "string"), dg.TableColumn("papers", "int"),
                                     dg.TableColumn("missing", "int")])  # fmt: skip
    return dg.AssetCheckResult(
        passed=not behind,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{len(behind)} of {shards} shards behind {configured_slug(cfg)}" if behind else None,
        metadata={
            "configured_model": configured_slug(cfg),
            "shards": shards,
            "shards_behind": len(behind),
            "papers_missing": sum(b["missing"] for b in behind),
            "behind": dg.MetadataValue.table(rows, schema=schema),
        },
    )


@dg.asset_check(asset=embedding_index, blocking=True)
def offsets_sorted_unique(ra: RaConfigResource) -> dg.AssetCheckResult:
    """The active index's PMIDs (offsets.npy) are strictly increasing: no duplicate row, binary search works."""
    active = open_active(ra.get_config())
    ok = bool(np.all(np.diff(active.pmids) > 0)) if len(active) else True
    return dg.AssetCheckResult(passed=ok, metadata={"rows": len(active), "index": active.slug})


@dg.asset_check(asset=embedding_index, blocking=True)
def vectors_finite_unit_norm(ra: RaConfigResource) -> dg.AssetCheckResult:
    """Every vector of the active index is finite and unit-norm, and its files match meta.json (VectorStore.verify)."""
    active = open_active(ra.get_config())
    problems = [p for p in active.verify() if not p.startswith("offsets")]
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": str(problems)[:1000], "index": active.slug})


@dg.asset_check(asset=embedding_index)
def every_paper_embedded(ra: RaConfigResource, store: StoreResource) -> dg.AssetCheckResult:
    """Every paper with a title or abstract has a vector in the active index (PMID-only rows are not embedded)."""
    cfg = ra.get_config()
    with store.get_client() as db:
        active = open_active(cfg)
        unembedded = missing_vectors(active, db)
    return dg.AssetCheckResult(passed=unembedded == 0, metadata={"papers_without_vector": unembedded,
                                                                  "index": active.slug})  # fmt: skip
