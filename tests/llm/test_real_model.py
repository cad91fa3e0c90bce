"""A real local model in the loop: llama.cpp's server with Gemma 3 270M drives seek_gap cycles on the demo corpus.

The server runs on a free loopback port and is stopped also when the test fails. Every cycle must end with a
schema-valid executed action or a recorded no-op, never an `error` or `json_error` event, and every prompt
must fit the context the server was given. The 270M base model exercises the machinery (constrained
decoding, the Action protocol, the cycle), not the judgement: what it chooses is not checked.

Stages a cycle asks for (search, PICO, SR overlap) run with the rules, as they do for any brain that is not
asked here: the LLM's part under test is the cycle. Under CI=true a model that cannot be installed or started
fails the test; elsewhere it skips saying why (scripts/setup.sh installs it).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time

import dagster as dg
import httpx
import jsonschema
import pytest

from ra_agent.agent.cycle import run_cycle
from ra_agent.agent.goal import GoalStore
from ra_agent.agent.runner import perform_requests, start_goal
from ra_agent.config import load_config
from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.llm import serve
from ra_agent.llm.openai_brain import OpenAIBrain
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.llm.select import select_brain
from ra_agent.workspace import open_store

from .conftest import why_no_llm

log = logging.getLogger(__name__)
pytestmark = pytest.mark.slow

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"
N_CTX = 4096  # the server's context; the prompt budget below keeps every prompt under it
REPLY_TOKENS = 320
# the fewest cycles that show what the test asserts: the first on a fresh goal, then two that read the history of the
# ones before (their prompts fill the same budget); every reply schema-valid, at least one an executed tool call
CYCLES = 3


def unavailable(reason: str):
    """Fail under CI (the install step must have provided the model), skip elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"real-model test: {reason}")
    pytest.skip(f"real-model test: {reason} ({why_no_llm()})")


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    missing = serve.missing_packages()
    if missing:
        unavailable(f"{', '.join(missing)} not installed")
    try:
        model = serve.model_file()
    except (serve.LlmServeError, OSError, ValueError) as exc:
        unavailable(f"the Gemma 3 270M GGUF could not be assembled: {exc}")
    log_path = tmp_path_factory.mktemp("llm") / "llama_server.log"
    try:
        server = serve.LlamaServer(model, log_path, n_ctx=N_CTX).__enter__()  # serve.default_threads()
    except serve.LlmServeError as exc:
        unavailable(str(exc))
    try:
        log.info("llama.cpp server ready at %s in %.1f s", server.info.base_url, server.ready_s)
        yield server
    finally:
        server.close()
    assert server.proc is not None and server.proc.poll() is not None  # nothing left running


def llm_settings(server) -> dict:
    return {"brain": "openai", "openai_base_url": server.info.base_url, "model": serve.MODEL_ALIAS,
            "num_ctx": N_CTX, "reply_tokens": REPLY_TOKENS, "temperature": 0.0, "seed": 7, "timeout_s": 300.0}  # fmt: skip


def prompt_tokens(server, messages: list[dict]) -> int:
    """The prompt's length in the model's own tokens (the server's tokenizer), chat template aside."""
    text = "\n".join(m["content"] for m in messages)
    answer = httpx.post(f"http://127.0.0.1:{server.info.port}/extras/tokenize/count", json={"input": text}, timeout=60)
    answer.raise_for_status()
    return answer.json()["count"]


