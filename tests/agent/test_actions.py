"""Action protocol: extraction, one repair turn, schema validation, security, gating and the outcome table."""

from __future__ import annotations

import json

import pytest

from ra_agent.agent.actions import describe_tools, interpret_reply, validate_action
from ra_agent.agent.handbook import parse_handbook
from ra_agent.agent.registry import REGISTRY_SPECS, registry_specs
from ra_agent.config import Config
from ra_agent.llm.protocol import (
    ERROR_KINDS,
    OUTCOMES,
    REPAIR_PROMPT,
    ActionError,
    NoAction,
    ParsedAction,
    ValidAction,
    parse_action,
    parse_with_repair,
    repair_asker,
)
from ra_agent.llm.rules_brain import RulesBrain

GOOD = 'I will search.\nAction: {"tool": "search_pubmed", "args": {"query": "ketone ester epilepsy adults"}}'


def action(tool: str, **args) -> ParsedAction:
    return ParsedAction(tool, args, json.dumps({"tool": tool, "args": args}))


def accepted(parsed: ParsedAction, **kwargs) -> ValidAction:
    result = validate_action(parsed, **kwargs)
    assert isinstance(result, ValidAction), result
    return result


def rejected(parsed: ParsedAction, kind: str, **kwargs) -> ActionError:
    result = validate_action(parsed, **kwargs)
    assert isinstance(result, ActionError) and result.kind == kind, result
    return result


def handbook(tools: str = "[search_pubmed, run_pico]", exploration: str = "false"):
    return parse_handbook(f"---\nPrimary_goal: seek_gap\nTools_allowed: {tools}\nExploration: {exploration}\n---\n")


class Repairer:
    """An ask_repair that answers from a list and counts its calls."""

    def __init__(self, *answers: str):
        self.answers, self.prompts = list(answers), []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0)


# ---------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "reply",
    [
        GOOD,
        'Thought: search.\n```json\nAction: {\n  "tool": "search_pubmed",\n  "args": {"query": "ketone ester epilepsy adults"}\n}\n```\n',
        'Thought.\nAction:\n```json\n{"tool": "search_pubmed", "args": {"query": "ketone ester epilepsy adults"}}\n```',
        "**Action:** {tool: 'search_pubmed', args: {query: 'ketone ester epilepsy adults',},}",
        '> Action: {"tool": "search_pubmed", "args": {"query": "ketone ester epilepsy adults"}}   \n\n',
    ],
    ids=["plain", "fenced", "fence-after-marker", "bold-json5", "quoted"],
)
def test_action_extraction_tolerates_fences_and_json5(reply):
    parsed = parse_action(reply)
    assert isinstance(parsed, ParsedAction), parsed
    assert (parsed.tool, parsed.args) == ("search_pubmed", {"query": "ketone ester epilepsy adults"})


def test_braces_inside_strings_do_not_end_the_object():
    parsed = parse_action('Action: {"tool": "search_pubmed", "args": {"query": "a } b { c \\" }"}}')
    assert isinstance(parsed, ParsedAction) and parsed.args["query"] == 'a } b { c " }'


@pytest.mark.parametrize(
    "reply",
    ["", "Just thinking about the clusters; the next action: search later.", 'The JSON {"tool": "x"} is not an action'],
)
def test_no_action(reply):
    result = parse_action(reply)
    assert isinstance(result, NoAction)
    assert result.outcome.event == "no_action" and result.outcome.status is None


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ('Action: {"tool": "run_pico", "args": {"cluster_id": "a"}\n', "json_error"),
        ('Action: {"tool": "run_pico" "args": {}}', "json_error"),
        ("Action: search_pubmed with query ketone", "json_error"),
        (
            'Action: {"tool": "prisma_check", "args": {"cluster_id": "a"}}\nAction: {"tool": "run_pico", "args": {}}',
            "multiple_actions",
        ),
        ('Action: {"tool": "prisma_check", "args": {"cluster_id": "a"}}\nThat should settle it.', "trailing_text"),
        ('Action: {"tool": "prisma_check", "args": {"cluster_id": "a"}, "why": "x"}', "extra_keys"),
        ('Action: {"args": {"cluster_id": "a"}}', "missing_tool"),
        ('Action: {"tool": "prisma_check", "args": ["a"]}', "bad_arg"),
    ],
)
def test_malformed_actions(reply, kind):
    result = parse_action(reply)
    assert isinstance(result, ActionError) and result.kind == kind, result


# ---------------------------------------------------------------------------- repair turn


