"""Cluster automation: one job that switches the index when complete, then forms or admits clusters and metrics."""

import dagster as dg

from ra_assets.defs.clusters.assets import cluster_metrics, clusters
from ra_assets.defs.embeddings.assets import embedding_index

organise_job = dg.define_asset_job(
    "organise_job",
    selection=dg.AssetSelection.assets(embedding_index, clusters, cluster_metrics),
    description="Switch the active embedding index when the configured model's folder is complete (rebuilding "
    "every vector family), then form clusters (first run) or admit new papers to the frozen ones, and refresh "
    "the per-cluster metrics. The demo runs it before its goal; the agent's organise stage runs the same assets.",
)
