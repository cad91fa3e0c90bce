"""Findings assets: PICO per cluster, existing-SR overlap per cluster, a handbook's review questions, and the goal
reports."""

import json
import time
from pathlib import Path

import dagster as dg

from ra_agent.agent import run_expand, run_pico_stage, run_reports, run_sr_overlap
from ra_agent.evidence import pico_code_version, questions_code_version, synthesis_code_version
from ra_assets.defs.clusters.assets import cluster_metrics, clusters
from ra_assets.defs.ingest.assets import baseline_snapshot, log_progress, papers, pubmed_search, references
from ra_assets.meta import content_version, rate
from ra_assets.partitions import cluster_partitions, expansion_partitions, handbook_partitions
from ra_assets.resources import BrainResource, EmbedderResource, EutilsResource, RaConfigResource, StoreResource


@dg.asset(
    deps=[clusters],
    partitions_def=cluster_partitions,
    group_name="findings",
    kinds={"python", "json"},
    code_version=pico_code_version(),
    pool="llm",
    check_specs=[
        dg.AssetCheckSpec(
            "pico_jsonl_valid",
            asset="pico_extractions",
            blocking=True,
            description="The cluster's pico/<cluster_id>.jsonl parses line by line (one record per PMID) and holds "
            "as many records as the run extracted; judged on the file this run wrote, so it runs with the asset.",
        )
    ],
)
def pico_extractions(
    context: dg.AssetExecutionContext,
    ra: RaConfigResource,
    store: StoreResource,
    brain: BrainResource,
    embedder: EmbedderResource,
):
    """PICO (P, I, C, O, StudyDesign, age, sample size) of one cluster's abstracts as
    `pico/<cluster_id>.jsonl` (one line per PMID) plus the p i c o m vector families; the
    LLM extracts 40 abstracts per prompt; when no LLM runs (or a batch fails), `[pico] extractor`:
    the learned tagger (default) or the rules, each named in every record. The code version names the
    tagger's model and span code and the rules, so a change to any shows the extractions stale."""
    from ra_agent.evidence import PicoFileError, read_pico

    cfg = ra.get_config()
    with store.get_client() as db:
        model = brain.get_client(db)
        started = time.monotonic()
        result = run_pico_stage(cfg, db, context.partition_key, brain=model, embedder=embedder.get_client(),
                                progress=log_progress(context, "abstracts", every=40))  # fmt: skip
        timing = rate(result.run.get("papers", 0), time.monotonic() - started, "papers")
    path = result.run.get("path", "")
    try:
        lines = len(read_pico(path)) if path else 0
        valid, problem = lines == result.run.get("papers", -1), ""
    except PicoFileError as exc:
        valid, problem, lines = False, str(exc), 0
    yield dg.MaterializeResult(
        metadata={
            **result.run,
            **timing,
            "brain": model.name,
            "pico_vectors": result.vectors_written,
            "path": dg.MetadataValue.path(path),
        },  # fmt: skip
        data_version=content_version([Path(path).read_bytes() if valid and path else b""]),
    )
    yield dg.AssetCheckResult(
        check_name="pico_jsonl_valid", passed=valid, metadata={"lines": lines, "problem": problem}
    )


@dg.asset(
    deps=[clusters],
    partitions_def=cluster_partitions,
    group_name="findings",
    kinds={"python"},
    code_version="1",
)
def sr_overlap(
    context: dg.AssetExecutionContext,
    ra: RaConfigResource,
    store: StoreResource,
    embedder: EmbedderResource,
    eutils: EutilsResource,
) -> dg.MaterializeResult:
    """Overlap of one cluster with existing systematic reviews: a `systematic[sb]` search built from
    its label (the local corpus when offline), review titles embedded and compared with the frozen
    centroid; reviews at cosine ≥ [sr] sr_cosine_threshold cover the cluster, and overlap = share of
    its eligible trials a covering review could have included (docs/architecture.md, Evidence verdicts)."""
    from ra_agent.evidence import load_prisma

    cfg = ra.get_config()
    with store.get_client() as db:
        found = run_sr_overlap(cfg, db, context.partition_key, embedder=embedder.get_client(),
                               eutils=None if cfg.ingest.offline else eutils.get_client(db))  # fmt: skip
    prisma = load_prisma(cfg, context.partition_key)
    status = {r.pmid: r.status for r in prisma.reviews} if prisma is not None else {}
    covering = [{"pmid": c.pmid, "year": c.year, "title": c.title[:120], "cosine": c.cosine, "basis": c.basis,
                 "trials_covered": len(c.trials_covered), "prisma": status.get(c.pmid, "not checked")}
                for c in found.covering]  # fmt: skip
    return dg.MaterializeResult(
        metadata={
            "query": found.query,
            "overlap": found.overlap,
            "definition": found.definition,
            "trials": f"{found.trials_covered} of {found.trials_total} ({found.trial_basis})",
            "reviews": found.n_reviews,
            "offline": found.offline,
            "searched": found.searched
            + (" (local only: verdicts built on it are provisional)" if found.offline else ""),
            "sr_pmids": str(found.sr_pmids[:20]),
            "covering_reviews": dg.MetadataValue.json(covering),
        }  # fmt: skip
    )


