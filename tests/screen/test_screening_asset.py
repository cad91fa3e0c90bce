"""The `screening_ranking` asset materialised for one project partition: ranking, counts and recall curve metadata."""

from __future__ import annotations

from typing import Any

import dagster as dg
from demo_corpus import demo_rows, write_demo_subset

from ra_agent.config import load_config
from ra_agent.screen.project import decide, decisions, project_from_import
from ra_agent.screen.stopping import stop_status
from ra_agent.workspace import open_store
from ra_assets import local
from ra_assets.defs.screening.assets import screen_project_partitions, screening_ranking
from ra_assets.defs.screening.automation import screening_sensor
from ra_assets.partitions import partition_name
from ra_assets.resources import build_resources


def test_screening_ranking_materialises_per_project(workspace, tmp_path):
    """240 demo records, the first 200 seeded with their labels: the metadata carries the ranking, the counts and the
    active rule's own verdict (buscar_ranked: its p-value and recall bound, no heuristic estimate beside them)."""
    rows = demo_rows()[:240]
    for row in rows[200:]:
        row["label_included"] = ""
    subset = write_demo_subset(tmp_path / "ppi_part.csv", rows)
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{workspace.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    cfg = load_config(config)
    with open_store(cfg) as store:
        project = project_from_import(cfg, store, subset, seed_labels="label_included")
        made = decisions(store, project)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(partition_name(screen_project_partitions), [project])
    result = dg.materialize([screening_ranking], partition_key=project, resources=build_resources(str(config)),
                            instance=instance)  # fmt: skip
    assert result.success
    (event,) = result.asset_materializations_for_node("screening_ranking")
    meta: dict[str, Any] = {k: v.value for k, v in event.metadata.items()}
    assert meta["screened"] == len(made) and meta["included"] == sum(d.label for d in made)
    assert meta["records"] == meta["screened"] + meta["undecided"]
    assert "| rank | PMID |" in meta["ranking"] and "data:image/png;base64," in meta["recall_curve"]
    assert meta["trained_on_decisions"] == max(d.seq for d in made)
    status = stop_status([d.label for d in made], len(rows), cfg.screen)
    assert meta["stop_rule"] == "buscar_ranked" and meta["stop"] == status.stop and status.p_value is not None
    assert meta["stop_p_value"] == status.p_value and meta["stop_recall_bound"] == status.recall_bound
    assert not any(key.startswith(("estimated", "recall_estimate")) for key in meta)


def test_screening_sensor_adds_the_project_then_skips_until_a_new_decision(workspace, subset_csv, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{workspace.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    cfg = load_config(config)
    instance = dg.DagsterInstance.ephemeral()

    def tick(cursor=None):
        return local.tick(screening_sensor, instance, config, cursor)

    empty, _ = tick()
    assert isinstance(empty, dg.SkipReason) and "no screening projects" in str(empty.skip_message)
    with open_store(cfg) as store:
        project = project_from_import(cfg, store, subset_csv, seed_labels="label_included")
        made = decisions(store, project)
    first, _ = tick()
    assert isinstance(first, dg.SensorResult)
    assert [r.partition_key for r in first.run_requests or []] == [project]
    assert first.dynamic_partitions_requests and list(first.dynamic_partitions_requests[0].partition_keys) == [project]
    instance.add_dynamic_partitions(partition_name(screen_project_partitions), [project])
    quiet, _ = tick(first.cursor)
    assert isinstance(quiet, dg.SkipReason) and "no new decisions" in str(quiet.skip_message)
    with open_store(cfg) as store:  # the reviewer revises a seeded decision: a new decision, a new ranking
        seq = decide(store, project, made[0].pmid, 1 - made[0].label, reason="revised on full text")
    again, _ = tick(first.cursor)
    assert isinstance(again, dg.SensorResult)
    assert [r.run_key for r in again.run_requests or []] == [f"screen:{project}:{seq}"]
    assert not again.dynamic_partitions_requests
