"""Organise stage (docs/architecture.md): features from the active index, form or admit, metrics and the map."""

from __future__ import annotations

import logging
import threading
import time
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
    reduce_seed: int | None = None  # UMAP's random_state at the first formation ([clustering] reduce_seed)
    active_clusters: int = 0
    feature_space: str = ""
    audit_by: str = ""
    table: str = ""
    map_png: str = ""


HEARTBEAT_S = 15.0  # a stage still running is told again this often


class Stages:
    """Tells `progress(step, steps, what)` each stage as it starts (steps 0, 1, ...), again every `every` seconds while
    it runs ("<what>: still running (N s in this stage)"), and `progress(steps, steps, "done")` at the end."""

    def __init__(self, progress: Callable[[int, int, str], None] | None, steps: int, every: float = HEARTBEAT_S):
        self.progress, self.steps, self.every = progress, steps, every
        self.step, self.what, self.started = -1, "", time.monotonic()
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.ticker = threading.Thread(target=self._tick, name="ra-stages", daemon=True)

    def __enter__(self) -> Stages:
        if self.progress is not None:
            self.ticker.start()
        return self

    def __call__(self, what: str) -> None:
        with self.lock:
            self.step, self.what, self.started = min(self.step + 1, self.steps - 1), what, time.monotonic()
            self._say(what)

    def _say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(self.step, self.steps, what)

    def _tick(self) -> None:
        while not self.stop.wait(self.every):
            with self.lock:
                if self.step >= 0:
                    self._say(f"{self.what}: still running ({time.monotonic() - self.started:.0f} s in this stage)")

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.ticker.is_alive():
            self.ticker.join()
        if exc[0] is None and self.progress is not None:
            self.progress(self.steps, self.steps, "done")


def organise(
    cfg: Config, store: Store, *, auditor=None, metrics: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> OrganiseResult:  # fmt: skip
    """Intake: form and freeze clusters the first time; afterwards admit new papers to the
    frozen centroids (never moving them) and refresh every active cluster's metrics and the map.

    `metrics=False` leaves the refresh to `refresh_metrics` (the Dagster `clusters` asset, whose
    downstream `cluster_metrics` asset does it). `progress(step, steps, what)` is told before each stage, and again
    every `HEARTBEAT_S` while a stage runs (UMAP alone takes a minute on two busy cores)."""
    from ra_agent.topics.lifecycle import FORMATION_STAGES, assign_papers
    from ra_agent.topics.members import noise_share
    from ra_agent.topics.metrics import compute_metrics, manifest_table, markdown_table

    active = store.conn.execute("SELECT COUNT(*) FROM cluster_manifest WHERE status='active'").fetchone()[0]
    steps = 1 + (FORMATION_STAGES if active == 0 else 1) + int(metrics)
    with Stages(progress, steps) as say:
        say("reading the vectors")
        features = load_features(cfg, store)
        out = OrganiseResult(feature_space=features.space)
        if len(features) == 0:
            log.warning("organise: no embedded papers yet")
            return out
        if active == 0:
            out = _form(cfg, store, features, out, auditor, say)
        else:
            say(f"assigning {len(features)} papers to the {active} frozen clusters")
            assignment = assign_papers(store, features, cfg)
            out.assigned, out.unassigned = len(assignment.assigned), len(assignment.unassigned)
            if metrics:
                compute_metrics(store, features, cfg)
        out.active_clusters = store.conn.execute(
            "SELECT COUNT(*) FROM cluster_manifest WHERE status='active'"
        ).fetchone()[0]
        out.unassigned, clustered = noise_share(store)
        out.noise_share = round(out.unassigned / clustered, 4) if clustered else 0.0
        if metrics:
            say("cluster metrics and the map")
            rows, out.map_png = cluster_report(cfg, store, features)
        else:
            rows = manifest_table(store)
    out.table = markdown_table(rows)
    return out


def _form(cfg: Config, store: Store, features, out: OrganiseResult, auditor,
          say: Callable[[str], None]) -> OrganiseResult:  # fmt: skip
    """The first formation (`cluster_corpus`), its stages told to `say`."""
    from ra_agent.topics.audit import auditor_for
    from ra_agent.topics.lifecycle import cluster_corpus

    auditor = auditor or auditor_for(cfg)
    result = cluster_corpus(store, features, cfg, auditor, stage=say)
    out.formed = len(result.cluster_ids)
    out.formation_noise_share = round(result.formation.noise_share, 4)
    out.reduction = result.formation.reduction
    out.audit_by = getattr(auditor, "name", "") or "rules:distinctive-terms"
    out.reduce_seed = cfg.clustering.reduce_seed
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
