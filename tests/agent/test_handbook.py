"""Handbook parser: shipped handbooks load, strict errors name file/line/key, Success evaluates safely."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra_agent.agent.handbook import load_handbook, parse_handbook
from ra_agent.agent.registry import HEAVY_TOOLS
from ra_agent.agent.success import METRIC_NAMES, HandbookError, normalise_metrics, parse_success

HANDBOOKS = Path(__file__).resolve().parents[2] / "handbooks"

MEMO_EXAMPLE = """\
---
# -- handbook: gap_kd_epilepsy.md ---------------------------------
Primary_goal: seek_gap                       # mandatory
Seed_query:   "ketogenic diet AND epilepsy"  # optional
Tools_allowed:
  - search_pubmed
  - run_pico
  - find_existing_sr
  - propose_alternative_pico
  - prisma_check
Exploration: true           # Gemma may use ripple mode
Success:
  eligible_trials  >= 6
  AND PRISMA_compliant == false
Stop_after: 1              # #success clusters before stop
---

# Prose for the LLM

Look for adult trials.
"""


def hb(front: str, prose: str = "") -> str:
    return f"---\n{front}---\n{prose}"


# ---------------------------------------------------------------------------- loading


def test_shipped_handbooks_all_load():
    paths = sorted(HANDBOOKS.glob("*.md"))
    assert {p.name for p in paths} >= {"seek_gap_ppi_gerd.md", "conduct_sr_ppi.md", "gap_kd_epilepsy.md"}
    for path in paths:
        handbook = load_handbook(path)
        assert handbook.prose, f"{path.name} has no prose for the LLM"
        assert handbook.success is not None


def test_demo_handbook_values():
    handbook = load_handbook(HANDBOOKS / "seek_gap_ppi_gerd.md")
    assert handbook.primary_goal == "seek_gap"
    assert handbook.seed_query == "proton pump inhibitors AND gastroesophageal reflux"
    assert handbook.success_text == "eligible_trials >= 6 AND PRISMA_compliant == false"
    assert handbook.stop_after == 1
    assert handbook.name == "seek_gap_ppi_gerd"
    sr = load_handbook(HANDBOOKS / "conduct_sr_ppi.md")
    assert sr.primary_goal == "conduct_SR" and sr.success_met({"eligible_trials": 8, "PRISMA_compliant": True})


def test_memo_example_parses_with_comments_and_multiline_success():
    handbook = parse_handbook(MEMO_EXAMPLE, "handbooks/gap_kd_epilepsy.md")
    assert handbook.primary_goal == "seek_gap"
    assert handbook.seed_query == "ketogenic diet AND epilepsy"
    assert handbook.tools_allowed == (
        "search_pubmed", "run_pico", "find_existing_sr", "propose_alternative_pico", "prisma_check",
    )  # fmt: skip
    assert handbook.exploration is True
    assert handbook.stop_after == 1
    assert handbook.success_metrics == ("eligible_trials", "PRISMA_compliant")
    assert handbook.prose.startswith("# Prose for the LLM") and "adult trials" in handbook.prose
    assert handbook.allows("run_pico") and not handbook.allows("embed_text")


def test_defaults_for_optional_keys():
    handbook = parse_handbook(hb("Primary_goal: manual_task\n"))
    assert handbook.seed_query is None
    assert handbook.tools_allowed == HEAVY_TOOLS
    assert handbook.exploration is False
    assert handbook.stop_after == 1
    assert handbook.success is None and not handbook.success_met({"eligible_trials": 100})
    assert "until it is stopped" in handbook.describe_success()


def test_inline_list_single_quotes_and_quoted_success():
    handbook = parse_handbook(
        hb(
            "Primary_goal: 'conduct_SR'\n"
            "Seed_query: 'Crohn''s disease AND infliximab'\n"
            'Tools_allowed: [run_pico, "prisma_check"]\n'
            'Success: "eligible_trials >= 10 AND PRISMA_compliant == true"\n'
            "Exploration: False\n"
        )
    )
    assert handbook.primary_goal == "conduct_SR"
    assert handbook.seed_query == "Crohn's disease AND infliximab"
    assert handbook.tools_allowed == ("run_pico", "prisma_check")
    assert handbook.exploration is False
    assert handbook.success_text == "eligible_trials >= 10 AND PRISMA_compliant == true"


def test_a_hash_inside_quotes_is_not_a_comment():
    handbook = parse_handbook(hb('Primary_goal: seek_gap\nSeed_query: "C# AND trials"   # real comment\n'))
    assert handbook.seed_query == "C# AND trials"


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("front", "line", "key", "fragment"),
    [
        ("Primary_goal: seek_gap\nCluster_id: 2\n", 3, "Cluster_id", "unknown key"),
        ("primary_goal: seek_gap\n", 2, "primary_goal", "unknown key"),
        (
            "Primary_goal: seek_gap\nStop_after: 1\nStop_after: 2\n",
            4,
            "Stop_after",
            "duplicate key (first set on line 3)",
        ),
        ("Primary_goal: seek_gap\nTools_allowed:\n- run_pico\n", 4, None, "bad indentation"),
        ("  Primary_goal: seek_gap\n", 2, None, "bad indentation"),
        ("Primary_goal: seek_gap\nTools_allowed:\n  - run_pico\n    - prisma_check\n", 5, "Tools_allowed", "line up"),
        ("Primary_goal: seek_gap\nTools_allowed: run_pico\n  - prisma_check\n", 4, "Tools_allowed", "bad indentation"),
        ("Primary_goal: seek_gap\nSuccess: eligible_trials > 1\n  - item\n", 4, "Success", "bad indentation"),
        ('Primary_goal: seek_gap\nSeed_query:\n\t"x"\n', 4, "Seed_query", "tabs"),
        ("Primary_goal: seek_gap\nSuccess: eligible_trials >= \n", 3, "Success", "found the end of the expression"),
        ("Primary_goal: seek_gap\nSuccess: eligible_trials = 6\n", 3, "Success", "use '=='"),
        ("Primary_goal: seek_gap\nSuccess: (eligible_trials > 30 AND sr_overlap > 0.2\n", 3, "Success", "missing ')'"),
        (
            "Primary_goal: seek_gap\nSuccess: eligible_trials > 30 sr_overlap > 0.2\n",
            3,
            "Success",
            "unexpected 'sr_overlap'",
        ),
        (
            "Primary_goal: seek_gap\nSuccess:\n  eligible_trials > 30\n  AND trials >= 6\n",
            5,
            "Success",
            "unknown metric 'trials'",
        ),
        ("Primary_goal: seek_gap\nSuccess: 6\n", 3, "Success", "not a condition"),
        ("Primary_goal: seek_gap\nSuccess: 1 < eligible_trials < 5\n", 3, "Success", "cannot be chained"),
        # a cluster's measure is refused: Success is judged on a review question (clusters only retrieve)
        (
            "Primary_goal: seek_gap\nSuccess:\n  eligible_trials >= 6\n  AND size > 30\n",
            5,
            "Success",
            "'size' is a cluster's measure; Success is judged on a review question's metrics",
        ),
        ("Primary_goal: seek_gap\nSuccess: PRISMA_compliant > false\n", 3, "Success", "needs numbers"),
        ("Primary_goal: seek_gap\nSuccess: eval(eligible_trials)\n", 3, "Success", "unknown metric 'eval'"),
        ("Primary_goal: seek_gap\nSuccess: eligible_trials > 1; import os\n", 3, "Success", "unexpected character ';'"),
        ("Primary_goal: find_trials\n", 2, "Primary_goal", "not one of seek_gap, conduct_SR, manual_task"),
        ("Primary_goal: seek_gap\nExploration: yes\n", 3, "Exploration", "expected true or false"),
        ("Primary_goal: seek_gap\nStop_after: 0\n", 3, "Stop_after", "integer >= 1"),
        ("Primary_goal: seek_gap\nStop_after: two\n", 3, "Stop_after", "integer >= 1"),
        # numbers past int()'s 4,300-digit limit used to end in "internal error: ValueError"
        ("Primary_goal: seek_gap\nStop_after: " + "9" * 5000 + "\n", 3, "Stop_after", "has 5000 digits (at most 15)"),
        (
            "Primary_goal: seek_gap\nSuccess: eligible_trials > " + "9" * 5000 + "\n",
            3,
            "Success",
            "has 5000 digits (at most 15)",
        ),
        (
            "Primary_goal: seek_gap\nSuccess:\n  eligible_trials > 1\n  AND sr_overlap > 0." + "9" * 15 + "\n",
            5,
            "Success",
            "has 16 digits",
        ),
        (
            "Primary_goal: seek_gap\nTools_allowed:\n  - search_pubmed\n  - add_papers\n",
            5,
            "Tools_allowed",
            "unknown tool 'add_papers'",
        ),
        ("Primary_goal: seek_gap\nTools_allowed: [run_pico, run_pico]\n", 3, "Tools_allowed", "listed twice"),
        ('Primary_goal: seek_gap\nSeed_query: "unterminated\n', 3, "Seed_query", "bad double-quoted string"),
        ("Primary_goal: seek_gap\nSeed_query:\n", 3, "Seed_query", "needs a value"),
        ('Seed_query: "x"\n', 1, "Primary_goal", "missing mandatory key"),
        ("Primary_goal seek_gap\n", 2, None, "expected 'Key: value'"),
    ],
)
def test_errors_name_file_line_and_key(front, line, key, fragment):
    with pytest.raises(HandbookError) as info:
        parse_handbook(hb(front), "handbooks/bad.md")
    err = info.value
    assert (err.source, err.line, err.key) == ("handbooks/bad.md", line, key)
    prefix = f"handbooks/bad.md:{line}: {key}: " if key else f"handbooks/bad.md:{line}: "
    assert str(err).startswith(prefix)
    assert fragment in str(err)


def test_unknown_metric_error_lists_the_allowed_names():
    with pytest.raises(HandbookError) as info:
        parse_handbook(hb("Primary_goal: seek_gap\nSuccess: n_trials >= 6\n"), "x.md")
    assert all(name in str(info.value) for name in METRIC_NAMES)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("Primary_goal: seek_gap\n", 1, "starts with a '---'"),
        ("---\nPrimary_goal: seek_gap\n", 1, "not closed"),
    ],
)
def test_front_matter_must_be_fenced(text, line, fragment):
    with pytest.raises(HandbookError) as info:
        parse_handbook(text, "h.md")
    assert info.value.line == line and fragment in str(info.value)


def test_missing_file_is_a_handbook_error(tmp_path):
    with pytest.raises(HandbookError, match="cannot read handbook"):
        load_handbook(tmp_path / "nope.md")


def test_a_handbook_not_in_utf8_is_a_handbook_error_naming_the_line(tmp_path):
    """The shipped gap handbook saved as Latin-1 (its seed query given an accented word): the goal sensor's
    load_handbook used to end in UnicodeDecodeError."""
    text = (HANDBOOKS / "seek_gap_ppi_gerd.md").read_text(encoding="utf-8")
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("Seed_query"))
    path = tmp_path / "latin1.md"
    path.write_bytes(text.replace("Seed_query: ", "Seed_query: café ", 1).encode("latin-1"))
    with pytest.raises(HandbookError, match=rf"^{path}:{line}: not UTF-8 \(byte 0xe9\)"):
        load_handbook(path)


# ---------------------------------------------------------------------------- Success evaluation

GAP = "eligible_trials >= 6 AND PRISMA_compliant == false"


@pytest.mark.parametrize(
    ("metrics", "met"),
    [
        ({"eligible_trials": 6, "PRISMA_compliant": False}, True),
        ({"eligible_trials": 12, "prisma_compliant": 0}, True),  # the store keeps booleans as 0/1
        ({"eligible_trials": 5, "PRISMA_compliant": False}, False),
        ({"eligible_trials": 6, "PRISMA_compliant": True}, False),
        ({"eligible_trials": 6, "PRISMA_compliant": None}, False),  # not checked yet: null comparisons are false
        ({"eligible_trials": 6}, False),
        ({"PRISMA_compliant": False}, False),
        ({}, False),
        ({"eligible_trials": "many", "PRISMA_compliant": False}, False),  # type mismatch is false, not an exception
    ],
)
def test_success_truth_table(metrics, met):
    assert parse_success(GAP).evaluate({k.lower(): v for k, v in metrics.items()}) is met
    handbook = parse_handbook(hb(f"Primary_goal: seek_gap\nSuccess: {GAP}\n"))
    assert handbook.success_met(metrics) is met


@pytest.mark.parametrize(
    ("expr", "metrics", "expected"),
    [
        # NOT binds tighter than AND, AND tighter than OR
        ("NOT eligible_trials > 100 OR sr_overlap >= 0.5", {"eligible_trials": 200, "sr_overlap": 0.6}, True),
        ("NOT eligible_trials > 100 OR sr_overlap >= 0.5", {"eligible_trials": 200, "sr_overlap": 0.1}, False),
        ("NOT eligible_trials > 100 OR sr_overlap >= 0.5", {"eligible_trials": 50, "sr_overlap": 0.1}, True),
        (
            "eligible_trials > 1 OR sr_overlap > 0.5 AND trials_since_review > 0",
            {"eligible_trials": 2, "sr_overlap": 0, "trials_since_review": 0},
            True,
        ),
        (
            "(eligible_trials > 1 OR sr_overlap > 0.5) AND trials_since_review > 0",
            {"eligible_trials": 2, "sr_overlap": 0, "trials_since_review": 0},
            False,
        ),
        ("NOT (eligible_trials > 1 OR sr_overlap > 0.5)", {"eligible_trials": 0, "sr_overlap": 0}, True),
        ("NOT NOT eligible_trials > 1", {"eligible_trials": 2}, True),
        (
            "not eligible_trials > 1 and sr_overlap < 1",
            {"eligible_trials": 0, "sr_overlap": 0},
            True,
        ),  # keywords are case-insensitive
        (
            "eligible_trials ≥ 6 AND sr_overlap ≤ 0.6 AND trials_since_review ≠ 0",
            {"eligible_trials": 6, "sr_overlap": 0.6, "trials_since_review": 3},
            True,
        ),
        ("6 <= eligible_trials", {"eligible_trials": 7}, True),
        ("sr_overlap == null", {}, True),
        ("sr_overlap != null", {"sr_overlap": 0.0}, True),
        ("sr_overlap < 0.6", {}, False),
        ("NOT sr_overlap >= 0.6", {}, False),  # a comparison over a null metric is unknown, and so is its NOT
        ("PRISMA_compliant", {"prisma_compliant": 1}, True),
        ("NOT PRISMA_compliant", {"prisma_compliant": None}, False),  # the check never ran: not "non-compliant"
        ("sr_overlap < .7 AND newest_trial >= 2015", {"sr_overlap": 0.69, "newest_trial": 2016.5}, True),
        ("trials_since_review > -1", {"trials_since_review": 0}, True),
        ("true", {}, True),
    ],
)
def test_precedence_and_null_semantics(expr, metrics, expected):
    assert parse_success(expr).evaluate(metrics) is expected


def test_canonical_text_keeps_grouping():
    assert (
        str(parse_success("NOT eligible_trials > 100 OR sr_overlap >= 0.5"))
        == "NOT eligible_trials > 100 OR sr_overlap >= 0.5"
    )
    assert (
        str(parse_success("(eligible_trials > 1 OR sr_overlap > 0.5) AND trials_since_review > 0"))
        == "(eligible_trials > 1 OR sr_overlap > 0.5) AND trials_since_review > 0"
    )
    assert (
        str(parse_success("not (eligible_trials > 1 or sr_overlap > 0.5)"))
        == "NOT (eligible_trials > 1 OR sr_overlap > 0.5)"
    )
    assert str(parse_success("6 <= ELIGIBLE_TRIALS")) == "eligible_trials >= 6"


def test_describe_success_and_unmet_conditions():
    handbook = parse_handbook(hb(f"Primary_goal: seek_gap\nSuccess: {GAP}\n"))
    assert handbook.describe_success() == "eligible_trials ≥ 6 and PRISMA_compliant is false"
    assert handbook.unmet_conditions({"eligible_trials": 5, "PRISMA_compliant": False}) == [
        "eligible_trials ≥ 6 (now eligible_trials = 5)"
    ]
    assert handbook.unmet_conditions({"eligible_trials": 6, "PRISMA_compliant": False}) == []
    mixed = parse_handbook(
        hb(
            "Primary_goal: seek_gap\nSuccess: eligible_trials > 30 OR NOT (sr_overlap < 0.2 AND trials_since_review > 0)\n"
        )
    )
    assert mixed.describe_success() == "eligible_trials > 30 or not (sr_overlap < 0.2 and trials_since_review > 0)"


# ---------------------------------------------------------------------------- three-valued logic over null metrics

SHIPPED = {p.name: load_handbook(p) for p in sorted(HANDBOOKS.glob("*.md"))}


@pytest.mark.parametrize(
    ("expr", "metrics", "truth"),
    [
        ("PRISMA_compliant == false", {"prisma_compliant": None}, None),
        ("NOT PRISMA_compliant == true", {"prisma_compliant": None}, None),
        ("NOT PRISMA_compliant", {}, None),
        ("eligible_trials >= 6 AND PRISMA_compliant == false", {"eligible_trials": 5}, False),  # unknown AND false
        ("eligible_trials >= 6 AND PRISMA_compliant == false", {"eligible_trials": 7}, None),  # unknown AND true
        ("eligible_trials >= 6 OR PRISMA_compliant == false", {"eligible_trials": 7}, True),  # unknown OR true
        ("eligible_trials >= 6 OR PRISMA_compliant == false", {"eligible_trials": 2}, None),  # unknown OR false
        ("NOT (eligible_trials >= 6 AND sr_overlap > 0.6)", {"eligible_trials": 2}, True),  # NOT (false AND unknown)
        ("sr_overlap == null OR sr_overlap <= 0.6", {}, True),  # an explicit null test is known
    ],
)
def test_null_metrics_are_unknown_and_unknown_is_not_success(expr, metrics, truth):
    condition = parse_success(expr)
    assert condition.truth(metrics) is truth
    assert condition.evaluate(metrics) is (truth is True)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_handbooks_never_succeed_before_prisma_check_ran(name):
    handbook = SHIPPED[name]
    enough = {"eligible_trials": 40, "sr_overlap": 0.1}
    assert handbook.success_met({**enough, "PRISMA_compliant": None}) is False
    assert handbook.success.truth(normalise_metrics({**enough, "PRISMA_compliant": None})) is None
    wanted = {"seek_gap": False, "conduct_SR": True}[handbook.primary_goal]
    assert handbook.success_met({**enough, "PRISMA_compliant": wanted}) is True
    assert handbook.success_met({**enough, "eligible_trials": 1, "PRISMA_compliant": None}) is False
    assert handbook.success.truth(normalise_metrics({"eligible_trials": 1})) is False  # unknown AND false


# ---------------------------------------------------------------------------- hostile handbooks up to the size cap
def _exercise(handbook) -> None:
    """Everything a goal does with a loaded handbook's Success (prompt text, metric list, evaluation)."""
    metrics = {"eligible_trials": 7, "PRISMA_compliant": False}
    handbook.success_text, handbook.success_metrics, handbook.describe_success()
    handbook.success_met(metrics), handbook.unmet_conditions(metrics)


