"""The `screening_ranking` asset: one partition per screening project (a registered search or an imported export)."""

import base64

import dagster as dg

from ra_agent.screen import MODEL_NAME, discovery_curve, projects, step
from ra_assets.resources import RaConfigResource, StoreResource

# keys are ra screening project names (screen_project.project: "search:<query_key>" or "import:<file name>")
screen_project_partitions = dg.DynamicPartitionsDefinition(name="screen_project")


@dg.asset(
    partitions_def=screen_project_partitions,
    group_name="screening",
    kinds={"python", "sklearn"},
    code_version=MODEL_NAME,
)
def screening_ranking(
    context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource
) -> dg.MaterializeResult:
    """The current screening order of one project's undecided records: the active-learning model
    (linear SVM on TF-IDF + PICO tokens + the citation links the store holds, fused with a ridge model on
    ra's vectors + design flags) retrained on every
    decision so far, with the stopping aid of `[screen] stop_rule` (the rule, its verdict and advice; for
    buscar_ranked and buscar the p-value of "recall < target" and the recall bound, for the heuristic
    recall_estimate its estimated includes left, named as such) and the project's recall-so-far curve. Decisions
    come from `ra screen`; the model row is stored in the store."""
    cfg = ra.get_config()
    project = context.partition_key
    with store.get_client() as db:
        if project not in projects(db):
            raise dg.Failure(f"no screening project {project!r} in the store (ra screen --search/--from)")
        result = step(cfg, db, project, n=cfg.screen.show_next)
        png = discovery_curve(cfg, db, project)
    s = result.stop
    table = "\n".join(
        ["| rank | PMID | year | title | why |", "|---|---|---|---|---|"]
        + [f"| {r.rank} | {r.pmid} | {r.year or ''} | {r.title[:90].replace('|', '/')} | {r.why.replace('|', '/')} |"
           for r in result.next]
    )  # fmt: skip
    image = base64.b64encode(png.read_bytes()).decode("ascii")
    return dg.MaterializeResult(
        metadata={
            "records": s.total,
            "screened": s.screened,
            "included": s.includes,
            "undecided": s.total - s.screened,
            **s.fields(),
            "trained_on_decisions": result.trained_seq,
            "model_digest": result.digest,
            "ranking": dg.MetadataValue.md(table),
            "recall_curve": dg.MetadataValue.md(f"![recall so far](data:image/png;base64,{image})"),
            "recall_curve_path": dg.MetadataValue.path(str(png)),
        },
        data_version=dg.DataVersion(f"{result.trained_seq}-{result.digest[:12]}"),
    )
