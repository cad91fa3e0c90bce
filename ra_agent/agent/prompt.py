"""What the brain sees each cycle: an observation of clusters and searches, rendered as the cycle prompt
(docs/architecture.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from ra_agent.agent.actions import describe_tools
from ra_agent.agent.goal import GoalState
from ra_agent.agent.handbook import Handbook
from ra_agent.config import Config
from ra_agent.llm.structured import is_rules_brain
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


def trial_pmids(store: Store, pmids: list[int]) -> set[int]:
    """Those of `pmids` that look like trials by real fields: an RCT publication type or a randomisation cue, and
    never a paper whose publication type, title or review phrasing makes it a review, protocol, editorial or letter."""
    from ra_agent.evidence.pico.design import non_trial_kind, review_by_text

    found = set()
    for paper in store.papers(pmids):
        if non_trial_kind(paper.title, paper.pub_types) or review_by_text(paper.title, paper.abstract):
            continue
        if any(t in paper.pub_types for t in RCT_TYPES) or TRIAL_CUE.search(f"{paper.title} {paper.abstract}"):
            found.add(paper.pmid)
    return found


def observe(cfg: Config, store: Store, state: GoalState, handbook: Handbook) -> dict[str, Any]:
    """The structured view of the world a cycle reasons over (also the `<state>` block of the prompt): the
    handbook's review questions (`goal_questions.question_entries`: the set's numbers, with what this goal measured)
    and the clusters that organise the corpus (the retrieval layer: search hits, trial candidates, splits)."""
    from ra_agent.agent.goal_questions import goal_question_set, question_entries
    from ra_agent.topics.metrics import manifest_table
    from ra_agent.topics.view import member_pmids

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
        trials = trial_pmids(store, members)
        clusters.append({
            "cluster_id": cid, "label": row["label"], "size": row["size"],
            "corpus_share": round(row["size"] / corpus, 3) if corpus else 0.0,
            "ers": row.get("ers"), "cvgr": row.get("cvgr"), "het_numeric": row.get("het_numeric"),
            "dispersion": row.get("dispersion"), "unstable": bool(row.get("unstable")), "mean_year": row.get("mean_year"),
            "trial_candidates": len(trials), "search_hits": len(hits.intersection(members)),
            "hit_trials": len(trials & hits),  # on-topic trials
            "owned": cid in state.owned_clusters,  # agent/ownership.py: the goal's retrieval layer
            "rejected": cid in state.rejected_clusters, "split_attempted": cid in split_tried,
        })  # fmt: skip
    qset, note = goal_question_set(cfg, store, state, handbook)
    return {
        "task": "cycle",
        "goal": {
            "goal_id": state.goal_id,
            "primary_goal": state.primary_goal,
            "topic": state.topic,
            "status": state.status,
            "question_id": state.question_id,
            "questions_done": state.questions_done,
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
            "sr_overlap_pivot": cfg.sr.sr_overlap_pivot,
            "rules_split_share": cfg.goal.rules_split_share,
            "split_min_size": 2 * cfg.clustering.split_min_cluster_size,
        },
        "corpus_papers": corpus,
        "searches": searches,
        # the handbook's questions (None while they are judged again, or when the handbook has none: questions_note)
        "questions": question_entries(cfg, state, qset) if qset is not None else None,
        "questions_note": note,
        "clusters": clusters,
        "last_results": [h for h in state.history if h["event"] in ("tool_call", "tool_result")][-3:],
        # actions the loop guard ended (rejected in the same form too often): never propose them again
        "ended_lines": [{k: e.get(k) for k in ("tool", "form", "reason")} for e in state.events("line_ended")],
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _sample_titles(cfg: Config, store: Store, cluster_id: str, budget_tokens: int) -> list[str]:
    from ra_agent.embed.tokens import sample_for_prompt
    from ra_agent.topics.view import member_pmids

    def line(p) -> str:
        return f"• {p.title} [PMID:{p.pmid}]"

    papers = store.papers(member_pmids(store, cluster_id))
    sample = sample_for_prompt(papers, cap=budget_tokens, limit=5, cfg=cfg, text=line)
    return [line(p) for p in sample.papers]


def playbooks_for(
    cfg: Config, store: Store, observation: dict[str, Any], embedder_factory, brain_name: str = ""
) -> str:
    """The `<mind_kb_playbooks>` block for this goal ("" when Mind-KB is off or empty: no embedder is loaded).

    An LLM brain is not shown playbooks a rule brain made; the configured encoding counts the tokens."""
    if not cfg.mindkb.enabled or not store.conn.execute("SELECT 1 FROM mind_kb LIMIT 1").fetchone():
        return ""
    from ra_agent.ask.mindkb import open_playbook_store, playbooks_block

    goal = observation["goal"]
    query = f"{goal['primary_goal']}: {goal['topic']}"
    playbooks = open_playbook_store(cfg, store, embedder_factory())
    from ra_agent.embed.tokens import encoder_for

    return playbooks_block(playbooks, query, cfg.mindkb.top_k, cfg.mindkb.token_budget, min_score=cfg.mindkb.min_score,
                           enc=encoder_for(cfg), exclude_rules=not is_rules_brain(brain_name))  # fmt: skip


STATE_SHARE = 0.4  # part of the prompt budget left after the fixed parts that the <state> block may take
_SAFETY_TOKENS = 64  # joints between parts, notes added by cuts
_STATE_LIST_CAP = 20  # searches and questions listed in the state block (the rest counted)
PROMPT_QUESTIONS = 12  # questions described in the prompt's questions block (in the set's order)


def _state_order(observation: dict[str, Any]) -> list[dict[str, Any]]:
    """Clusters in the order the state block keeps them: the goal's own clusters first, then the
    most relevant (search hits, trial candidates), newest (mean year) and largest; rejected ones last."""
    goal = observation["goal"]
    own = [goal.get("cluster_id"), *(goal.get("owned_clusters") or [])]
    rank = {cid: i for i, cid in enumerate(c for c in own if c)}
    return sorted(observation["clusters"], key=lambda c: (
        rank.get(c["cluster_id"], len(rank)), bool(c.get("rejected")), -(c.get("search_hits") or 0),
        -(c.get("trial_candidates") or 0), -(c.get("mean_year") or 0), -(c.get("size") or 0), c["cluster_id"]))  # fmt: skip


def state_block(observation: dict[str, Any], budget: int, enc) -> tuple[str, int]:
    """The `<state>` JSON within `budget` tokens: clusters in `_state_order` while they fit, long lists cut,
    and a line saying how many clusters were left out. Returns (block, clusters left out)."""
    from ra_agent.embed.tokens import count_tokens

    def dumps(doc: Any) -> str:
        return json.dumps(doc, ensure_ascii=False, default=str)

    searches = observation["searches"]
    base = {k: v for k, v in observation.items() if k != "clusters"}
    base["searches"] = searches[-_STATE_LIST_CAP:]
    if len(searches) > _STATE_LIST_CAP:
        base["searches_left_out"] = len(searches) - _STATE_LIST_CAP
    questions = observation.get("questions")
    shown = None if questions is None else list(questions[:_STATE_LIST_CAP])  # the set's order: the topic's first
    total = len(questions or [])
    while True:  # as many questions as the budget holds
        if shown is not None:
            base["questions"] = shown
            if len(shown) < total:
                base["questions_left_out"] = total - len(shown)
        used = count_tokens(f"<state>\n{dumps(base)}\n</state>", enc) + 40  # + the "clusters" key and the note
        if used <= budget or not shown:
            break
        shown = shown[:-1]
    kept: list[dict[str, Any]] = []
    ordered = _state_order(observation)
    for cluster in ordered:
        entry = dict(cluster)
        cost = count_tokens(dumps(entry), enc) + 1
        if used + cost > budget:
            break
        kept.append(entry)
        used += cost
    left_out = len(ordered) - len(kept)
    doc = {**base, "clusters": kept}
    note = (
        f"\n({left_out} of {len(ordered)} clusters left out of this state block to fit the token budget)"
        if left_out
        else ""
    )
    return f"<state>\n{dumps(doc)}\n</state>{note}", left_out


def questions_block(observation: dict[str, Any]) -> str:
    """The handbook's review questions as the prompt shows them (the numbers `ra questions` prints): in-scope first,
    each with its id, the question in words, studies, reports, verdict, covering review, trials since, and what this
    goal did to it."""
    questions = observation.get("questions")
    if questions is None:
        note = observation.get("questions_note") or "not judged yet"
        return f"# Review questions of the handbook\nNone now: {note}."
    lines = ["# Review questions of the handbook (judged once over the whole corpus; tools take their question_id)"]
    ordered = sorted(questions, key=lambda q: not q["in_scope"])
    for q in ordered[:PROMPT_QUESTIONS]:
        covered = f"; covered by {q['covering']}, {q['trials_since']} trials since" if q["covering"] else ""
        done = [t for t, key in (("PICO", "pico_done"), ("reviews", "sr_checked"), ("PRISMA", "prisma_checked"),
                                 ("pivot", "alternative_proposed")) if q.get(key)]  # fmt: skip
        flags = "".join([" [focus]" if q["focus"] else "", " [done]" if q["done"] else "",
                         "" if q["in_scope"] else " [outside the handbook's scope]"])  # fmt: skip
        lines.append(f"- {q['question_id']}{flags}: {q['in_words']}: {q['studies']} studies ({q['reports']} "
                     f"reports); {q['verdict']}{covered}; PRISMA_compliant {_fmt(q['PRISMA_compliant'])}"
                     + (f"; checked: {', '.join(done)}" if done else ""))  # fmt: skip
    if len(ordered) > PROMPT_QUESTIONS:
        lines.append(f"({len(ordered) - PROMPT_QUESTIONS} more questions in the state block)")
    return "\n".join(lines)


def build_messages(
    cfg: Config, store: Store, handbook: Handbook, observation: dict[str, Any], playbooks: str = ""
) -> list[dict[str, str]]:
    """System + user messages: the handbook's questions, per-cluster blocks, handbook, success rule, state JSON.

    The whole prompt stays within `prompt_budget(cfg)` tokens (token_soft_cap, with [llm] reply_tokens
    free under num_ctx): the system prompt, tool list, goal lines and instructions are kept whole; handbook
    prose is cut to [tokens] handbook_prose_tokens and Mind-KB playbooks to [mindkb] token_budget; the
    `<state>` block takes up to STATE_SHARE of what is left (clusters sampled token-aware, see state_block);
    the questions block (`questions_block`) and the cluster blocks share the rest, sample titles newest first.
    """
    from ra_agent.embed.tokens import cap_tokens, count_tokens, encoder_for, prompt_budget

    enc = encoder_for(cfg)
    hb = observation["handbook"]
    goal = observation["goal"]
    searched = ", ".join(repr(s["query"]) for s in observation["searches"][-_STATE_LIST_CAP:]) or "none yet"
    goal_lines = cap_tokens(
        f'Handbook says Primary_goal = "{hb["primary_goal"]}" (goal now: {goal["primary_goal"]}, '
        f"focus question: {goal['question_id'] or 'none'}; done: {', '.join(goal['questions_done']) or 'none'}).\n"
        f"Seed query: {hb['seed_query'] or '(none)'}; searches done: {searched}.\n"
        f"This goal's clusters (hold its search hits or were chosen by it; they retrieve, they do not decide): "
        f"{', '.join(goal.get('owned_clusters') or []) or 'none yet'}.\n"
        f"Success requires, of one review question: {hb['success']} (for {hb['stop_after']} question(s)).\n"
        f"Pivot from a question a review covers (holding > {observation['thresholds']['sr_overlap_pivot']} of "
        "its studies)."
        + "".join(
            f"\nEnded (do not propose again): {e['tool']}: {e['reason']}" for e in observation.get("ended_lines", [])
        ),
        600,
        enc,
        "goal lines",
    )
    prose = cap_tokens(handbook.prose.strip(), cfg.tokens.handbook_prose_tokens, enc, "handbook prose")
    playbooks = cap_tokens(playbooks, cfg.mindkb.token_budget, enc, "playbooks") if playbooks else ""
    instruction = "<< write your reasoning >>\n<< end with Action {...} >>"
    system = SYSTEM_PROMPT.format(tools=describe_tools(cfg=cfg, handbook=handbook))
    fixed = [system, goal_lines, prose, playbooks, instruction]
    left = prompt_budget(cfg) - sum(count_tokens(t, enc) for t in fixed) - 8 * len(fixed) - _SAFETY_TOKENS
    state, _ = state_block(observation, max(0, int(left * STATE_SHARE)), enc)
    left -= count_tokens(state, enc)
    questions = cap_tokens(questions_block(observation), max(left // 2, 0), enc, "questions block")
    left -= count_tokens(questions, enc) + 4
    shown = sorted(observation["clusters"],
                   key=lambda c: (not c.get("owned"), -(c["trial_candidates"] or 0), -c["size"], c["cluster_id"]))  # fmt: skip
    blocks: list[str] = []
    shown = shown[:PROMPT_CLUSTERS]
    for i, c in enumerate(shown):
        head = (
            f"# Cluster {c['cluster_id']} – {c['label']}\n"
            f"Size: {c['size']} | ERS: {_fmt(c['ers'])} | het_numeric: {_fmt(c['het_numeric'])} | "
            f"CVGR: {_fmt(c['cvgr'])} | dispersion: {_fmt(c['dispersion'])}{' (unstable)' if c['unstable'] else ''}\n"
            f"Trial candidates: {c['trial_candidates']} | search hits: {c['search_hits']}\n"
            f"Sample titles:\n"
        )
        cost = count_tokens(head, enc) + 4
        if cost > left:
            break
        share = (left - cost) // (len(shown) - i)
        titles = "\n".join(_sample_titles(cfg, store, c["cluster_id"], share))
        block = cap_tokens(head + titles, max(cost, left - 40), enc, "cluster block")
        left -= count_tokens(block, enc) + 4
        blocks.append(block)
    user = "\n\n".join([questions, *blocks, goal_lines, prose, *([playbooks] if playbooks else []), instruction, state])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
