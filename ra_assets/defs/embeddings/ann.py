"""The ANN index asset: a faiss IVF index over the active embedding index once it is large, rebuilt when it changes."""

import dagster as dg

from ra_agent.store import ann_state, build_ann, open_active
from ra_assets.defs.embeddings.assets import embedding_index
from ra_assets.meta import scalars
from ra_assets.resources import RaConfigResource


@dg.asset(
    deps=[embedding_index],
    group_name="embeddings",
    kinds={"faiss"},
    automation_condition=dg.AutomationCondition.eager(),
)
def ann_index(context: dg.AssetExecutionContext, ra: RaConfigResource) -> dg.MaterializeResult:
    """Approximate nearest-neighbour index (`emb/<model-slug>/ann/ivf.faiss`: faiss IVF, fp16 codes, inner
    product) over the active index's E vectors, built once the folder holds `[ann] min_rows` vectors.

    Rebuilt whenever `embedding_index` materialises with new rows (eager automation); ra's vector
    search uses it only while it covers exactly the folder's rows and scans exactly otherwise,
    logging which. Metadata: size, build time, recall@10 sampled against the exact scan."""
    cfg = ra.get_config()
    vectors = open_active(cfg)
    result = build_ann(vectors, cfg.ann)
    state = ann_state(vectors)
    search = f"ANN index (nprobe {cfg.ann.nprobe})" if state.current else f"exact scan: {state.reason}"
    context.log.info(f"ann_index {result.action}: {result.reason}; searches use the {search}")
    return dg.MaterializeResult(
        metadata={**scalars(result), "search": search, "path": str(vectors.root / "ann")},
        data_version=dg.DataVersion(f"{result.slug}:{result.count}:{result.action != 'skipped'}"),
    )


ann_automation_sensor = dg.AutomationConditionSensorDefinition(
    "ann_index_automation",
    target=dg.AssetSelection.assets(ann_index),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Evaluates ann_index's eager condition (Dagster's default automation sensor starts stopped): "
    "a new embedding_index materialisation requests a rebuild.",
)
