"""ra ask: the bounded tool loop over the demo corpus, with the rules planner and a scripted Ollama planner."""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

from ra_agent.ask.commands import add_ask_parser, ask_status_lines, result_lines
from ra_agent.ask.evidence import comparison, design_label, evidence_score
from ra_agent.ask.flow import AnswerFilter, ask, recent_runs
from ra_agent.ask.rules import RULES_ASK_NAME, AskRulesBrain
from ra_agent.ask.tools import NO_SUPPORT, AskTools, content_words, mmr_select, sentences, summarise_result
from ra_agent.embed.tokens import count_tokens, encoder_for
from ra_agent.llm.ollama_brain import OllamaBrain
from ra_agent.llm.protocol import REPAIR_PROMPT

ON_TOPIC = "Does omeprazole heal erosive oesophagitis better than ranitidine?"
OFF_TOPIC = "What is the mass of the supermassive black hole at the centre of the Milky Way galaxy?"


QUOTE = re.compile(r'^- (?P<design>[^,]+), (?P<year>\d{4}|n\.d\.) \[PMID:(?P<pmid>\d+)\]: "(?P<sentence>.+)"$')


def action(tool: str, **args) -> str:
    return f"Thought: I need more evidence.\nAction: {json.dumps({'tool': tool, 'args': args})}"


def run_rules(cfg, store, embedder, question=ON_TOPIC, **kw):
    return ask(cfg, store, question, brain=AskRulesBrain(cfg), embedder=embedder, **kw)


def top_hit(cfg, store, embedder, query: str) -> int:
    """The PMID find_similar puts first for `query` (what a planner would cite after that search)."""
    return AskTools(cfg, store, embedder).find_similar([query], k=cfg.ask.k)["data"][0]["pmid"]


def requests_text(server) -> list[str]:
    return ["\n".join(m["content"] for m in r["messages"]) for r in server.chat_requests]


# ---------------------------------------------------------------------------- the rules planner


def test_rules_planner_answers_with_sentences_quoted_from_the_read_abstracts(cfg, store, embedder):
    tokens: list[str] = []
    result = run_rules(cfg, store, embedder, on_final_token=tokens.append)
    assert result.brain == RULES_ASK_NAME and RULES_ASK_NAME in result.answer
    assert (result.stop_reason, result.tool_calls, result.error) == ("answered", 3, None)
    assert [s.tool for s in result.steps if s.kind == "tool"] == ["find_similar", "read_note", "read_note"]
    assert result.citations and store.existing_pmids(result.citations) == set(result.citations)
    assert not result.no_support and result.removed_citations == []
    read = {json.loads(shown)["meta"]["pmid"] for plan, shown in result.sequence[1:]}
    assert set(result.citations) == read  # each paper read contributes its best sentence
    quoted = [m for line in result.answer.splitlines() if (m := QUOTE.match(line))]
    assert 1 <= len(quoted) <= cfg.ask.rules_answer_sentences
    terms = set(content_words(ON_TOPIC))
    for m in quoted:
        paper = store.paper(int(m["pmid"]))
        assert m["sentence"] in sentences(paper.abstract)
        assert terms & set(content_words(m["sentence"]))
        assert (m["design"], m["year"]) == (design_label(paper), str(paper.year))  # each source's design and year
    # only the final answer streamed: several chunks, nothing of the tool phases
    assert len(tokens) > 1 and "".join(tokens) == result.answer
    assert not any("Action" in t or "tool_result" in t for t in tokens)
    assert result.success


def test_off_topic_question_gets_a_plain_no_support_answer(cfg, store, embedder):
    result = run_rules(cfg, store, embedder, question=OFF_TOPIC)
    assert result.no_support and NO_SUPPORT in result.answer and result.citations == []
    assert result.tool_calls == 1 and result.retrieved
    assert max(r["score"] for r in result.retrieved) < cfg.ask.support_floor
    assert "below the support floor" in result.answer