@dg.asset(
    deps=[clusters],
    partitions_def=expansion_partitions,
    group_name="findings",
    kinds={"python"},
    code_version="1",
    pool="llm",
)
def cluster_expansion(
    context: dg.AssetExecutionContext,
    ra: RaConfigResource,
    store: StoreResource,
    brain: BrainResource,
    embedder: EmbedderResource,
) -> dg.MaterializeResult:
    """Expansion of one frozen cluster (partition `<cluster_id>.<semantic|ripple>`): the semantic
    boundary loop over search candidates (τ from 0.60 down by 0.05, batches of 40 judged by the brain), or
    the citation ripple (parents to α = 0.25 coverage, then citers at τ_sem 0.45). Accepted papers join."""
    cfg = ra.get_config()
    with store.get_client() as db:
        model = brain.get_client(db)
        result = run_expand(cfg, db, context.partition_key, brain=model, embedder=embedder.get_client())
    return dg.MaterializeResult(
        metadata={
            "accepted": len(result.accepted),
            "halted_by": result.halted_by,
            "judge": model.name,
            "thresholds": str(getattr(result, "thresholds", "")),
        }  # fmt: skip
    )


# Living evidence: a handbook's questions are judged again when records arrive (an import, a search, the weekly
# baseline), by Dagster's automation (review_questions_automation below); eager() without its newly_missing (a new
# handbook's partition is judged by the goal that adds it) and without any_deps_missing (most weekly partitions of
# baseline_snapshot are never materialised).
RECORDS_ARRIVED = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("records arrived")


@dg.asset(
    deps=[
        papers,
        references,
        dg.AssetDep(pubmed_search, partition_mapping=dg.AllPartitionMapping()),
        dg.AssetDep(baseline_snapshot, partition_mapping=dg.AllPartitionMapping()),
    ],
    partitions_def=handbook_partitions,
    group_name="findings",
    kinds={"python", "json", "markdown"},
    code_version=questions_code_version(),  # the rules that judge questions: a change shows the sets stale
    automation_condition=RECORDS_ARRIVED,
    check_specs=[
        dg.AssetCheckSpec(
            "review_questions_well_formed",
            asset="review_questions",
            description="The handbook's questions folder as this run wrote it: every question has a well-formed id, "
            "a known verdict, its dossier file, a reason for each report, studies made of its reports, reports and "
            "reviews that are papers of the store, and no dossier of a question the set does not hold.",
        ),
        dg.AssetCheckSpec(
            "verdicts_unchanged",
            asset="review_questions",
            description="Living evidence: warns when this run judged the handbook's questions again and a verdict "
            "changed since the evaluation before (gap -> covered, covered -> update warranted, a new question, ...); "
            "the changes in words are in its metadata and in changes.md beside the dossiers "
            "(docs/living_evidence.md).",
        ),
    ],
)
def review_questions(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource):
    """A handbook's review questions over the whole corpus (partition: the handbook's key), computed once and read
    by everything else: each question's studies (reports of one trial grouped) with why each counts, the reviews
    whose own question encompasses it, the trials since the newest, and its verdict. Written to
    `questions/<handbook key>/` (questions.json and one dossier per question), the same numbers `ra questions`
    prints, the goal's tools and Success read and the dossiers and SR drafts show (docs/review_questions.md), and its evidence-gap map (docs/gap_map.md)."""
    from ra_agent.agent import (
        current_question_set,
        load_question_set,
        map_files,
        map_preview,
        questions_root,
        registered_handbook,
    )
    from ra_agent.evidence import question_set_problems, set_table

    cfg = ra.get_config()
    with store.get_client() as db:
        handbook = registered_handbook(cfg, context.partition_key)
        judged_now = current_question_set(cfg, db, handbook) is None  # else the stored set is read as it is
        qset = load_question_set(cfg, db, handbook)
        folder = questions_root(cfg) / qset.key
        seen, problems = question_set_problems(folder, db)
        drawn = map_files(cfg, db, qset)
    top = qset.topic_question
    context.log.info(f"{qset.key}: {len(qset.questions)} review questions; topic's question {top.verdict}")
    yield dg.MaterializeResult(
        metadata={
            "handbook": qset.handbook,
            "topic": qset.topic,
            "scope": dg.MetadataValue.md("\n".join(f"- {line}" for line in qset.scope) or "_nothing stated_"),
            "judged_by": qset.judged_by,
            "records_judged": len(qset.eligibility),
            "eligible_reports": qset.eligible_reports,
            "reviews_checked": qset.reviews_checked,
            "questions": len(qset.questions),
            "reason": qset.reason,
            "table": dg.MetadataValue.md(set_table(qset)),
            "per_question": dg.MetadataValue.json(
                [
                    {
                        "id": q.id,
                        "question": q.in_words,
                        "in_scope": q.in_scope,
                        "studies": len(q.studies),
                        "reports": len(q.trials),
                        "study_reports": {sid: list(reports) for sid, reports in q.studies.items()},
                        "verdict": q.verdict,
                        "covering": q.covering.pmid if q.covering else None,
                        "trials_since": len(q.trials_since),
                    }
                    for q in qset.questions
                ]
            ),
            "path": dg.MetadataValue.path(str(folder)),
            "changes": dg.MetadataValue.path(str(folder / "changes.md")),
            **_gap_map_metadata(drawn, map_preview),
        },  # fmt: skip
        data_version=content_version([json.dumps([q.as_dict() for q in qset.questions], sort_keys=True, default=str)]),
    )
    yield dg.AssetCheckResult(
        check_name="review_questions_well_formed",
        passed=not problems,
        metadata={"questions": seen, "problems": len(problems), "first": "; ".join(problems[:5])},
        description=f"{seen} questions read, {len(problems)} problems",
    )
    yield verdicts_check(cfg, qset, judged_now)


