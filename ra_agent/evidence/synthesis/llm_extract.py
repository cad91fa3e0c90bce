"""Arm-level extraction by a language model, each value checked against the sentence it quotes; the rules otherwise.

When an LLM brain answers, each trial's abstract is sent as numbered sentences with a JSON schema (`arm_schema`,
through `llm.structured.ask_structured`): per arm, the arm label, outcome, time point, events and total (or mean,
SD and n), the index of the sentence stating the result, the index of the sentence stating the arm size when the
total is not in it, and a quote of the result sentence. A value is kept only when it can be read where the model
says it is (`check_item`):
- the sentence index names a sentence of this abstract and the quote occurs in it;
- the arm names a drug the abstract names;
- events (or a percentage that a whole count of the total reproduces at its printed precision), mean and SD occur
  as numbers in the result sentence, and when that sentence prints a count over the total ("60/169") the events
  are that count; the total (n) occurs in the result sentence or the size sentence;
- the time point is one the abstract states.
A trial whose reply fails (no answer, no JSON, no value that passes) is read by the rules (`extract.EXTRACTOR`),
and every datum names the extractor that produced it ("llm:<brain> (arm-data-v1)" or the rules with the reason
they were used).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ra_agent.evidence.classes import agents_in
from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.synthesis.extract import EXTRACTOR, ArmDatum, extract_arm_data
from ra_agent.evidence.synthesis.numbers import count_from_percent, normalise_text, outcome_class, time_points
from ra_agent.llm.base import Brain, BrainError, ReplySchema
from ra_agent.llm.structured import is_rules_brain
from ra_agent.models import Paper

log = logging.getLogger(__name__)

PROMPT_VERSION = "arm-data-v1"
MAX_ITEMS = 40

SYSTEM = (
    "You extract arm-level results from the abstract of a randomised controlled trial. Reply with JSON only, "
    "following the schema. Use only numbers printed in the abstract."
)
INSTRUCTIONS = """For every treatment arm and every efficacy outcome (healing, relapse, remission, symptom relief,
eradication, scores) at every time point the abstract reports, give one item:
- "arm": the arm as the abstract names it, with its drug and dose ("omeprazole 20 mg");
- "outcome": the outcome in a few words; "weeks": the time point in weeks (null when none is stated);
- for a count: "events" (patients with the outcome) and "total" (patients in the arm); for a continuous result:
  "mean", "sd" and "total" (patients in the arm); the other fields null;
- "sentence": the number of the sentence stating the result; "size_sentence": the number of the sentence stating
  the arm size when the total is not in the result sentence (else null); "quote": the words of the result sentence
  that hold the numbers, copied exactly.
Skip adverse events, pH and pharmacokinetic results. Give no item for a number the abstract does not print (a count
may be computed only from a printed percentage and the printed arm size).

Abstract, one sentence per line:
"""


def arm_schema(n_sentences: int) -> ReplySchema:
    """{"arms": [item, ...]}: every field required, nulls where a field does not apply, sentence indices in range."""
    index = {"type": "integer", "minimum": 0, "maximum": max(n_sentences - 1, 0)}
    number = {"type": ["number", "null"]}
    count = {"type": ["integer", "null"], "minimum": 0}
    item = {
        "type": "object",
        "properties": {
            "arm": {"type": "string", "minLength": 1, "maxLength": 120},
            "outcome": {"type": "string", "minLength": 1, "maxLength": 120},
            "weeks": number,
            "events": count,
            "total": count,
            "mean": number,
            "sd": number,
            "sentence": index,
            "size_sentence": {"anyOf": [index, {"type": "null"}]},
            "quote": {"type": "string", "minLength": 1, "maxLength": 400},
        },
        "additionalProperties": False,
    }
    item["required"] = list(item["properties"])
    reply = {"type": "object", "properties": {"arms": {"type": "array", "items": item, "maxItems": MAX_ITEMS}},
             "required": ["arms"], "additionalProperties": False}  # fmt: skip
    return ReplySchema("arm_data", reply)


def abstract_units(paper: Paper) -> list[str]:
    """The abstract's sentences, as the rules read them (numbered in the prompt)."""
    return [u for section in sections_of(paper) for u in sentences(section.text)]


def arm_messages(units: Sequence[str]) -> list[dict[str, str]]:
    lines = "\n".join(f"[{i}] {u}" for i, u in enumerate(units))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": INSTRUCTIONS + lines}]


