"""Review-question judgements by an LLM in the judge seam (`evidence.judge`), over a loopback Ollama server replaying
scripted replies, on the demo corpus's real records: a quote that is not in the record leaves the decision to the
rules (and says so), a quote that is decides and the LLM is named; past the call cap the rules decide, saying so."""

from __future__ import annotations

import json

import jsonschema
import pytest
from demo_corpus import demo_papers

from ra_agent.config import Config
from ra_agent.evidence.questions.build import questions_for_topic
from ra_agent.evidence.questions.judge import RulesJudge
from ra_agent.evidence.questions.llm_judge import LlmQuestionJudge, question_judge_for, record_sentences
from ra_agent.evidence.questions.model import RULES
from ra_agent.evidence.questions.topic import Topic
from ra_agent.llm.ollama_brain import OllamaBrain

SEED = "proton pump inhibitors AND gastroesophageal reflux"  # handbooks/seek_gap_ppi_gerd.md
SCOPE = demo_papers()[:300]  # the first 300 demo records (file order), for speed
TOPIC = Topic.from_seed_query(SEED).with_corpus(SCOPE)  # as questions_for_topic reads it
BRAIN = "ollama:gemma3n:e4b"


def rules_questions(judge=None):
    cfg = Config()
    return questions_for_topic(Topic.from_seed_query(SEED), SCOPE, pivot=cfg.sr.sr_overlap_pivot,
                               update_after=cfg.sr.update_after_trials, min_trials=cfg.sr.min_eligible_trials,
                               judge=judge)  # fmt: skip


@pytest.fixture(scope="module")
def by_rules():
    questions, judged, reviews = rules_questions()
    return questions[0], judged, reviews  # the topic's own question first


def reply(verdict: str, quote: str, reason: str = "From the record.") -> str:
    return json.dumps({"verdict": verdict, "reason": reason, "quotes": [quote]})


def brain_for(server) -> OllamaBrain:
    return OllamaBrain(Config().with_overrides(llm={"ollama_host": server.host, "timeout_s": 10.0}))


def test_an_invented_quote_leaves_the_trial_to_the_rules_and_a_real_one_decides(by_rules, ollama_server):
    root, judged, _ = by_rules
    papers = {p.pmid: p for p in SCOPE}
    first, second, *rest = [pmid for pmid, answer in judged.items() if answer.eligible]
    assert len(rest) >= 2  # the demo holds many eligible trials
    invented = "All participants were healthy volunteers without reflux symptoms."
    assert invented.lower() not in " ".join(record_sentences(papers[first])).lower()
    real = record_sentences(papers[second])[1]  # the abstract's first sentence, verbatim
    ollama_server.script(reply("not eligible", invented), reply("not eligible", real, "It is not a randomised trial."))
    judge = LlmQuestionJudge(brain_for(ollama_server), max_calls=2)
    questions, answers, _ = rules_questions(judge)
    own = questions[0]

    assert first in own.trials and answers[first].eligible  # the invented quote did not count: the rules decided
    assert f"quote is not in PMID {first}" in answers[first].reason and answers[first].judged_by.startswith(RULES)
    assert second not in own.trials and not answers[second].eligible  # the LLM, quoting the record, rejected it
    assert answers[second].judged_by == BRAIN and f"not eligible by {BRAIN}" in answers[second].reason
    assert "It is not a randomised trial." in answers[second].reason and real[:60] in answers[second].reason
    assert all("judge_max_calls = 2 reached" in answers[p].reason for p in rest)  # the cap: the rules decide them
    assert any(p in own.trials for p in rest) and all(p in own.trials for p in rest if p in root.trials)
    assert set(own.trials) == set(root.trials) - {second}
    assert all(not answers[p].eligible and answers[p] == judged[p] for p in judged if not judged[p].eligible)
    assert own.judged_by == judge.name == f"{BRAIN} (LLM, quotes checked against the record)"
    assert len(ollama_server.chat_requests) == 2 and len(judge.calls) == 2  # reviews past the cap: not asked

    schema = ollama_server.chat_requests[0]["format"]  # constrained: verdict and quotes are enums
    assert schema["properties"]["verdict"]["enum"] == ["eligible", "not eligible", "unclear"]
    assert schema["properties"]["quotes"]["items"]["enum"] == record_sentences(papers[first])
    assert schema["additionalProperties"] is False
    jsonschema.validate(json.loads(reply("not eligible", real)), ollama_server.chat_requests[1]["format"])
    with pytest.raises(jsonschema.ValidationError):  # a quote that is not one of the record's sentences
        jsonschema.validate(json.loads(reply("not eligible", invented)), schema)
    assert judge.calls[0]["mode"] == "json_schema" and judge.calls[0]["schema"] == "trial_eligibility"


