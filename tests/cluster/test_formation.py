"""Formation, features, rule-based audit and reporting on the real demo corpus."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ra_agent.topics.audit import (
    AuditDecision,
    AuditError,
    ClusterBrief,
    TermAuditor,
    describe_clusters,
    distinctive_terms,
    mesh_headings,
    validate_decisions,
)
from ra_agent.topics.features import NOISE, PICO_SPACE, Features, decode_centroid
from ra_agent.topics.formation import form_clusters
from ra_agent.topics.lifecycle import apply_audit, show_noise
from ra_agent.topics.map import cluster_map_png
from ra_agent.topics.members import ACTIVE
from ra_agent.topics.metrics import ClusterMetrics, manifest_table, markdown_table

from .conftest import NOW, ROOT

MEDLINE = ROOT / "tests" / "fixtures" / "medline" / "biopython_pubmed_result2.txt"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def contains(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, flags=re.IGNORECASE) is not None


# ----------------------------------------------------------------------------- formation


def test_formation_finds_clusters_of_min_size_and_noise(clustered, cfg):
    formation = clustered[1].formation
    sizes = formation.sizes()
    assert formation.n_clusters >= 2
    assert min(sizes) >= cfg.clustering.min_cluster_size
    assert sizes == sorted(sizes, reverse=True)
    assert 0 < len(formation.noise) < len(formation.labels)
    assert set(np.unique(formation.labels)) == {NOISE, *range(formation.n_clusters)}
    assert formation.reduced_dims == 0  # 1,289 papers < reduce_above: HDBSCAN ran on all 384 dims


def test_frozen_clusters_and_pool_partition_the_corpus(store, clustered, demo):
    result = clustered[1]
    rows = manifest_table(store)
    assert [r["cluster_id"] for r in rows] == result.cluster_ids
    assert [r["size"] for r in rows] == result.formation.sizes()
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{12}", row["cluster_id"])
        assert row["audit_by"] == TermAuditor.name == "rules:distinctive-terms"
        assert row["feature_space"] == "E" and row["status"] == ACTIVE
    blob, dim = store.conn.execute("SELECT frozen_centroid, centroid_dim FROM cluster_manifest").fetchone()
    assert dim == 384 and len(blob) == 384 * 2  # fp16
    assert np.linalg.norm(np.frombuffer(blob, np.float16).astype(np.float32)) == pytest.approx(1, abs=1e-2)
    members = {r[0] for r in store.conn.execute("SELECT pmid FROM cluster_member")}
    pooled = {r[0] for r in store.conn.execute("SELECT pmid FROM unassigned_pool WHERE reason='noise'")}
    assert members.isdisjoint(pooled)
    assert members | pooled == set(demo.features.pmids.tolist())
    assert len(show_noise(store, 5)) == 5 and all(r["title"] for r in show_noise(store, 5))


def test_reduction_above_threshold(demo, cfg):
    small = cfg.with_overrides(clustering={"reduce_above": 1000})
    formation = form_clusters(demo.features, small)
    assert formation.reduced_dims == cfg.clustering.reduce_dims
    assert formation.n_clusters >= 1 and min(formation.sizes()) >= cfg.clustering.min_cluster_size


def test_too_few_papers_are_all_noise(demo, cfg):
    few = demo.features.subset(demo.features.pmids[: cfg.clustering.min_samples])
    assert (form_clusters(few, cfg).labels == NOISE).all()


# ----------------------------------------------------------------------------- features


def test_abstract_features_are_unit_rows(demo):
    assert demo.features.space == "E"
    assert np.allclose(np.linalg.norm(demo.features.matrix, axis=1), 1, atol=1e-5)


def test_pico_features_concatenate_normalised_families(demo):
    n = 50
    pmids = demo.features.pmids[:n]
    e = demo.features.matrix.copy()  # the session's matrix must not change
    # stand-in family vectors (real MiniLM rows of other papers); m is missing for the first 10 papers
    families = {"E": e[:n], "i": e[n : 2 * n] * 3, "c": e[2 * n : 3 * n], "o": e[3 * n : 4 * n], "m": e[4 * n : 5 * n]}
    families["m"][:10] = 0
    feats = Features.build(pmids, families, "auto")
    assert feats.space == PICO_SPACE == "i|c|o|m" and feats.dim == 4 * 384
    assert np.allclose(np.linalg.norm(feats.matrix, axis=1), 1, atol=1e-5)
    blocks = np.linalg.norm(feats.matrix.reshape(n, 4, 384), axis=2)
    assert np.allclose(blocks[10:], 0.5, atol=1e-5)  # each present family weighs the same
    assert np.allclose(blocks[:10, :3], 1 / np.sqrt(3), atol=1e-5) and np.allclose(blocks[:10, 3], 0)
    assert Features.build(pmids, families, "abstract").space == "E"
    families["i"][:] = families["c"][:] = families["o"][:] = 0
    assert Features.build(pmids, families, "auto").space == "E"  # some papers have no PICO vector at all
    with pytest.raises(ValueError, match="all-zero"):
        Features.build(pmids, families, "pico")
    with pytest.raises(ValueError, match="families"):
        Features.build(pmids, {"E": e[:n]}, "pico")


def test_features_lookup(demo):
    pmids = demo.features.pmids[[5, 2, 9]]
    assert np.array_equal(demo.features.subset(pmids).pmids, pmids)
    assert np.array_equal(demo.features.vectors(pmids), demo.features.matrix[[5, 2, 9]])
    with pytest.raises(KeyError, match="1 PMIDs"):
        demo.features.rows([int(pmids[0]), 1])


# ----------------------------------------------------------------------------- rule-based audit


def test_labels_are_distinctive_terms_of_the_members(store, demo):
    texts = {p.pmid: f"{p.title} {p.abstract}" for p in demo.papers}
    for row in manifest_table(store):
        members = {
            r[0] for r in store.conn.execute("SELECT pmid FROM cluster_member WHERE cluster_id=?", (row["cluster_id"],))
        }
        terms = row["label"].split(" · ")
        assert len(terms) == 4
        for term in terms:
            inside = np.mean([contains(term, texts[p]) for p in members])
            outside = np.mean([contains(term, t) for p, t in texts.items() if p not in members])
            assert inside > 2 * outside, (term, inside, outside)
        assert row["summary"].startswith(f"{row['size']} papers (")
        assert all(t in row["summary"] for t in terms)


def test_briefs_show_central_titles_and_metrics(store, clustered, cfg):
    briefs = describe_clusters(store, clustered[1].formation, cfg, now=NOW)
    assert [b.size for b in briefs] == clustered[1].formation.sizes()
    for brief in briefs:
        assert len(brief.sample_titles) == cfg.clustering.audit_sample_titles
        assert brief.year_min <= brief.metrics.mean_year <= brief.year_max
        assert brief.mesh_terms == ()  # the demo CSV has no MeSH
        assert 0 < brief.metrics.dispersion < 1


def test_mesh_terms_from_real_records():
    """Distinctive MeSH of the two protein-structure records among four real Biopython test records."""
    records, mesh = [], []
    for line in MEDLINE.read_text().splitlines():
        if line.startswith("PMID-"):
            records.append(int(line.split("-", 1)[1]))
            mesh.append([])
        elif line.startswith("MH  -"):
            mesh[-1].append(line.split("-", 1)[1].strip())
    assert records == [16403221, 16377612, 14871861, 14630660]
    assert mesh_headings(["Information Storage and Retrieval/*methods/*standards", "*Software"]) == [
        "Information Storage and Retrieval",
        "Software",
    ]
    (top,) = distinctive_terms(mesh, [0, NOISE, NOISE, 0], 1, 3, mesh=True)
    assert top[0] == "Databases, Protein"  # in both records, in neither of the others
    assert all("*" not in t and "/" not in t for t in top)


def test_term_auditor_interleaves_mesh_and_words(cfg):
    brief = ClusterBrief(
        idx=0, size=40, terms=("protein", "parser", "structure"), mesh_terms=("Databases, Protein", "Software"),
        sample_titles=("PDB file parser and structure class implemented in Python.",), year_min=2003, year_max=2006,
        metrics=ClusterMetrics(size=40, cvgr=0.0, ers=0.0, het_numeric=None, dispersion=0.1, mean_year=2004.5),
    )  # fmt: skip
    (decision,) = TermAuditor(cfg).audit([brief])
    assert decision.action == "keep"
    assert decision.label == "Databases, Protein · Software · parser · structure"  # "protein" is inside a heading
    assert decision.summary == (
        "40 papers (2003–2006) whose most distinctive title/abstract terms are protein, parser and structure; "
        "leading MeSH headings: Databases, Protein, Software."
    )


def test_audit_merge_into_is_applied(empty_store, clustered, cfg):
    formation = clustered[1].formation
    decisions = [AuditDecision(0, "keep", label="a"), AuditDecision(1, "merge_into", target_idx=0)]
    decisions += [AuditDecision(i, "discard") for i in range(2, formation.n_clusters)]
    (cid,) = apply_audit(empty_store, formation, decisions, cfg, audit_by="test", now=NOW)
    union = formation.members([0, 1])
    assert manifest_table(empty_store)[0]["size"] == len(union)
    row = empty_store.conn.execute("SELECT * FROM cluster_manifest WHERE cluster_id=?", (cid,)).fetchone()
    mean = formation.features.vectors(union).mean(axis=0)
    assert decode_centroid(row["frozen_centroid"], 384) @ (mean / np.linalg.norm(mean)) == pytest.approx(1, abs=1e-4)


def test_audit_discard_pools_the_members(empty_store, clustered, cfg):
    formation = clustered[1].formation
    decisions = [AuditDecision(0, "discard")] + [
        AuditDecision(i, "keep", label=f"c{i}") for i in range(1, formation.n_clusters)
    ]
    ids = apply_audit(empty_store, formation, decisions, cfg, audit_by="test", now=NOW)
    assert len(ids) == formation.n_clusters - 1
    pooled = {
        r[0] for r in empty_store.conn.execute("SELECT pmid FROM unassigned_pool WHERE reason='audit_discard:test'")
    }
    assert pooled == set(formation.members(0).tolist())


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        ([AuditDecision(0, "keep", label="a")], r"no decision for idx \[1\]"),
        ([AuditDecision(0, "keep"), AuditDecision(1, "discard")], "keep needs a label"),
        ([AuditDecision(0, "merge_into", target_idx=1), AuditDecision(1, "merge_into", target_idx=0)], "loops"),
        ([AuditDecision(0, "merge_into", target_idx=1), AuditDecision(1, "discard")], "is discarded"),
        ([AuditDecision(0, "merge_into"), AuditDecision(1, "keep", label="b")], "needs a target_idx"),
        ([AuditDecision(0, "split"), AuditDecision(1, "keep", label="b")], "not one of"),
        ([AuditDecision(0, "discard"), AuditDecision(0, "discard")], "more than one"),
    ],
)
def test_invalid_audits_are_rejected(decisions, message):
    with pytest.raises(AuditError, match=message):
        validate_decisions(decisions, 2)


def test_decisions_from_llm_json():
    assert validate_decisions(
        [
            AuditDecision.from_dict({"idx": 0, "action": "keep", "label": "KD vs AED paediatric"}),
            AuditDecision.from_dict({"idx": 1, "action": "merge_into", "target_idx": 2}),
            AuditDecision.from_dict({"idx": 2, "action": "merge_into", "target_idx": 0}),
            AuditDecision.from_dict({"idx": 3, "action": "discard"}),
        ],
        4,
    ) == {0: [0, 1, 2]}


# ----------------------------------------------------------------------------- reporting


def test_markdown_preview(store):
    rows = manifest_table(store)
    text = markdown_table(rows, limit=1)
    lines = text.splitlines()
    assert lines[0].startswith("| cluster_id | label | size |")
    assert rows[0]["label"] in lines[2] and f"| {rows[0]['size']} |" in lines[2]
    assert lines[-1] == f"{len(rows) - 1} more rows not shown"


def test_cluster_map_png(tmp_path, clustered):
    formation = clustered[1].formation
    path = cluster_map_png(formation.features.matrix, formation.labels, tmp_path / "maps" / "clusters.png")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
    names = np.where(formation.labels == NOISE, "unassigned", formation.labels.astype(str))
    named = cluster_map_png(formation.features.matrix, names, tmp_path / "named.png", noise_label="unassigned")
    assert named.read_bytes().startswith(PNG_SIGNATURE)
