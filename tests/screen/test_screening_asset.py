"""The `screening_ranking` asset materialised for one project partition: ranking, counts and recall curve metadata."""

from __future__ import annotations

import dagster as dg

from ra_agent.config import load_config
from ra_agent.screen.project import decisions, project_from_import
from ra_agent.workspace import open_store
from ra_assets.defs.screening.assets import screen_project_partitions, screening_ranking
from ra_assets.partitions import partition_name
from ra_assets.resources import build_resources


def test_screening_ranking_materialises_per_project(workspace, subset_csv, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{workspace.data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    cfg = load_config(config)
    with open_store(cfg) as store:
        project = project_from_import(cfg, store, subset_csv, seed_labels="label_included")
        made = decisions(store, project)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(partition_name(screen_project_partitions), [project])
    result = dg.materialize([screening_ranking], partition_key=project, resources=build_resources(str(config)),
                            instance=instance)  # fmt: skip
    assert result.success
    (event,) = result.asset_materializations_for_node("screening_ranking")
    meta = {k: v.value for k, v in event.metadata.items()}
    assert meta["screened"] == len(made) and meta["included"] == sum(d.label for d in made)
    assert meta["records"] == meta["screened"] + meta["undecided"]
    assert "| rank | PMID |" in meta["ranking"] and "data:image/png;base64," in meta["recall_curve"]
    assert meta["trained_on_decisions"] == max(d.seq for d in made)
