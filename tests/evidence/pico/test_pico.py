"""PICO extraction runs: LLM batches with a scripted brain, JSON repair and rule fallback, JSONL files, guards, eligibility."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re

import pytest
from replay.ollama_server import OllamaReplayServer

from ra_agent.config import Config, PicoConfig
from ra_agent.embed.tokens import count_tokens
from ra_agent.evidence.pico.extract import (
    SCHEMA_KEYS,
    LearnedExtractor,
    PicoFileError,
    PicoRecord,
    RuleExtractor,
    consistency_warnings,
    count_eligible,
    is_eligible_trial,
    pico_texts,
    read_pico,
    run_pico,
)
from ra_agent.evidence.pico.learned import model_version
from ra_agent.evidence.pico.llm_extract import FIX_JSON_PROMPT, LlmExtractor, make_extractor, parse_reply
from ra_agent.llm.base import BrainError
from ra_agent.llm.ollama_brain import OllamaBrain
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.models import Paper

LINE_KEYS = ["pmid", *SCHEMA_KEYS, "extractor"]
TRIALS = [10950032, 10871975, 9354207]  # three real free-text RCT abstracts of the demo corpus


class ScriptedBrain:
    """Stands in for the LLM: answers each chat() with the next scripted reply and records the messages."""

    def __init__(self, *replies: str | Exception, name: str = "fake:scripted-llm"):
        self.name = name
        self.replies = list(replies)
        self.calls: list[list[dict[str, str]]] = []

    def chat(self, messages: list[dict[str, str]]) -> str:
        self.calls.append([dict(m) for m in messages])
        if not self.replies:
            raise AssertionError("the extractor asked more often than scripted")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


class EchoBrain:
    """Answers every prompt with a record per PMID it finds in the prompt, its title as P (for batching tests)."""

    name = "fake:echo-llm"

    def __init__(self):
        self.prompts: list[str] = []

    def chat(self, messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        found = re.findall(r"^PMID (\d+)\nTitle: (.*)$", prompt, re.M)
        return json.dumps([{"pmid": int(p), "P": title} for p, title in found])


# What each of TRIALS says, in its abstract's words or close paraphrases (read from data/demo by hand)
GROUNDED = {
    10950032: {"P": "338 patients with erosive gastroesophageal reflux disease", "I": "rabeprazole 20 mg once daily",
               "C": "ranitidine 150 mg four times daily", "O": "healing of esophageal erosions seen at endoscopy",
               "StudyDesign": "RCT, double-blind", "PopulationAge": "", "SampleSize": "338"},
    10871975: {"P": "patients with symptomatic GERD without erosive esophagitis",
               "I": "omeprazole 20 mg once daily; omeprazole 10 mg once daily", "C": "placebo",
               "O": "complete resolution of heartburn", "StudyDesign": "RCT, double-blind, placebo-controlled",
               "PopulationAge": "", "SampleSize": "359"},
    9354207: {"P": "24 patients with reflux oesophagitis grade II and III", "I": "pantoprazole 40 mg o.m.",
              "C": "ranitidine 150 mg b.d.", "O": "24-hour intragastric and oesophageal pH",
              "StudyDesign": "randomised double-blind trial", "PopulationAge": "", "SampleSize": "24"},
}  # fmt: skip


def llm_item(pmid: int, **fields: object) -> dict:
    return {"pmid": pmid, **GROUNDED[pmid], **fields}


@pytest.fixture
def trials(demo_papers) -> list[Paper]:
    return [demo_papers[p] for p in TRIALS]


# --------------------------------------------------------------------------- LLM extractor


def test_good_json_array(trials):
    brain = ScriptedBrain(json.dumps([llm_item(p.pmid) for p in trials]))
    records = LlmExtractor(brain).extract(trials)
    assert [r.pmid for r in records] == TRIALS
    assert all(r.extractor == "fake:scripted-llm" for r in records)
    assert records[0].to_json() == {**llm_item(TRIALS[0]), "extractor": "fake:scripted-llm"}
    (messages,) = brain.calls
    assert [m["role"] for m in messages] == ["system", "user"]
    for paper in trials:  # every title and abstract goes into the one prompt
        assert f"PMID {paper.pmid}\nTitle: {paper.title}" in messages[1]["content"]
        assert paper.abstract in messages[1]["content"]


def test_fenced_json5_with_prose(trials):
    items = "\n".join(
        f"  {{pmid: {p.pmid}, P: 'adults', I: 'rabeprazole', C: '', O: 'healing', StudyDesign: 'RCT', "
        f"PopulationAge: '', SampleSize: '338',}},  // record {i}"
        for i, p in enumerate(trials)
    )
    reply = f"Here is the extraction:\n```json\n[\n{items}\n]\n```\nLet me know if you need more."
    brain = ScriptedBrain(reply)
    records = LlmExtractor(brain).extract(trials)
    assert len(brain.calls) == 1
    # parsed for all three; kept where the abstract says it (only the first trial tests rabeprazole in 338 patients)
    assert [r.I for r in records] == ["rabeprazole", "", ""] and [r.SampleSize for r in records] == ["338", "", ""]
    assert [r.O for r in records] == ["healing", "", "healing"]  # the second trial measures heartburn, not healing
    assert all(r.P == "" and "'adults'" in r.dropped["P"] for r in records)  # "adults" is in none of them


def test_one_malformed_reply_then_exactly_one_repair_turn(trials):
    broken = json.dumps([llm_item(p.pmid) for p in trials])[:60]  # a reply cut off mid-object
    fixed = json.dumps([llm_item(p.pmid) for p in trials])
    brain = ScriptedBrain(broken, fixed)
    records = LlmExtractor(brain).extract(trials)
    first, repair = brain.calls
    assert repair[:2] == first
    assert repair[2:] == [{"role": "assistant", "content": broken}, {"role": "user", "content": FIX_JSON_PROMPT}]
    assert all(r.extractor == "fake:scripted-llm" for r in records)
    assert [r.P for r in records] == [GROUNDED[p]["P"] for p in TRIALS]


def test_garbage_twice_falls_back_to_the_learned_tagger_for_the_batch(trials, caplog):
    brain = ScriptedBrain("I cannot help with that.", "Sorry, still no JSON here.")
    extractor = LlmExtractor(brain)
    with caplog.at_level(logging.WARNING, logger="ra_agent.evidence.pico.llm_extract"):
        records = extractor.extract(trials)
    assert len(brain.calls) == 2  # the prompt and one repair turn, nothing more
    assert [r.pmid for r in records] == TRIALS
    assert all(r.extractor == f"{model_version()} (llm json_error)" for r in records)
    expected = LearnedExtractor().extract(trials)
    assert [r.fields() for r in records] == [r.fields() for r in expected]
    assert len(extractor.failures) == 1 and "json_error" in extractor.failures[0]
    assert f"falling back to {model_version()}" in caplog.text


def test_json_without_records_is_a_schema_error(trials):
    brain = ScriptedBrain('{"answer": "no abstracts found"}', "[1, 2, 3]")
    records = LlmExtractor(brain).extract(trials)
    assert len(brain.calls) == 2
    assert {r.extractor for r in records} == {f"{model_version()} (llm schema_error)"}


def test_brain_error_falls_back_without_retrying_to_the_configured_rules(trials):
    brain = ScriptedBrain(BrainError("Ollama at http://127.0.0.1:9 (gemma3n:e4b): connection refused"))
    cfg = dataclasses.replace(Config(), pico=PicoConfig(extractor="rules"))
    records = LlmExtractor.from_config(brain, cfg).extract(trials)
    assert len(brain.calls) == 1
    assert {r.extractor for r in records} == {"rules:pico-cues-v2 (llm brain_error)"}
    assert all(r.P for r in records)  # the rules still filled the batch


def test_missing_pmids_and_keys_are_empty_and_values_become_strings(trials):
    a, b, c = TRIALS
    reply = json.dumps(
        [
            {"pmid": a, "P": None, "I": {"drug": "x"}, "O": ["healing", "relief"], "SampleSize": 338, "extra": 1},
            {"pmid": str(b), "Population": "patients with symptomatic GERD", "study_design": "RCT", "age": 45.0},
        ]
    )
    records = LlmExtractor(ScriptedBrain(reply)).extract(trials)
    first, second, third = records
    assert first.to_json() == {
        "pmid": a, "P": "", "I": "", "C": "", "O": "healing; relief", "StudyDesign": "",
        "PopulationAge": "", "SampleSize": "338", "extractor": "fake:scripted-llm",
    }  # fmt: skip
    assert (second.pmid, second.P, second.StudyDesign) == (b, "patients with symptomatic GERD", "RCT")
    assert second.PopulationAge == "" and second.dropped == {"PopulationAge": "'45': 45 not in the text"}
    assert third.pmid == c and third.fields() == dict.fromkeys(SCHEMA_KEYS, "")
    assert third.extractor == "fake:scripted-llm (pmid missing from reply)"


def test_extra_and_duplicate_pmids_are_dropped(trials, caplog):
    first = "Patients with a history of heartburn"
    items = [{**llm_item(TRIALS[0]), "pmid": 999}, llm_item(TRIALS[1], P=first), *(llm_item(p.pmid) for p in trials)]
    with caplog.at_level(logging.WARNING, logger="ra_agent.evidence.pico.llm_extract"):
        records = LlmExtractor(ScriptedBrain(json.dumps(items))).extract(trials)
    assert [r.pmid for r in records] == TRIALS  # input order, one each
    assert records[1].P == first  # the first answer for a PMID wins
    assert "not in the batch: 999" in caplog.text


def test_batches_hold_at_most_batch_size_papers(demo_papers):
    papers = [p for p in demo_papers.values() if p.abstract][:90]
    brain = EchoBrain()
    records = LlmExtractor(brain, batch_size=40, token_budget=10**9).extract(papers)
    assert [len(re.findall(r"^PMID \d+$", p, re.M)) for p in brain.prompts] == [40, 40, 10]
    assert [r.pmid for r in records] == [p.pmid for p in papers]
    assert all(
        r.extractor == "fake:echo-llm" and r.P == " ".join(p.title.split())
        for r, p in zip(records, papers, strict=True)
    )


def test_past_the_cap_papers_go_to_the_fallback_labelled(trials, tmp_path, caplog):
    """[pico] llm_max_abstracts caps what one run sends to the LLM; the rest are the fallback's, and say so."""
    brain = ScriptedBrain(json.dumps([llm_item(p.pmid) for p in trials[:2]]))
    extractor = LlmExtractor(brain, max_papers=2, fallback=RuleExtractor())
    with caplog.at_level(logging.WARNING, logger="ra_agent.evidence.pico.llm_extract"):
        result = run_pico(trials, extractor, tmp_path / "c.jsonl")
    assert len(brain.calls) == 1 and all(f"PMID {p.pmid}\n" in brain.calls[0][1]["content"] for p in trials[:2])
    assert result.extractor_counts == {"fake:scripted-llm": 2,
                                       "rules:pico-cues-v2 (llm cap: [pico] llm_max_abstracts = 2)": 1}  # fmt: skip
    assert result.metadata()["llm_papers"] == 2 and "1 papers beyond the cap of 2" in caplog.text