def test_gemma_drives_seek_gap_cycles(gemma, demo, demo_project, real_model_report):
    # the question set's LLM judge asked once per build (40 by default: minutes per build on CPU; its own test below)
    cfg = demo.with_overrides(llm={**llm_settings(gemma), "judge_max_calls": 1}, goal={"max_cycles": 40, "max_tool_calls": 60},
                              tokens={"token_soft_cap": N_CTX - REPLY_TOKENS - 600})  # fmt: skip
    brain = select_brain(cfg, RulesBrain)
    assert isinstance(brain, OpenAIBrain) and brain.name == f"openai:{serve.MODEL_ALIAS}"
    rules = RulesBrain()  # the stages' brain (see the module docstring)
    embedder = SentenceTransformerEmbedder(cfg)
    asked: list[dict] = []
    original = brain.chat_structured

    def recording(messages, schema):  # keep what each cycle sent, to check the schema and the context
        reply = original(messages, schema)
        asked.append({"messages": messages, "schema": schema.schema, "reply": reply, "stats": dict(brain.last_stats)})
        return reply

    brain.chat_structured = recording  # type: ignore[method-assign]
    outcomes, goals_run, started = [], [], time.monotonic()
    with open_store(cfg) as store:
        while len(outcomes) < CYCLES:
            goal_id = start_goal(cfg, store, demo_project / HANDBOOK, brain.name).goal_id
            goals_run.append(goal_id)
            while len(outcomes) < CYCLES:
                outcome = run_cycle(cfg, store, goal_id, brain, embedder_factory=lambda: embedder)
                outcomes.append(outcome)
                assert perform_requests(cfg, store, outcome, rules, lambda: embedder), f"a stage crashed: {outcome}"
                log.info("cycle %d of %s: %s %s (%s)", outcome.cycle, goal_id, outcome.event, outcome.tool or "",
                         outcome.brain_call)  # fmt: skip
                if outcome.status != "in_progress":
                    break  # the model stopped its goal (or success): the next cycles run on a new goal
        states = [GoalStore(cfg.data_dir, store).load(g) for g in goals_run]
    took = time.monotonic() - started

    assert len(outcomes) >= CYCLES
    events = [h for s in states for h in s.history]
    bad = [h for h in events if h["event"] in ("error", "json_error")]
    assert not bad, f"protocol errors with the real model: {bad}"
    assert all(o.event in ("tool_call", "no_action", "stopped") for o in outcomes), [o.event for o in outcomes]
    assert sum(o.event == "tool_call" for o in outcomes) >= CYCLES // 2
    assert all(o.brain == brain.name for o in outcomes) and all(s.brain == brain.name for s in states)
    assert len(asked) >= sum(o.event != "stopped" or o.tool is not None for o in outcomes) > 0
    sizes = []
    for call in asked:
        assert call["stats"]["mode"] == "json_schema", call["stats"]
        jsonschema.validate(json.loads(call["reply"]), call["schema"])  # the server kept to the schema
        used = prompt_tokens(gemma, call["messages"])
        sizes.append(used)
        assert used + REPLY_TOKENS <= N_CTX, f"a prompt of {used} tokens leaves no room for the reply in {N_CTX}"
    tokens = sum(c["stats"].get("completion_tokens") or 0 for c in asked)
    generating = sum((c["stats"]["total_s"] or 0) - (c["stats"]["ttft_s"] or 0) for c in asked)
    real_model_report(
        f"real model {brain.name}: {len(outcomes)} cycles on {len(goals_run)} goal(s) in {took:.0f} s; "
        f"{len(asked)} constrained calls, mode json_schema ({asked[0]['stats'].get('response_format')}), prompts "
        f"{min(sizes)}-{max(sizes)} tokens of n_ctx {N_CTX}; "
        f"{tokens} tokens generated at {tokens / max(generating, 1e-6):.1f} tokens/s; "
        f"events {[o.event + (':' + o.tool if o.tool else '') for o in outcomes]}"
    )


