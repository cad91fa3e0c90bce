"""Per-cluster metrics (docs/handbooks.md lists them), the unstable trigger and the manifest table."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ra_agent.config import ClusteringConfig, Config
from ra_agent.store.db import Store
from ra_agent.topics.features import (
    Features,
    Pmids,
    centroid,
    decode_centroid,
    dispersion,
    encode_centroid,
    het_numeric,
)
from ra_agent.topics.members import ACTIVE, check_feature_space, cluster_members, cluster_row, pmid_list, sql_chunks

log = logging.getLogger(__name__)

MANIFEST_COLUMNS = ("cluster_id", "label", "size", "mean_year", "ers", "cvgr", "het_numeric", "dispersion", "unstable")


# ----------------------------------------------------------------------------- audit


@dataclass(frozen=True)
class ClusterMetrics:
    """The metrics of one cluster (sr_overlap stays None until find_existing_sr computes it)."""

    size: int
    cvgr: float
    ers: float
    het_numeric: float | None
    dispersion: float
    mean_year: float | None
    sr_overlap: float | None = None


# ----------------------------------------------------------------------------- metrics


def _member_years(store: Store, pmids: Pmids) -> list[int]:
    years: list[int] = []
    for chunk in sql_chunks(pmid_list(pmids)):
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT year FROM paper WHERE pmid IN ({marks}) AND year IS NOT NULL"
        years.extend(r[0] for r in store.conn.execute(sql, chunk))
    return years


def citation_velocity(store: Store, pmids: Pmids, years: int, year_now: int) -> float:
    """CVGR: least-squares slope of citations received per year over the `years` years ending at year_now.

    A citation is a `ref` edge whose dst is a member, counted in the citing paper's year (edges from
    papers without a stored year are ignored; each edge counts once). 0.0 without edges in the window
    or with a one-year window (no slope).
    """
    first = year_now - years + 1
    counts = dict.fromkeys(range(first, year_now + 1), 0)
    for chunk in sql_chunks(pmid_list(pmids)):
        marks = ",".join("?" * len(chunk))
        sql = (
            f"SELECT p.year, COUNT(*) FROM ref r JOIN paper p ON p.pmid = r.src "
            f"WHERE r.dst IN ({marks}) AND p.year BETWEEN ? AND ? GROUP BY p.year"
        )
        for year, n in store.conn.execute(sql, (*chunk, first, year_now)):
            counts[year] += n
    if years < 2 or not any(counts.values()):
        return 0.0
    x = np.array(list(counts), dtype=np.float64)
    y = np.array(list(counts.values()), dtype=np.float64)
    x -= x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def measure_cluster(
    store: Store,
    pmids: Pmids,
    x: np.ndarray,
    c: np.ndarray,
    cfg: Config,
    *,
    het: Mapping[str, np.ndarray] | None = None,
    now: datetime | None = None,
) -> ClusterMetrics:
    """Metrics of members `pmids` with vectors `x` around centroid `c`.

    ERS uses PubMed's year granularity: a paper is recent when its year >= now.year -
    ceil(ers_window_months / 12) (18 months -> this year and the two before); papers without a
    year count in the size but never as recent. mean_year ignores unknown years.
    """
    ccfg = cfg.clustering
    year_now = (now or datetime.now(UTC)).year
    years = _member_years(store, pmids)
    recent_from = year_now - math.ceil(ccfg.ers_window_months / 12)
    return ClusterMetrics(
        size=len(pmids),
        cvgr=citation_velocity(store, pmids, ccfg.cvgr_years, year_now),
        ers=sum(y >= recent_from for y in years) / len(pmids) if len(pmids) else 0.0,
        het_numeric=het_numeric(het) if het else None,
        dispersion=dispersion(x, c),
        mean_year=float(np.mean(years)) if years else None,
    )


def split_threshold(features: Features, ccfg: ClusteringConfig) -> float:
    """The dispersion at which a cluster is unstable, on the embedding model's own scale.

    dispersion_split_ratio x the corpus dispersion (all `features` rows around their own centroid, the
    spread of the whole search in this space): a cluster nearly as spread as the search is not one topic.
    The absolute 0.70 was set for Qwen vectors and never fires with MiniLM, whose cluster dispersions
    are 0.1-0.35 (docs/architecture.md). dispersion_split_ratio = 0 uses the absolute dispersion_split.
    """
    if ccfg.dispersion_split_ratio <= 0 or len(features) < 2:
        return ccfg.dispersion_split
    return ccfg.dispersion_split_ratio * dispersion(features.matrix, centroid(features.matrix))


def is_unstable(metrics: ClusterMetrics, ccfg: ClusteringConfig, threshold: float | None = None) -> bool:
    """Unstable: dispersion >= threshold (default dispersion_split) and size >= unstable_min_size."""
    limit = ccfg.dispersion_split if threshold is None else threshold
    return metrics.dispersion >= limit and metrics.size >= ccfg.unstable_min_size


def compute_metrics(
    store: Store,
    features: Features,
    cfg: Config,
    cluster_ids: Sequence[str] | None = None,
    *,
    now: datetime | None = None,
) -> dict[str, ClusterMetrics]:
    """Measure clusters (default: all active), append a cluster_metrics row each, refresh the unstable flag.

    Dispersion is against the frozen centroid; the unstable threshold is `split_threshold` of `features`.
    sr_overlap, eligible_trials and prisma_compliant are carried forward from the cluster's previous row
    (their own tools compute them). The PICO centroid is stored the first time the members have PICO vectors.
    """
    if cluster_ids is None:
        cluster_ids = [
            r[0] for r in store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status=?", (ACTIVE,))
        ]
    now = now or datetime.now(UTC)
    computed_ts = int(now.timestamp())
    results: dict[str, ClusterMetrics] = {}
    carried: dict[str, tuple] = {}
    pico: dict[str, np.ndarray | None] = {}
    for cid in cluster_ids:
        row = cluster_row(store, cid, active=False)
        check_feature_space(row, features)
        pmids = cluster_members(store, cid)
        rows = features.rows(pmids)
        c = decode_centroid(row["frozen_centroid"], row["centroid_dim"])
        metrics = measure_cluster(store, pmids, features.matrix[rows], c, cfg, het=features.het_families(rows), now=now)
        previous = store.conn.execute(
            "SELECT sr_overlap, eligible_trials, prisma_compliant FROM cluster_metrics WHERE cluster_id=? "
            "ORDER BY computed_ts DESC LIMIT 1",
            (cid,),
        ).fetchone()
        carried[cid] = tuple(previous) if previous else (None, None, None)
        results[cid] = dataclasses.replace(metrics, sr_overlap=carried[cid][0])
        pico[cid] = pico_centroid(features, rows)
    threshold = split_threshold(features, cfg.clustering)
    with store.transaction():
        for cid, m in results.items():
            store.conn.execute(
                "INSERT OR REPLACE INTO cluster_metrics(cluster_id, computed_ts, size, cvgr, ers, het_numeric, "
                "dispersion, sr_overlap, eligible_trials, prisma_compliant, mean_year) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (cid, computed_ts, m.size, m.cvgr, m.ers, m.het_numeric, m.dispersion, *carried[cid], m.mean_year),
            )
            store.conn.execute(
                "UPDATE cluster_manifest SET unstable=? WHERE cluster_id=?",
                (int(is_unstable(m, cfg.clustering, threshold)), cid),
            )
            c = pico[cid]
            if c is not None:
                store.conn.execute(
                    "UPDATE cluster_manifest SET pico_centroid=?, pico_dim=? WHERE cluster_id=? AND pico_centroid IS NULL",
                    (encode_centroid(c), c.size, cid),
                )
    return results


def pico_centroid(features: Features, rows: np.ndarray) -> np.ndarray | None:
    """centroid_PICO: normalised mean [I ‖ C ‖ O ‖ design] of the member `rows` that have PICO vectors.

    None without PICO families or with fewer than two such members; stored once (it is frozen like the
    E centroid) by `compute_metrics`, so it appears at the first refresh after run_pico.
    """
    x = features.pico_rows(rows)
    if x is None:
        return None
    x = x[np.any(x != 0, axis=1)]
    return centroid(x) if len(x) >= 2 else None


# ----------------------------------------------------------------------------- reporting


def manifest_table(store: Store, *, include_inactive: bool = False) -> list[dict[str, Any]]:
    """One dict per cluster (active only unless asked): manifest fields, member count and latest metrics."""
    rows = store.conn.execute(
        "SELECT c.cluster_id, c.label, c.summary, c.status, c.parent_id, c.merged_into, c.tau_assign, c.unstable, "
        "c.audit_by, c.feature_space, c.created_ts, "
        "(SELECT COUNT(*) FROM cluster_member m WHERE m.cluster_id = c.cluster_id) AS size, "
        "mt.cvgr, mt.ers, mt.het_numeric, mt.dispersion, mt.sr_overlap, mt.eligible_trials, mt.prisma_compliant, "
        "mt.mean_year, mt.computed_ts FROM cluster_manifest c "
        "LEFT JOIN cluster_metrics mt ON mt.cluster_id = c.cluster_id AND mt.computed_ts = "
        "(SELECT MAX(computed_ts) FROM cluster_metrics WHERE cluster_id = c.cluster_id) "
        "WHERE ? = 1 OR c.status = ? ORDER BY size DESC, c.cluster_id",
        (int(include_inactive), ACTIVE),
    )
    return [dict(r) for r in rows]


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = MANIFEST_COLUMNS, *, limit: int | None = None
) -> str:
    """A Markdown table of `rows` (e.g. manifest_table output) for previews; `limit` caps the rows shown."""
    shown = rows[:limit] if limit is not None else rows
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in shown]
    if len(shown) < len(rows):
        lines.append(f"\n{len(rows) - len(shown)} more rows not shown")
    return "\n".join(lines)