def test_batches_stay_inside_the_token_budget(demo_papers):
    papers = [p for p in demo_papers.values() if p.abstract][:40]
    extractor = LlmExtractor(EchoBrain(), batch_size=40, token_budget=3000)
    batches = extractor.batches(papers)
    assert len(batches) > 1 and sum(len(b) for b in batches) == 40
    for batch in batches:
        messages = extractor.messages([text for _, text in batch])
        assert count_tokens("".join(m["content"] for m in messages)) <= 3000


def test_make_extractor_picks_the_configured_extractor_without_an_llm():
    assert isinstance(make_extractor(None), LearnedExtractor)
    assert isinstance(make_extractor(RulesBrain(), Config()), LearnedExtractor)
    assert make_extractor(None).name == model_version() and model_version().startswith("learned:pico-crf-v2@")
    rules_cfg = dataclasses.replace(Config(), pico=PicoConfig(extractor="rules"))
    assert isinstance(make_extractor(RulesBrain(), rules_cfg), RuleExtractor)
    llm = make_extractor(ScriptedBrain(), Config())
    assert isinstance(llm, LlmExtractor) and llm.name == "fake:scripted-llm"
    cfg = Config()  # the reply's room ([llm] reply_tokens, ~90 tokens a record) binds before [sr] pico_batch_size
    assert llm.batch_size == cfg.llm.reply_tokens // 90 < cfg.sr.pico_batch_size
    assert llm.max_papers == cfg.pico.llm_max_abstracts