def verdicts_check(cfg, qset, judged_now: bool) -> dg.AssetCheckResult:
    """The verdicts_unchanged result: WARN (passed=False) when the evaluation this run made changed a verdict."""
    from ra_agent.agent import set_changes

    changes, unreadable = set_changes(cfg, qset)
    meta = {"unreadable_history_lines": dg.MetadataValue.md("\n".join(f"- {p}" for p in unreadable) or "_none_")}
    if not judged_now or changes is None:
        why = "nothing re-judged: the corpus, handbook and knobs are as at its last evaluation"
        return dg.AssetCheckResult(check_name="verdicts_unchanged", passed=True, metadata={**meta, "summary": why},
                                   description=why, severity=dg.AssetCheckSeverity.WARN)  # fmt: skip
    transitions = changes.transitions
    return dg.AssetCheckResult(
        check_name="verdicts_unchanged",
        passed=not transitions,
        severity=dg.AssetCheckSeverity.WARN,
        description=changes.summary(),
        metadata={
            **meta,
            "summary": changes.summary(),
            "transitions": len(transitions),
            "changes": dg.MetadataValue.md(changes.markdown()),
            "per_question": dg.MetadataValue.json([c.as_dict() for c in changes.questions]),
            "evaluated": changes.after.evaluated_ts,
            "compared_with": changes.before.evaluated_ts if changes.before else "",
        },
    )


def _gap_map_metadata(files, preview) -> dict:
    """The evidence-gap map in the UI: the picture (Markdown) and the path of the offline HTML."""
    if files is None:
        return {}
    html = {"gap_map_html": dg.MetadataValue.path(str(files.html))} if files.html else {}
    return {"gap_map": dg.MetadataValue.md(preview(files)), **html}


class SheetImport(dg.Config):
    """A reviewer's extraction sheet to take in: the handbook whose review question it belongs to, and the file."""

    handbook: str = ""  # a handbook name (as ra run takes it) or a path; "" with sheet "": report what is stored
    sheet: str = ""  # .xlsx or .csv written by `ra extract HANDBOOK --sheet` and edited by the review team
    question: str = ""  # a review question id; "": the topic's own question


