"""The expansion boundary judge sees each candidate's title and its abstract cut to [tokens] judge_abstract_tokens."""

from __future__ import annotations

from ra_agent.embed.tokens import count_tokens, encoder_for
from ra_agent.llm.ollama_brain import OllamaBrain
from ra_agent.topics.expansion import _judge
from ra_agent.workspace import open_store


def test_the_judge_prompt_carries_token_capped_abstracts(demo, ollama_server):
    cfg = demo.with_overrides(llm={"ollama_host": ollama_server.root_url}, tokens={"judge_abstract_tokens": 40})
    with open_store(cfg) as store:
        papers = [p for p in store.papers(store.all_pmids()) if len(p.abstract) > 600][:3]
        shown = [p.pmid for p in papers]
        ollama_server.script(f'Reason.\nAction: {{"tool": "judge_boundary", "args": {{"keep_pmids": [{shown[0]}]}}}}')
        verdict = _judge(store, OllamaBrain(cfg), "PPI healing", shown, dict.fromkeys(shown, 0.7), 0.5, cfg)
    assert verdict.keep == [shown[0]]
    prompt = ollama_server.chat_requests[0]["messages"][-1]["content"]
    enc = encoder_for(cfg)
    for paper in papers:
        assert paper.title in prompt
        line = next(x for x in prompt.splitlines() if x.startswith("  Abstract: ") and paper.abstract[:40] in x)
        assert line.endswith(" …") and count_tokens(line.removeprefix("  Abstract: ").removesuffix(" …"), enc) <= 40
