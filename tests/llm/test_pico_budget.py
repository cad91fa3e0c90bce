"""The PICO batch prompt fits the model's context: every batch within token_soft_cap and num_ctx - reply_tokens."""

from __future__ import annotations

import dataclasses

from demo_corpus import demo_papers

from ra_agent.config import Config
from ra_agent.embed.tokens import REPAIR_TURN_TOKENS, count_tokens, prompt_budget
from ra_agent.evidence.pico.llm_extract import LlmExtractor
from ra_agent.llm.rules_brain import RulesBrain


def test_pico_batches_fit_a_small_context_window():
    cfg = Config()
    small = dataclasses.replace(cfg, llm=dataclasses.replace(cfg.llm, num_ctx=4096, reply_tokens=700))
    assert prompt_budget(small) == 4096 - 2 * 700 - REPAIR_TURN_TOKENS < small.tokens.token_soft_cap  # num_ctx binds
    papers = [p for p in demo_papers() if p.abstract][:120]
    extractor = LlmExtractor.from_config(RulesBrain(), small)
    batches = extractor.batches(papers)
    assert len(batches) > 1 and sum(len(b) for b in batches) == len(papers)
    for batch in batches:
        messages = extractor.messages([text for _, text in batch])
        prompt = sum(count_tokens(m["content"]) for m in messages)
        assert prompt <= prompt_budget(small), f"a batch of {len(batch)} abstracts needs {prompt} tokens"