def test_parse_reply_reports_why():
    assert parse_reply("") == (None, "llm json_error: empty reply")
    assert parse_reply("no json at all")[1].startswith("llm json_error")
    items, error = parse_reply('{"pmid": 5, "P": "x"}')
    assert error == "" and items == [{"pmid": 5, "P": "x"}]


def test_ollama_brain_over_the_wire(trials, tmp_path):
    """The real Ollama client against a loopback /api/chat serving a fenced reply."""
    reply = "```json\n" + json.dumps([llm_item(p.pmid) for p in trials]) + "\n```"
    with OllamaReplayServer(replies=[reply]) as server:
        cfg = Config().with_overrides(llm={"ollama_host": server.host, "timeout_s": 5.0})
        extractor = make_extractor(OllamaBrain(cfg), cfg)
        result = run_pico(trials, extractor, tmp_path / "pico" / "c1.jsonl")
        (request,) = server.chat_requests
    assert request["model"] == "gemma3n:e4b" and request["messages"][0]["role"] == "system"
    assert result.extractor_counts == {"ollama:gemma3n:e4b": 3}
    assert [r.extractor for r in read_pico(tmp_path / "pico" / "c1.jsonl")] == ["ollama:gemma3n:e4b"] * 3


# --------------------------------------------------------------------------- run_pico and JSONL files


