"""Every cycle prompt fits the token budget: 200 clusters and a 1 MB handbook, measured with the configured encoding."""

from __future__ import annotations

import dataclasses

from ra_agent.agent.goal import GoalStore
from ra_agent.agent.handbook import load_handbook, parse_handbook
from ra_agent.agent.prompt import SYSTEM_PROMPT, build_messages, observe, state_block
from ra_agent.agent.runner import start_goal
from ra_agent.embed.tokens import REPAIR_TURN_TOKENS, count_tokens, encoder_for, prompt_budget
from ra_agent.workspace import open_store

HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"


def prompt_tokens(cfg, messages) -> int:
    enc = encoder_for(cfg)
    return sum(count_tokens(m["content"], enc) for m in messages)


def huge_world(cfg, demo_project, clusters: int = 200, prose_bytes: int = 1_000_000):
    """The demo goal's real observation, its clusters cloned (with new ids and years) up to `clusters`,
    and the demo handbook with its real prose repeated to `prose_bytes`."""
    path = demo_project / HANDBOOK
    text = path.read_text(encoding="utf-8")
    body = text.split("---", 2)[2]
    handbook = parse_handbook(text + body * (prose_bytes // len(body) + 1))
    with open_store(cfg) as store:
        state = start_goal(cfg, store, path, "test").goal_id
        goal = GoalStore(cfg.data_dir, store).load(state)
        observation = observe(cfg, store, goal, load_handbook(path))
    real = observation["clusters"]
    clones = [
        {**real[i % len(real)], "cluster_id": f"clone{i:04d}", "mean_year": 1990 + i % 30, "search_hits": 0}
        for i in range(clusters - len(real))
    ]
    observation["clusters"] = real + clones
    return handbook, observation, goal


def test_200_clusters_and_a_1_mb_handbook_fit_the_budget(demo, demo_project):
    handbook, observation, goal = huge_world(demo, demo_project)
    assert len(handbook.prose) > 1_000_000 and len(observation["clusters"]) == 200
    focus = observation["clusters"][150]["cluster_id"]
    observation["goal"]["cluster_id"] = focus
    with open_store(demo) as store:
        messages = build_messages(demo, store, handbook, observation)
    used = prompt_tokens(demo, messages)
    budget = prompt_budget(demo)
    assert budget == min(demo.tokens.token_soft_cap, demo.llm.num_ctx - 2 * demo.llm.reply_tokens - REPAIR_TURN_TOKENS)
    assert used <= budget, f"{used} tokens > budget {budget}"
    system, user = messages[0]["content"], messages[1]["content"]
    assert system.startswith(SYSTEM_PROMPT.format(tools="").rstrip()) and "search_pubmed(" in system  # whole
    assert "handbook prose cut to 1,500 tokens" in user
    assert "clusters left out of this state block to fit the token budget" in user
    state = user[user.index("<state>") :]
    first = state.index('"cluster_id": "')
    assert state[first:].startswith(f'"cluster_id": "{focus}"')  # the goal's own cluster comes first
    assert "Success requires" in user and "end with Action" in user


def test_small_contexts_shrink_the_prompt(demo, demo_project):
    small = dataclasses.replace(demo, llm=dataclasses.replace(demo.llm, num_ctx=4096, reply_tokens=600))
    handbook, observation, _ = huge_world(small, demo_project, clusters=120, prose_bytes=200_000)
    with open_store(small) as store:
        messages = build_messages(small, store, handbook, observation)
    assert prompt_budget(small) == 2768 and prompt_tokens(small, messages) <= 2768  # 4096 - 2 x 600 - 128


def test_state_block_keeps_the_newest_most_relevant_clusters(demo, demo_project):
    _, observation, _ = huge_world(demo, demo_project, clusters=60, prose_bytes=10)
    observation["clusters"][-1]["search_hits"] = 99  # the most relevant cluster comes first
    enc = encoder_for(demo)
    block, left_out = state_block(observation, 3000, enc)
    assert count_tokens(block, enc) <= 3000 and 0 < left_out < 60
    assert f"({left_out} of 60 clusters left out" in block
    first = block.index('"cluster_id": "')
    assert block[first:].startswith(f'"cluster_id": "{observation["clusters"][-1]["cluster_id"]}"')
    whole, none_out = state_block(observation, 1_000_000, enc)
    assert none_out == 0 and "left out" not in whole