def test_a_review_is_kept_or_dropped_by_a_quoting_llm(by_rules, ollama_server):
    root, _, reviews = by_rules
    rules = RulesJudge()
    answering = [r for r in reviews if rules.review(r, root, TOPIC).verdict]
    other = next(r for r in reviews if not rules.review(r, root, TOPIC).verdict)
    one = answering[0]  # the same review asked three times, three replies
    ollama_server.script(reply("answers", one.title), reply("does not answer", record_sentences(one)[-1]),
                         reply("answers", "This review covers every trial of proton pump inhibitors ever done."))  # fmt: skip
    judge = LlmQuestionJudge(brain_for(ollama_server))
    kept, ruled = judge.review(one, root, TOPIC), rules.review(one, root, TOPIC)
    assert kept.verdict and kept.reason.startswith(ruled.reason) and f"answers by {BRAIN}" in kept.reason
    assert kept.judged_by == BRAIN and kept.rank == ruled.rank  # the rules' ranking stays
    dropped = judge.review(one, root, TOPIC)  # the LLM, quoting the review, says it does not answer
    assert not dropped.verdict and dropped.judged_by == BRAIN and f"does not answer by {BRAIN}" in dropped.reason
    fallback = judge.review(one, root, TOPIC)  # an invented quote: the rules' answer, labelled
    assert fallback.verdict and fallback.judged_by.startswith(RULES)
    assert f"quote is not in PMID {one.pmid}" in fallback.judged_by and "(fallback: " in fallback.reason
    assert judge.review(other, root, TOPIC) == rules.review(other, root, TOPIC)  # the rules said no: not asked
    assert len(ollama_server.chat_requests) == 3
    assert ollama_server.chat_requests[0]["format"]["properties"]["verdict"]["enum"] == [
        "answers", "does not answer", "unclear"]  # fmt: skip


def test_garbage_then_a_brain_error_leave_every_judgement_to_the_rules(by_rules, ollama_server):
    _, judged, _ = by_rules
    papers = {p.pmid: p for p in SCOPE}
    pmid = next(p for p, a in judged.items() if a.eligible)
    ollama_server.script("I think it is fine.", "still no JSON")
    judge = LlmQuestionJudge(brain_for(ollama_server))
    garbage = judge.trial(papers[pmid], TOPIC)
    assert garbage.eligible and "reply unusable after one repair turn" in garbage.judged_by
    assert len(ollama_server.chat_requests) == 2  # the question and its repair turn
    judge.brain = OllamaBrain(Config().with_overrides(llm={"ollama_host": "http://127.0.0.1:9", "timeout_s": 2.0}))
    down = judge.trial(papers[pmid], TOPIC)
    assert "unavailable" in down.judged_by and down.eligible
    assert "unavailable" in judge.trial(papers[pmid], TOPIC).judged_by  # not asked again


def test_without_an_llm_the_rules_judge_and_say_so(by_rules):
    root, judged, _ = by_rules
    assert isinstance(question_judge_for(Config().with_overrides(llm={"brain": "rules"})), RulesJudge)
    assert isinstance(question_judge_for(Config().with_overrides(llm={"judge_max_calls": 0})), RulesJudge)
    questions, answers, _ = rules_questions(RulesJudge())
    assert set(questions[0].trials) == set(root.trials) and questions[0].judged_by == RULES
    assert root.trials and all(answers[p].judged_by == RULES and answers[p] == judged[p] for p in root.trials)
