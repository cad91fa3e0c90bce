"""Which clusters a goal owns (issue 11): those holding its own search hits, then those it acted on.

Rule (`owned_clusters`): an active cluster is owned by a goal when it holds at least one hit of the
goal's own searches (`candidate_papers` rows of the queries its `search_pubmed` calls registered),
ranked by the number of hits it holds (ties: cluster id); after those come the active clusters the
goal acted on by name: its focus `cluster_id`, the clusters it ran PICO on, expanded, or split into. They are the
goal's retrieval layer (the prompt shows them first); Success and the reports read its handbook's questions.
"""

from __future__ import annotations

import re
from typing import Any

from ra_agent.agent.goal import GoalState
from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.workspace import query_key

# tools whose `cluster_id` argument names a cluster the goal works on
CLUSTER_TOOLS = ("run_pico", "split_cluster")
EXPAND_RE = re.compile(r"^expand\[(?P<cluster>[A-Za-z0-9_-]+)\.(semantic|ripple)\]$")


def goal_queries(state: GoalState) -> list[str]:
    """The queries the goal searched (its own search_pubmed calls), first call first."""
    return list(dict.fromkeys(h["args"]["query"] for h in state.events("tool_call") if h["tool"] == "search_pubmed"))


def hits_per_cluster(store: Store, state: GoalState) -> dict[str, int]:
    """Active cluster -> how many of the goal's search hits it holds (clusters with none are left out)."""
    keys = [query_key(q) for q in goal_queries(state)]
    if not keys:
        return {}
    marks = ",".join("?" * len(keys))
    rows = store.conn.execute(
        f"SELECT m.cluster_id, COUNT(DISTINCT c.pmid) FROM candidate_papers c "
        f"JOIN cluster_member m ON m.pmid = c.pmid JOIN cluster_manifest k ON k.cluster_id = m.cluster_id "
        f"WHERE k.status = 'active' AND c.query_key IN ({marks}) GROUP BY m.cluster_id",
        keys,
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def acted_on(state: GoalState) -> list[str]:
    """Clusters the goal named: focus cluster, tool arguments, expansions, split children."""
    named: list[str] = [state.cluster_id] if state.cluster_id else []
    for h in state.events("tool_call"):
        args, result = h.get("args") or {}, h.get("result") or {}
        if h["tool"] in CLUSTER_TOOLS and args.get("cluster_id"):
            named.append(args["cluster_id"])
        named += [m["cluster"] for m in (EXPAND_RE.match(r) for r in h.get("requests", [])) if m]
        if h["tool"] == "split_cluster" and isinstance(result.get("children"), list):
            named += [c for c in result["children"] if isinstance(c, str)]
    return list(dict.fromkeys(named))


def owned_clusters(store: Store, state: GoalState) -> list[str]:
    """The goal's clusters by the rule in the module docstring (active clusters only)."""
    hits = hits_per_cluster(store, state)
    ranked = sorted(hits, key=lambda cid: (-hits[cid], cid))
    active = {r[0] for r in store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status='active'")}
    return list(dict.fromkeys([*ranked, *(c for c in acted_on(state) if c in active)]))


def refresh_owned(store: Store, state: GoalState) -> list[str]:
    """Recompute `state.owned_clusters`; a change is recorded in the history (`clusters_owned`)."""
    owned = owned_clusters(store, state)
    if owned != state.owned_clusters:
        gained = [c for c in owned if c not in state.owned_clusters]
        lost = [c for c in state.owned_clusters if c not in owned]
        state.owned_clusters = owned
        state.record("clusters_owned", owned=len(owned), gained=gained, lost=lost)
    return owned


def search_runs(store: Store, state: GoalState) -> list[dict[str, Any]] | None:
    """The search_run row of every query the goal searched; None while one of them has not run yet."""
    runs = []
    for query in goal_queries(state):
        row = store.conn.execute("SELECT query, count, fetched, offline FROM search_run WHERE query_key=?",
                                 (query_key(query),)).fetchone()  # fmt: skip
        if row is None:
            return None
        runs.append(dict(row))
    return runs


def no_papers_reason(cfg: Config, store: Store, state: GoalState) -> str | None:
    """Why the goal cannot go on, when every search it ran found nothing and it owns no cluster; else None.

    The reason says what to do: offline by configuration, PubMed unreachable, or PubMed answering 0.
    """
    runs = search_runs(store, state)
    if not runs or state.owned_clusters or any(r["count"] or r["fetched"] for r in runs):
        return None
    queries = " / ".join(f"'{r['query']}'" for r in runs)
    local = sum(len(store.search(r["query"], 1)) for r in runs)  # the local corpus, whatever the search used
    unreachable = any(r["offline"] for r in runs) or store.api_state("eutils")["consecutive_errors"] > 0
    if cfg.ingest.offline:
        why = "offline by configuration ([ingest] offline = true) and 0 local matches"
        fix = "import a search export with `ra import` or set [ingest] offline = false"
    elif unreachable and local:
        why = "PubMed unreachable and the search returned nothing, although the local corpus holds matches"
        fix = "retry when PubMed answers, or set [ingest] offline = true to search the local corpus"
    elif unreachable:
        why = "PubMed unreachable and 0 local matches"
        fix = "import a search export with `ra import` or go online"
    else:
        why = "PubMed returned 0 records"
        fix = "broaden the handbook's Seed_query or import a search export with `ra import`"
    return f"no papers match {queries}: {why}; {fix}"