def test_telemetry_row_and_status_lines(cfg, store, embedder):
    result = run_rules(cfg, store, embedder)
    (row,) = recent_runs(store, 5)
    assert row["id"] == result.run_id and row["question"] == ON_TOPIC and row["brain"] == RULES_ASK_NAME
    assert (row["tool_calls"], row["turns"], row["steps"]) == (3, 4, len(result.steps))
    assert row["tokens_in"] == result.tokens_in > 0 and row["tokens_out"] == result.tokens_out > 0
    assert row["latency_ms"] >= sum(s["ms"] for s in row["step_log"] if s["kind"] == "tool")
    assert [s["kind"] for s in row["step_log"]] == ["decide", "tool"] * 3 + ["decide"]
    assert row["citations"] == result.citations and len(row["retrieved"]) == len(result.retrieved) > 0
    assert row["success"] == 1 and row["playbook_id"] == result.playbook_id
    lines = ask_status_lines(cfg, store)
    assert lines[0].startswith("ask runs: 1") and f"#{result.run_id}" in lines[1] and "3 tool calls" in lines[1]
    assert any(line.startswith("Mind-KB (Mind-KB, sqlite): 1 playbooks") for line in lines)
    printed = result_lines(store, result)
    assert printed[0] == "Citations:" and any("Telemetry: run" in line for line in printed)


# ---------------------------------------------------------------------------- a scripted LLM planner


def test_tool_call_limit_is_respected_then_the_answer_streams(ollama_cfg, store, embedder, ollama_server):
    a, b, c = store.all_pmids()[:3]
    final = "Final answer: " + " ".join(
        f"Omeprazole healed more patients than ranitidine [PMID:{a}]." for _ in range(4)
    )
    ollama_server.script(
        action("find_similar", queries=["omeprazole versus ranitidine healing"]),
        action("read_note", pmid=a),
        action("read_note", pmid=b),
        action("read_note", pmid=c),  # over the cap: refused
        final,
    )
    tokens: list[str] = []
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder,
                 max_tool_calls=3, on_final_token=tokens.append)  # fmt: skip
    assert (result.stop_reason, result.tool_calls, result.turns) == ("tool_limit", 3, 4)
    # four constrained decide turns (the planner's schema as Ollama's `format`), then the plain streamed answer
    assert [isinstance(r.get("format"), dict) for r in ollama_server.chat_requests] == [True] * 4 + [False]
    assert [s.mode for s in result.steps if s.kind == "decide"] == ["json_schema"] * 4
    assert ollama_server.unused_replies == 0
    finalize = ollama_server.chat_requests[-1]["messages"]
    assert '<finalize reason="tool_limit"/>' in finalize[-1]["content"]
    assert '<budget tool_calls_left="0"/>' in finalize[-3]["content"]
    assert result.citations == [a] and result.answer.startswith("Omeprazole healed")
    assert len(tokens) > 1 and "".join(tokens) == result.answer  # streamed from the server in pieces
    assert not result.success and result.playbook_id is None  # the loop did not exit early


def test_two_iterations_without_new_pmids_stop_the_loop(ollama_cfg, store, embedder, ollama_server):
    same = action("find_similar", queries=["omeprazole ranitidine"], k=5)
    ollama_server.script(same, same, same, f"Final answer: nothing new [PMID:{store.all_pmids()[0]}].")
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder, max_tool_calls=5)
    assert (result.stop_reason, result.tool_calls) == ("no_progress", 3)
    assert [s.new_pmids for s in result.steps if s.kind == "tool"] == [5, 0, 0]
    assert len(ollama_server.chat_requests) == 4 and "format" not in ollama_server.chat_requests[-1]
    assert '<finalize reason="no_progress"/>' in ollama_server.chat_requests[-1]["messages"][-1]["content"]


