"""Phases of the model-bump backfill test, each in a fresh process (a code location reload), printing JSON.

usage: python backfill_steps.py {embed_all | bump_check | backfill_one | backfill_rest}
Environment: RA_CONFIG (the project's config.toml) and DAGSTER_HOME (a persistent instance).
"""

import json
import os
import sys

import dagster as dg

from ra_agent.config import load_config
from ra_agent.store.vectors import active_index, emb_root
from ra_agent.workspace import open_store
from ra_assets.definitions import defs as load_defs

SHARDS = dg.AssetKey("embedding_shards")


def materialize(defs, instance, job_name: str, partition: str | None = None) -> None:
    job = defs.resolve_job_def(job_name)
    assert job.execute_in_process(instance=instance, partition_key=partition).success


def recorded_code_versions(instance, partitions) -> dict[str, str]:
    out = {}
    for key in partitions:
        records = instance.fetch_materializations(dg.AssetRecordsFilter(SHARDS, asset_partitions=[key]), limit=1)
        out[key] = records.records[0].event_log_entry.tags.get("dagster/code_version")
    return out


def main(step: str) -> dict:
    cfg = load_config(os.environ["RA_CONFIG"])
    defs = load_defs()
    instance = dg.DagsterInstance.get()
    with open_store(cfg) as store:
        batches = [b["batch_id"] for b in store.batches()]
    current = defs.resolve_asset_graph().get(SHARDS).code_version
    if step == "embed_all":
        instance.add_dynamic_partitions("ingest_batch", batches)
        for batch in batches:
            materialize(defs, instance, "embedding_shard_job", batch)
        materialize(defs, instance, "embedding_index_job")
    elif step == "backfill_one":
        materialize(defs, instance, "embedding_shard_job", batches[0])
        materialize(defs, instance, "embedding_index_job")  # must not switch to an incomplete folder
    elif step == "backfill_rest":
        for batch in batches[1:]:
            materialize(defs, instance, "embedding_shard_job", batch)
        materialize(defs, instance, "embedding_index_job")
    folders = {p.name: json.loads((p / "meta.json").read_text())["count"]
               for p in emb_root(cfg.data_dir).iterdir() if (p / "meta.json").exists()}  # fmt: skip
    return {
        "code_version": current,
        "recorded": recorded_code_versions(instance, batches) if step != "embed_all" else {},
        "unsynced": sorted(k for k, v in recorded_code_versions(instance, batches).items() if v != current),
        "batches": batches,
        "active": active_index(cfg.data_dir),
        "folders": folders,
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])))
