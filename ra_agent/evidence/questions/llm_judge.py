"""Review-question judgements by an LLM, in the judge seam of `judge.py` (`QuestionJudge`): "is trial T
eligible for the topic's question" (`trial`) and "does review R answer Q" (`review`), each checked against the record;
the rules decide wherever the LLM cannot, and say so.

`LlmQuestionJudge` puts what the rules (`judge.RulesJudge`) admit, an eligible trial or a review that answers, to
its brain through `ask_structured` for {"verdict", "reason", "quotes"}: the verdict an enum, the quotes an enum of the
record's sentences (title and abstract) where the server constrains decoding. Every quote must be found in the
record's text (whitespace and case aside). A yes keeps the rules' answer with the LLM's verdict and first quote added
to its reason; a no, quoting the record, turns it down, the reason the LLM's. A reply with no quote, a quote that is
not in the text, an "unclear" verdict, an unusable reply or a brain error leaves the rules' answer standing, its
reason saying "(fallback: why)". At most `max_calls` judgements are asked per judge ([llm] judge_max_calls); past that
the rules decide, saying so. The LLM adds nothing the rules left out.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import json5

from ra_agent.evidence.pico.text import sentences
from ra_agent.evidence.questions.judge import QuestionJudge, RulesJudge
from ra_agent.evidence.questions.model import Eligibility, Judgement, ReviewQuestion
from ra_agent.evidence.questions.topic import Topic
from ra_agent.llm.base import ReplySchema
from ra_agent.llm.structured import ChatBrain, ask_json, is_rules_brain
from ra_agent.models import Paper

log = logging.getLogger(__name__)
Ruled = TypeVar("Ruled", Eligibility, Judgement)

ELIGIBLE_VERDICTS = ("eligible", "not eligible", "unclear")
COVERS_VERDICTS = ("answers", "does not answer", "unclear")
MIN_QUOTE_CHARS = 12
REASON_CHARS = 300
MAX_QUOTES = 3
FIX_JSON = 'FIX JSON ONLY: return only the JSON object {"verdict": ..., "reason": ..., "quotes": [...]}'

SYSTEM = (
    "You are a systematic reviewer. You judge one record against one review question from the record's own "
    "sentences, and answer with one JSON object."
)
ELIGIBLE_TASK = (
    "Is this record a trial eligible for the review question? Eligible means: a randomised trial in humans with the "
    "question's condition, testing the question's intervention against its comparator. Animal studies, healthy "
    "volunteers, other conditions, pharmacokinetic or mechanism studies, reviews and protocols are not eligible."
)
COVERS_TASK = (
    "Does this review answer the review question? It answers it when its own question (population and intervention, "
    "a drug class includes its members) encompasses the review question."
)
REPLY_FORM = (
    'Reply with only {{"verdict": one of {verdicts}, "reason": "<one sentence>", "quotes": ["<the record\'s '
    'sentences you relied on, copied exactly>"]}}.'
)


def note(verdict: str, by: str, quotes: Sequence[str]) -> str:
    """One line for a reason: the verdict, who decided, and the first quote."""
    quote = f': "{quotes[0][:160]}"' if quotes else ""
    return f"{verdict} by {by}{quote}"


def record_sentences(paper: Paper) -> list[str]:
    """The title and the abstract's sentences, whitespace collapsed (what a quote may be taken from)."""
    abstract = paper.abstract or " ".join(s.text for s in paper.sections)
    units = [paper.title or "", *sentences(abstract)]
    return list(dict.fromkeys(" ".join(u.split()) for u in units if u.strip()))


def _folded(text: str) -> str:
    return " ".join(re.sub(r"[\"'“”‘’]", "", text).lower().split()).strip(" .")