def test_the_planner_is_constrained_to_the_ask_tools_and_a_final_answer(ollama_cfg, store, embedder, ollama_server):
    """A constrained reply is JSON: {"reasoning", "action"}, the action a tool call or the final answer."""
    query = "omeprazole ranitidine"
    pmid = top_hit(ollama_cfg, store, embedder, query)
    search = {"tool": "find_similar", "args": {"queries": [query]}}
    final = {"tool": "final_answer", "args": {"answer": f"Omeprazole healed more patients [PMID:{pmid}]."}}
    ollama_server.script(json.dumps({"reasoning": "Search first.", "action": search}),
                         json.dumps({"reasoning": "Enough evidence.", "action": final}))  # fmt: skip
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder)
    schema = ollama_server.chat_requests[0]["format"]
    tools = [o["properties"]["tool"]["enum"][0] for o in schema["properties"]["action"]["anyOf"]]
    assert tools == ["find_similar", "read_note", "final_answer"] and schema["additionalProperties"] is False
    for bad in ({"reasoning": "r", "action": {"tool": "search_pubmed", "args": {"query": "x"}}},
                {"reasoning": "r", "action": {"tool": "read_note", "args": {"pmid": "12"}}},
                {"reasoning": "r", "action": final, "note": "x"}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert (result.stop_reason, result.tool_calls, len(ollama_server.chat_requests)) == ("answered", 1, 2)
    assert result.answer == f"Omeprazole healed more patients [PMID:{pmid}]." and result.citations == [pmid]


def test_malformed_json_is_repaired_once(ollama_cfg, store, embedder, ollama_server):
    pmid = top_hit(ollama_cfg, store, embedder, "omeprazole ranitidine")
    ollama_server.script(
        'Thought: search first.\nAction: {"tool": "find_similar", "args": {"queries": ["omeprazole ranitidine"]}',
        '{"tool": "find_similar", "args": {"queries": ["omeprazole ranitidine"]}}',
        f"Final answer: Omeprazole heals more oesophagitis than ranitidine [PMID:{pmid}].",
    )
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder)
    assert (result.stop_reason, result.repairs, result.tool_calls) == ("answered", 1, 1)
    texts = requests_text(ollama_server)
    assert sum(t.count("FIX JSON ONLY") for t in texts) == 1 and REPAIR_PROMPT in texts[1]
    assert [s.kind for s in result.steps] == ["decide", "repair", "tool", "decide"]
    # the conversation carries the repaired Action, not the broken one
    third = ollama_server.chat_requests[2]["messages"]
    assert third[2]["content"].startswith("Action: {") and third[3]["content"].startswith(
        '<tool_result tool="find_similar"'
    )
    assert result.citations == [pmid] and result.success


def test_schema_violation_twice_ends_with_an_error_answer(ollama_cfg, store, embedder, ollama_server):
    ollama_server.script(
        action("find_similar", queries=["omeprazole"], k="many"),
        '{"tool": "find_similar", "args": {"queries": ["a", "b", "c", "d"]}}',
    )
    tokens: list[str] = []
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder,
                 on_final_token=tokens.append)  # fmt: skip
    assert result.stop_reason == "schema_error" and result.tool_calls == 0 and len(ollama_server.chat_requests) == 2
    assert "still invalid after one repair turn" in result.answer and "at most 3 queries" in result.answer
    assert "".join(tokens) == result.answer and result.citations == [] and not result.no_support
    assert not result.success and recent_runs(store, 1)[0]["stop_reason"] == "schema_error"


def test_only_pmids_a_tool_returned_in_this_run_may_be_cited(ollama_cfg, store, embedder, ollama_server):
    query = "omeprazole ranitidine erosive oesophagitis"
    real = top_hit(ollama_cfg, store, embedder, query)
    returned = {
        h["pmid"] for h in AskTools(ollama_cfg, store, embedder).find_similar([query], k=ollama_cfg.ask.k)["data"]
    }
    stored_not_returned = next(p for p in store.all_pmids() if p not in returned)
    ollama_server.script(
        action("find_similar", queries=[query]),
        f"Final answer: Omeprazole healed more patients [PMID:{real}]. Ranitidine was weaker "
        f"[PMID:{stored_not_returned}]. It also cured everyone [PMID:99999999].",
    )
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder)
    assert result.citations == [real] and result.removed_citations == [stored_not_returned, 99999999]
    assert "99999999" not in result.answer and str(stored_not_returned) not in result.answer
    assert result.answer.endswith("Ranitidine was weaker. It also cured everyone.")  # the sentences still read
    assert result.playbook_id is None  # a run that cited a paper it never saw is no playbook
    assert recent_runs(store, 1)[0]["removed_citations"] == [stored_not_returned, 99999999]


