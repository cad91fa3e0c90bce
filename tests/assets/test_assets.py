"""Assets on their own: a direct call with build_asset_context, and one dg.materialize run of the pipeline.

The corpus is the first rows of the bundled Cohen PPI CSV (real PubMed records); the model is the
offline all-MiniLM-L6-v2, so the run embeds and clusters for real.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dagster as dg
import pytest
from demo_corpus import demo_rows, write_demo_subset

from ra_agent.config import load_config
from ra_agent.store.vectors import active_index
from ra_agent.topics.features import ABSTRACT_FAMILY
from ra_agent.workspace import open_store
from ra_assets.defs.clusters.assets import cluster_metrics, clusters
from ra_assets.defs.clusters.checks import members_exist_in_paper, tau_assign_in_range
from ra_assets.defs.embeddings.assets import embedding_index, embedding_shards
from ra_assets.defs.embeddings.checks import every_paper_embedded, offsets_sorted_unique, vectors_finite_unit_norm
from ra_assets.defs.ingest.assets import papers, references
from ra_assets.defs.ingest.checks import deleted_citations_absent, no_empty_titles, ref_src_in_paper
from ra_assets.partitions import ingest_batch_partitions, partition_name
from ra_assets.resources import build_resources

os.environ.setdefault("HF_HUB_OFFLINE", "1")
INGEST_CHECKS = (no_empty_titles, deleted_citations_absent, ref_src_in_paper)
INDEX_CHECKS = (offsets_sorted_unique, vectors_finite_unit_norm, every_paper_embedded)
CLUSTER_CHECKS = (members_exist_in_paper, tau_assign_in_range)


@pytest.fixture
def project(tmp_path) -> tuple[Path, list[dict]]:
    rows = demo_rows()[:240]
    write_demo_subset(tmp_path / "ppi_subset.csv", rows)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[workspace]\ndata_dir = "data"\ndemo_corpus = "{tmp_path / "ppi_subset.csv"}"\n'
        "[ingest]\noffline = true\n[clustering]\nmin_samples = 5\nmin_cluster_size = 12\n"
    )
    return config, rows


def test_papers_asset_called_directly_reports_the_corpus_and_its_checks(project):
    config, rows = project
    resources = build_resources(str(config))
    with dg.build_asset_context(resources={"ra": resources["ra"], "store": resources["store"]}) as context:
        result = papers(context)
    checks = [no_empty_titles(store=resources["store"]), deleted_citations_absent(store=resources["store"])]

    pmids = {int(r["pubmedID"]) for r in rows if r["pubmedID"].strip()}
    assert result.metadata["papers"] == len(pmids)
    assert result.metadata["with_abstract"] == sum(1 for r in rows if r["abstract"].strip())
    assert result.metadata["import_inserted"] == len(pmids)
    seconds = result.metadata["seconds"]  # how long the import took, and how fast it went
    assert 0 < seconds and result.metadata["imported_records_per_second"] == pytest.approx(len(pmids) / seconds, 0.02)
    # the Cohen export has records with neither title nor abstract: nothing lost (the check passes), said in words
    pmid_only = sum(1 for r in rows if not (r["title"] + r["abstract"]).strip())
    assert result.metadata["pmid_only"] == pmid_only > 0
    # the export carries no publication types: the table says so with the real count, and the rule kinds count
    types = {r.data["article_type"]: r.data["papers"] for r in result.metadata["article_types"].records}
    assert types == {"(none recorded)": len(pmids)}
    kinds = {r.data["kind"]: r.data["papers"] for r in result.metadata["publication_kinds_by_rule"].records}
    assert sum(kinds.values()) == len(pmids) and kinds["(no title)"] == pmid_only and kinds.get("RCT", 0) > 0
    titles, deleted = checks
    assert deleted.passed
    assert titles.passed and titles.metadata["pmid_only"].value == pmid_only
    assert titles.description == (
        f"every paper with text has a title; {pmid_only} rows carry only a PMID (no title, "
        "no abstract, as in the bundled Cohen export): nothing lost, kept and never embedded"
    )

    cfg = load_config(config)
    with open_store(cfg) as store:  # an importer that lost a title would leave this
        store.conn.execute(
            "UPDATE paper SET title = '' WHERE pmid = ?", (next(int(r["pubmedID"]) for r in rows if r["abstract"]),)
        )
        store.conn.commit()
    with dg.build_asset_context(resources={"ra": resources["ra"], "store": resources["store"]}) as context:
        result = papers(context)
    assert result.metadata["import_inserted"] == 0  # the file was loaded once; nothing new
    assert result.metadata["papers"] == len(pmids)
    titles = no_empty_titles(store=resources["store"])
    assert not titles.passed and titles.severity == dg.AssetCheckSeverity.ERROR
    assert titles.metadata["abstract_without_title"].value == 1


def test_materialize_runs_ingest_embedding_and_clustering_with_lineage(project):
    config, rows = project
    resources = build_resources(str(config))
    instance = dg.DagsterInstance.ephemeral()

    ingest = dg.materialize([papers, references, *INGEST_CHECKS], resources=resources, instance=instance)
    assert ingest.success
    # the PMID-only rows lost nothing: no_empty_titles passes and references materialise downstream
    checked = {c.check_name: c.passed for c in ingest.get_asset_check_evaluations()}
    assert checked["no_empty_titles"] is True
    assert ingest.asset_materializations_for_node("references")

    cfg = load_config(config)
    with open_store(cfg) as store:
        batches = [b["batch_id"] for b in store.batches()]
    assert batches
    instance.add_dynamic_partitions(partition_name(ingest_batch_partitions), batches)
    embedded = 0
    for batch in batches:
        shard = dg.materialize([embedding_shards], partition_key=batch, resources=resources, instance=instance)
        assert shard.success
        (event,) = shard.asset_materializations_for_node("embedding_shards")
        embedded += event.metadata["embedded"].value

    organised = dg.materialize([embedding_index, clusters, cluster_metrics, *INDEX_CHECKS, *CLUSTER_CHECKS],
                               resources=resources, instance=instance)  # fmt: skip
    assert organised.success
    assert embedded == sum(1 for r in rows if r["pubmedID"].strip() and (r["title"] + r["abstract"]).strip())
    assert active_index(cfg.data_dir) is not None

    record = instance.get_latest_materialization_event(dg.AssetKey("clusters"))
    assert record is not None and record.asset_materialization is not None
    meta = record.asset_materialization.metadata
    with open_store(cfg) as store:
        stored = store.conn.execute("SELECT COUNT(*) FROM cluster_manifest WHERE status = 'active'").fetchone()[0]
        members = store.conn.execute("SELECT COUNT(*) FROM cluster_member").fetchone()[0]
    assert meta["formed"].value == meta["active_clusters"].value == stored >= 1
    assert meta["feature_space"].value == ABSTRACT_FAMILY  # no PICO vectors yet: abstract embeddings
    assert 0 < members <= embedded
    pooled = embedded - members  # every embedded paper is a member or in the unassigned pool
    assert meta["unassigned"].value == pooled and meta["noise_share"].value == round(pooled / embedded, 4)
    assert meta["formation_noise_share"].value >= meta["noise_share"].value  # the intake only takes papers in
    assert meta["reduction"].value == "umap 5"
    # how long and how fast: every embedded paper is in a cluster or in the pool
    assert meta["papers_per_second"].value == pytest.approx(embedded / meta["seconds"].value, 0.02)
    checks = {(c.asset_key.to_user_string(), c.check_name): c.passed for c in organised.get_asset_check_evaluations()}
    index_checks = ("offsets_sorted_unique", "vectors_finite_unit_norm", "every_paper_embedded")
    assert checks == {("embedding_index", name): True for name in index_checks} | {
        ("clusters", "members_exist_in_paper"): True,
        ("clusters", "tau_assign_in_range"): True,
    }
    # the instance holds one materialisation per asset (the shard per ingest batch), as the UI shows them
    for key in ("papers", "embedding_index", "clusters", "cluster_metrics"):
        assert instance.get_latest_materialization_event(dg.AssetKey(key)) is not None, key
    shard_keys = instance.get_materialized_partitions(dg.AssetKey("embedding_shards"))
    assert shard_keys == set(batches)

    # centroids are frozen: the first intake after formation tries the formation's noise against them
    # (memo 40: outside papers stay unassigned until the next cycle); from then on, with no new papers,
    # intake changes nothing and the content-hash data version stays put, so findings stay fresh
    def clusters_version() -> str:
        assert dg.materialize([clusters], resources=resources, instance=instance).success
        event = instance.get_latest_materialization_event(dg.AssetKey("clusters"))
        assert event is not None and event.asset_materialization is not None
        return event.asset_materialization.tags["dagster/data_version"]

    settled = clusters_version()
    assert clusters_version() == settled


def test_progress_lines_carry_count_rate_and_time_left(caplog):
    """A long asset step logs "what: done/total (rate/s, about N s left)" every `every` items and at the end."""
    import logging

    from ra_assets.defs.ingest.assets import log_progress

    with dg.build_asset_context() as context, caplog.at_level(logging.INFO, logger="ra_assets.progress"):
        progress = log_progress(context, "embedded", every=100, seconds=3600, min_gap_s=0)
        for done in range(0, 301, 50):
            progress(done, 300)
    lines = [r.getMessage() for r in caplog.records if r.name == "ra_assets.progress"]
    assert [line.split(" (")[0] for line in lines] == ["embedded: 100/300", "embedded: 200/300", "embedded: 300/300"]
    assert all(re.search(r"\(\d+\.\d/s", line) for line in lines)
    assert "s left" in lines[0] and "left" not in lines[-1]
    with dg.build_asset_context() as context, caplog.at_level(logging.INFO, logger="ra_assets.progress"):
        caplog.clear()
        fast = log_progress(context, "abstracts", every=40)  # a fast step: no line per 40 items, only the last
        for done in range(0, 181, 20):
            fast(done, 180)
        fast(180, 180)  # the importers report their last count again when they end: said once
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["abstracts: 180/180"]
