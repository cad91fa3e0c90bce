"""What the brain sees each cycle: an observation of clusters and searches, rendered as the memo-60 §5 prompt."""

from __future__ import annotations

import json
import re
from typing import Any

from ra_agent.agent.actions import describe_tools
from ra_agent.agent.goal import GoalState
from ra_agent.agent.handbook import Handbook
from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.workspace import query_key

TRIAL_CUE = re.compile(r"\brandomi[sz]ed\b|\brandomly assigned\b|\bdouble[- ]blind\b|\bplacebo[- ]controlled\b", re.I)
RCT_TYPES = ("Randomized Controlled Trial", "Controlled Clinical Trial", "Pragmatic Clinical Trial")
PROMPT_CLUSTERS = 8  # clusters described in full in one prompt; the rest appear in the state block only

SYSTEM_PROMPT = """You are ra, an autonomous systematic-review researcher. Deterministic tools do all
fetching, embedding and clustering; you read the metrics and sample titles, reason, and choose ONE tool.

Rules:
- Write your reasoning, then end your reply with exactly one line `Action: {{"tool": ..., "args": {{...}}}}`.
- Only the keys "tool" and "args"; arguments must match the schemas below; no file paths, no URLs.
- To change the goal (pivot to conduct_SR, set cluster_id, reject a cluster, stop) use the tool update_goal.
- A reply without an Action is treated as thoughts only: the cycle ends without side effects.

Tools you may call now:
{tools}
"""


def trial_candidates(store: Store, pmids: list[int]) -> int:
    """Members that look like trials by real fields: an RCT publication type or a randomisation cue."""
    count = 0
    for paper in store.papers(pmids):
        if any(t in paper.pub_types for t in RCT_TYPES) or TRIAL_CUE.search(f"{paper.title} {paper.abstract}"):
            count += 1
    return count


def observe(cfg: Config, store: Store, state: GoalState, handbook: Handbook) -> dict[str, Any]:
    """The structured view of the world a cycle reasons over (also the `<state>` block of the prompt)."""
    from ra_agent.evidence.sr_search import load_sr_overlap
    from ra_agent.topics.metrics import manifest_table
    from ra_agent.topics.view import member_pmids, pico_path

    pivot = cfg.sr.sr_overlap_pivot
    proposed = {h.get("cluster_id") for h in state.events("alternative_proposed") + state.events("alternative_failed")}
    split_tried = {
        h.get("args", {}).get("cluster_id") for h in state.events("tool_call") if h.get("tool") == "split_cluster"
    }
    corpus = store.counts()["paper"]
    searches = []
    for query in dict.fromkeys(h["args"]["query"] for h in state.events("tool_call") if h["tool"] == "search_pubmed"):
        run = store.conn.execute("SELECT count, fetched, offline FROM search_run WHERE query_key=?",
                                 (query_key(query),)).fetchone()  # fmt: skip
        searches.append({"query": query, **(dict(run) if run else {"count": None})})
    hits: set[int] = set()
    for search in searches:
        hits.update(r[0] for r in store.conn.execute("SELECT pmid FROM candidate_papers WHERE query_key=?",
                                                        (query_key(search["query"]),)))  # fmt: skip
    clusters = []
    for row in manifest_table(store):
        cid = row["cluster_id"]
        members = member_pmids(store, cid)
        overlap = row.get("sr_overlap")
        prisma = row.get("prisma_compliant")
        entry = {
            "cluster_id": cid,
            "label": row["label"],
            "size": row["size"],
            "corpus_share": round(row["size"] / corpus, 3) if corpus else 0.0,
            "ers": row.get("ers"),
            "cvgr": row.get("cvgr"),
            "het_numeric": row.get("het_numeric"),
            "dispersion": row.get("dispersion"),
            "unstable": bool(row.get("unstable")),
            "mean_year": row.get("mean_year"),
            "sr_overlap": overlap,
            "eligible_trials": row.get("eligible_trials"),
            "PRISMA_compliant": None if prisma is None else bool(prisma),
            "trial_candidates": trial_candidates(store, members),
            "search_hits": len(hits.intersection(members)),
            "owned": cid in state.owned_clusters,  # agent/ownership.py: Success reads only these
            "pico_done": pico_path(cfg, cid).exists(),
            "covered_by_sr": overlap is not None and overlap > pivot,
            "rejected": cid in state.rejected_clusters,
            "alternative_proposed": cid in proposed,
            "split_attempted": cid in split_tried,
        }
        if entry["covered_by_sr"]:
            found = load_sr_overlap(cfg, cid)
            entry["sr_pmids"] = sorted(found.sr_pmids) if found else []
        clusters.append(entry)
    return {
        "task": "cycle",
        "goal": {
            "goal_id": state.goal_id,
            "primary_goal": state.primary_goal,
            "topic": state.topic,
            "status": state.status,
            "cluster_id": state.cluster_id,
            "owned_clusters": state.owned_clusters,
            "rejected_clusters": state.rejected_clusters,
            "pending_queries": state.pending_queries,
            "cycle": state.cycle,
        },
        "handbook": {
            "name": handbook.name,
            "primary_goal": handbook.primary_goal,
            "seed_query": handbook.seed_query,
            "tools_allowed": sorted(handbook.tools_allowed),
            "exploration": handbook.exploration,
            "success": handbook.success_text,
            "stop_after": handbook.stop_after,
        },
        "thresholds": {
            "min_eligible_trials": cfg.sr.min_eligible_trials,
            "sr_overlap_pivot": pivot,
            "rules_split_share": cfg.goal.rules_split_share,
            "split_min_size": 2 * cfg.clustering.split_min_cluster_size,
        },
        "corpus_papers": corpus,
        "searches": searches,
        "clusters": clusters,
        "last_results": [h for h in state.history if h["event"] in ("tool_call", "tool_result")][-3:],
    }


