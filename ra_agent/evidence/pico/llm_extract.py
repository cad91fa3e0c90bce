"""PICO through an LLM: the seed's batch prompt, a schema-constrained reply, the JSON repair turn, every value
checked against its abstract (`grounding`), and a labelled fallback extractor."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import json5

from ra_agent.config import Config, SrConfig, TokensConfig
from ra_agent.embed.tokens import count_tokens, prompt_budget, truncate_tokens
from ra_agent.evidence.pico.extract import (
    SCHEMA_KEYS,
    Extractor,
    LearnedExtractor,
    PicoRecord,
    RuleExtractor,
    default_extractor,
)
from ra_agent.evidence.pico.grounding import ground_fields
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.structured import ChatBrain, ask_json, is_rules_brain
from ra_agent.models import Paper

log = logging.getLogger(__name__)

FIX_JSON_PROMPT = "FIX JSON ONLY: return only the valid JSON for the previous message"
MAX_FIELD_CHARS = 600
ABSTRACT_TOKEN_CAP = 800  # one abstract never takes more of a batch prompt than this
REPLY_TOKENS_PER_RECORD = 90  # reply room reserved per abstract inside the token budget
_SR = SrConfig()
_TOKENS = TokensConfig()


SYSTEM_PROMPT = (
    "You extract PICO fields from biomedical abstracts for a systematic review. "
    "You answer with one JSON object and nothing else."
)
USER_INSTRUCTIONS = """For each abstract below give one JSON object with exactly these keys:
"pmid" (the number given), "P" (population: condition, setting, age and number), "I" (intervention incl. dose),
"C" (comparator; "" if none), "O" (primary outcome), "StudyDesign" ("RCT", "controlled trial", "cohort",
"case-control", "cross-sectional", "case report", "systematic review", "meta-analysis", "narrative review", ...
followed by qualifiers such as double-blind, placebo-controlled, crossover, multicentre),
"PopulationAge" (ages or age group), "SampleSize" (participants randomised or enrolled, digits only).
All values are strings, in the abstract's own words. Use "" when the abstract does not say; never guess.
Return ONLY {"records": [...]}: a JSON array with exactly one object per PMID, in the order given."""
SHORT_FIELD_CHARS = 80  # StudyDesign, PopulationAge, SampleSize in the reply schema
LONG_FIELD_CHARS = 300  # P, I, C, O in the reply schema (longer values are cut to MAX_FIELD_CHARS anyway)


def pico_schema(pmids: Sequence[int]) -> ReplySchema:
    """The batch reply as a schema: {"records": one object per PMID}, `pmid` an enum of the batch's PMIDs, the seven
    fields as strings, no other keys. (An object around the array: OpenAI's strict mode wants an object root.)"""
    longs = ("P", "I", "C", "O")
    props: dict[str, Any] = {"pmid": {"enum": list(pmids)}}
    props |= {k: {"type": "string", "maxLength": LONG_FIELD_CHARS if k in longs else SHORT_FIELD_CHARS}
              for k in SCHEMA_KEYS}  # fmt: skip
    record = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    records = {"type": "array", "items": record, "minItems": len(pmids), "maxItems": len(pmids)}
    return ReplySchema("pico_batch", {"type": "object", "properties": {"records": records}, "required": ["records"],
                                      "additionalProperties": False})  # fmt: skip


class LlmExtractor:
    """Batch PICO extraction through a chat brain: a schema-constrained reply (`pico_schema`) where the server takes
    one, the text protocol and one JSON repair turn where it refuses; every value checked against its abstract
    (`grounding`: ungrounded values are blanked and the record's `dropped` says why); a labelled fallback extractor
    for a batch the LLM could not answer and for the papers beyond `max_papers` (`[pico] llm_max_abstracts`)."""

    def __init__(
        self,
        brain: ChatBrain,
        *,
        batch_size: int = _SR.pico_batch_size,
        token_budget: int = _TOKENS.token_soft_cap,
        fallback: RuleExtractor | LearnedExtractor | None = None,
        max_papers: int | None = None,
    ):
        self.brain = brain
        self.name = brain.name
        self.batch_size = batch_size
        self.token_budget = token_budget
        self.fallback = fallback or default_extractor()
        self.max_papers = max_papers
        self.sent = 0  # papers sent to the LLM so far (max_papers caps it)
        self.failures: list[str] = []
        self.calls: list[dict[str, Any]] = []  # mode, tokens and times of every batch call

    @classmethod
    def from_config(cls, brain: ChatBrain, cfg: Config) -> LlmExtractor:
        """Batches sized to the prompt budget (token_soft_cap, the reply's room kept free under num_ctx) and to the
        reply's room ([llm] reply_tokens: about REPLY_TOKENS_PER_RECORD per record); at most
        `[pico] llm_max_abstracts` papers per run go to the LLM."""
        per_reply = max(1, cfg.llm.reply_tokens // REPLY_TOKENS_PER_RECORD)
        return cls(brain, batch_size=min(cfg.sr.pico_batch_size, per_reply), token_budget=prompt_budget(cfg),
                   fallback=default_extractor(cfg), max_papers=cfg.pico.llm_max_abstracts)  # fmt: skip

    def extract(self, papers: Sequence[Paper]) -> list[PicoRecord]:
        room = len(papers) if self.max_papers is None else max(0, self.max_papers - self.sent)
        asked, beyond = papers[:room], papers[room:]
        records: list[PicoRecord] = []
        for batch in self.batches(asked):
            records.extend(self.extract_batch([p for p, _ in batch], [t for _, t in batch]))
        if beyond:
            label = f"{self.fallback.name} (llm cap: [pico] llm_max_abstracts = {self.max_papers})"
            log.warning("%s: %d papers beyond the cap of %d abstracts per run go to %s", self.name, len(beyond),
                        self.max_papers, self.fallback.name)  # fmt: skip
            records.extend(self.fallback.extract_one(p, label=label) for p in beyond)
        return records

    def call_summary(self) -> dict[str, Any]:
        """How the LLM was asked in this run: calls per mode, completion tokens, seconds, papers sent."""
        modes = Counter(c["mode"] for c in self.calls)
        return {
            "llm_calls": len(self.calls),
            "llm_mode": ", ".join(f"{m} {n}" for m, n in modes.most_common()),
            "llm_completion_tokens": sum(c.get("completion_tokens") or 0 for c in self.calls),
            "llm_total_s": round(sum(c.get("total_s") or 0 for c in self.calls), 3),
            "llm_papers": self.sent,
        }

    def batches(self, papers: Sequence[Paper]) -> list[list[tuple[Paper, str]]]:
        """(paper, prompt text) groups of at most batch_size papers whose prompt fits token_budget."""
        overhead = count_tokens(SYSTEM_PROMPT + USER_INSTRUCTIONS)
        groups: list[list[tuple[Paper, str]]] = []
        current: list[tuple[Paper, str]] = []
        used = overhead
        for paper in papers:
            text = truncate_tokens(paper_prompt_text(paper), ABSTRACT_TOKEN_CAP)
            cost = count_tokens(text) + REPLY_TOKENS_PER_RECORD
            if current and (len(current) >= self.batch_size or used + cost > self.token_budget):
                groups.append(current)
                current, used = [], overhead
            current.append((paper, text))
            used += cost
        if current:
            groups.append(current)
        return groups

    def messages(self, texts: Sequence[str]) -> list[dict[str, str]]:
        user = USER_INSTRUCTIONS + "\n\n" + "\n\n".join(texts)
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def extract_batch(self, papers: Sequence[Paper], texts: Sequence[str] | None = None) -> list[PicoRecord]:
        """One prompt for these papers (schema-constrained when the server takes it); a repair turn on unparseable
        output; the fallback extractor for the batch if that fails too. Every value is checked against its abstract."""
        messages = self.messages(texts if texts is not None else [paper_prompt_text(p) for p in papers])
        wanted = [p.pmid for p in papers]
        self.sent += len(papers)
        asked = ask_json(self.brain, messages, parse_reply, pico_schema(wanted), fix=FIX_JSON_PROMPT, json_repair=False,
                         label=f"PICO by {self.name} for {len(wanted)} PMIDs")  # fmt: skip
        if asked.asked is not None:
            self.calls.append(asked.asked.figures())
        items, error = asked.value, asked.problem
        if asked.error is not None:
            items, error = None, f"llm brain_error: {asked.error}"
        if error or items is None:
            return self._fall_back(papers, error or "llm json_error")
        return [ground_record(r, p) for r, p in zip(validate_items(items, wanted, self.name), papers, strict=True)]

    def _fall_back(self, papers: Sequence[Paper], error: str) -> list[PicoRecord]:
        reason = error.split(":")[0]
        self.failures.append(f"PMIDs {papers[0].pmid}..{papers[-1].pmid} ({len(papers)}): {error}")
        log.warning("%s: %s for %d PMIDs; falling back to %s for this batch", self.name, error, len(papers),
                    self.fallback.name)  # fmt: skip
        label = f"{self.fallback.name} ({reason})"
        return [self.fallback.extract_one(p, label=label) for p in papers]


def ground_record(record: PicoRecord, paper: Paper) -> PicoRecord:
    """`record` with every value the abstract does not support blanked (`grounding`); `dropped` says why."""
    grounded, dropped = ground_fields(record.fields(), paper, SCHEMA_KEYS)
    if dropped:
        log.info("%s: PMID %d values not grounded in the abstract, dropped: %s", record.extractor, record.pmid,
                 "; ".join(f"{k} {v}" for k, v in dropped.items())[:400])  # fmt: skip
    out = PicoRecord.of(record.pmid, grounded, record.extractor, dict(record.evidence))
    out.dropped = dropped
    return out


def paper_prompt_text(paper: Paper) -> str:
    abstract = paper.abstract or " ".join(s.text for s in paper.sections)
    return f"PMID {paper.pmid}\nTitle: {paper.title}\nAbstract: {abstract or '(none)'}"


def make_extractor(brain: ChatBrain | None, cfg: Config | None = None) -> Extractor:
    """The LLM extractor for an LLM brain; `[pico] extractor` (the learned tagger by default, or the rules) when
    there is none or it is the rules brain."""
    if brain is None or is_rules_brain(brain):  # (None is the rules too: spelled out for the type checker)
        return default_extractor(cfg)
    return LlmExtractor.from_config(brain, cfg) if cfg else LlmExtractor(brain)


# --------------------------------------------------------------------------- reply parsing and validation


_FENCE = re.compile(r"```(?:json5?|javascript)?\s*(.*?)```", re.S | re.I)
KEY_ALIASES = {
    "pmid": "pmid",
    "id": "pmid",
    "p": "P",
    "population": "P",
    "participants": "P",
    "i": "I",
    "intervention": "I",
    "c": "C",
    "comparator": "C",
    "comparison": "C",
    "control": "C",
    "o": "O",
    "outcome": "O",
    "outcomes": "O",
    "studydesign": "StudyDesign",
    "study_design": "StudyDesign",
    "design": "StudyDesign",
    "populationage": "PopulationAge",
    "population_age": "PopulationAge",
    "age": "PopulationAge",
    "samplesize": "SampleSize",
    "sample_size": "SampleSize",
    "n": "SampleSize",
}


def parse_reply(reply: str) -> tuple[list[dict] | None, str]:
    """The record objects of a model reply (JSON5, code fences tolerated), or (None, "llm json_error: …")."""
    if not isinstance(reply, str) or not reply.strip():
        return None, "llm json_error: empty reply"
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    for open_, close in (("[", "]"), ("{", "}")):
        start, end = text.find(open_), text.rfind(close)
        if start < 0 or end <= start:
            continue
        try:
            data = json5.loads(text[start : end + 1])
        except ValueError as exc:
            return None, f"llm json_error: {str(exc)[:120]}"
        items = _record_list(data)
        if items:
            return items, ""
        return None, "llm schema_error: no record objects with a pmid"
    return None, "llm json_error: no JSON array or object in the reply"


def _record_list(data: Any) -> list[dict]:
    if isinstance(data, dict):
        if any(str(k).lower() == "pmid" for k in data):
            data = [data]
        else:
            data = next((v for v in data.values() if isinstance(v, list)), [])
    if not isinstance(data, list):
        return []
    return [d for d in data if isinstance(d, dict) and any(str(k).lower() == "pmid" for k in d)]


def _as_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str):
        return " ".join(value.split())[:MAX_FIELD_CHARS]
    if isinstance(value, list):
        return "; ".join(t for t in (_as_text(v) for v in value if not isinstance(v, (dict, list))) if t)[
            :MAX_FIELD_CHARS
        ]
    return ""


def _as_pmid(value: Any) -> int | None:
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and int(text) > 0 else None


def validate_items(items: Iterable[dict], wanted: Sequence[int], extractor: str) -> list[PicoRecord]:
    """One record per wanted PMID, in order: unknown PMIDs dropped, missing PMIDs and keys as "", values as strings."""
    wanted_set = set(wanted)
    by_pmid: dict[int, PicoRecord] = {}
    dropped: list[str] = []
    for item in items:
        pmid = _as_pmid(next((v for k, v in item.items() if str(k).lower() in ("pmid", "id")), None))
        if pmid is None or pmid not in wanted_set:
            dropped.append(str(item.get("pmid", "?")))
            continue
        if pmid in by_pmid:
            continue
        values: dict[str, str] = {}
        for key, value in item.items():
            name = KEY_ALIASES.get(str(key).strip().lower().replace(" ", ""), None)
            if name and name != "pmid" and name not in values:
                values[name] = _as_text(value)
        by_pmid[pmid] = PicoRecord.of(pmid, values, extractor)
    if dropped:
        log.warning("%s: dropped %d record(s) for PMIDs not in the batch: %s", extractor, len(dropped),
                    ", ".join(dropped[:10]))  # fmt: skip
    missing = [p for p in wanted if p not in by_pmid]
    if missing:
        log.warning("%s: reply lacks %d PMID(s) (kept with empty fields): %s", extractor, len(missing),
                    ", ".join(map(str, missing[:10])))  # fmt: skip
    return [by_pmid.get(p) or PicoRecord(pmid=p, extractor=f"{extractor} (pmid missing from reply)") for p in wanted]


__all__ = [
    "FIX_JSON_PROMPT",
    "LlmExtractor",
    "ground_record",
    "make_extractor",
    "paper_prompt_text",
    "parse_reply",
    "pico_schema",
    "validate_items",
]
