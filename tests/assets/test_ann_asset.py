"""The ann_index asset: built from the active embedding index above [ann] min_rows, rebuilt when the index grows.

Real demo records (the bundled Cohen PPI CSV), embedded by the offline all-MiniLM-L6-v2; the size
knob is lowered so a few hundred vectors count as a large store.
"""

from __future__ import annotations

import os

import dagster as dg
from demo_corpus import demo_rows, write_demo_subset

from ra_agent.config import load_config
from ra_agent.embed.index import embed_all
from ra_agent.store.ann import ann_state, search
from ra_agent.store.vectors import open_active
from ra_agent.workspace import Workspace, open_store
from ra_assets.defs.embeddings.ann import ann_index
from ra_assets.defs.embeddings.assets import embedding_index
from ra_assets.defs.ingest.assets import papers
from ra_assets.resources import build_resources

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def embed_and_index(config, resources, instance) -> None:
    """Import pending files, embed what is new, and materialise the embedding index (as the pipeline does)."""
    assert dg.materialize([papers], resources=resources, instance=instance).success
    cfg = load_config(config)
    with open_store(cfg) as store:
        embed_all(cfg, store)
    assert dg.materialize([embedding_index], resources=resources, instance=instance).success


def latest(instance, key: str) -> dict:
    event = instance.get_latest_materialization_event(dg.AssetKey(key))
    assert event is not None and event.asset_materialization is not None
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_ann_index_is_built_used_and_rebuilt_when_the_embedding_index_grows(tmp_path):
    rows = [r for r in demo_rows() if r["abstract"].strip()]
    write_demo_subset(tmp_path / "first.csv", rows[:220])
    config = tmp_path / "config.toml"
    config.write_text(
        f'[workspace]\ndata_dir = "data"\ndemo_corpus = "{tmp_path / "first.csv"}"\n[ingest]\noffline = true\n'
        "[ann]\nmin_rows = 200\nnlist = 4\nnprobe = 2\nrecall_queries = 20\n"
    )
    resources = build_resources(str(config))
    instance = dg.DagsterInstance.ephemeral()
    defs = dg.Definitions(assets=[embedding_index, ann_index], resources=resources)

    def tick(cursor=None):
        only = dg.AssetSelection.assets(ann_index)
        return dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=only, cursor=cursor)

    start = tick()
    embed_and_index(config, resources, instance)
    first = tick(start.cursor)
    assert first.total_requested == 1  # the embedding index materialised: the eager condition requests ann_index
    assert dg.materialize([ann_index], resources=resources, instance=instance).success
    built = tick(first.cursor)
    assert built.total_requested == 0  # materialised: nothing more to do
    meta = latest(instance, "ann_index")
    assert meta["action"] == "built" and meta["count"] == 220 and meta["nlist"] == 4
    assert meta["recall_queries"] == 20 and meta["recall_at_10"] >= 0.7
    assert meta["search"].startswith("ANN index") and "seconds" in meta  # (a build over 220 rows can round to 0.0 s)
    cfg = load_config(config)
    vectors = open_active(cfg)
    query = vectors.get([int(rows[5]["pubmedID"])])[0]
    assert search(vectors, query, 5, cfg.ann).method == "ann"

    # 30 more records arrive: the embedding index grows, the ANN index is stale (searches scan exactly) until rebuilt
    inbox = Workspace.of(cfg).imports_dir
    inbox.mkdir(parents=True, exist_ok=True)
    write_demo_subset(inbox / "more.csv", rows[220:250])
    embed_and_index(config, resources, instance)
    vectors = open_active(cfg)
    assert len(vectors) == 250 and not ann_state(vectors).current
    assert search(vectors, query, 5, cfg.ann).method == "exact"
    assert tick(built.cursor).total_requested == 1  # the eager condition asks for a rebuild after the upstream update
    assert dg.materialize([ann_index], resources=resources, instance=instance).success
    meta = latest(instance, "ann_index")
    assert meta["action"] == "built" and meta["count"] == 250
    assert ann_state(open_active(cfg)).current and search(open_active(cfg), query, 5, cfg.ann).method == "ann"

    # materialising again with nothing new keeps the index
    assert dg.materialize([ann_index], resources=resources, instance=instance).success
    assert latest(instance, "ann_index")["action"] == "current"
