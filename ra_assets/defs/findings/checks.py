"""Findings checks, runnable on their own from the UI: the written review questions are well formed."""

import dagster as dg

from ra_assets.defs.findings.assets import review_questions
from ra_assets.resources import RaConfigResource, StoreResource


@dg.asset_check(asset=review_questions)
def review_questions_well_formed(ra: RaConfigResource, store: StoreResource) -> dg.AssetCheckResult:
    """Every written review question (questions/clusters/*/questions.json) has a well-formed id, a known verdict,
    its dossier file, a reason for each trial, and trials and reviews that are papers of the store."""
    from ra_agent.evidence import question_file_problems

    with store.get_client() as db:
        seen, problems = question_file_problems(ra.get_config(), db)
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={"questions": seen, "problems": len(problems), "first": "; ".join(problems[:5])},
        description=f"{seen} questions read, {len(problems)} problems",
    )
