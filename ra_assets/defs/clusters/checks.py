"""Cluster checks, each runnable on its own from the UI: members are papers, tau_assign in range."""

import dagster as dg

from ra_assets.defs.clusters.assets import clusters
from ra_assets.meta import none_found
from ra_assets.resources import StoreResource


@dg.asset_check(asset=clusters, blocking=True)
def members_exist_in_paper(store: StoreResource) -> dg.AssetCheckResult:
    """Every cluster member is a paper of the corpus (no orphan `cluster_member.pmid`)."""
    return none_found(
        store, "SELECT COUNT(*) FROM cluster_member WHERE pmid NOT IN (SELECT pmid FROM paper)", "orphans"
    )


@dg.asset_check(asset=clusters)
def tau_assign_in_range(store: StoreResource) -> dg.AssetCheckResult:
    """Every active cluster's tau_assign (P95 cosine distance of its members to the frozen centroid) is in (0, 2]."""
    return none_found(
        store,
        "SELECT COUNT(*) FROM cluster_manifest WHERE status='active' AND NOT (tau_assign > 0 AND tau_assign <= 2)",
        "bad",
    )
