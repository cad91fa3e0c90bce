"""Goal state: id formula, atomic persistence, store mirror, append-only history, the LLM's allowed mutations."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ra_agent import fileio
from ra_agent.agent.goal import (
    GoalMutationError,
    GoalState,
    GoalStateError,
    GoalStore,
    apply_llm_mutation,
    goal_id_for,
    new_goal,
)
from ra_agent.store.db import Store

HANDBOOK = "handbooks/gap_kd_epilepsy.md"
START = "2025-08-04T14:22:03.123456Z"


@pytest.fixture
def goals(tmp_path) -> GoalStore:
    return GoalStore(tmp_path / "data")


@pytest.fixture
def state(goals: GoalStore) -> GoalState:
    return goals.create(
        HANDBOOK, "seek_gap", "ketogenic diet epilepsy adults", start_ts=START, brain="ollama:gemma3n:e4b"
    )


def test_goal_id_is_sha1_of_handbook_path_and_start_ts(state):
    expected = hashlib.sha1((HANDBOOK + START).encode()).hexdigest()[:12]
    assert state.goal_id == expected == goal_id_for(HANDBOOK, START)
    assert new_goal(HANDBOOK, "seek_gap", "t").goal_id != new_goal(HANDBOOK, "seek_gap", "t").goal_id


def test_created_goal_file_has_memo_fields_and_created_entry(goals, state, tmp_path):
    path = tmp_path / "data" / "goals" / state.goal_id / "goal_state.json"
    doc = json.loads(path.read_text())
    for key in (
        "goal_id",
        "primary_goal",
        "topic",
        "status",
        "handbook_path",
        "question_id",
        "questions_done",
        "cluster_id",
        "subgoals",
        "history",
    ):
        assert key in doc
    for key in ("cycle", "brain", "pending_asset_requests", "pending_tool_calls", "success_questions"):
        assert key in doc
    assert doc["status"] == "in_progress" and doc["cluster_id"] is None and doc["handbook_path"] == HANDBOOK
    (created,) = doc["history"]
    assert created["event"] == "created" and created["cycle"] == 0
    assert created["brain"] == "ollama:gemma3n:e4b" and created["ts"].endswith("Z")
    assert goals.load(state.goal_id) == state
    assert goals.goal_ids() == [state.goal_id]
    with pytest.raises(GoalStateError, match="already exists"):
        goals.create(HANDBOOK, "seek_gap", "again", start_ts=START)


def test_save_is_atomic_a_failed_replace_keeps_the_old_version(goals, state, monkeypatch):
    path = goals.state_path(state.goal_id)
    before = path.read_text()
    state.topic = "changed"

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(fileio.os, "replace", crash)
    with pytest.raises(OSError):
        goals.save(state)
    assert path.read_text() == before
    assert os.listdir(path.parent) == ["goal_state.json"]  # no temp file left behind


def test_history_is_append_only(goals, state):
    state.record("no_action", reason="thoughts only")
    goals.save(state)
    reloaded = goals.load(state.goal_id)
    reloaded.history.pop(0)
    with pytest.raises(GoalStateError, match="append-only"):
        goals.save(reloaded)
    reloaded = goals.load(state.goal_id)
    reloaded.history[0]["event"] = "forged"
    with pytest.raises(GoalStateError, match="append-only"):
        goals.save(reloaded)


def test_store_mirror_follows_the_state(tmp_path):
    with Store(tmp_path / "ra.sqlite") as store:
        goals = GoalStore(tmp_path / "data", store)
        state = goals.create(HANDBOOK, "seek_gap", "kd", start_ts=START)
        row = dict(store.conn.execute("SELECT * FROM goal").fetchone())
        assert row["goal_id"] == state.goal_id and row["status"] == "in_progress" and row["cycle"] == 0
        assert row["handbook_path"] == HANDBOOK and row["created_ts"] == 1754317323
        state.begin_cycle("rules:handbook-policy-v1")
        apply_llm_mutation(state, {"primary_goal": "conduct_SR"})
        state.set_status("stopped", reason="success")
        goals.save(state)
        row = dict(store.conn.execute("SELECT * FROM goal").fetchone())
        assert (row["primary_goal"], row["status"], row["cycle"]) == ("conduct_SR", "stopped", 1)


def test_record_shape_and_reserved_keys(state):
    state.begin_cycle("ollama:gemma3n:e4b")
    entry = state.record("merge_clusters", source="fa12cd88991e", target="67e9c14b62d3")
    assert entry.keys() == {"cycle", "ts", "brain", "event", "source", "target"}
    assert (entry["cycle"], entry["event"]) == (1, "merge_clusters")
    with pytest.raises(GoalStateError, match="reserved"):
        state.record("tool_call", cycle=3)
    with pytest.raises(GoalStateError, match="snake_case"):
        state.record("Tool Call")


def test_executor_status_changes_and_brain_switch(state):
    assert state.set_status("in_progress") is None
    entry = state.set_status("paused", reason="PAUSE file")
    assert (entry["event"], entry["old"], entry["new"]) == ("paused", "in_progress", "paused")
    assert state.set_status("in_progress")["event"] == "resumed"
    with pytest.raises(GoalStateError):
        state.set_status("finished")
    state.begin_cycle("rules:handbook-policy-v1")
    assert state.events("brain_changed")[0]["new"] == "rules:handbook-policy-v1"


# ---------------------------------------------------------------------------- LLM mutations


def test_pivot_and_stop_are_recorded(state):
    state.begin_cycle("ollama:gemma3n:e4b")
    entries = apply_llm_mutation(state, {"primary_goal": "conduct_SR", "cluster_id": "07e3a1dca9b4"})
    assert [e["event"] for e in entries] == ["pivoted", "cluster_selected"]
    pivot = entries[0]
    assert (pivot["old"], pivot["new"], pivot["by"], pivot["cycle"]) == ("seek_gap", "conduct_SR", "llm", 1)
    assert state.primary_goal == "conduct_SR" and state.cluster_id == "07e3a1dca9b4"
    assert apply_llm_mutation(state, {"status": "stopped"})[0]["event"] == "stopped"
    assert state.status == "stopped"


def test_unchanged_values_add_no_history(state):
    n = len(state.history)
    assert apply_llm_mutation(state, {"primary_goal": "seek_gap", "status": "in_progress"}) == []
    assert len(state.history) == n


def test_lists_are_validated_and_normalised(state):
    apply_llm_mutation(state, {"rejected_clusters": ["c1", "c2", "c1"], "pending_queries": ["  MCT diet adults "]})
    assert state.rejected_clusters == ["c1", "c2"] and state.pending_queries == ["MCT diet adults"]
    with pytest.raises(GoalMutationError):
        apply_llm_mutation(state, {"rejected_clusters": ["../../etc"]})


@pytest.mark.parametrize(
    "key", ["goal_id", "history", "handbook_path", "cycle", "brain", "pending_tool_calls", "success_questions"]
)
def test_forbidden_fields_are_rejected_and_nothing_applies(state, key):
    snapshot = state.to_dict()
    with pytest.raises(GoalMutationError) as info:
        apply_llm_mutation(state, {"topic": "something else", key: "x"})
    assert info.value.forbidden and key in str(info.value)
    assert state.to_dict() == snapshot


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"status": "crashed"}, "set by the executor only"),
        ({"status": "done"}, "the LLM may set in_progress or stopped"),
        ({"primary_goal": "write_novel"}, "not one of"),
        ({"topic": "  "}, "non-empty"),
        ({"cluster_id": "../pico/x"}, "cluster id"),
        ({"question_id": "q-../../x"}, "question id"),
        ({"questions_done": ["q-0123456789", "cluster7"]}, "list of question ids"),
        ({"subgoals": "find trials"}, "must be a list"),
        ({"favourite_colour": "blue"}, "unknown goal field"),
        ({}, "non-empty"),
        ("stop", "JSON object"),
    ],
)
def test_bad_values_are_rejected(state, changes, fragment):
    with pytest.raises(GoalMutationError) as info:
        apply_llm_mutation(state, changes)
    assert fragment in str(info.value) and not info.value.forbidden


def test_from_dict_is_strict():
    good = new_goal(HANDBOOK, "seek_gap", "t").to_dict()
    assert GoalState.from_dict(good).to_dict() == good
    with pytest.raises(GoalStateError, match="unknown goal_state fields"):
        GoalState.from_dict({**good, "extra": 1})
    with pytest.raises(GoalStateError, match="status"):
        GoalState.from_dict({**good, "status": "sleeping"})
    with pytest.raises(GoalStateError, match="missing"):
        GoalState.from_dict({"goal_id": "abc"})
    # a goal_state.json of the version whose goals succeeded on clusters still loads (its cluster list is dropped)
    assert GoalState.from_dict({**good, "success_clusters": ["c1"]}).to_dict() == good


def test_the_question_in_focus_and_the_questions_done_are_the_goals(state):
    apply_llm_mutation(state, {"question_id": "q-0123456789", "questions_done": ["q-abcdefabcd", "q-abcdefabcd"]})
    assert state.question_id == "q-0123456789" and state.questions_done == ["q-abcdefabcd"]
    assert [h["event"] for h in state.history[-2:]] == ["question_selected", "questions_done"]


def test_goal_ids_must_be_hex(goals):
    with pytest.raises(GoalStateError):
        goals.goal_dir("../../etc")