def test_success_nesting_at_the_cap_loads_and_past_it_names_the_line():
    """50 levels of parentheses or NOTs load and evaluate; one more is a HandbookError naming the line of the
    '(' or NOT past the cap (150 levels or 1,000 NOTs used to raise RecursionError)."""
    at_cap = parse_handbook(
        hb("Primary_goal: seek_gap\nSuccess:\n" + "  (\n" * 50 + "  eligible_trials > 30\n" + "  )\n" * 50)
    )
    assert at_cap.success_met({"eligible_trials": 31}) and not at_cap.success_met({"eligible_trials": 30})
    nots = parse_handbook(hb("Primary_goal: seek_gap\nSuccess: " + "NOT " * 50 + "eligible_trials > 30\n"))
    assert nots.success_met({"eligible_trials": 31}) and not nots.success_met(
        {"eligible_trials": 30}
    )  # an even number of NOTs
    assert nots.describe_success().count("not (") == 50
    with pytest.raises(HandbookError, match=r"^<handbook>:54: Success: nested more than 50 levels deep"):
        parse_handbook(
            hb("Primary_goal: seek_gap\nSuccess:\n" + "  (\n" * 150 + "  eligible_trials > 30\n" + "  )\n" * 150)
        )
    with pytest.raises(HandbookError, match=r"^<handbook>:3: Success: nested more than 50 levels deep"):
        parse_handbook(hb("Primary_goal: seek_gap\nSuccess: " + "NOT " * 1000 + "eligible_trials > 30\n"))


