"""A model-version bump shows the embedding shards unsynced; a backfill re-embeds them into a new model
folder while the old one stays readable and active until the new index is complete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from demo_corpus import demo_rows, write_demo_subset

from ra_agent.config import load_config
from ra_agent.ingest.importers import import_file
from ra_agent.store.vectors import VectorStore, emb_root
from ra_agent.workspace import open_store

STEPS = Path(__file__).with_name("backfill_steps.py")
PAPERS, SHARD = 90, 30  # three ingest batches (embedding shards) of real demo records


def config_text(version: str) -> str:
    return (
        f'[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = true\n'
        f'[embedding]\nmodel_version = "{version}"\nrefresh_threshold = {SHARD}\n'
    )


@pytest.fixture
def project(tmp_path):
    rows = [r for r in demo_rows() if r["abstract"].strip()][:PAPERS]
    subset = write_demo_subset(tmp_path / "subset.csv", rows)
    (tmp_path / "config.toml").write_text(config_text("1"))
    cfg = load_config(tmp_path / "config.toml")
    with open_store(cfg) as store:
        import_file(store, subset, cfg)
    (tmp_path / "dagster_home").mkdir()
    return tmp_path


def step(project: Path, name: str) -> dict:
    env = {**os.environ, "RA_CONFIG": str(project / "config.toml"), "DAGSTER_HOME": str(project / "dagster_home"),
           "HF_HUB_OFFLINE": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, str(STEPS), name], env=env, cwd=project, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


@pytest.mark.slow
def test_model_bump_backfill_switches_only_when_complete(project):
    first = step(project, "embed_all")
    assert len(first["batches"]) == PAPERS // SHARD
    old = first["active"]
    assert old.endswith("@1") and first["folders"] == {old: PAPERS} and first["unsynced"] == []
    assert first["check"] == {"passed": True, "behind": []}
    pico_rows = first["families"][old]
    assert (
        set(pico_rows) == {"E", "p", "i", "c", "o", "m"} and pico_rows["E"] == PAPERS and 0 < pico_rows["i"] <= PAPERS
    )
    before = np.array(VectorStore(emb_root(project / "data") / old).matrix("E"))

    (project / "config.toml").write_text(config_text("2"))
    bumped = step(project, "bump_check")
    assert bumped["code_version"].endswith("@2")
    assert bumped["unsynced"] == bumped["batches"]  # every shard was materialised with the old code version
    assert bumped["check"] == {"passed": False, "behind": sorted(bumped["batches"])}  # the UI lists them

    partial = step(project, "backfill_one")
    new = partial["code_version"]
    assert partial["folders"] == {old: PAPERS, new: SHARD}
    assert partial["active"] == old  # an incomplete re-embed never replaces the index
    assert partial["unsynced"] == partial["batches"][1:]
    assert partial["check"]["behind"] == sorted(partial["batches"][1:])

    final = step(project, "backfill_rest")
    assert final["active"] == new and final["unsynced"] == []
    assert final["folders"] == {old: PAPERS, new: PAPERS}
    after_old = np.array(VectorStore(emb_root(project / "data") / old).matrix("E"))
    assert np.array_equal(before, after_old)  # the old folder is untouched and still readable
    # the switch rebuilt every vector family with the new model, not only E
    assert final["families"][new] == pico_rows and final["check"] == {"passed": True, "behind": []}


@pytest.mark.slow
def test_one_backfill_run_re_embeds_every_shard_and_every_family(project):
    first = step(project, "embed_all")
    old = first["active"]
    (project / "config.toml").write_text(config_text("2"))
    done = step(project, "backfill_all")  # one run over the whole ingest_batch range, then the index
    new = done["code_version"]
    assert done["active"] == new != old and done["unsynced"] == [] and done["check"]["passed"]
    assert done["families"][new] == first["families"][old]  # E and p i c o m, row for row
