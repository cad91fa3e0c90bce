"""Cluster assets: frozen topic clusters (manifest, members, centroids) and their per-cluster metrics."""

import base64
import time
from pathlib import Path

import dagster as dg

from ra_agent.topics import organise, refresh_metrics
from ra_assets.defs.embeddings.assets import embedding_index
from ra_assets.defs.ingest.assets import log_stages
from ra_assets.meta import content_version, rate, scalars
from ra_assets.resources import RaConfigResource, StoreResource


def png_markdown(path: str, alt: str) -> dg.MetadataValue:
    """Inline a PNG in Markdown metadata so the UI shows the picture."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{data})")


@dg.asset(
    deps=[embedding_index],
    group_name="clusters",
    kinds={"python", "sqlite"},
    code_version="1",
)
def clusters(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource) -> dg.MaterializeResult:
    """Topic clusters (docs/architecture.md): HDBSCAN over the active vectors, audited and labelled, frozen centroids,
    tau_assign = P95 of inner distances. Later runs admit new papers to the frozen centroids
    (or the unassigned pool) and never move a centroid."""
    cfg = ra.get_config()
    with store.get_client() as db:
        started = time.monotonic()
        result = organise(cfg, db, metrics=False, progress=log_stages(context, "clusters"))  # cluster_metrics refreshes
        seconds = time.monotonic() - started
        rows = db.conn.execute("SELECT cluster_id, pmid FROM cluster_member ORDER BY cluster_id, pmid").fetchall()
        version = content_version(f"{cid}:{pmid}" for cid, pmid in rows)  # the memberships
    return dg.MaterializeResult(
        metadata={
            **scalars(result, skip=("table", "map_png")),
            # papers in a cluster or in the unassigned pool after this run
            **rate(len(rows) + result.unassigned, seconds, "papers"),
            "manifest": dg.MetadataValue.md(result.table or "_no clusters_"),
        },
        data_version=version,  # unchanged memberships leave the findings downstream fresh
    )


METRIC_COLUMNS = (
    ("cluster_id", "string"), ("label", "string"), ("size", "int"), ("mean_year", "float"), ("ers", "float"),
    ("cvgr", "float"), ("het_numeric", "float"), ("dispersion", "float"), ("unstable", "int"),
    ("eligible_trials", "int"), ("sr_overlap", "float"), ("prisma_compliant", "string"),
)  # fmt: skip


def metrics_table(rows: list[dict]) -> dg.MetadataValue:
    """Every active cluster's metrics as a table (all rows: the UI sorts and scrolls it)."""
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in METRIC_COLUMNS])

    def cell(name: str, kind: str, value):
        if value is None:
            return None
        if kind == "float":
            return round(float(value), 3)
        return str(value) if kind == "string" else int(value)

    records = [dg.TableRecord({name: cell(name, kind, row.get(name)) for name, kind in METRIC_COLUMNS}) for row in rows]
    return dg.MetadataValue.table(records, schema=schema)


@dg.asset(deps=[clusters], group_name="clusters", kinds={"python", "sqlite"}, code_version="1")
def cluster_metrics(
    context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource
) -> dg.MaterializeResult:
    """Per-cluster metrics (size, CVGR, ERS, het_numeric, dispersion, sr_overlap, eligible trials) as a
    Markdown table and a 2-D map of the clusters."""
    cfg = ra.get_config()
    with store.get_client() as db:
        rows, map_png = refresh_metrics(cfg, db)
    unstable = sum(1 for r in rows if r.get("unstable"))
    metadata = {"clusters": len(rows), "unstable": unstable, "metrics": metrics_table(rows)}
    if map_png:
        metadata["cluster_map"] = png_markdown(map_png, "2-D map of the clusters")
        metadata["cluster_map_path"] = dg.MetadataValue.path(map_png)
    return dg.MaterializeResult(metadata=metadata)