def test_repair_turn_is_sent_once_and_fixes_the_json():
    ask = Repairer('```json\n{"tool": "prisma_check", "args": {"cluster_id": "07e3a1dca9b4"}}\n```')
    result = parse_with_repair('Action: {"tool": "prisma_check", "args": {"cluster_id": 07e3a1dca9b4}}', ask)
    assert isinstance(result, ParsedAction) and result.repaired
    assert result.args == {"cluster_id": "07e3a1dca9b4"}
    (prompt,) = ask.prompts
    assert prompt.startswith(REPAIR_PROMPT) and "Problem: invalid JSON" in prompt and "FIX JSON ONLY" in REPAIR_PROMPT
    assert "Return ONLY valid JSON for the prior message" in REPAIR_PROMPT


def test_second_failure_is_json_error():
    ask = Repairer('{"tool": "prisma_check", "args": {cluster_id: }}')
    result = parse_with_repair('Action: {"tool": "prisma_check", "args": {', ask)
    assert isinstance(result, ActionError) and result.kind == "json_error" and result.repaired
    assert len(ask.prompts) == 1
    assert result.outcome.event == "json_error" and result.outcome.status is None
    assert result.outcome.log == {"json_error": True}


def test_repair_reply_without_json_is_json_error():
    result = parse_with_repair("Action: {oops", Repairer("Sorry, I cannot do that."))
    assert isinstance(result, ActionError) and result.kind == "json_error"


@pytest.mark.parametrize("reply", [GOOD, "no action here", 'Action: {"tool": "nope", "args": {}}'])
def test_no_repair_unless_the_json_is_broken(reply):
    ask = Repairer()
    parse_with_repair(reply, ask)
    assert ask.prompts == []


def test_rules_brain_answers_the_repair_turn():
    messages = [{"role": "user", "content": "cycle prompt"}]
    reply = 'Action: {"tool": "prisma_check", "args": {"cluster_id": "c1"},}'
    answer = repair_asker(RulesBrain(), messages, reply)(REPAIR_PROMPT)
    assert isinstance(parse_with_repair("Action: {", lambda _: answer), ParsedAction)


# ---------------------------------------------------------------------------- validation


def test_defaults_are_filled():
    valid = accepted(action("search_pubmed", query="ketogenic diet AND epilepsy"))
    assert valid.args == {"query": "ketogenic diet AND epilepsy", "retmax": 2000, "expand_mode": "semantic"}
    assert json.loads(valid.args_json) == valid.args
    cfg = Config().with_overrides(ingest={"default_retmax": 500})
    assert accepted(action("search_pubmed", query="x"), specs=registry_specs(cfg)).args["retmax"] == 500
    assert accepted(action("show_noise")).args == {"limit": 20}


@pytest.mark.parametrize(
    ("parsed", "kind", "fragment"),
    [
        (action("summarise_findings", cluster_id="a"), "unknown_tool", "unknown tool 'summarise_findings'"),
        (action("add_papers", pmids=[1]), "unknown_tool", "known: search_pubmed"),
        (action("search_pubmed"), "missing_arg", "['query']"),
        (action("merge_clusters", source="a"), "missing_arg", "['target']"),
        (action("run_pico"), "missing_arg", "one of question_id, cluster_id, pmid_list"),
        (action("search_pubmed", query="x", db="pmc"), "extra_arg", "['db']"),
        (action("search_pubmed", query="x", retmax="2000"), "bad_arg", "retmax must be an integer"),
        (action("search_pubmed", query="x", retmax=True), "bad_arg", "retmax must be an integer"),
        (action("search_pubmed", query="x", retmax=0), "bad_arg", ">= 1"),
        (action("search_pubmed", query="x", expand_mode="deep"), "bad_arg", '"semantic", "ripple"'),
        (action("search_pubmed", query="   "), "bad_arg", "non-empty string"),
        (action("run_pico", cluster_id="a", pmid_list=[1, 2]), "bad_arg", "exactly one of"),
        (action("run_pico", pmid_list=[1, "2"]), "bad_arg", "list of integers"),
        (action("run_pico", pmid_list=[]), "bad_arg", "non-empty list"),
        (action("propose_alternative_pico", question_id="q-123"), "bad_arg", "not a valid id"),
        (action("prisma_check", cluster_id="a"), "extra_arg", "['cluster_id']"),
        (action("find_existing_sr", question_id="a b"), "bad_arg", "not a valid id"),
        (action("run_pico", question_id="q-0123456789", cluster_id="a"), "bad_arg", "exactly one of"),
        (action("merge_clusters", source="a", target="a"), "bad_arg", "two different clusters"),
        (action("embed_text", text=[]), "bad_arg", "string or a list of strings"),
        (action("update_goal", changes="stop"), "bad_arg", "JSON object"),
        (action("update_goal", changes={"status": "finished"}), "bad_arg", "status 'finished'"),
        (action("update_goal", changes={"goal_id": "abc"}), "forbidden_change", "may not change 'goal_id'"),
        (action("update_goal", changes={"history": []}), "forbidden_change", "may not change 'history'"),
    ],
)
def test_schema_errors(parsed, kind, fragment):
    result = rejected(parsed, kind)
    assert fragment in result.message, result.message
    assert result.tool == parsed.tool


