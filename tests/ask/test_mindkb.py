"""Mind-KB: playbook form and id, the success heuristic, the SQLite store, prompt retrieval and its token budget."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import types

import pytest

from ra_agent.ask.flow import ask
from ra_agent.ask.mindkb import (
    BLOCK_CLOSE,
    BLOCK_OPEN,
    ChromaPlaybookStore,
    Playbook,
    RunSummary,
    SqlitePlaybookStore,
    canonical_json,
    extract_playbook,
    is_success,
    open_playbook_store,
    playbooks_block,
    record_agent_cycle_playbook,
    select_playbooks,
)
from ra_agent.ask.rules import AskRulesBrain
from ra_agent.embed.tokens import count_tokens, encoder_for
from ra_agent.llm.ollama_brain import OllamaBrain

from .test_ask import ON_TOPIC, action, top_hit

PLAN = {"tool": "find_similar", "args": {"queries": ["omeprazole ranitidine"], "k": 5}}
RESULT = {"ok": True, "data": [{"pmid": 7766740, "score": 0.71, "title": "Lansoprazole vs ranitidine"}]}


def playbook(prompt: str = ON_TOPIC, final: str = "Omeprazole heals more [PMID:7766740].", **kw) -> Playbook:
    return extract_playbook(prompt, [(PLAN, RESULT)], final, **kw)


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (RunSummary(True, "Omeprazole heals more [PMID:1].", 2), True),
        (RunSummary(False, "Omeprazole heals more [PMID:1].", 3), False),  # ran out of turns
        (RunSummary(True, "Omeprazole heals more.", 0), False),  # no tool step: nothing to learn
        (RunSummary(True, 'Action: {"tool": "read_note", "args": {"pmid": 1}}', 1), False),
        (RunSummary(True, 'I will call {"tool": "read_note", "args": {"pmid": 1}}', 1), False),
    ],
)
def test_success_heuristic(run, expected):
    assert is_success(run) is expected


def test_canonical_sequence_dense_text_and_id():
    book = playbook(session="ask:1")
    assert [s["role"] for s in book.steps] == ["user", "assistant", "tool_result", "assistant"]
    assert book.steps[1]["content"] == '{"args":{"k":5,"queries":["omeprazole ranitidine"]},"tool":"find_similar"}'
    assert book.id == hashlib.sha256(canonical_json(list(book.steps)).encode()).hexdigest()
    assert book.id == playbook(session="another session").id != playbook(final="Other answer.").id
    assert book.dense_text == (
        f"Playbook for: {ON_TOPIC}\n---\nSteps:\n"
        f"1) Planner decided: {canonical_json(PLAN)}\n"
        f"2) Tool returned: {canonical_json(RESULT)}\n"
        "3) Final answer: Omeprazole heals more [PMID:7766740]."
    )
    assert (book.kind, book.source, book.original_prompt, book.tool_steps) == ("playbook", "ask", ON_TOPIC, 1)
    with pytest.raises(ValueError):
        Playbook(({"role": "user", "content": "q"},))


def test_sqlite_store_merges_duplicates_and_ranks_by_similarity(store, embedder):
    books = SqlitePlaybookStore(store, embedder)
    first = books.add(playbook())
    assert books.add(playbook(session="later")) == first
    other = books.add(playbook("Which antibiotics eradicate Helicobacter pylori with lansoprazole?", "Amoxicillin."))
    assert books.count() == 2
    rows = store.conn.execute("SELECT id, count, collection, kind, metadata, length(vector) n FROM mind_kb").fetchall()
    by_id = {r["id"]: r for r in rows}
    assert by_id[first]["count"] == 2 and by_id[other]["count"] == 1
    assert by_id[first]["n"] == 384 * 2 and json.loads(by_id[first]["metadata"])["collection"] == "Mind-KB"
    assert [b.id for b in books.top(5)] == [first, other] and books.top(5)[0].count == 2
    found = books.search("omeprazole or ranitidine for healing oesophagitis", 2)
    assert [b.id for b in found] == [first, other] and found[0].score > found[1].score
    assert SqlitePlaybookStore(store).count() == 2  # read-only use needs no embedder


def test_block_is_trimmed_to_the_token_budget(store, embedder):
    books = SqlitePlaybookStore(store, embedder)
    long_result = {"ok": True, "text": "Healing rates at eight weeks were higher with omeprazole. " * 60}
    for n in range(3):
        books.add(extract_playbook(f"{ON_TOPIC} (variant {n})", [(PLAN, long_result)], f"Answer {n} [PMID:7766740]."))
    enc = encoder_for()
    full = playbooks_block(books, ON_TOPIC, 3, 100_000, enc=enc)
    assert full.startswith(BLOCK_OPEN + "\nPlaybook 1 (succeeded 1x, similarity ") and full.endswith(BLOCK_CLOSE)
    assert full.count("Playbook for: ") == 3
    for budget in (120, 500, 1200):
        block, used = select_playbooks(books, ON_TOPIC, 3, budget, enc=enc)
        assert block.startswith(BLOCK_OPEN) and block.endswith(BLOCK_CLOSE)
        assert count_tokens(block, enc) <= budget and " …" in block
        assert 1 <= len(used) == block.count("Playbook for: ") < 3
    assert playbooks_block(books, ON_TOPIC, 3, 20, enc=enc) == ""  # not even one playbook head fits
    assert playbooks_block(books, ON_TOPIC, 3, 100_000, min_score=0.999, enc=enc) == ""
    assert playbooks_block(books, ON_TOPIC, 0, 100_000, enc=enc) == ""


def test_identical_successful_runs_store_one_playbook_and_feed_the_next_prompt(
    ollama_cfg, store, embedder, ollama_server
):
    pmid = top_hit(ollama_cfg, store, embedder, "omeprazole ranitidine oesophagitis")
    replies = [action("find_similar", queries=["omeprazole ranitidine oesophagitis"], k=5),
               f"Final answer: Omeprazole healed more patients than ranitidine [PMID:{pmid}]."]  # fmt: skip
    books = SqlitePlaybookStore(store, embedder)
    results = []
    for _ in range(2):
        ollama_server.script(*replies)
        results.append(ask(ollama_cfg, store, ON_TOPIC, brain=OllamaBrain(ollama_cfg), embedder=embedder, mindkb=books))
    first, second = results
    assert first.success and first.playbook_id == second.playbook_id is not None
    assert books.count() == 1 and books.top(1)[0].count == 2
    assert store.conn.execute("SELECT COUNT(*), MAX(count) FROM mind_kb").fetchone()[:] == (1, 2)
    run1, run2 = (r["messages"] for r in ollama_server.chat_requests[::2])
    assert not any(BLOCK_OPEN in m["content"] for m in run1)
    (prompt,) = [m["content"] for m in run2 if BLOCK_OPEN in m["content"]]
    assert f"Playbook for: {ON_TOPIC}" in prompt and BLOCK_CLOSE in prompt
    assert second.playbooks_used == [first.playbook_id]


def test_rule_brain_playbooks_are_marked_and_left_out_of_llm_prompts(store, embedder):
    books = SqlitePlaybookStore(store, embedder)
    books.add(playbook(brain="rules:ask-v1"))
    books.add(playbook(final="Lansoprazole heals as well [PMID:7766740].", brain="ollama:gemma3n:e4b"))
    stored = {b.brain: b.from_rules for b in books.top(5)}
    assert stored == {"rules:ask-v1": True, "ollama:gemma3n:e4b": False}
    enc = encoder_for()
    _, for_llm = select_playbooks(books, ON_TOPIC, 5, 10_000, enc=enc, exclude_rules=True)
    _, for_rules = select_playbooks(books, ON_TOPIC, 5, 10_000, enc=enc)
    assert [b.brain for b in for_llm] == ["ollama:gemma3n:e4b"] and len(for_rules) == 2


def test_rules_runs_use_the_configured_store(cfg, store, embedder):
    for _ in range(2):
        result = ask(cfg, store, ON_TOPIC, brain=AskRulesBrain(cfg), embedder=embedder)
        assert result.success
    (row,) = store.conn.execute("SELECT id, count, source FROM mind_kb").fetchall()
    assert (row["id"], row["count"], row["source"]) == (result.playbook_id, 2, "ask")
    off = cfg.with_overrides(mindkb={"enabled": False})
    assert ask(off, store, ON_TOPIC, brain=AskRulesBrain(off), embedder=embedder).playbook_id is None


def test_agent_cycle_playbooks(store, embedder):
    books = SqlitePlaybookStore(store, embedder)
    steps = [({"tool": "run_pico", "args": {"cluster_id": "c1"}}, {"ok": True, "eligible": 7})]
    pid = record_agent_cycle_playbook(
        books, "Goal: seek a gap in PPI trials", steps, "Done: 7 eligible trials.", session="g1"
    )
    assert pid is not None and books.top(1)[0].source == "agent_cycle"
    assert record_agent_cycle_playbook(books, "Goal", [], "Done.") is None
    assert record_agent_cycle_playbook(books, "Goal", steps, "Done.", exited_early=False) is None


def test_chroma_backend_falls_back_to_sqlite_without_chromadb(cfg, store, embedder, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "chromadb", None)  # import fails as if not installed
    with caplog.at_level(logging.WARNING, logger="ra_agent.ask.mindkb"):
        books = open_playbook_store(cfg.with_overrides(mindkb={"backend": "chroma"}), store, embedder)
    assert isinstance(books, SqlitePlaybookStore) and "chromadb is not installed" in caplog.text


class _FakeCollection:
    """Just enough of chromadb's Collection for ChromaPlaybookStore (cosine distances, like hnsw:space=cosine)."""

    def __init__(self, metadata):
        self.metadata, self.rows = metadata, {}

    def get(self, ids=None, include=()):
        keys = [i for i in (ids or self.rows) if i in self.rows]
        return {"ids": keys, "metadatas": [self.rows[i][1] for i in keys]}

    def add(self, ids, documents, embeddings, metadatas):
        self.rows[ids[0]] = (embeddings[0], metadatas[0])

    def update(self, ids, metadatas):
        self.rows[ids[0]] = (self.rows[ids[0]][0], metadatas[0])

    def count(self):
        return len(self.rows)

    def query(self, query_embeddings, n_results, include):
        dist = sorted(
            (1 - sum(a * b for a, b in zip(v, query_embeddings[0], strict=True)), i) for i, (v, _) in self.rows.items()
        )
        top = dist[:n_results]
        return {"metadatas": [[self.rows[i][1] for _, i in top]], "distances": [[d for d, _ in top]]}


def test_chroma_backend_against_a_fake_client(tmp_path, embedder, monkeypatch):
    collections = {}

    class Client:
        def __init__(self, path):
            self.path = path

        def get_or_create_collection(self, name, metadata):
            return collections.setdefault(name, _FakeCollection(metadata))

    monkeypatch.setitem(sys.modules, "chromadb", types.SimpleNamespace(PersistentClient=Client))
    books = ChromaPlaybookStore(tmp_path / "chroma", embedder)
    assert collections["Mind-KB"].metadata["kind"] == "playbook"
    pid = books.add(playbook())
    assert books.add(playbook()) == pid and books.count() == 1 and books.top(1)[0].count == 2
    (found,) = books.search(ON_TOPIC, 3)
    assert found.id == pid and found.score > 0.5