def test_uncited_answer_says_the_corpus_holds_no_support(ollama_cfg, store, embedder, ollama_server):
    ollama_server.script(action("find_similar", queries=["black holes"]), "Final answer: Black holes are heavy.")
    result = ask(ollama_cfg, store, OFF_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder)
    best = max(r["score"] for r in result.retrieved)
    # below the calibrated floor the LLM's unsupported text is not passed on, and no playbook is stored
    assert best < ollama_cfg.ask.support_floor and result.no_support and result.playbook_id is None
    assert (
        result.answer == f"{NO_SUPPORT} (best similarity {best:.2f} < support_floor {ollama_cfg.ask.support_floor:.2f})"
    )


def test_unknown_pmid_in_read_note_is_a_failed_tool_call(ollama_cfg, store, embedder, ollama_server):
    ollama_server.script(action("read_note", pmid=1), "Final answer: none.")
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder)
    second = ollama_server.chat_requests[1]["messages"][-1]["content"]
    assert '"ok":false' in second and "PMID 1 is not in the local corpus" in second
    assert [s.ok for s in result.steps if s.kind == "tool"] == [False]


# ---------------------------------------------------------------------------- the tools and helpers


def test_find_similar_mmr_filters_and_short_abstract_penalty(cfg, store, embedder):
    tools = AskTools(cfg, store, embedder)
    out = tools.find_similar(["omeprazole ranitidine healing"], k=10, filter={"year_from": 1994, "year_to": 1995})
    years = [d["year"] for d in out["data"]]
    assert out["ok"] and 0 < len(years) <= 10 and all(1994 <= y <= 1995 for y in years)
    assert len({d["pmid"] for d in out["data"]}) == len(years)
    assert all(len(d["snippet"]) <= cfg.ask.snippet_chars for d in out["data"])
    cosine_only = {"mmr_lambda": 1.0, "evidence_weight": 0.0, "head_to_head_bonus": 0.0}
    relevance_only = AskTools(cfg.with_overrides(ask=cosine_only), store, embedder)
    scores = [d["score"] for d in relevance_only.find_similar(["omeprazole ranitidine healing"], k=10)["data"]]
    assert scores == sorted(scores, reverse=True)
    # with the evidence rule, the order is cosine + the rule's score (design level, head-to-head bonus)
    ruled = AskTools(cfg.with_overrides(ask={"mmr_lambda": 1.0}), store, embedder)
    question = "omeprazole versus ranitidine for healing"
    data = ruled.find_similar([question], k=10)["data"]
    a, compared = cfg.ask, comparison(question)
    total = [d["score"] - ruled._short_penalty(store.paper(d["pmid"])) + evidence_score(
        store.paper(d["pmid"]), compared, weight=a.evidence_weight, head_to_head=a.head_to_head_bonus) for d in data]  # fmt: skip
    assert total == pytest.approx(sorted(total, reverse=True), abs=1e-4)
    assert [d["score"] for d in data] != sorted((d["score"] for d in data), reverse=True)  # the rule moved something
    assert tools.find_similar(["omeprazole"], k=5, filter={"article_type": "Meta-Analysis"})["data"] == []
    paper = store.paper(store.all_pmids()[0])
    paper.abstract = "x" * 40
    assert tools._short_penalty(paper) == pytest.approx(cfg.ask.short_chunk_penalty * (1 - 40 / 160))
    paper.abstract = "x" * 400
    assert tools._short_penalty(paper) == 0.0


def test_mmr_skips_near_duplicates():
    vectors = np.array([[1, 0, 0], [1, 0, 0], [0.6, 0.8, 0], [0, 0, 1]], dtype=np.float32)
    relevance = np.array([0.9, 0.9, 0.85, 0.2], dtype=np.float32)
    assert mmr_select(relevance, vectors, 3, 1.0) == [0, 1, 2]
    assert mmr_select(relevance, vectors, 3, 0.5) == [0, 2, 3]


def test_read_note_clips_and_knows_missing_papers(cfg, store, embedder):
    tools = AskTools(cfg, store, embedder)
    pmid = store.all_pmids()[0]
    note = tools.read_note(pmid, max_chars=100)
    assert note["ok"] and note["meta"]["pmid"] == pmid and note["truncated"] and len(note["text"]) <= 100
    assert tools.read_note(1, 100) == {"ok": False, "error": "PMID 1 is not in the local corpus"}