def test_null_optional_arguments_count_as_absent():
    assert accepted(action("run_pico", cluster_id=None, pmid_list=[11, 12])).args == {"pmid_list": [11, 12]}


@pytest.mark.parametrize(
    "text",
    [
        "/etc/passwd",
        "epilepsy ../../secrets.txt",
        "~/notes.md",
        "C:\\Users\\me\\x.txt",
        "d:/data",
        "\\\\server\\share",
        "file:///etc/passwd",
        "see FILE:notes",
        "ketogenic (/tmp/out.json)",
    ],
)
def test_file_paths_are_refused(text):
    assert "file paths are not accepted" in rejected(action("search_pubmed", query=text), "bad_arg").message


@pytest.mark.parametrize(
    "text",
    [
        "ketogenic diet and/or modified Atkins",
        "Epilepsy/diet therapy[MeSH] AND adult[MeSH]",
        "2015:2020[dp] AND randomized controlled trial[pt]",
        "profile: ketone ester",
        "HbA1c 7% / 53 mmol/mol",  # a "/" between words is not a path
        "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/esearch.fcgi?db=pubmed",
    ],
)
def test_ordinary_queries_pass(text):
    accepted(action("search_pubmed", query=text))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("https://evil.example.com/x", "host 'evil.example.com' is not allowed"),
        ("http://eutils.ncbi.nlm.nih.gov@evil.example.com/", "host 'evil.example.com'"),
        ("https://api.crossref.org.evil.example/works", "not allowed"),
        ("ftp://api.crossref.org/works", "scheme 'ftp'"),
    ],
)
def test_foreign_urls_are_refused(text, fragment):
    assert fragment in rejected(action("search_pubmed", query=text), "bad_arg").message


def test_url_allowlist_comes_from_config():
    cfg = Config().with_overrides(tools={"allowed_hosts": ["ncbi.nlm.nih.gov"]})
    accepted(action("search_pubmed", query="https://www.ncbi.nlm.nih.gov/pubmed/?term=x"), cfg=cfg)
    rejected(action("search_pubmed", query="https://api.crossref.org/works"), "bad_arg", cfg=cfg)


def test_strings_inside_goal_changes_are_checked_too():
    result = rejected(action("update_goal", changes={"pending_queries": ["read /etc/shadow"]}), "bad_arg")
    assert "file paths" in result.message


# ---------------------------------------------------------------------------- gating


def test_handbook_whitelist_and_config_switches():
    book = handbook()
    assert (
        "Tools_allowed"
        in rejected(action("prisma_check", question_id="q-0123456789"), "tool_not_allowed", handbook=book).message
    )
    accepted(action("run_pico", cluster_id="a"), handbook=book)
    cfg = Config().with_overrides(tools={"enable_run_pico": False})
    disabled = rejected(action("run_pico", cluster_id="a"), "tool_not_allowed", handbook=book, cfg=cfg)
    assert "enable_run_pico" in disabled.message
    # a refused tool is refused before its arguments are looked at
    rejected(action("prisma_check", bogus=1), "tool_not_allowed", handbook=book)


def test_cluster_commands_and_update_goal_are_always_allowed():
    book = handbook("[]")
    for parsed in (
        action("split_cluster", cluster_id="67e9c14b62d3"),
        action("merge_clusters", source="fa12cd88991e", target="67e9c14b62d3"),
        action("drop_cluster", cluster_id="-1"),
        action("show_noise", limit=5),
        action("update_goal", changes={"primary_goal": "conduct_SR", "cluster_id": "67e9c14b62d3"}),
    ):
        accepted(parsed, handbook=book)


def test_ripple_needs_exploration():
    ripple = action("search_pubmed", query="x", expand_mode="ripple")
    assert "Exploration" in rejected(ripple, "tool_not_allowed", handbook=handbook()).message
    accepted(ripple, handbook=handbook(exploration="true"))


