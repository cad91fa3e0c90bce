"""Phases of the model-bump backfill test, each in a fresh process (a code location reload), printing JSON.

usage: python backfill_steps.py {embed_all | bump_check | backfill_one | backfill_rest | backfill_all}
(backfill_all: what the UI's one backfill over the embeddings group runs — every shard in one run, the
embedding_shards single-run backfill policy, then the index.) embed_all also writes the PICO records of every
paper by the configured no-LLM extractor (`[pico] extractor`, the learned tagger by default) to pico/all.jsonl and
their p i c o m vectors into the first model's folder.
Environment: RA_CONFIG (the project's config.toml) and DAGSTER_HOME (a persistent instance).
"""

import json
import os
import sys
from pathlib import Path

import dagster as dg

from ra_agent.config import load_config
from ra_agent.store.vectors import active_index, emb_root
from ra_agent.workspace import open_store
from ra_assets.definitions import defs as load_defs

SHARDS = dg.AssetKey("embedding_shards")


def materialize(defs, instance, job_name: str, partition: str | None = None, tags: dict | None = None) -> None:
    job = defs.resolve_job_def(job_name)
    assert job.execute_in_process(instance=instance, partition_key=partition, tags=tags).success


def write_pico(cfg, store) -> None:
    """PICO of every paper by the configured no-LLM extractor, and its vectors in the active folder (what the pico
    stage does without an LLM)."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.evidence.pico.extract import read_pico, run_pico
    from ra_agent.evidence.pico.llm_extract import make_extractor
    from ra_agent.evidence.pico.vectors import embed_pico_families
    from ra_agent.store.vectors import open_active
    from ra_agent.workspace import Workspace

    path = Path(Workspace.of(cfg).pico_dir) / "all.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    run_pico(store.papers(store.all_pmids()), make_extractor(None, cfg), path)
    embed_pico_families(open_active(cfg), read_pico(path), SentenceTransformerEmbedder(cfg))


def shards_check(cfg_path: str) -> dict:
    from ra_assets.defs.embeddings.checks import shards_on_configured_model
    from ra_assets.resources import build_resources

    resources = build_resources(cfg_path)
    result = shards_on_configured_model(ra=resources["ra"], store=resources["store"])
    return {"passed": result.passed, "behind": sorted(r.data["batch_id"] for r in result.metadata["behind"].records)}


def nonzero_rows(folder: Path) -> dict[str, int]:
    from ra_agent.store.vectors import VectorStore

    vectors = VectorStore(folder)
    return {f: int(vectors.has(vectors.pmids, f).sum()) for f in vectors.families}


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
        with open_store(cfg) as store:
            write_pico(cfg, store)
    elif step == "backfill_all":  # one run over the whole partition range, as the single-run backfill policy asks
        range_tags = {
            "dagster/asset_partition_range_start": batches[0],
            "dagster/asset_partition_range_end": batches[-1],
        }
        materialize(defs, instance, "embedding_shard_job", tags=range_tags)
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
        "check": shards_check(os.environ["RA_CONFIG"]),
        "families": {p.name: nonzero_rows(p) for p in emb_root(cfg.data_dir).iterdir() if (p / "meta.json").exists()},
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])))