def test_a_flat_success_at_the_size_cap_loads_and_evaluates():
    """A Success of ~1 MB (the handbook_max_bytes default): 34,000 comparisons joined by AND/OR on their own
    lines parse and evaluate (the chains are loops, not recursion)."""
    from ra_agent.config import Config

    cap = Config().goal.handbook_max_bytes
    terms = [f"  {'OR' if i % 3 else 'AND'} eligible_trials > {i}\n" for i in range(1, 34_000)]
    text = hb("Primary_goal: seek_gap\nSuccess:\n  eligible_trials > 0\n" + "".join(terms))
    assert 0.6 * cap < len(text.encode()) <= cap
    handbook = parse_handbook(text)
    assert handbook.success_met({"eligible_trials": 50_000}) and not handbook.success_met({"eligible_trials": 0})
    _exercise(handbook)


def test_mutated_shipped_handbooks_load_or_fail_with_a_handbook_error():
    """Seeded mutations of every shipped handbook (lines dropped, doubled, swapped, cut; key lines with junk
    values added; Success tokens piled up, deep nesting, 5,000-digit numbers, stray characters) either load
    or raise a HandbookError naming the file and a line, never another exception."""
    import random

    rng = random.Random(28)
    pieces = ["(", ")", "NOT ", "AND ", "OR ", "eligible_trials ", ">= ", "== ", "6 ", "null ", "true ", "-", "=", '"', "'",
              "#", ":", "  - ", "\t", "Success:", "---", "é", "1e999 ", "(" * 200, "NOT " * 1000, "9" * 5000,
              "0." + "9" * 5000, "[", "]", ",", "\\", "\ufeff", "∞", "١٢٣", "+"]  # fmt: skip
    keys = ["Primary_goal", "Seed_query", "Tools_allowed", "Exploration", "Success", "Stop_after"]
    values = [
        "",
        "9" * 5000,
        "+" + "9" * 5000,
        "eligible_trials > " + "9" * 5000,
        "sr_overlap < 0." + "9" * 5000,
        "[",
        '"',
        "-1",
    ]
    outcomes = {"loaded": 0, "refused": 0, "too many digits": 0}
    for path in sorted(HANDBOOKS.glob("*.md")):
        original = path.read_text(encoding="utf-8").splitlines()
        for _ in range(300):
            lines = list(original)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(lines))
                match rng.randrange(6):
                    case 0:
                        del lines[i]
                    case 1:
                        lines.insert(i, lines[i])
                    case 2:
                        j = rng.randrange(len(lines))
                        lines[i], lines[j] = lines[j], lines[i]
                    case 3:
                        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
                    case 4:
                        key = rng.choice(keys)  # a key's value replaced, or the key added when the file lacks it
                        junk = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
                        entry = f"{key}: {rng.choice(values)}{junk}"
                        if (at := next((n for n, t in enumerate(lines) if t.startswith(f"{key}:")), None)) is None:
                            lines.insert(max(i, 1), entry)
                        else:
                            lines[at] = entry
                    case _:
                        at = rng.randrange(len(lines[i]) + 1)
                        junk = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
                        lines[i] = lines[i][:at] + junk + lines[i][at:]
            try:
                handbook = parse_handbook("\n".join(lines) + "\n", path.name)
            except HandbookError as exc:
                assert str(exc).startswith(f"{path.name}:") and exc.line >= 1
                outcomes["refused"] += 1
                outcomes["too many digits"] += "digits (at most" in str(exc)
            else:
                _exercise(handbook)
                outcomes["loaded"] += 1
    assert outcomes["loaded"] > 100 and outcomes["refused"] > 100 and outcomes["too many digits"] > 5, outcomes


def test_a_spawned_handbook_is_named_by_what_it_asks_not_where_the_project_lies(tmp_path):
    """Two fresh clones of one project spawned the same theme under two names (a hash of the parent's absolute
    path), so their question folders and handbooks differed: the name now follows the parent's name and the query."""
    from ra_agent.agent.spawn import spawn_handbook
    from ra_agent.config import load_config

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "config.toml", environ={})
    names = []
    for clone in ("a", "b"):
        parent = tmp_path / clone / "handbooks" / "seek_gap_ppi_gerd.md"
        parent.parent.mkdir(parents=True)
        parent.write_text((root / "handbooks" / "seek_gap_ppi_gerd.md").read_text(encoding="utf-8"), encoding="utf-8")
        spawned = spawn_handbook(cfg, parent, "pantoprazole AND reflux AND omeprazole", tmp_path / clone / "data")
        assert load_handbook(spawned).seed_query == "pantoprazole AND reflux AND omeprazole"
        names.append(spawned.name)
    assert names[0] == names[1] and names[0].startswith("seek_gap_ppi_gerd__alt_")
    other = spawn_handbook(cfg, parent, "esomeprazole AND reflux AND omeprazole", tmp_path / "b" / "data")
    assert other.name != names[1]
