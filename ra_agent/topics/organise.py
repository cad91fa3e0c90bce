"""Organise stage (docs/architecture.md): features from the active index, form or admit, metrics and the map."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ra_agent.config import Config
from ra_agent.store.db import Store

log = logging.getLogger(__name__)


def load_features(cfg: Config, store: Store, pmids=None):
    """Clustering features of `pmids` (default: every embedded paper) from the active vector index.

    E always; the PICO families p i c o m when they exist, so [embedding]/[clustering] features
    "auto" switches to `[I‖C‖O‖design]` once every paper has PICO vectors.
    """
    import numpy as np

    from ra_agent.store.vectors import embeddable_pmids, open_active
    from ra_agent.topics.features import Features

    vectors = open_active(cfg)
    ids = np.asarray(vectors.pmids if pmids is None else pmids, dtype=np.int64)
    ids = ids[vectors.has(ids)]
    ids = ids[np.isin(ids, np.asarray(embeddable_pmids(store), dtype=np.int64))]  # PMID-only rows: no topic
    families = {f: vectors.get(ids, f) for f in vectors.families}
    return Features.build(ids, families, mode=cfg.clustering.features)


@dataclass
class OrganiseResult:
    formed: int = 0  # clusters frozen by this run (first formation)
    assigned: int = 0  # papers admitted to an existing frozen cluster
    unassigned: int = 0
    noise_share: float = 0.0  # unassigned pool / papers clustered (active members + pool), after the intake
    formation_noise_share: float | None = None  # HDBSCAN noise before the tau_assign intake (first formation only)
    reduction: str = ""  # what HDBSCAN ran on at the first formation, e.g. "umap 5"
    active_clusters: int = 0
    feature_space: str = ""
    audit_by: str = ""
    table: str = ""
    map_png: str = ""


def organise(
    cfg: Config, store: Store, *, auditor=None, goal_id: str | None = None, metrics: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> OrganiseResult:  # fmt: skip
    """Intake: form and freeze clusters the first time; afterwards admit new papers to the
    frozen centroids (never moving them) and refresh every active cluster's metrics and the map.

    `metrics=False` leaves the refresh to `refresh_metrics` (the Dagster `clusters` asset, whose
    downstream `cluster_metrics` asset does it). `progress(step, steps, what)` is told before each stage."""
    from ra_agent.topics.lifecycle import assign_papers, cluster_corpus
    from ra_agent.topics.members import noise_share
    from ra_agent.topics.metrics import compute_metrics, manifest_table, markdown_table

    steps = 3 if metrics else 2
    say = progress or (lambda _step, _steps, _what: None)
    say(0, steps, "reading the vectors")
    features = load_features(cfg, store)
    out = OrganiseResult(feature_space=features.space)
    if len(features) == 0:
        log.warning("organise: no embedded papers yet")
        return out
    active = store.conn.execute("SELECT COUNT(*) FROM cluster_manifest WHERE status='active'").fetchone()[0]
    say(1, steps, f"forming clusters of {len(features)} papers (reduction, HDBSCAN, audit)" if active == 0 else
        f"assigning {len(features)} papers to the frozen clusters")  # fmt: skip
    if active == 0:
        from ra_agent.topics.audit import auditor_for

        auditor = auditor or auditor_for(cfg)
        result = cluster_corpus(store, features, cfg, auditor, goal_id=goal_id)
        out.formed = len(result.cluster_ids)
        out.formation_noise_share = round(result.formation.noise_share, 4)
        out.reduction = result.formation.reduction
        out.audit_by = getattr(auditor, "name", "") or "rules:distinctive-terms"
    else:
        assignment = assign_papers(store, features, cfg)
        out.assigned, out.unassigned = len(assignment.assigned), len(assignment.unassigned)
        if metrics:
            compute_metrics(store, features, cfg)
    out.active_clusters = store.conn.execute("SELECT COUNT(*) FROM cluster_manifest WHERE status='active'").fetchone()[
        0
    ]
    out.unassigned, clustered = noise_share(store)
    out.noise_share = round(out.unassigned / clustered, 4) if clustered else 0.0
    if metrics:
        say(2, steps, "cluster metrics and the map")
        rows, out.map_png = cluster_report(cfg, store, features)
    else:
        rows = manifest_table(store)
    say(steps, steps, "done")
    out.table = markdown_table(rows)
    return out


def refresh_metrics(cfg: Config, store: Store) -> tuple[list[dict], str]:
    """Recompute every active cluster's metrics: (manifest rows, cluster map PNG path or "")."""
    from ra_agent.topics.metrics import compute_metrics, manifest_table

    features = load_features(cfg, store)
    if not len(features):
        return manifest_table(store), ""
    compute_metrics(store, features, cfg)
    return cluster_report(cfg, store, features)


def cluster_report(cfg: Config, store: Store, features) -> tuple[list[dict], str]:
    """The manifest rows and a 2-D map PNG of the active clusters (path under data_dir/plots)."""
    import numpy as np

    from ra_agent.topics.map import UNASSIGNED, cluster_map_png
    from ra_agent.topics.metrics import manifest_table
    from ra_agent.workspace import Workspace

    rows = manifest_table(store)
    label_of = {
        r[0]: r[1]
        for r in store.conn.execute(
            "SELECT m.pmid, c.label FROM cluster_member m JOIN cluster_manifest c USING (cluster_id) "
            "WHERE c.status='active'"
        )
    }
    labels = np.array([label_of.get(int(p), UNASSIGNED) for p in features.pmids])
    path = Workspace.of(cfg).plots_dir / "cluster_map.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    ccfg = cfg.clustering
    title = f"{len(rows)} clusters, {len(features)} papers ({int((labels == UNASSIGNED).sum())} unassigned)"
    cluster_map_png(features.matrix, labels, path, title=title, noise_label=UNASSIGNED,
                    projection=ccfg.map_projection, seed=ccfg.reduce_seed)  # fmt: skip
    return rows, str(path)