def test_run_pico_writes_one_valid_line_per_pmid(demo_papers, tmp_path):
    papers = [p for p in demo_papers.values() if p.abstract][:50]
    out = tmp_path / "pico" / "cluster-7.jsonl"
    seen: list[tuple[int, int]] = []
    result = run_pico([*papers, papers[0], papers[3]], RuleExtractor(), out, progress=lambda d, t: seen.append((d, t)))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 50
    objects = [json.loads(line) for line in lines]
    assert all(list(o) == LINE_KEYS for o in objects)
    assert all(isinstance(o[k], str) for o in objects for k in LINE_KEYS[1:])
    assert [o["pmid"] for o in objects] == [p.pmid for p in papers]
    assert [r.to_json() for r in read_pico(out)] == objects
    assert (result.status, result.papers, result.path) == ("ok", 50, str(out))
    assert result.extractor == "rules:pico-cues-v2" and result.extractor_counts == {"rules:pico-cues-v2": 50}
    assert result.extracted == sum(any(o[k] for k in SCHEMA_KEYS) for o in objects)
    assert set(result.fill_rates) == set(SCHEMA_KEYS)
    assert result.fill_rates["StudyDesign"] == sum(bool(o["StudyDesign"]) for o in objects) / 50
    assert result.rct == sum("RCT" in o["StudyDesign"] for o in objects)
    assert seen == [(40, 50), (50, 50)]
    assert result.metadata()["fill_P"] == round(result.fill_rates["P"], 3)
    assert [p.name for p in out.parent.iterdir()] == ["cluster-7.jsonl"]  # no temp file left


class BrokenExtractor:
    """Extracts the first batch, then fails: a crash in the middle of a run."""

    name = "test:broken"
    batch_size = 2

    def __init__(self):
        self.calls = 0

    def extract(self, papers):
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("killed mid-run")
        return [PicoRecord(pmid=p.pmid, extractor=self.name) for p in papers]


def test_a_crash_mid_run_leaves_the_previous_file(trials, tmp_path):
    out = tmp_path / "c.jsonl"
    run_pico(trials, RuleExtractor(), out)
    before = out.read_bytes()
    with pytest.raises(RuntimeError, match="killed mid-run"):
        run_pico(trials, BrokenExtractor(), out)
    assert out.read_bytes() == before