_NUMBER = re.compile(r"(?<![\d.])[-−]?\d+(?:\.\d+)?")
_PAIR = re.compile(r"\b(\d+)\s*(?:\(\s*\d+(?:\.\d+)?\s*%\s*\)\s*)?(?:/|out of|of)\s*(?:the\s+)?(\d+)\b")


def _numbers_in(text: str) -> set[float]:
    """Every number printed in `text`, number words included ("Fifty-one" → 51)."""
    return {float(m.group(0).replace("−", "-")) for m in _NUMBER.finditer(normalise_text(text))}


def _percents_in(text: str) -> list[tuple[float, int]]:
    return [(float(m.group(1)), len(m.group(1).partition(".")[2]))
            for m in re.finditer(r"(?<![\d.])(\d+(?:\.\d+)?)\s*%", normalise_text(text))]  # fmt: skip


def _squash(text: str) -> str:
    return " ".join(text.split()).lower()


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


@dataclass(frozen=True)
class Checked:
    """One reply item: the datum it gives, or why it was rejected."""

    datum: ArmDatum | None
    reason: str = ""


def check_item(item: Any, paper: Paper, units: Sequence[str], extractor: str) -> Checked:
    """The datum of one reply item when every value is found where the item says (see the module docstring)."""
    if not isinstance(item, dict):
        return Checked(None, "not an object")
    idx = _int(item.get("sentence"))
    if idx is None or not 0 <= idx < len(units):
        return Checked(None, f"sentence {item.get('sentence')!r} is not a sentence of the abstract")
    sentence = units[idx]
    quote = str(item.get("quote") or "")
    if not quote.strip() or _squash(quote) not in _squash(sentence):
        return Checked(None, f"quote {quote[:60]!r} is not in sentence {idx}")
    size_idx = _int(item.get("size_sentence"))
    if item.get("size_sentence") is not None and (size_idx is None or not 0 <= size_idx < len(units)):
        return Checked(None, f"size_sentence {item.get('size_sentence')!r} is not a sentence of the abstract")
    size_sentence = units[size_idx] if size_idx is not None else ""
    arm = " ".join(str(item.get("arm") or "").split())
    abstract = " ".join(units)
    drug = _drug_of(arm, abstract)
    if drug is None:
        return Checked(None, f"arm {arm[:60]!r} names no drug of the abstract")
    weeks = _float(item.get("weeks"))
    if weeks is not None and not any(abs(w - weeks) < 0.15 for _, w in time_points(normalise_text(abstract))):
        return Checked(None, f"time point {weeks:g} weeks is not stated in the abstract")
    total = _int(item.get("total"))
    in_sentence = _numbers_in(sentence)
    if total is None or total <= 0 or (total not in in_sentence and total not in _numbers_in(size_sentence)):
        return Checked(None, f"total {item.get('total')!r} is not printed in sentence {idx} or its size sentence")
    outcome = " ".join(str(item.get("outcome") or "").split()).lower()[:80]
    mean, sd = _float(item.get("mean")), _float(item.get("sd"))
    size_note = size_sentence if size_sentence and total not in in_sentence else ""
    if mean is not None or sd is not None:
        if mean is None or sd is None or mean not in in_sentence or sd not in in_sentence:
            return Checked(None, f"mean {item.get('mean')!r} or SD {item.get('sd')!r} is not printed in sentence {idx}")
        return Checked(ArmDatum(paper.pmid, arm, drug, f"mean {outcome}", weeks, 0, total, sentence, size_note,
                                extractor, mean=mean, sd=sd))  # fmt: skip
    events = _int(item.get("events"))
    if events is None or not 0 <= events <= total:
        return Checked(None, f"events {item.get('events')!r} is not a count between 0 and the total {total}")
    pairs = {int(e) for e, t in _PAIR.findall(normalise_text(sentence)) if int(t) == total}
    if pairs and events not in pairs:  # the sentence prints this arm's count over its total: it must be that one
        return Checked(None, f"events {events} is not the count sentence {idx} prints over {total} ({sorted(pairs)})")
    stated = events in in_sentence
    derived = any(count_from_percent(p, d, total) == events for p, d in _percents_in(sentence))
    if not (stated or derived):
        return Checked(
            None, f"events {events} is neither printed in sentence {idx} nor a printed percentage of {total}"
        )
    named = outcome_class(outcome) or outcome
    return Checked(ArmDatum(paper.pmid, arm, drug, named, weeks, events, total, sentence, size_note, extractor))


