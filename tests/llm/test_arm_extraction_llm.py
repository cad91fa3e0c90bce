"""Arm-level extraction through an LLM (both loopback wire protocols) on a real demo abstract: a value the quoted
sentence does not print is rejected, a checked reply is used and named, a failed one falls back to the rules."""

from __future__ import annotations

import json

import jsonschema
import pytest
from demo_corpus import demo_papers

from ra_agent.evidence.synthesis import EXTRACTOR, synthesise
from ra_agent.evidence.synthesis.llm_extract import abstract_units, arm_schema, check_item, extract_with_llm
from ra_agent.llm.select import llm_brain
from ra_agent.models import Paper

PMID = 10950032  # rabeprazole vs ranitidine, erosive GERD: "At wk 4, healing was observed in 59% (98/167) ..."


@pytest.fixture(scope="module")
def paper() -> Paper:
    return next(p for p in demo_papers() if p.pmid == PMID)


def item(arm: str, weeks: float, events: int, total: int, sentence: int, quote: str) -> dict:
    return {"arm": arm, "outcome": "healing of erosions", "weeks": weeks, "events": events, "total": total,
            "mean": None, "sd": None, "sentence": sentence, "size_sentence": None, "quote": quote}  # fmt: skip


def valid_items() -> list[dict]:
    return [
        item("rabeprazole 20 mg", 4, 98, 167, 8, "59% (98/167) of patients assigned to rabeprazole"),
        item("ranitidine 150 mg", 4, 60, 169, 8, "36% (60/169) of those receiving ranitidine"),
        item("rabeprazole 20 mg", 8, 146, 167, 9, "87% (146/167) and 66% (112/169)"),
        item("ranitidine 150 mg", 8, 112, 169, 9, "87% (146/167) and 66% (112/169)"),
    ]


def sent_schema(backend: str, request: dict) -> dict:
    if backend == "ollama":
        return request["format"]
    return request["response_format"]["json_schema"]["schema"]


def test_a_checked_reply_is_used_and_named(cfg, loopback, paper):
    brain = llm_brain(loopback.configure(cfg))
    loopback.script(json.dumps({"arms": valid_items()}))
    got = extract_with_llm(paper, brain)
    name = f"llm:{loopback.backend}:gemma3n:e4b (arm-data-v1)"
    assert got.extractor == name and got.rejected == ()
    assert {(d.drug, d.weeks, d.events, d.total) for d in got.data} == {
        ("rabeprazole", 4, 98, 167), ("ranitidine", 4, 60, 169), ("rabeprazole", 8, 146, 167),
        ("ranitidine", 8, 112, 169)}  # fmt: skip
    units = abstract_units(paper)
    for d in got.data:
        assert d.extractor == name and d.sentence in units and d.outcome == "healing"
    request = loopback.chat_requests[0]
    schema = sent_schema(loopback.backend, request)
    assert schema == arm_schema(len(units)).schema
    jsonschema.validate({"arms": valid_items()}, schema)  # the reply the server sent is one the schema admits
    prompt = request["messages"][-1]["content"]
    assert f"[8] {units[8]}" in prompt and f"[{len(units) - 1}] {units[-1]}" in prompt


def test_a_number_missing_from_its_sentence_is_rejected(cfg, loopback, paper):
    brain = llm_brain(loopback.configure(cfg))
    units = abstract_units(paper)
    wrong = valid_items()
    wrong[1] = item("ranitidine 150 mg", 4, 61, 169, 8, "36% (60/169) of those receiving ranitidine")  # 61: not printed
    wrong[2] = item("rabeprazole 20 mg", 8, 146, 167, 9, "87% (146/167) of patients")  # a quote not in sentence 9
    loopback.script(json.dumps({"arms": wrong}))
    got = extract_with_llm(paper, brain)
    assert {(d.drug, d.weeks, d.events) for d in got.data} == {("rabeprazole", 4, 98), ("ranitidine", 8, 112)}
    assert len(got.rejected) == 2
    # 61 of 169 prints as the sentence's 36%, but the sentence prints the count itself: 60/169
    assert "events 61 is not the count sentence 8 prints over 169 ([60])" in got.rejected[0]
    assert "is not in sentence 9" in got.rejected[1]
    # each check on its own, against the real sentences
    assert check_item(item("ranitidine 150 mg", 4, 60, 169, 99, "x"), paper, units, "llm").reason.startswith(
        "sentence 99"
    )
    assert "names no drug" in check_item(item("cimetidine", 4, 60, 169, 8, "(60/169)"), paper, units, "llm").reason
    assert "time point 6 weeks" in check_item(item("ranitidine", 6, 60, 169, 8, "(60/169)"), paper, units, "llm").reason
    # a percentage of the printed total that a whole count reproduces is a printed number: 59% of 167 is 98.5 → 98
    derived = item("rabeprazole 20 mg", 4, 98, 167, 8, "59%")
    assert check_item(derived, paper, units, "llm").datum is not None


def test_a_failed_reply_falls_back_to_the_rules_and_says_so(cfg, loopback, paper):
    brain = llm_brain(loopback.configure(cfg))
    bad = [item("ranitidine 150 mg", 4, 61, 169, 8, "36% (60/169)")]
    loopback.script(json.dumps({"arms": bad}), "I cannot find any numbers.")
    rules = {(d.drug, d.weeks, d.events, d.total) for d in synthesise([paper]).data[PMID]}
    s = synthesise([paper], brain=brain)
    assert s.extractors[PMID] == f"{EXTRACTOR} (fallback: 1 item(s) rejected)"
    assert {(d.drug, d.weeks, d.events, d.total) for d in s.data[PMID]} == rules and len(rules) == 4
    assert all(d.extractor == s.extractors[PMID] for d in s.data[PMID])
    assert EXTRACTOR in s.extractor and "fallback" in s.extractor
    again = synthesise([paper], brain=brain)  # the second scripted reply holds no JSON
    assert again.extractors[PMID] == f"{EXTRACTOR} (fallback: no JSON object in the reply)"
    gone = synthesise([paper], brain=brain)  # nothing scripted: the server answers 500
    assert gone.extractors[PMID].startswith(f"{EXTRACTOR} (fallback: no answer: ")
    cache: dict = {}
    loopback.script(json.dumps({"arms": valid_items()}))
    first = synthesise([paper], brain=brain, cache=cache)
    assert synthesise([paper], brain=brain, cache=cache).data == first.data  # one LLM call for both drafts
    assert first.extractor == f"llm:{loopback.backend}:gemma3n:e4b (arm-data-v1)"