def test_describe_tools_lists_only_usable_tools():
    text = describe_tools(handbook=handbook())
    assert '`search_pubmed(query: str, retmax: int = 2000, expand_mode: "semantic" | "ripple" = "semantic")`' in text
    assert "run_pico(" in text and "exactly one of question_id, cluster_id, pmid_list" in text
    assert "prisma_check" not in text and "update_goal" in text and "split_cluster" in text


# ---------------------------------------------------------------------------- outcomes and batching


def test_outcome_table_follows_the_memos():
    assert set(OUTCOMES) == {"no_action", *ERROR_KINDS}
    # memo 70 §4: unknown tool -> log {"error": "unknown_tool"}, no state change
    assert (OUTCOMES["unknown_tool"].event, OUTCOMES["unknown_tool"].status) == ("error", None)
    assert OUTCOMES["unknown_tool"].log == {"error": "unknown_tool"}
    # memo 70 §4 / memo 60 §3: a missing arg or extra keys are executor errors; issue 13: after the one
    # repair turn they are logged and the goal goes on (no status change), like an unknown tool
    assert (OUTCOMES["missing_arg"].event, OUTCOMES["missing_arg"].status) == ("error", None)
    assert OUTCOMES["extra_keys"].status is None and OUTCOMES["extra_arg"].status is None
    # memo 80 §3: json_error after the repair -> no state change
    assert (OUTCOMES["json_error"].event, OUTCOMES["json_error"].status) == ("json_error", None)
    # memo 60 §7: malformed Action -> no_action, continue next cycle
    assert OUTCOMES["multiple_actions"].event == "no_action" and OUTCOMES["multiple_actions"].status is None
    assert OUTCOMES["tool_not_allowed"].status is None


def test_embed_text_is_split_silently():
    texts = [f"text {i}" for i in range(600)]
    calls = accepted(action("embed_text", text=texts)).calls()
    assert [len(c["text"]) for c in calls] == [256, 256, 88]
    assert sum((c["text"] for c in calls), []) == texts
    assert accepted(action("embed_text", text="one string")).calls() == [{"text": "one string"}]


def test_interpret_reply_end_to_end():
    result = interpret_reply(GOOD, Repairer(), handbook=handbook())
    assert isinstance(result, ValidAction) and result.args["expand_mode"] == "semantic"
    assert isinstance(interpret_reply("just thinking", Repairer()), NoAction)


def test_every_registered_tool_has_a_signature():
    for spec in REGISTRY_SPECS.values():
        assert spec.signature().startswith(f"{spec.name}(") and spec.description


# ---------------------------------------------------------------------------- hostile sizes (issue 13)


def test_find_urls_in_one_pass():
    from ra_agent.llm.protocol import find_urls

    text = "see https://eutils.ncbi.nlm.nih.gov/x?a=1, (ftp://h.example/y) and " + "a" * 80_000 + "://tail"
    assert list(find_urls(text)) == ["https://eutils.ncbi.nlm.nih.gov/x?a=1,", "ftp://h.example/y",
                                     "a" * 32 + "://tail"]  # fmt: skip
    assert list(find_urls("no scheme ://here, 7% / 53 mmol/mol")) == []


def test_a_string_over_the_cap_is_a_bad_arg_and_huge_or_deep_replies_a_json_error():
    cfg = Config()
    long = rejected(action("search_pubmed", query="a" * 5_000_000), "bad_arg", cfg=cfg)
    assert "5,000,000 characters is over the cap of 4,000" in long.message
    huge = parse_action("x" * 300_000 + GOOD)
    assert isinstance(huge, ActionError) and huge.kind == "json_error" and "over the 200,000" in huge.message
    deep = parse_action('Action: {"tool": "t", "args": ' + '{"a": ' * 5000 + "1" + "}" * 5001)
    assert isinstance(deep, ActionError) and deep.kind == "json_error" and "deeper than 32 levels" in deep.message
    assert len(deep.raw or "") <= 2000


def test_schema_slips_get_one_repair_turn_naming_the_violation():
    ask = Repairer('{"tool": "search_pubmed", "args": {"query": "ketone ester"}}')
    reply = 'Thought.\nAction: {"tool": "search_pubmed", "args": {"query": "ketone ester", "reason": "gap"}}'
    result = interpret_reply(reply, ask, cfg=Config())
    assert isinstance(result, ValidAction) and result.repaired and result.args["query"] == "ketone ester"
    (prompt,) = ask.prompts
    assert prompt.startswith("FIX THE ACTION ONLY") and "takes no argument(s) ['reason']" in prompt
