"""The rules brain's seek_gap and conduct_SR branches after the SR search: pivot, PRISMA check, ra's own draft."""

from __future__ import annotations

from ra_agent.llm.rules_brain import decide

SEED = "proton pump inhibitors AND gastroesophageal reflux"


def state(primary: str, **cluster) -> dict:
    """A cycle's <state> block after the seed search and run_pico on one cluster with 12 eligible trials."""
    tools = ["search_pubmed", "run_pico", "find_existing_sr", "prisma_check"]
    if primary == "seek_gap":
        tools.append("propose_alternative_pico")
    entry = {"cluster_id": "c1", "label": "reflux", "size": 40, "corpus_share": 0.05, "pico_done": True,
             "eligible_trials": 12, "sr_overlap": None, "PRISMA_compliant": None, "prisma_checked": None,
             "covered_by_sr": False, "search_hits": 30, "trial_candidates": 20, **cluster}  # fmt: skip
    return {
        "goal": {"goal_id": "g", "primary_goal": primary, "cluster_id": None, "rejected_clusters": []},
        "handbook": {"primary_goal": primary, "seed_query": SEED, "tools_allowed": tools},
        "thresholds": {
            "min_eligible_trials": 6,
            "sr_overlap_pivot": 0.6,
            "rules_split_share": 0.5,
            "split_min_size": 60,
        },  # fmt: skip
        "searches": [{"query": SEED}],
        "clusters": [entry],
    }


def test_seek_gap_pivots_from_a_covered_cluster_and_checks_prisma_of_an_uncovered_one():
    covered = decide(state("seek_gap", sr_overlap=0.89, covered_by_sr=True, sr_pmids=[11683686]))
    assert covered.tool == "propose_alternative_pico" and covered.args == {"exclude_pmids": [11683686]}
    uncovered = decide(state("seek_gap", sr_overlap=0.2))
    assert uncovered.tool == "prisma_check" and "20%" in uncovered.reasoning[-1]
    # a PRISMA_compliant left by a check of ra's own draft is not a check of the prior reviews
    after_draft = decide(state("seek_gap", sr_overlap=0.2, PRISMA_compliant=True, prisma_checked="draft"))
    assert after_draft.tool == "prisma_check"
    done = decide(state("seek_gap", sr_overlap=0.2, PRISMA_compliant=False, prisma_checked="prior_sr"))
    assert done.tool == "update_goal"


def test_conduct_sr_writes_and_checks_its_own_draft_even_when_reviews_cover_the_topic():
    # a prior-review check (seek_gap) set PRISMA_compliant on the cluster: the draft is still checked
    first = decide(state("conduct_SR", sr_overlap=0.89, covered_by_sr=True, PRISMA_compliant=False,
                         prisma_checked="prior_sr"))  # fmt: skip
    assert first.tool == "prisma_check" and first.args == {"cluster_id": "c1"}
    passed = decide(state("conduct_SR", sr_overlap=0.89, covered_by_sr=True, PRISMA_compliant=True,
                          prisma_checked="draft"))  # fmt: skip
    assert passed.tool == "update_goal" and passed.args == {"changes": {"cluster_id": "c1"}}
    failed = decide(state("conduct_SR", sr_overlap=0.1, PRISMA_compliant=False, prisma_checked="draft"))
    assert failed.tool == "update_goal" and failed.args == {"changes": {"status": "stopped"}}
    assert "checklist" in failed.reasoning[-1]