def test_large_tool_results_are_summarised_within_the_budget():
    enc = encoder_for()
    result = {"ok": True, "data": [{"pmid": i, "title": "Omeprazole trial " * 8, "year": 2000, "score": 0.5,
                                    "snippet": "Healing rates were higher with omeprazole. " * 6} for i in range(40)]}  # fmt: skip
    shown = summarise_result(result, 600, enc)
    assert count_tokens(json.dumps(shown, separators=(",", ":")), enc) <= 600
    assert (
        shown["summarised"]
        and shown["omitted"] > 0
        and [d["pmid"] for d in shown["data"]] == list(range(len(shown["data"])))
    )
    note = summarise_result({"ok": True, "meta": {"pmid": 1}, "text": "word " * 3000}, 200, enc)
    assert count_tokens(json.dumps(note, separators=(",", ":")), enc) <= 200 and note["text"].endswith(" …")
    small = {"ok": True, "data": []}
    assert summarise_result(small, 600, enc) is small


def test_answer_filter_judges_citations_split_across_stream_chunks():
    text = "Final answer: Omeprazole works [PMID:11] and so do others [PMID: 99]; see [PMIDs: 11, 98]. Done [x]."
    answer = AnswerFilter(lambda pmids: {p for p in pmids if p == 11})
    out = "".join(answer.feed(ch) for ch in text) + answer.flush()
    assert out == "Omeprazole works [PMID:11] and so do others; see [PMID:11]. Done [x]."
    assert answer.cited == [11] and answer.removed == [99, 98]


def test_cli_parser_registers_ask():
    import argparse

    parser = argparse.ArgumentParser()
    add_ask_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ask", "Is omeprazole better?", "--max-tool-calls", "2", "--k", "5"])
    assert (args.question, args.max_tool_calls, args.k, args.func.__name__) == (
        "Is omeprazole better?",
        2,
        5,
        "cmd_ask",
    )


def test_brain_failure_ends_with_an_error_answer(ollama_cfg, store, embedder, ollama_server):
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder)  # nothing scripted
    assert result.stop_reason == "brain_error" and "no scripted reply left" in result.error
    assert result.answer.startswith("No answer: the language model did not answer") and not result.success


def test_ra_ask_command_streams_the_answer_and_prints_telemetry(cfg, embedder, tmp_path, capsys):
    import argparse

    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{cfg.data_dir}"\ndemo_corpus = ""\n[llm]\nbrain = "rules"\n')
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(config))
    add_ask_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ask", ON_TOPIC, "--max-tool-calls", "2", "--k", "5"])
    assert args.func(args) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert out.startswith("Extractive answer (rules:ask-v1, no LLM)") and "[PMID:" in out
    assert "\nCitations:\n  [PMID:" in out and "Telemetry" not in out  # telemetry goes to the log file
    cited = re.findall(r"^  \[PMID:\d+\] (.+?), (\d{4}|n\.d\.): ", out, re.M)
    assert cited and all(design for design, _ in cited)  # each citation names its design and year
    log = cfg.data_dir / cfg.logging.log_dir / "ask.log"
    assert "Telemetry: run 1, stop: answered, 3 turns, 2 tool calls" in log.read_text()
    assert str(log) in captured.err


def test_every_planner_prompt_fits_the_token_budget(ollama_cfg, store, embedder, ollama_server):
    from ra_agent.embed.tokens import prompt_budget

    queries = ["omeprazole healing", "lansoprazole relapse", "pantoprazole maintenance", "rabeprazole heartburn",
               "esomeprazole erosive", "ranitidine comparison", "famotidine reflux", "cisapride motility"]  # fmt: skip
    ollama_server.script(*(action("find_similar", queries=[q], k=50) for q in queries), "Final answer: done.")
    result = ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder, max_tool_calls=8)
    assert result.tool_calls >= 3
    enc = encoder_for(ollama_cfg)
    sizes = [count_tokens("\n".join(m["content"] for m in r["messages"]), enc) for r in ollama_server.chat_requests]
    assert max(sizes) <= prompt_budget(ollama_cfg), sizes