def test_the_agent_sensor_runs_one_cycle_with_the_real_model(gemma, demo_project, monkeypatch, real_model_report):
    from flow.conftest import write_config

    from ra_assets import local
    from ra_assets.defs.agent.automation import agent_sensor

    config = write_config(demo_project)  # brain = "rules"; the [llm] lines below point it at the server
    lines = [f"{k} = {json.dumps(v)}" for k, v in llm_settings(gemma).items()]
    text = config.read_text().replace('[llm]\nbrain = "rules"\n', "[llm]\n" + "\n".join(lines) + "\n")
    config.write_text(text + f"[tokens]\ntoken_soft_cap = {N_CTX - REPLY_TOKENS - 600}\n")
    monkeypatch.setenv("RA_CONFIG", str(config))
    cfg = load_config(config)
    with open_store(cfg) as store:
        goal_id = start_goal(cfg, store, demo_project / HANDBOOK, f"openai:{serve.MODEL_ALIAS}").goal_id
    from ra_assets.definitions import defs as load

    defs = load()
    with dg.instance_for_test() as instance:
        result, _ = local.tick(agent_sensor, instance, config, None)
        requests = [r for r in result.run_requests or [] if r.job_name == "agent_cycle_job"]
        assert len(requests) == 1, result
        run = local.execute(defs, instance, requests[0], agent_sensor.name)
        assert run.success
        assert run.dagster_run.tags.get("ra/goal") == goal_id  # the run is tagged with its goal and cycle
        outputs = [e.event_specific_data for e in run.all_events if e.event_type_value == "STEP_OUTPUT"]
        values = {k: getattr(v, "value", v) for out in outputs for k, v in (out.metadata or {}).items()}
    assert values["brain"] == f"openai:{serve.MODEL_ALIAS}" and values["brain_mode"] == "json_schema", values
    assert values["event"] in ("tool_call", "no_action", "stopped") and values["brain_total_s"] > 0, values
    real_model_report(
        f"agent_cycle run with {values['brain']}: {values['event']} {values.get('tool', '')}, mode "
        f"{values['brain_mode']} ({values.get('brain_response_format')}), {values.get('brain_completion_tokens')} "
        f"tokens ({values.get('brain_tokens_counted')}), ttft {values.get('brain_ttft_s')} s, "
        f"total {values['brain_total_s']} s"
    )
    with open_store(cfg) as store:
        state = GoalStore(cfg.data_dir, store).load(goal_id)
    assert state.cycle == 1 and not [h for h in state.history if h["event"] in ("error", "json_error")]


def test_gemma_judges_a_trial_for_a_review_question(gemma, real_model_report):
    """One "is trial T eligible for the topic's question" asked of the real model through the judge seam: a
    schema-valid judgement quoting one of the record's own sentences, or the rules deciding and saying why; never an
    unlabelled answer."""
    from demo_corpus import demo_papers

    from ra_agent.config import Config
    from ra_agent.evidence.questions.judge import RulesJudge
    from ra_agent.evidence.questions.llm_judge import LlmQuestionJudge, record_sentences
    from ra_agent.evidence.questions.model import RULES
    from ra_agent.evidence.questions.topic import Topic

    cfg = Config().with_overrides(llm=llm_settings(gemma))
    scope = demo_papers()[:300]
    topic = Topic.from_seed_query("proton pump inhibitors AND gastroesophageal reflux").with_corpus(scope)
    paper = next(p for p in scope if RulesJudge().trial(p, topic).eligible)
    brain = OpenAIBrain(cfg)
    judge = LlmQuestionJudge(brain, max_calls=1)
    answer = judge.trial(paper, topic)
    (call,) = judge.calls
    assert call["mode"] == "json_schema" and call["schema"] == "trial_eligibility"
    if answer.judged_by == brain.name:  # the model's answer was used: it quoted a sentence of the record
        said = re.search(rf'(not )?eligible by {re.escape(brain.name)}: "(.+)"', answer.reason)
        assert said and answer.eligible == (said.group(1) is None), answer.reason
        assert any(s.startswith(said.group(2)) for s in record_sentences(paper)), answer.reason
    else:  # the rules decided, and say why
        assert answer.judged_by.startswith(f"{RULES} (fallback: ") and answer.eligible, answer
    real_model_report(
        f"question judge {brain.name} on PMID {paper.pmid}: eligible={answer.eligible} by {answer.judged_by}; "
        f"{call['completion_tokens']} tokens in {call['total_s']} s ({call['mode']}, {call.get('response_format')})"
    )