def metrics_of(cluster: dict[str, Any]) -> dict[str, Any]:
    """The names a handbook `Success` expression may use, from one observed cluster."""
    return {k: cluster.get(k) for k in ("size", "ers", "cvgr", "het_numeric", "dispersion", "sr_overlap",
                                        "eligible_trials", "PRISMA_compliant")}  # fmt: skip


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _sample_titles(cfg: Config, store: Store, cluster_id: str, budget_tokens: int) -> list[str]:
    from ra_agent.embed.tokens import sample_for_prompt
    from ra_agent.topics.view import member_pmids

    sample = sample_for_prompt(store.papers(member_pmids(store, cluster_id)), cap=budget_tokens, limit=5, cfg=cfg)
    return [f"• {p.title} [PMID:{p.pmid}]" for p in sample.papers]


def playbooks_for(cfg: Config, store: Store, observation: dict[str, Any], embedder_factory) -> str:
    """The `<mind_kb_playbooks>` block for this goal ("" when Mind-KB is off or empty: no embedder is loaded)."""
    if not cfg.mindkb.enabled or not store.conn.execute("SELECT 1 FROM mind_kb LIMIT 1").fetchone():
        return ""
    from ra_agent.ask.mindkb import open_playbook_store, playbooks_block

    goal = observation["goal"]
    query = f"{goal['primary_goal']}: {goal['topic']}"
    playbooks = open_playbook_store(cfg, store, embedder_factory())
    return playbooks_block(playbooks, query, cfg.mindkb.top_k, cfg.mindkb.token_budget, min_score=cfg.mindkb.min_score)


def build_messages(
    cfg: Config, store: Store, handbook: Handbook, observation: dict[str, Any], playbooks: str = ""
) -> list[dict[str, str]]:
    """System + user messages: per-cluster blocks (memo 60 §5), handbook, success rule, state JSON.

    The token soft cap ([tokens] token_soft_cap) is shared between the clusters shown; sample
    titles come newest first and are trimmed to fit.
    """
    shown = sorted(observation["clusters"],
                   key=lambda c: (not c.get("owned"), -(c["trial_candidates"] or 0), -c["size"]))  # fmt: skip
    shown = shown[:PROMPT_CLUSTERS]
    per_cluster = cfg.tokens.token_soft_cap // max(2 * len(shown), 1)
    blocks = []
    for c in shown:
        blocks.append(
            f"# Cluster {c['cluster_id']} – {c['label']}\n"
            f"Size: {c['size']} | ERS: {_fmt(c['ers'])} | het_numeric: {_fmt(c['het_numeric'])} | "
            f"CVGR: {_fmt(c['cvgr'])} | dispersion: {_fmt(c['dispersion'])}{' (unstable)' if c['unstable'] else ''}\n"
            f"Trial candidates: {c['trial_candidates']} | eligible_trials: {_fmt(c['eligible_trials'])} | "
            f"Existing_SR_overlap: {_fmt(c['sr_overlap'])} | PRISMA_compliant: {_fmt(c['PRISMA_compliant'])}\n"
            f"Sample titles:\n" + "\n".join(_sample_titles(cfg, store, c["cluster_id"], per_cluster))
        )
    hb = observation["handbook"]
    goal = observation["goal"]
    searched = ", ".join(repr(s["query"]) for s in observation["searches"]) or "none yet"
    user = "\n\n".join(
        [
            *blocks,
            f'Handbook says Primary_goal = "{hb["primary_goal"]}" (goal now: {goal["primary_goal"]}, '
            f"focus cluster: {goal['cluster_id'] or 'none'}).\n"
            f"Seed query: {hb['seed_query'] or '(none)'}; searches done: {searched}.\n"
            f"This goal's clusters (hold its search hits or were chosen by it): "
            f"{', '.join(goal.get('owned_clusters') or []) or 'none yet'}; Success is judged on these only.\n"
            f"Success requires: {hb['success']} (for {hb['stop_after']} cluster(s)).\n"
            f"Pivot when Existing_SR_overlap > {observation['thresholds']['sr_overlap_pivot']}.",
            handbook.prose.strip(),
            *([playbooks] if playbooks else []),
            "<< write your reasoning >>\n<< end with Action {...} >>",
            f"<state>\n{json.dumps(observation, ensure_ascii=False, default=str)}\n</state>",
        ]
    )
    system = SYSTEM_PROMPT.format(tools=describe_tools(cfg=cfg, handbook=handbook))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