@dg.asset(group_name="findings", kinds={"python", "json"}, code_version="1")
def extraction_sheet(
    context: dg.AssetExecutionContext, config: SheetImport, ra: RaConfigResource, store: StoreResource
) -> dg.MaterializeResult:
    """The review team's numbers from their extraction sheet (`ra extract HANDBOOK --sheet FILE`, edited): with a
    sheet in the run config, every row is validated (a bad row fails the run naming file, row and column, and nothing
    is taken in) and its reviewer numbers stored under `<data_dir>/extraction/`; without, the stored numbers are
    reported. Upstream of `reports`: an SR draft made after it pools the reviewer's numbers, which win over ra's
    and are named as the reviewer's in its tables and forest plots (docs/synthesis.md)."""
    from ra_agent.agent import import_sheet, reviewer_summary
    from ra_assets.handbooks import handbook_choices

    cfg = ra.get_config()
    if config.sheet:
        named = handbook_choices(ra.config_path).path(config.handbook)
        handbook = named if named.is_file() else Path(config.handbook)
        with store.get_client() as db:
            got = import_sheet(cfg, db, handbook, Path(config.sheet), config.question or None)
        context.log.info("%s: %d rows give the reviewer's numbers (%d cleared)", config.sheet, got.given, got.removed)
    summary = reviewer_summary(cfg)
    return dg.MaterializeResult(
        metadata={
            "reviewer_rows": summary.rows,
            "cleared_rows": summary.removed,
            "sheets": dg.MetadataValue.json(summary.sheets),
            "files": dg.MetadataValue.json(summary.files),
        },
        data_version=content_version(summary.content),
    )


@dg.asset(
    deps=[cluster_metrics, pico_extractions, sr_overlap, review_questions, cluster_expansion, extraction_sheet],
    group_name="findings",
    kinds={"markdown"},
    code_version=synthesis_code_version(),  # an SR draft's numbers change with the arm-data extractor
)
def reports(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource) -> dg.MaterializeResult:
    """Gap dossiers and SR drafts (Markdown under `reports/<goal_id>/`, PRISMA flow diagram beside each draft) for
    every goal whose review questions met its handbook's Success; every cited PMID exists in the store. An SR draft's
    comparisons (each with its condition and whether it answers the goal's review question), pooled estimates
    (with I²) and forest plots (paths, and Markdown images) are listed in the metadata."""
    from ra_agent.agent import workspace_relative
    from ra_agent.evidence import drafts_synthesis

    cfg = ra.get_config()
    goal_id = context.run.tags.get("ra/goal")  # the agent sensor tags a goal's runs; None when run by hand
    with store.get_client() as db:
        written = run_reports(cfg, db, goal_id)
    previews = {Path(p).name: Path(p).read_text(encoding="utf-8")[:3000] for p in written}
    synthesis = drafts_synthesis(written)
    return dg.MaterializeResult(
        metadata={
            "reports": len(written),
            "goal_id": goal_id or "",
            "paths": dg.MetadataValue.json([workspace_relative(cfg, p) for p in written]),
            "main_comparison": dg.MetadataValue.json(synthesis["main"]),
            "comparisons": dg.MetadataValue.json(synthesis["comparisons"]),
            "pooled_estimates": dg.MetadataValue.md(synthesis["pooled_md"]),
            "forest_plots": dg.MetadataValue.json([workspace_relative(cfg, p) for p in synthesis["forest_plots"]]),
            "forest_plot_images": dg.MetadataValue.md(synthesis["forest_md"]),
            **{f"preview_{name}": dg.MetadataValue.md(text) for name, text in list(previews.items())[:3]},
        },
        data_version=content_version(Path(p).read_bytes() for p in sorted(written)),
    )


@dg.asset(deps=[reports], group_name="memory", kinds={"sqlite"}, code_version="1")
def mind_kb(context: dg.AssetExecutionContext, ra: RaConfigResource, store: StoreResource) -> dg.MaterializeResult:
    """Mind-KB: playbooks (tool sequences of successful agent goals and `ra ask` runs), deduplicated by
    sha256 of their steps and retrieved into planning prompts. Refreshed after the agent's reports."""
    from ra_agent.agent import GoalStore, record_goal_playbook
    from ra_agent.ask import open_playbook_store

    cfg = ra.get_config()
    with store.get_client() as db:
        goals = GoalStore(cfg.data_dir, db)
        added = [record_goal_playbook(cfg, db, goals, state) for state in goals.states()]
        playbooks = open_playbook_store(cfg, db, None)
        count, top = playbooks.count(), playbooks.top(cfg.mindkb.status_top)
    lines = [f"- ×{p.count} {p.source}: {p.steps[0]['content'][:120]}" for p in top]
    return dg.MaterializeResult(
        metadata={
            "playbooks": count,
            "added_from_goals": len([a for a in added if a]),
            "collection": cfg.mindkb.collection,
            "top_playbooks": dg.MetadataValue.md("\n".join(lines) or "_none yet_"),
        }
    )


review_questions_automation = dg.AutomationConditionSensorDefinition(
    "review_questions_automation",
    target=dg.AssetSelection.assets(review_questions),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Living evidence: evaluates review_questions' 'records arrived' condition (Dagster's default "
    "automation sensor starts stopped): a new papers, references, pubmed_search or baseline_snapshot "
    "materialisation re-judges every handbook's questions (docs/living_evidence.md).",
)