def test_a_failed_rename_leaves_the_previous_file_and_no_temp(trials, tmp_path, monkeypatch):
    out = tmp_path / "c.jsonl"
    run_pico(trials, RuleExtractor(), out)
    before = out.read_bytes()

    def no_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError, match="disk full"):
        run_pico(trials[:1], RuleExtractor(), out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


class CountingExtractor:
    name = "test:counting"
    batch_size = 400

    def __init__(self):
        self.papers = 0

    def extract(self, papers):
        self.papers += len(papers)
        return [PicoRecord(pmid=p.pmid, extractor=self.name) for p in papers]


def test_confirmation_guard_above_800(demo_papers, tmp_path):
    papers = list(demo_papers.values())[:801]
    asked: list[int] = []
    extractor = CountingExtractor()
    out = tmp_path / "big.jsonl"
    result = run_pico(papers, extractor, out, confirm=lambda n: asked.append(n) or False)
    assert asked == [801]
    assert result.status == "declined" and result.extracted == 0 and result.path is None
    assert extractor.papers == 0 and not out.exists()
    result = run_pico(papers, extractor, out, confirm=lambda n: True)
    assert result.status == "ok" and extractor.papers == 801 and len(read_pico(out)) == 801


def test_no_confirmation_asked_at_or_below_the_limit(demo_papers, tmp_path):
    papers = list(demo_papers.values())[:800]
    asked: list[int] = []
    result = run_pico(papers, CountingExtractor(), tmp_path / "c.jsonl", confirm=lambda n: asked.append(n) or False)
    assert asked == [] and result.status == "ok"
    result = run_pico(papers[:10], CountingExtractor(), tmp_path / "d.jsonl", confirm=lambda n: False, confirm_above=5)
    assert result.status == "declined"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "Expecting property name"),
        ('["a list"]', "expected a JSON object"),
        ('{"pmid": "12", "P": "", "I": "", "C": "", "O": "", "StudyDesign": "", "PopulationAge": "", '
         '"SampleSize": "", "extractor": "x"}', "'pmid' must be a positive integer"),
        ('{"pmid": 12, "P": "", "I": "", "C": "", "O": "", "StudyDesign": "", "extractor": "x"}',
         "missing key(s) PopulationAge, SampleSize"),
        ('{"pmid": 12, "P": 5, "I": "", "C": "", "O": "", "StudyDesign": "", "PopulationAge": "", '
         '"SampleSize": "", "extractor": "x"}', "key(s) P must be strings"),
    ],
)  # fmt: skip
def test_read_pico_names_file_and_line_of_a_bad_line(tmp_path, line, problem):
    good = json.dumps(PicoRecord(pmid=1, P="adults", extractor="x").to_json())
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{line}\n", encoding="utf-8")
    with pytest.raises(PicoFileError) as err:
        read_pico(path)
    assert str(err.value).startswith(f"{path}:2: ") and problem in str(err.value)


def test_read_pico_rejects_a_repeated_pmid(tmp_path):
    line = json.dumps(PicoRecord(pmid=7, extractor="x").to_json())
    path = tmp_path / "dup.jsonl"
    path.write_text(f"{line}\n{line}\n", encoding="utf-8")
    with pytest.raises(PicoFileError, match=r"dup\.jsonl:2: PMID 7 appears more than once"):
        read_pico(path)


# --------------------------------------------------------------------------- consistency guard


def test_identical_pio_with_conflicting_designs_is_flagged(caplog):
    pio = {"P": "Adults with GERD", "I": "omeprazole 20 mg", "O": "healing at 8 weeks"}
    records = [
        PicoRecord.of(1, {**pio, "StudyDesign": "RCT (double-blind)"}, "x"),
        PicoRecord.of(
            2, {**{k: v.lower() + "." for k, v in pio.items()}, "StudyDesign": "cohort (retrospective)"}, "x"
        ),
        PicoRecord.of(3, {**pio, "StudyDesign": "randomised double-blind"}, "x"),  # same class as pmid 1
        PicoRecord.of(4, {**pio, "P": "", "StudyDesign": "case report"}, "x"),
    ]
    papers = [Paper(pmid=1, title="Omeprazole trial"), Paper(pmid=2, title="Omeprazole cohort")]
    with caplog.at_level(logging.WARNING, logger="ra_agent.evidence.pico.extract"):
        (warning,) = consistency_warnings(records, papers)
    assert "RCT vs cohort" in warning
    assert "1 'RCT (double-blind)' 'Omeprazole trial'" in warning and "2 'cohort (retrospective)'" in warning
    assert "4 " not in warning
    assert "PICO consistency guard" in caplog.text