def _drug_of(arm: str, abstract: str) -> str | None:
    """The arm's first drug (or placebo) that the abstract names, lower-case."""
    if re.search(r"\bplacebo", arm, re.I) and re.search(r"\bplacebo", abstract, re.I):
        return "placebo"
    for agent in agents_in(arm):
        if re.search(rf"\b{re.escape(agent.word)}\b", abstract, re.I):
            return agent.word
    words = [w.lower() for w in re.findall(r"[A-Za-z][\w-]{3,}", arm)]
    return next((w for w in words if re.search(rf"\b{re.escape(w)}\b", abstract, re.I)), None)


def parse_reply(text: str) -> list[Any] | str:
    """The reply's items, or why there are none."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end < start:
        return "no JSON object in the reply"
    try:
        doc = json.loads(text[start : end + 1])
    except ValueError as exc:
        return f"invalid JSON: {str(exc)[:120]}"
    items = doc.get("arms") if isinstance(doc, dict) else None
    return items if isinstance(items, list) else 'no "arms" list in the reply'


@dataclass(frozen=True)
class PaperExtraction:
    """One trial's arm data, the extractor that produced them and the reply items rejected on the way."""

    data: list[ArmDatum]
    extractor: str
    rejected: tuple[str, ...] = ()


def extract_with_llm(paper: Paper, brain: Brain) -> PaperExtraction:
    """One trial through the LLM (see the module docstring); the rules when the reply gives no checked value."""
    from ra_agent.llm.structured import ask_structured

    units = abstract_units(paper)
    name = f"llm:{brain.name} ({PROMPT_VERSION})"
    if not units:
        return PaperExtraction([], name)
    try:
        asked = ask_structured(brain, arm_messages(units), arm_schema(len(units)))
        items = parse_reply(asked.text)
    except BrainError as exc:
        items = f"no answer: {str(exc)[:120]}"
    if isinstance(items, str):
        return _fallback(paper, items)
    checked = [check_item(item, paper, units, name) for item in items[:MAX_ITEMS]]
    rejected = tuple(c.reason for c in checked if c.datum is None)
    for reason in rejected:
        log.info("PMID %d: %s rejected an item: %s", paper.pmid, name, reason)
    data: list[ArmDatum] = []
    seen: set[tuple[str, str, float | None]] = set()
    for datum in (c.datum for c in checked if c.datum is not None):
        if (datum.arm, datum.outcome, datum.weeks) not in seen:
            seen.add((datum.arm, datum.outcome, datum.weeks))
            data.append(datum)
    if not data:
        reason = f"{len(rejected)} item(s) rejected" if rejected else "the reply holds no arm data"
        return _fallback(paper, reason, rejected)
    return PaperExtraction(data, name, rejected)


def _fallback(paper: Paper, reason: str, rejected: tuple[str, ...] = ()) -> PaperExtraction:
    name = f"{EXTRACTOR} (fallback: {reason})"
    log.warning("PMID %d: LLM arm extraction failed (%s): the rules read it", paper.pmid, reason)
    return PaperExtraction([replace(d, extractor=name) for d in extract_arm_data(paper)], name, rejected)


def uses_llm(brain: Brain | None) -> bool:
    """Whether `brain` is a language model (the rules brain is not)."""
    return not is_rules_brain(brain)


def extract_all(
    papers: Sequence[Paper], brain: Brain | None = None, cache: dict[int, PaperExtraction] | None = None
) -> tuple[dict[int, list[ArmDatum]], dict[int, str]]:
    """(PMID → arm data, PMID → extractor) for `papers`: through the LLM when `brain` is one, else the rules. A
    caller drafting the same trials several times passes one `cache` (PMID → extraction) to ask the LLM once."""
    if not uses_llm(brain):
        return {p.pmid: extract_arm_data(p) for p in papers}, {p.pmid: EXTRACTOR for p in papers}
    assert brain is not None
    cache = {} if cache is None else cache
    for paper in papers:
        if paper.pmid not in cache:
            cache[paper.pmid] = extract_with_llm(paper, brain)
    return {p.pmid: cache[p.pmid].data for p in papers}, {p.pmid: cache[p.pmid].extractor for p in papers}