def judgement_schema(verdicts: Sequence[str], quotable: Sequence[str], name: str) -> ReplySchema:
    """{"verdict": an enum, "reason": text, "quotes": 1-3 of the record's sentences}, no other keys."""
    quote: dict[str, Any] = {"enum": list(quotable)} if quotable else {"type": "string", "minLength": MIN_QUOTE_CHARS}
    props = {"verdict": {"enum": list(verdicts)}, "reason": {"type": "string", "minLength": 1, "maxLength": REASON_CHARS},
             "quotes": {"type": "array", "items": quote, "minItems": 1, "maxItems": MAX_QUOTES}}  # fmt: skip
    return ReplySchema(name, {"type": "object", "properties": props, "required": list(props),
                              "additionalProperties": False})  # fmt: skip


def parse_judgement(reply: str, verdicts: Sequence[str]) -> tuple[dict[str, Any] | None, str]:
    """The reply's {"verdict", "reason", "quotes"} (JSON5, prose around it tolerated), or (None, why not)."""
    start, end = (reply or "").find("{"), (reply or "").rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object in the reply"
    try:
        doc = json5.loads(reply[start : end + 1])
    except ValueError as exc:
        return None, f"unparseable JSON ({str(exc)[:80]})"
    if not isinstance(doc, dict):
        return None, "the reply is not a JSON object"
    verdict = str(doc.get("verdict", "")).strip().lower()
    if verdict not in verdicts:
        return None, f"verdict {doc.get('verdict')!r} is not one of {', '.join(verdicts)}"
    quotes = doc.get("quotes")
    quotes = [quotes] if isinstance(quotes, str) else quotes
    if not isinstance(quotes, list) or not all(isinstance(q, str) for q in quotes):
        return None, "quotes must be a list of strings"
    return {"verdict": verdict, "reason": " ".join(str(doc.get("reason", "")).split())[:REASON_CHARS],
            "quotes": [" ".join(q.split()) for q in quotes if q.strip()]}, ""  # fmt: skip


def unfound_quote(quotes: Sequence[str], paper: Paper) -> str | None:
    """The first quote that is not in the record's title or abstract (or is too short to show anything), else None."""
    text = _folded(" ".join(record_sentences(paper)))
    for quote in quotes:
        folded = _folded(quote)
        if len(folded) < MIN_QUOTE_CHARS or folded not in text:
            return quote
    return None


