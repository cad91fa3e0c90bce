"""Schema-constrained cycles over both wire protocols: the schema names exactly the handbook's tools, and a server
that refuses it gets the text protocol (the cycle says which mode it used)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from replay.ollama_server import OllamaReplayServer
from replay.openai_server import OpenAIReplayServer

from ra_agent.agent.actions import cycle_schema
from ra_agent.agent.cycle import run_cycle
from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.registry import REGISTRY_SPECS
from ra_agent.agent.runner import start_goal
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.llm.select import select_brain
from ra_agent.llm.structured import schema_tools
from ra_agent.workspace import open_store

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"
REPLY = {"reasoning": "The seed query has not been searched yet.",
         "action": {"tool": "search_pubmed", "args": {"query": "omeprazole maintenance of healed oesophagitis"}}}  # fmt: skip


def sent_schema(backend: str, request: dict) -> dict | None:
    """The JSON schema a chat request carried (Ollama `format`, OpenAI `response_format`), else None."""
    if backend == "ollama":
        return request.get("format") if isinstance(request.get("format"), dict) else None
    fmt = request.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")


def one_cycle(cfg, project):
    brain = select_brain(cfg, RulesBrain)
    with open_store(cfg) as store:
        goal_id = start_goal(cfg, store, project / HANDBOOK, brain.name).goal_id
        return run_cycle(cfg, store, goal_id, brain)


def test_the_first_request_of_a_cycle_carries_the_action_schema(demo, demo_project, loopback):
    cfg = loopback.configure(demo)
    loopback.script(json.dumps(REPLY))
    outcome = one_cycle(cfg, demo_project)
    assert (outcome.event, outcome.tool) == ("tool_call", "search_pubmed")
    first = loopback.chat_requests[0]
    schema = sent_schema(loopback.backend, first)
    assert schema is not None, f"{loopback.backend}: no schema in {sorted(first)}"
    if loopback.backend == "openai":
        assert first["response_format"]["type"] == "json_schema" and first["response_format"]["json_schema"]["strict"]
    handbook = load_handbook(demo_project / HANDBOOK)
    allowed = set(handbook.tools_allowed) | {n for n, s in REGISTRY_SPECS.items() if not s.gated}
    tools = [o["properties"]["tool"]["enum"][0] for o in schema["properties"]["action"]["anyOf"]]
    assert set(tools) == allowed and "embed_text" not in tools  # embed_text is heavy and not in Tools_allowed
    assert schema["required"] == ["reasoning", "action"] and schema["additionalProperties"] is False
    jsonschema.validate(REPLY, schema)  # the reply the server sent is one the schema admits
    for bad in ({**REPLY, "note": "x"}, {"reasoning": "r", "action": {"tool": "embed_text", "args": {"text": "x"}}},
                {"reasoning": "r", "action": {"tool": "search_pubmed", "args": {"query": "x", "why": "y"}}}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert outcome.brain_call is not None and outcome.brain_call["mode"] == "json_schema"
    assert outcome.brain_call["total_s"] is not None and outcome.brain_call["completion_tokens"]
    log = open(outcome.log_path, encoding="utf-8").read()
    assert "brain call: mode=json_schema schema=agent_action" in log and "json_status: ok" in log


def test_cluster_ids_are_an_enum_of_the_clusters_shown(demo, demo_project):
    handbook = load_handbook(demo_project / HANDBOOK)
    with open_store(demo) as store:
        ids = [r[0] for r in store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status='active'")]
    assert len(ids) >= 2
    schema = cycle_schema(demo, handbook, ids)
    assert schema_tools(schema) == [s.name for s in REGISTRY_SPECS.values()
                                    if not s.gated or s.name in handbook.tools_allowed]  # fmt: skip
    run_pico = {"reasoning": "r", "action": {"tool": "run_pico", "args": {"cluster_id": ids[0]}}}
    jsonschema.validate(run_pico, schema.schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**run_pico, "action": {"tool": "run_pico", "args": {"cluster_id": "c_unknown"}}},
                            schema.schema)  # fmt: skip
    # question ids are an enum of the handbook's questions, in the tools that take one and in update_goal
    questions = cycle_schema(demo, handbook, ids, ["q-0123456789", "q-abcdefabcd"])
    sr = {"reasoning": "r", "action": {"tool": "find_existing_sr", "args": {"question_id": "q-0123456789"}}}
    jsonschema.validate(sr, questions.schema)
    focus = {"reasoning": "r", "action": {"tool": "update_goal", "args": {"changes": {"question_id": "q-abcdefabcd"}}}}
    jsonschema.validate(focus, questions.schema)
    for bad in ({"question_id": "q-9999999999"}, {"question_id": ids[0]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**sr, "action": {"tool": "find_existing_sr", "args": bad}}, questions.schema)
    with pytest.raises(jsonschema.ValidationError):  # exactly one of question_id, cluster_id, pmid_list
        jsonschema.validate({**run_pico, "action": {"tool": "run_pico", "args": {"cluster_id": ids[0],
                                                                                 "pmid_list": [1]}}}, schema.schema)  # fmt: skip
    stop = {"reasoning": "done", "action": {"tool": "update_goal", "args": {"changes": {"status": "stopped"}}}}
    jsonschema.validate(stop, schema.schema)
    for changes in ({}, {"status": "crashed"}, {"goal_id": "g2"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(
                {**stop, "action": {"tool": "update_goal", "args": {"changes": changes}}}, schema.schema
            )
    with pytest.raises(jsonschema.ValidationError):  # Exploration: false, so no ripple
        jsonschema.validate({"reasoning": "r", "action": {"tool": "search_pubmed",
                                                          "args": {"query": "x", "expand_mode": "ripple"}}},
                            schema.schema)  # fmt: skip


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_a_server_refusing_the_schema_gets_the_text_protocol(demo, demo_project, backend):
    server = OllamaReplayServer(schemas=False) if backend == "ollama" else OpenAIReplayServer(json_mode=False)
    with server:
        where = {"ollama_host": server.root_url} if backend == "ollama" else {"openai_base_url": server.base_url}
        cfg = demo.with_overrides(llm={"brain": backend, "timeout_s": 10.0, **where})
        text = "The seed query comes first.\nAction: " + json.dumps(REPLY["action"])
        server.script(text)
        outcome = one_cycle(cfg, demo_project)
        paths = "/api/chat" if backend == "ollama" else "/v1/chat/completions"
        refused = len(server.requests_to(paths)) - 1
    assert (outcome.event, outcome.tool) == ("tool_call", "search_pubmed")
    assert refused == (1 if backend == "ollama" else 2)  # OpenAI: both response_format forms were refused
    assert sent_schema(backend, server.chat_requests[0]) is not None
    assert sent_schema(backend, server.chat_requests[-1]) is None and "response_format" not in server.chat_requests[-1]
    assert outcome.brain_call is not None and outcome.brain_call["mode"] == "text_fallback"
    log = open(outcome.log_path, encoding="utf-8").read()
    assert "brain call: mode=text_fallback" in log


def test_the_rules_brain_says_it_answered_in_text(demo, demo_project):
    outcome = one_cycle(demo.with_overrides(llm={"brain": "rules"}), demo_project)
    assert outcome.brain == RulesBrain.name and outcome.brain_call is not None
    assert outcome.brain_call["mode"] == "text"
    assert "brain call: mode=text schema=agent_action" in open(outcome.log_path, encoding="utf-8").read()


def test_the_boundary_judge_is_constrained_to_the_candidates_shown(cfg, loopback):
    from ra_agent.topics.judge import Candidate, ask_judge

    shown = [Candidate(8425567, "Omeprazole versus ranitidine in erosive oesophagitis", 0.81),
             Candidate(9187325, "Lansoprazole maintenance of healed reflux oesophagitis", 0.77),
             Candidate(7556410, "Helicobacter pylori eradication and peptic ulcer recurrence", 0.52)]  # fmt: skip
    brain = select_brain(loopback.configure(cfg), RulesBrain)
    loopback.script(json.dumps({"reasoning": "The two reflux trials fit the cluster.",
                                "action": {"tool": "judge_boundary", "args": {"keep_pmids": [8425567, 9187325]}}}))  # fmt: skip
    verdict = ask_judge(brain, "PPI in reflux oesophagitis", shown, 0.6)
    assert verdict.keep == [8425567, 9187325] and not verdict.error
    schema = sent_schema(loopback.backend, loopback.chat_requests[0])
    assert schema is not None
    keep = schema["properties"]["action"]["properties"]["args"]["properties"]["keep_pmids"]
    assert keep["items"]["enum"] == sorted(c.pmid for c in shown)
    jsonschema.validate({"reasoning": "none fit", "action": {"tool": "judge_boundary", "args": {"keep_pmids": []}}},
                        schema)  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):  # a PMID it was not shown
        jsonschema.validate({"reasoning": "r", "action": {"tool": "judge_boundary", "args": {"keep_pmids": [1]}}},
                            schema)  # fmt: skip


PICO_TRIALS = (10950032, 9354207)  # rabeprazole vs ranitidine (338 patients); pantoprazole vs ranitidine (24)


def test_pico_batches_are_constrained_to_the_batch_pmids_and_the_seven_fields(cfg, loopback):
    from demo_corpus import demo_papers

    from ra_agent.evidence.pico.llm_extract import LlmExtractor

    papers = [p for p in demo_papers() if p.pmid in PICO_TRIALS]
    reply = {"records": [
        {"pmid": 10950032, "P": "338 patients with erosive gastroesophageal reflux disease",
         "I": "rabeprazole 20 mg once daily", "C": "ranitidine 150 mg four times daily",
         "O": "absence of esophageal erosions or ulcerations", "StudyDesign": "RCT, double-blind",
         "PopulationAge": "", "SampleSize": "338"},
        {"pmid": 9354207, "P": "patients with oesophagitis grade II and III", "I": "pantoprazole 40 mg",
         "C": "ranitidine 150 mg", "O": "healing", "StudyDesign": "RCT", "PopulationAge": "adults",
         "SampleSize": "24"},
    ]}  # fmt: skip
    brain = select_brain(loopback.configure(cfg), RulesBrain)
    loopback.script(json.dumps(reply))
    extractor = LlmExtractor.from_config(brain, loopback.configure(cfg))
    records = extractor.extract(papers)
    (request,) = loopback.chat_requests
    schema = sent_schema(loopback.backend, request)
    assert schema is not None, f"{loopback.backend}: no schema in {sorted(request)}"
    item = schema["properties"]["records"]["items"]
    assert sorted(item["properties"]["pmid"]["enum"]) == sorted(PICO_TRIALS)
    assert item["required"] == ["pmid", "P", "I", "C", "O", "StudyDesign", "PopulationAge", "SampleSize"]
    assert item["additionalProperties"] is False and schema["properties"]["records"]["minItems"] == 2
    jsonschema.validate(reply, schema)
    for bad in ({"records": [{**reply["records"][0], "pmid": 123}, reply["records"][1]]},  # a PMID not in the batch
                {"records": [{**reply["records"][0], "Notes": "x"}, reply["records"][1]]},  # an extra key
                {"records": [{**reply["records"][0], "SampleSize": 338}, reply["records"][1]]},  # not a string
                {"records": reply["records"][:1]}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert [r.extractor for r in records] == [brain.name] * 2
    assert records[0].SampleSize == "338" and records[1].PopulationAge == "" and "PopulationAge" in records[1].dropped
    assert extractor.call_summary()["llm_mode"] == "json_schema 1" and extractor.calls[0]["schema"] == "pico_batch"


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_a_server_refusing_the_pico_schema_gets_the_text_prompt_and_a_repair_turn(cfg, backend):
    from demo_corpus import demo_papers

    from ra_agent.evidence.pico.llm_extract import FIX_JSON_PROMPT, LlmExtractor

    papers = [p for p in demo_papers() if p.pmid in PICO_TRIALS]
    server = OllamaReplayServer(schemas=False) if backend == "ollama" else OpenAIReplayServer(json_mode=False)
    with server:
        where = {"ollama_host": server.root_url} if backend == "ollama" else {"openai_base_url": server.base_url}
        llm_cfg = cfg.with_overrides(llm={"brain": backend, "timeout_s": 10.0, **where})
        fixed = [{"pmid": p, "I": i} for p, i in zip(PICO_TRIALS, ("rabeprazole", "pantoprazole"), strict=True)]
        server.script("Sure! Here are the records: [{pmid: 10950032, I: 'rabeprazole',", json.dumps(fixed))
        extractor = LlmExtractor.from_config(select_brain(llm_cfg, RulesBrain), llm_cfg)
        records = extractor.extract(papers)
        requests = server.chat_requests
    assert [r.I for r in records] == ["rabeprazole", "pantoprazole"]
    assert sent_schema(backend, requests[0]) is not None  # asked with the schema first, refused
    assert requests[-1]["messages"][-1]["content"] == FIX_JSON_PROMPT  # then the text protocol's repair turn
    assert extractor.call_summary()["llm_mode"] == "text_fallback 1"


@pytest.mark.parametrize("server_kind", ["ollama", "openai", "llama-cpp-python"])
def test_the_agent_cycle_run_records_how_the_brain_was_asked(demo_project, monkeypatch, server_kind):
    """One agent_cycle run through the agent sensor against a recording server: the run's metadata carries the mode,
    tokens, time to first token and total time. The llama-cpp-python server refuses OpenAI's json_schema form with
    its 500 and takes json_object+schema; it reports no usage in a stream, so the tokens are the chunks counted."""
    import dagster as dg
    from flow.conftest import write_config

    from ra_agent.agent.goal import GoalStore
    from ra_agent.config import load_config
    from ra_assets import local
    from ra_assets.definitions import defs as load
    from ra_assets.defs.agent.automation import agent_sensor

    server = (OllamaReplayServer() if server_kind == "ollama"
              else OpenAIReplayServer(llama_cpp_python=server_kind == "llama-cpp-python"))  # fmt: skip
    with server:
        llm = {"brain": "ollama", "ollama_host": server.root_url} if server_kind == "ollama" else {
            "brain": "openai", "openai_base_url": server.base_url, "model": "gemma3n:e4b"}  # fmt: skip
        config = write_config(demo_project)
        lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in llm.items())
        config.write_text(config.read_text().replace('[llm]\nbrain = "rules"\n', f"[llm]\n{lines}\n"))
        monkeypatch.setenv("RA_CONFIG", str(config))
        cfg = load_config(config)
        with open_store(cfg) as store:
            goal_id = start_goal(cfg, store, demo_project / HANDBOOK, f"{llm['brain']}:gemma3n:e4b").goal_id
        server.script(json.dumps(REPLY))
        with dg.instance_for_test() as instance:
            result, _ = local.tick(agent_sensor, instance, config, None)
            (request,) = [r for r in result.run_requests or [] if r.job_name == "agent_cycle_job"]
            run = local.execute(load(), instance, request, agent_sensor.name)
            outputs = [e.event_specific_data for e in run.all_events if e.event_type_value == "STEP_OUTPUT"]
        requests = server.chat_requests
    values = {k: getattr(v, "value", v) for out in outputs for k, v in (out.metadata or {}).items()}
    assert run.success and values["event"] == "tool_call" and values["tool"] == "search_pubmed"
    assert values["brain"] == f"{llm['brain']}:gemma3n:e4b" and values["brain_mode"] == "json_schema"
    assert values["brain_schema"] == "agent_action"
    assert 0 <= values["brain_ttft_s"] <= values["brain_total_s"] < 10
    if server_kind == "llama-cpp-python":
        assert [r["response_format"]["type"] for r in requests] == ["json_schema", "json_object"]  # refused, taken
        assert requests[1]["response_format"]["schema"]["required"] == ["reasoning", "action"]
        assert values["brain_response_format"] == "json_object+schema"
        assert "brain_prompt_tokens" not in values and values["brain_tokens_counted"] == "stream chunks"
        assert values["brain_completion_tokens"] == len(json.dumps(REPLY)) // 48 + 1  # one per 48-character chunk
    else:
        assert values["brain_prompt_tokens"] > 500 and values["brain_completion_tokens"] == len(json.dumps(REPLY)) // 4
        assert len(requests) == 1 and sent_schema(server_kind, requests[0]) is not None
    with open_store(cfg) as store:
        state = GoalStore(cfg.data_dir, store).load(goal_id)
    assert [h["event"] for h in state.history if h["event"] == "tool_call"] == ["tool_call"]


def test_alternative_pico_and_prisma_verdicts_are_constrained(demo, loopback):
    from ra_agent.evidence.prisma.check import check_draft
    from ra_agent.evidence.sr.alternative import propose_alternative_pico
    from ra_agent.topics.view import member_pmids

    cfg = loopback.configure(demo)
    brain = select_brain(cfg, RulesBrain)
    with open_store(cfg) as store:
        cid = store.conn.execute("SELECT cluster_id FROM cluster_manifest WHERE status='active' ORDER BY cluster_id"
                                 ).fetchone()[0]  # fmt: skip
        members = member_pmids(store, cid)
        words = [w for w in store.papers(members[1:2])[0].title.split() if len(w) > 4][:3]
        theme = f"P: {words[0]}; I: {words[1]}; C: placebo; O: {words[2]}"
        loopback.script(json.dumps({"new_PICO": theme, "seed_query": f"{words[1]} AND {words[0]}"}),
                        json.dumps({"compliant": False, "missing_items": [5, 7]}))  # fmt: skip
        alt = propose_alternative_pico(cfg, store, brain, members[:1], cluster_id=cid)
        checked = check_draft(cfg, brain, "A draft without headings.")
    first, second = (sent_schema(loopback.backend, r) for r in loopback.chat_requests)
    assert first is not None and second is not None
    assert first["required"] == ["new_PICO", "seed_query"] and first["additionalProperties"] is False
    assert second["properties"]["missing_items"]["items"] == {"enum": [4, 5, 6, 7, 8]}  # the items asked about
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"compliant": True, "missing_items": [12]}, second)
    assert (alt.judged_by, alt.new_PICO) == (brain.name, theme)
    assert (checked.judged_by, checked.as_dict()) == (brain.name, {"compliant": False, "missing_items": [5, 7]})


# Gemma 3 270M's reply under llama-cpp-python's json_object+schema, recorded in a real `ra run` (2026-11-26): the
# grammar let a raw newline into the reasoning string, which strict JSON refuses; the Action itself is sound.
GEMMA_RAW_NEWLINE_REPLY = (
    '{"reasoning": ">(20 of 15 clusters left out of this state block to fit the token budget)\n'
    '(14 of 15 clusters left out of this state block to fit the token budget) [/INST]{", "action": {"tool": '
    '"search_pubmed", "args": { "query": "proton pump inhibitors AND gastroesophageal reflux", "retmax": 2000, '
    '"expand_mode": "semantic"}} }'
)


def test_a_raw_newline_in_a_constrained_reply_is_read_not_a_json_error():
    from ra_agent.llm.protocol import parse_action
    from ra_agent.llm.structured import action_reply_text

    with pytest.raises(ValueError):
        json.loads(GEMMA_RAW_NEWLINE_REPLY)  # strict JSON refuses it: the case is real
    text = action_reply_text(GEMMA_RAW_NEWLINE_REPLY)
    assert text.endswith('"expand_mode": "semantic"}}') and "\nAction: " in text
    parsed = parse_action(text)
    assert parsed.tool == "search_pubmed" and parsed.args["retmax"] == 2000, parsed