def test_consistent_designs_raise_nothing():
    pio = {"P": "adults", "I": "omeprazole", "O": "healing"}
    records = [
        PicoRecord.of(1, {**pio, "StudyDesign": "RCT"}, "x"),
        PicoRecord.of(2, {**pio, "StudyDesign": "RCT (crossover)"}, "x"),
    ]
    assert consistency_warnings(records) == []


class ConflictingExtractor:
    name = "test:conflict"
    batch_size = 40

    def extract(self, papers):
        designs = ["RCT", "cohort"]
        return [
            PicoRecord(
                pmid=p.pmid, P="adults", I="omeprazole", O="healing", StudyDesign=designs[i % 2], extractor=self.name
            )
            for i, p in enumerate(papers)
        ]


def test_run_pico_returns_the_guard_warnings(trials, tmp_path):
    result = run_pico(trials[:2], ConflictingExtractor(), tmp_path / "c.jsonl")
    assert len(result.warnings) == 1 and "RCT vs cohort" in result.warnings[0]


# --------------------------------------------------------------------------- eligibility


def test_eligible_needs_an_rct_and_p_i_o(xml_papers, demo_papers):
    rct_by_type = xml_papers[31191790]  # Randomized Controlled Trial publication type
    full = PicoRecord(pmid=rct_by_type.pmid, P="knee osteoarthritis", I="compression", O="swelling")
    assert is_eligible_trial(rct_by_type, full)  # no StudyDesign needed: the publication type says RCT
    assert not is_eligible_trial(rct_by_type, PicoRecord(pmid=rct_by_type.pmid, P="x", I="y"))  # no O
    assert not is_eligible_trial(rct_by_type, None)
    free_text = demo_papers[10950032]  # CSV record: no publication types
    assert is_eligible_trial(free_text, PicoRecord(pmid=free_text.pmid, P="a", I="b", O="c", StudyDesign="RCT"))
    assert is_eligible_trial(free_text, PicoRecord(pmid=free_text.pmid, P="a", I="b", O="c", StudyDesign="randomised"))
    assert not is_eligible_trial(free_text, PicoRecord(pmid=free_text.pmid, P="a", I="b", O="c", StudyDesign="cohort"))
    observational = xml_papers[30530577]
    assert not is_eligible_trial(observational, PicoRecord(pmid=observational.pmid, P="a", I="b", O="c"))


def test_count_eligible_over_rule_records(demo_papers):
    papers = [demo_papers[p] for p in (10950032, 10102945, 10559084, 8580272, 7654116, 8917326)]
    records = RuleExtractor().extract(papers)
    # 10950032, 10102945 and 10559084 are stated randomised trials with P, I and O found; 8580272 is a blinded
    # trial without stated randomisation, 7654116 a non-randomised comparison, 8917326 a narrative review
    assert count_eligible(papers, records) == 3
    assert count_eligible(papers, {r.pmid: r for r in records[:1]}) == 1  # papers without a record don't count


def test_pico_texts_per_family():
    record = PicoRecord(pmid=1, P="patients with GERD", I="omeprazole", C="placebo", O="healing",
                        StudyDesign="RCT (double-blind)", PopulationAge="aged 18-75 years")  # fmt: skip
    assert pico_texts(record) == {
        "p": "patients with GERD (aged 18-75 years)",
        "i": "omeprazole",
        "c": "placebo",
        "o": "healing",
        "m": "RCT (double-blind)",
    }
    assert pico_texts(PicoRecord(pmid=2, P="infants aged 3 to 12 months", PopulationAge="aged 3 to 12 months"))[
        "p"
    ] == ("infants aged 3 to 12 months")
    assert set(pico_texts(PicoRecord(pmid=3)).values()) == {""}


def test_record_json_round_trip():
    record = PicoRecord(pmid=5, P="a", SampleSize="47", extractor="x", evidence={"P": "cue"})
    assert PicoRecord.from_json(json.loads(json.dumps(record.to_json()))).to_json() == record.to_json()
    assert "evidence" not in record.to_json()
