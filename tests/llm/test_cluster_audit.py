"""Cluster Audit #1 through the LLM (memo 40 §3) on the demo corpus's real provisional clusters, with the labelled fallback."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ra_agent.embed.tokens import count_tokens, encoder_for, prompt_budget
from ra_agent.topics.audit import (
    DISCARD,
    KEEP,
    MERGE_INTO,
    LLMAuditor,
    TermAuditor,
    audit_messages,
    auditor_for,
    describe_clusters,
)
from ra_agent.topics.formation import form_clusters
from ra_agent.topics.lifecycle import apply_audit
from ra_agent.topics.organise import load_features
from ra_agent.workspace import open_store


@pytest.fixture
def provisional(demo):
    """The demo corpus's provisional clusters (formation) and their briefs."""
    with open_store(demo) as store:
        formation = form_clusters(load_features(demo, store), demo)  # reduce-then-cluster: a dozen topics
        briefs = describe_clusters(store, formation, demo)
    assert formation.n_clusters >= 3
    return formation, briefs


def verdicts(n: int) -> list[dict]:
    out = [{"idx": 0, "action": "keep", "label": "PPI vs H2RA healing of erosive oesophagitis"},
           {"idx": 1, "action": "merge_into", "target_idx": 0}, {"idx": 2, "action": "discard"}]  # fmt: skip
    return out + [{"idx": i, "action": "keep", "label": f"topic {i}", "summary": "More trials."} for i in range(3, n)]


def test_the_llm_audits_and_its_decisions_are_applied(demo, provisional, loopback):
    formation, briefs = provisional
    cfg = loopback.configure(demo)
    reply = "Here is my audit:\n```json\n" + json.dumps(verdicts(formation.n_clusters))[:-1] + ",]\n```"  # json5 slip
    loopback.script(reply)
    auditor = auditor_for(cfg)
    assert isinstance(auditor, LLMAuditor)
    decisions = auditor.audit(briefs)
    assert [d.action for d in decisions[:3]] == [KEEP, MERGE_INTO, DISCARD] and decisions[1].target_idx == 0
    assert decisions[0].label == "PPI vs H2RA healing of erosive oesophagitis"
    assert decisions[0].summary.startswith(f"{briefs[0].size} papers")  # no LLM summary: the term auditor's
    prompt = loopback.chat_requests[0]["messages"][-1]["content"]
    first_request = loopback.chat_requests[0]  # constrained to one decision per cluster shown
    fmt = first_request.get("format") or first_request["response_format"]["json_schema"]["schema"]
    decision = fmt["properties"]["decisions"]
    assert decision["minItems"] == decision["maxItems"] == formation.n_clusters
    assert {o["properties"]["action"]["enum"][0] for o in decision["items"]["anyOf"]} == {KEEP, MERGE_INTO, DISCARD}
    assert decision["items"]["anyOf"][0]["properties"]["idx"]["enum"] == list(range(formation.n_clusters))
    assert "## Cluster idx 0:" in prompt and "Central titles:" in prompt and briefs[0].sample_titles[0] in prompt
    with open_store(cfg) as store:
        ids = apply_audit(store, formation, decisions, cfg, audit_by=auditor.name)
        rows = {r["label"]: dict(r) for r in store.conn.execute(
            f"SELECT * FROM cluster_manifest WHERE cluster_id IN ({','.join('?' * len(ids))})", ids)}  # fmt: skip
    first = rows["PPI vs H2RA healing of erosive oesophagitis"]
    assert first["audit_by"] == f"{loopback.backend}:gemma3n:e4b (LLM audit)"
    assert len(ids) == formation.n_clusters - 2  # one merged, one discarded


def test_a_faulty_audit_gets_one_repair_turn(demo, provisional, ollama_server):
    formation, briefs = provisional
    cfg = demo.with_overrides(llm={"ollama_host": ollama_server.root_url})
    bad = verdicts(formation.n_clusters)
    bad[1]["target_idx"] = 2  # merge into a discarded cluster
    ollama_server.script(json.dumps(bad), json.dumps(verdicts(formation.n_clusters)))
    auditor = auditor_for(cfg)
    decisions = auditor.audit(briefs)
    assert decisions[1].target_idx == 0 and len(ollama_server.chat_requests) == 2
    repair = ollama_server.chat_requests[1]
    assert "merge_into target idx 2 is discarded" in repair["messages"][-1]["content"] and repair["format"] == "json"


def test_the_term_auditor_decides_when_the_llm_fails_and_says_so(demo, provisional, ollama_server):
    _, briefs = provisional
    cfg = demo.with_overrides(llm={"ollama_host": ollama_server.root_url})
    ollama_server.script("I think these clusters look fine.", "[" * 5000)
    auditor = auditor_for(cfg)
    decisions = auditor.audit(briefs)
    assert auditor.name == "rules:distinctive-terms (fallback: LLM audit failed)"
    assert decisions == TermAuditor(cfg).audit(briefs)
    assert isinstance(auditor_for(cfg.with_overrides(llm={"brain": "rules"})), TermAuditor)
    assert isinstance(auditor_for(cfg.with_overrides(clustering={"llm_audit": False})), TermAuditor)


def test_the_audit_prompt_fits_the_budget_with_200_clusters(demo, provisional):
    _, briefs = provisional
    many = [dataclasses.replace(briefs[i % len(briefs)], idx=i) for i in range(200)]
    messages = audit_messages(many, demo)
    enc = encoder_for(demo)
    used = sum(count_tokens(m["content"], enc) for m in messages)
    assert used <= prompt_budget(demo) and "## Cluster idx 199:" in messages[-1]["content"]
