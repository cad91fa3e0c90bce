"""The agent's tool registry: every tool a brain may call (its arguments, defaults from the config, purpose and
kind), and which tools are heavy (gated by the config and the handbook's Tools_allowed)."""

from __future__ import annotations

from dataclasses import replace

from ra_agent.agent.goal import QUESTION_ID_RE, SAFE_ID_RE
from ra_agent.config import Config
from ra_agent.llm.protocol import ArgSpec, ToolSpec

_CLUSTER_ID = ArgSpec("str", required=True, pattern=SAFE_ID_RE, description="a cluster id (letters, digits, _ or -)")
_QUESTION_ID = ArgSpec(
    "str", required=True, pattern=QUESTION_ID_RE, description="a review question's id (q- and 10 hex digits)"
)


def registry_specs(cfg: Config | None = None) -> dict[str, ToolSpec]:
    """The heavy tools (docs/handbooks.md, Tools_allowed), the cluster commands and update_goal; defaults from cfg.
    The review-question tools take a question id of the handbook's set (the prompt lists them)."""
    cfg = cfg or Config()
    specs = [
        ToolSpec(
            "search_pubmed",
            {
                "query": ArgSpec("str", required=True, description="PubMed query"),
                "retmax": ArgSpec("int", default=cfg.ingest.default_retmax, minimum=1),
                "expand_mode": ArgSpec("str", default="semantic", choices=("semantic", "ripple")),
            },
            "Search PubMed, fetch and embed the candidates, and grow the clusters (ripple needs Exploration).",
        ),
        ToolSpec(
            "embed_text",
            {"text": ArgSpec("str|list[str]", required=True, max_items=cfg.tools.embed_text_max_strings)},
            "Embed text(s) for an on-the-fly cosine comparison.",
        ),
        ToolSpec(
            "run_pico",
            {
                "question_id": replace(_QUESTION_ID, required=False),
                "cluster_id": replace(_CLUSTER_ID, required=False),
                "pmid_list": ArgSpec("list[int]", minimum=1),
            },
            "Extract P, I, C, O and study design for a question's reports (or a cluster's, or a PMID list's abstracts).",
            exactly_one_of=("question_id", "cluster_id", "pmid_list"),
        ),
        ToolSpec(
            "prisma_check",
            {"question_id": _QUESTION_ID},
            "seek_gap: check PRISMA items 4-8 of the review covering a question; conduct_SR: write ra's SR draft of "
            "the question and check it.",
        ),
        ToolSpec(
            "find_existing_sr",
            {"question_id": _QUESTION_ID},
            "Record the reviews that answer a question and whether one covers it (and searches PubMed for more "
            "reviews when online).",
        ),
        ToolSpec(
            "propose_alternative_pico",
            {"question_id": _QUESTION_ID},
            "Pivot from a covered question: to a narrower in-scope question its covering review leaves open, else a "
            "new goal on the trials it leaves out.",
        ),
        ToolSpec("split_cluster", {"cluster_id": _CLUSTER_ID}, "Re-cluster one cluster's members.", kind="cluster"),
        ToolSpec(
            "merge_clusters",
            {"source": _CLUSTER_ID, "target": _CLUSTER_ID},
            "Merge the source cluster into the target.",
            kind="cluster",
        ),
        ToolSpec(
            "drop_cluster",
            {"cluster_id": _CLUSTER_ID},
            "Drop a cluster; its papers return to the pool.",
            kind="cluster",
        ),
        ToolSpec(
            "show_noise",
            {"limit": ArgSpec("int", default=20, minimum=1)},
            "Show papers HDBSCAN left unassigned (noise).",
            kind="cluster",
        ),
        ToolSpec(
            "update_goal",
            {"changes": ArgSpec("object", required=True, description="goal fields to change")},
            "Change goal fields: primary_goal (pivot), topic, status (stopped to finish), cluster_id, "
            "subgoals, rejected_clusters, pending_queries.",
            kind="goal",
        ),
    ]
    return {s.name: s for s in specs}


REGISTRY_SPECS = registry_specs()
HEAVY_TOOLS = tuple(name for name, spec in REGISTRY_SPECS.items() if spec.gated)
