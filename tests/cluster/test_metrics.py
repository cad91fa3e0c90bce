"""Per-cluster metrics (memo 40 §7) on small, hand-checkable inputs built from real demo records."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from ra_agent.store.schema import PROV_PUBMED
from ra_agent.topics.audit import TermAuditor, describe_clusters
from ra_agent.topics.features import HET_FAMILIES, PICO_FEATURE_FAMILIES, Features, decode_centroid, het_numeric
from ra_agent.topics.formation import Formation
from ra_agent.topics.lifecycle import apply_audit
from ra_agent.topics.metrics import citation_velocity, compute_metrics, manifest_table

from .conftest import NOW

NOT_IN_STORE = 1  # a citing PMID the store has no record (and so no year) for


def by_year(demo, year: int, n: int, skip: set[int]) -> list[int]:
    found = [p.pmid for p in demo.papers if p.year == year and p.pmid not in skip][:n]
    assert len(found) == n
    skip.update(found)
    return found


def freeze_one(store, features: Features, members: list[int], cfg) -> str:
    """Freeze `members` as one cluster (every other row of `features` is noise), audited by the rule-based auditor."""
    formation = Formation(features, np.where(np.isin(features.pmids, members), 0, -1))
    decisions = TermAuditor(cfg).audit(describe_clusters(store, formation, cfg, now=NOW))
    (cid,) = apply_audit(store, formation, decisions, cfg, audit_by=TermAuditor.name, now=NOW)
    return cid


def test_ers_and_cvgr(empty_store, demo, cfg):
    """The demo CSV has no reference lists, so the citation edges are laid by hand between real records
    (every citing paper is newer than the one it cites); NOW is the end of 2003."""
    used: set[int] = set()
    m2003, m2001, m2000, m1995 = (by_year(demo, y, n, used) for y, n in ((2003, 2), (2001, 1), (2000, 1), (1995, 4)))
    members = m2003 + m2001 + m2000 + m1995
    (c2001,), c2002, c2003, (c1999,), (other,) = (by_year(demo, y, n, used) for y, n in ((2001, 1), (2002, 2), (2003, 2), (1999, 1), (1996, 1)))  # fmt: skip
    empty_store.add_refs(
        (src, dst, PROV_PUBMED)
        for src, dst in [
            (c2001, m1995[0]),  # 2001: 1
            (c2002[0], m1995[1]),  # 2002: 2
            (c2002[1], m1995[2]),
            (c2003[0], m1995[0]),  # 2003: 4, one of them from a member
            (c2003[0], m1995[3]),
            (c2003[1], m2000[0]),
            (m2003[0], m1995[1]),
            (c1999, m1995[2]),  # before the 3-year window
            (c2003[1], other),  # cites a non-member
            (NOT_IN_STORE, m1995[0]),  # citing year unknown
        ]
    )
    features = demo.features.subset(members + [c2001, *c2002, *c2003, c1999, other])
    cid = freeze_one(empty_store, features, members, cfg)

    (row,) = manifest_table(empty_store)
    assert row["cluster_id"] == cid and row["size"] == 8
    # 18 months at year granularity: 2003 - ceil(18 / 12) = 2001 onwards -> 2 + 1 of 8 papers
    assert row["ers"] == pytest.approx(3 / 8)
    # citations per year 2001..2003 = 1, 2, 4 -> least-squares slope 1.5 per year
    assert row["cvgr"] == pytest.approx(1.5)
    assert row["mean_year"] == pytest.approx((2 * 2003 + 2001 + 2000 + 4 * 1995) / 8)
    assert row["het_numeric"] is None and row["sr_overlap"] is None
    assert citation_velocity(empty_store, members, 2, 2003) == pytest.approx(2.0)  # 2002..2003: 2, 4
    assert citation_velocity(empty_store, members, 1, 2003) == 0.0  # one year has no slope
    assert citation_velocity(empty_store, m2003, 3, 2003) == 0.0  # nobody cites them


def test_metrics_rows_accumulate_and_carry_sr_overlap(empty_store, demo, cfg):
    members = demo.features.pmids[:40].tolist()
    cid = freeze_one(empty_store, demo.features.subset(demo.features.pmids[:60]), members, cfg)
    empty_store.conn.execute("UPDATE cluster_metrics SET sr_overlap = 0.21 WHERE cluster_id = ?", (cid,))
    later = NOW + timedelta(days=1)
    (metrics,) = compute_metrics(empty_store, demo.features, cfg, now=later).values()
    assert metrics.sr_overlap == 0.21
    rows = empty_store.conn.execute(
        "SELECT computed_ts, sr_overlap FROM cluster_metrics ORDER BY computed_ts"
    ).fetchall()
    assert [tuple(r) for r in rows] == [(int(NOW.timestamp()), 0.21), (int(later.timestamp()), 0.21)]


def brute_force_het(families: dict[str, np.ndarray]) -> float:
    values = []
    for rows in families.values():
        rows = rows[np.any(rows != 0, axis=1)]
        sims = rows @ rows.T
        n = len(rows)
        values.append(1 - (sims.sum() - np.trace(sims)) / (n * (n - 1)))
    return float(np.mean(values))


def test_het_numeric_with_pico_families(empty_store, demo, cfg):
    n, members = 60, 45
    e = demo.features.matrix
    # stand-in P/I/C/O vectors: real MiniLM rows of other papers; some comparators missing (zero rows)
    families = {f: e[(k + 1) * n : (k + 2) * n].copy() for k, f in enumerate(HET_FAMILIES)}
    families["c"][::3] = 0
    features = Features.build(demo.features.pmids[:n], {"E": e[:n], **families}, "abstract")
    assert features.space == "E"
    freeze_one(empty_store, features, features.pmids[:members].tolist(), cfg)
    expected = brute_force_het({f: v[:members] for f, v in families.items()})
    assert manifest_table(empty_store)[0]["het_numeric"] == pytest.approx(expected, abs=1e-6)
    assert het_numeric({}) is None
    assert het_numeric({"p": e[:1]}) is None  # one paper has no pairs


def test_pico_centroid_is_stored_beside_the_e_centroid_once_pico_vectors_exist(empty_store, demo, cfg):
    n, members = 60, 45
    e = demo.features.matrix
    pmids = demo.features.pmids[:n]
    cid = freeze_one(empty_store, Features.build(pmids, {"E": e[:n]}, "abstract"), pmids[:members].tolist(), cfg)
    row = "SELECT frozen_centroid, centroid_dim, pico_centroid, pico_dim FROM cluster_manifest WHERE cluster_id=?"
    before = empty_store.conn.execute(row, (cid,)).fetchone()
    assert before["pico_centroid"] is None and before["centroid_dim"] == 384  # E only: no PICO vectors yet

    # run_pico later gives the members I/C/O/design vectors (stand-ins: real MiniLM rows of other papers)
    families = {f: e[(k + 1) * n : (k + 2) * n].copy() for k, f in enumerate(PICO_FEATURE_FAMILIES)}
    for f in families.values():
        f[:5] = 0  # five members without any PICO vector
    features = Features.build(pmids, {"E": e[:n], **families}, "abstract")
    compute_metrics(empty_store, features, cfg, now=NOW)
    after = empty_store.conn.execute(row, (cid,)).fetchone()
    blocks = [families[f][5:members] / np.linalg.norm(families[f][5:members], axis=1, keepdims=True)
              for f in PICO_FEATURE_FAMILIES]  # fmt: skip
    expected = np.hstack(blocks).mean(axis=0)
    expected /= np.linalg.norm(expected)
    assert after["pico_dim"] == 4 * 384 and after["frozen_centroid"] == before["frozen_centroid"]
    assert np.allclose(decode_centroid(after["pico_centroid"], after["pico_dim"]), expected, atol=2e-3)  # fp16

    families["i"][5:10] = e[:5]  # the PICO centroid is frozen: later refreshes leave it alone
    compute_metrics(empty_store, Features.build(pmids, {"E": e[:n], **families}, "abstract"), cfg, now=NOW)
    assert empty_store.conn.execute(row, (cid,)).fetchone()["pico_centroid"] == after["pico_centroid"]