class LlmQuestionJudge:
    """A `judge.QuestionJudge`: the rules' answers checked by `brain`, quotes checked against the record."""

    def __init__(self, brain: ChatBrain, max_calls: int = 40, rules: QuestionJudge | None = None):
        self.brain = brain
        self.name = f"{brain.name} (LLM, quotes checked against the record)"
        self.max_calls = max_calls
        self.rules = rules or RulesJudge()
        self.calls: list[dict[str, Any]] = []  # mode, tokens and times of every call
        self.unavailable = ""  # set after a brain error: the rules decide from then on

    def trial(self, paper: Paper, topic: Topic) -> Eligibility:
        ruled = self.rules.trial(paper, topic)
        if not ruled.eligible:  # the LLM checks what the rules admit
            return ruled
        doc, why = self._ask(f"{ELIGIBLE_TASK}\n\nReview question: {topic.describe()}", paper, ELIGIBLE_VERDICTS,
                             "trial_eligibility")  # fmt: skip
        return self._decided(ruled, doc, why, "eligible", "eligible")

    def review(self, review: Paper, question: ReviewQuestion, topic: Topic) -> Judgement:
        ruled = self.rules.review(review, question, topic)
        if not ruled.verdict:
            return ruled
        doc, why = self._ask(f"{COVERS_TASK}\n\nReview question: {question.pico}", review, COVERS_VERDICTS,
                             "review_answers_question")  # fmt: skip
        return self._decided(ruled, doc, why, "answers", "verdict")

    def _decided(self, ruled: Ruled, doc: dict | None, why: str, yes: str, flag: str) -> Ruled:
        """The rules' answer `ruled` (an Eligibility or a Judgement) after the LLM's `doc`: kept with the LLM's note
        on a yes, turned down (its `flag` False, the LLM's reason) on a no, kept saying why the rules decided when
        the LLM gave nothing usable."""
        if doc is None:
            return dataclasses.replace(ruled, reason=f"{ruled.reason} (fallback: {why})",
                                       judged_by=f"{ruled.judged_by} (fallback: {why})")  # fmt: skip
        said = note(doc["verdict"], self.brain.name, doc["quotes"])
        if doc["verdict"] == yes:
            return dataclasses.replace(ruled, reason=f"{ruled.reason}; {said}", judged_by=self.brain.name)
        return dataclasses.replace(
            ruled, **{flag: False}, reason=f"{doc['reason']} ({said})", judged_by=self.brain.name
        )

    def _ask(self, task: str, paper: Paper, verdicts: Sequence[str], schema_name: str) -> tuple[dict | None, str]:
        """The LLM's usable {"verdict", "reason", "quotes"} (not "unclear", every quote in the record), or (None, why
        the rules decide)."""
        if self.unavailable:
            return None, self.unavailable
        if len(self.calls) >= self.max_calls:
            return None, f"LLM judgement cap [llm] judge_max_calls = {self.max_calls} reached"
        quotable = record_sentences(paper)
        listing = "\n".join(f"- {s}" for s in quotable)
        user = f"{task}\n\nRecord PMID {paper.pmid}:\n{listing}\n\n" + REPLY_FORM.format(
            verdicts=", ".join(json.dumps(v) for v in verdicts)
        )
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        asked = ask_json(self.brain, messages, lambda reply: parse_judgement(reply, verdicts),
                         judgement_schema(verdicts, quotable, schema_name), label=f"{schema_name} on PMID {paper.pmid}",
                         fix=FIX_JSON)  # fmt: skip
        if asked.asked is not None:
            self.calls.append(asked.asked.figures())
        if asked.error is not None:
            self.unavailable = f"{self.brain.name} unavailable: {str(asked.error)[:160]}"
            log.warning("question judge: %s; the rules decide", self.unavailable)
            return None, self.unavailable
        doc, why = asked.value, asked.problem
        if doc is None:
            return None, f"{self.brain.name}'s reply unusable after one repair turn: {why}"
        if doc["verdict"] == "unclear":
            return None, f"{self.brain.name} said unclear: {doc['reason'][:120]}"
        if not doc["quotes"]:
            return None, f"{self.brain.name} quoted nothing"
        missing = unfound_quote(doc["quotes"], paper)
        if missing is not None:
            log.info("question judge %s: quote not in PMID %d: %r", self.brain.name, paper.pmid, missing[:120])
            return None, f"{self.brain.name}'s quote is not in PMID {paper.pmid}: {missing[:80]!r}"
        doc["quotes"] = doc["quotes"][:MAX_QUOTES]
        return doc, ""


def question_judge_for(cfg: Any, brain: ChatBrain | None = None) -> QuestionJudge:
    """An LLM judge when an LLM brain answers (the configured backend is probed when no brain is given) and [llm]
    judge_max_calls > 0, else the rules."""
    if cfg.llm.brain == "rules" or cfg.llm.judge_max_calls == 0:
        return RulesJudge()
    if brain is None:
        from ra_agent.llm.select import llm_brain

        candidate = llm_brain(cfg)
        reason = candidate.unavailable_reason()
        if reason is not None:
            log.info("review-question judgements by the rules: %s", reason)
            return RulesJudge()
        brain = candidate
    return RulesJudge() if is_rules_brain(brain) else LlmQuestionJudge(brain, cfg.llm.judge_max_calls)


__all__ = [
    "COVERS_VERDICTS",
    "ELIGIBLE_VERDICTS",
    "LlmQuestionJudge",
    "judgement_schema",
    "parse_judgement",
    "question_judge_for",
    "record_sentences",
    "unfound_quote",
]
