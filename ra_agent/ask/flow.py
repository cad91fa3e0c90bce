"""The ask flow (seed 001): bounded Decide -> Tool -> Observe loop, finalize with citations, telemetry."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ra_agent.ask.mindkb import (
    PlaybookStore,
    canonical_json,
    extract_playbook,
    is_success,
    open_playbook_store,
    select_playbooks,
)
from ra_agent.ask.rules import AskRulesBrain
from ra_agent.ask.tools import NO_SUPPORT, AskTools, ToolRun, ask_specs, check_action
from ra_agent.config import Config
from ra_agent.embed.embedder import Embedder
from ra_agent.embed.tokens import count_tokens, encoder_for, prompt_budget
from ra_agent.llm.base import Brain, BrainError, Message, ReplySchema
from ra_agent.llm.protocol import (
    REPAIR_PROMPT,
    ActionError,
    NoAction,
    ValidAction,
    describe_specs,
    parse_action,
    repair_messages,
)
from ra_agent.llm.select import select_brain
from ra_agent.llm.structured import action_reply_text, action_schema, ask_structured, is_rules_brain
from ra_agent.store.db import Store

log = logging.getLogger(__name__)
STREAM_CHUNK_CHARS = 48  # chunk size when a final answer that is already complete is emitted
STOP_REASONS = ("answered", "tool_limit", "no_progress", "schema_error", "brain_error")
TURN_TOKENS = 250  # room kept per planner turn (its reasoning and Action) when tool results share the prompt budget


SYSTEM_PROMPT = """You are ra's question-answering planner. You answer questions about the biomedical literature \
using ONLY the papers of the local corpus (PubMed records), which you reach through tools.

Every reply is either
- brief reasoning, then exactly one tool call as the last line: Action: {{"tool": "<name>", "args": {{...}}}}
- or, once the evidence suffices or no tool calls are left, the final answer: a line "Final answer:" and then \
the answer, with no Action.

Tools:
{tools}

The final answer:
- states only what the tool results show, and cites the paper after each claim as [PMID:12345678];
- cites only PMIDs that appeared in tool results (other citations are removed);
- cites the best evidence first: systematic reviews and randomised trials before narrative reviews and other designs; for "A versus B", the trials that compare exactly A and B;
- keeps each source's qualifiers (dose, population, "not significant") and names its design and year;
- says "{no_support}" when the papers do not answer the question.
Mind-KB playbooks, when given, are examples of tool sequences that worked before; they are not evidence."""

FIRST_TURN = "{playbooks}<question>{question}</question>\n{budget}"
TOOL_TURN = '<tool_result tool="{tool}" call="{call}">{result}</tool_result>\n{budget}'
FINALIZE_TURN = (
    '<finalize reason="{reason}"/>\nNo more tool calls ({why}). Write only the final answer now from the tool '
    "results above, citing each claim as [PMID:12345678]; no Action."
)
_FINAL_MARK_RE = re.compile(r"^[ \t>*_#-]*final answer[*_]*[ \t]*:[*_]*[ \t]*", re.I | re.M)
# [PMID:123], [PMID 123], [PMIDs: 1, 2], [PMID:1; PMID:2] (leading blanks go with a removed citation)
_CITATION_RE = re.compile(r"[ \t]*\[\s*PMIDs?\s*:?\s*(\d{1,9}(?:\s*[,;]\s*(?:PMID\s*:?\s*)?\d{1,9})*)\s*\]", re.I)


def _budget(left: int) -> str:
    """The budget tag that ends every planner turn, with what the planner may do next."""
    if left:
        return f'<budget tool_calls_left="{left}"/>\nReply with one Action or the final answer.'
    return '<budget tool_calls_left="0"/>\nNo tool calls left: write the final answer now, without an Action.'


# ---------------------------------------------------------------------------- final answers


class AnswerFilter:
    """Streams a final answer: drops a leading "Final answer:" label, keeps citations `known` accepts (the
    PMIDs a tool returned in this run), removes others (the sentence still reads: the bracket goes, the text stays).

    Text from an unclosed "[" on is held back until its "]" arrives, so a citation is judged whole.
    """

    HOLD_CHARS = 64

    def __init__(self, known: Callable[[list[int]], set[int]]):
        self.known = known
        self.cited: list[int] = []
        self.removed: list[int] = []
        self._buf = ""
        self._started = False

    def feed(self, text: str) -> str:
        self._buf += text
        if not self._started:
            head = self._buf.lstrip()
            if len(head) < len("final answer:") + 2 and "\n" not in head:
                return ""
            self._buf, self._started = _strip_label(head), True
        cut = self._buf.rfind("[")
        if cut != -1 and "]" not in self._buf[cut:] and len(self._buf) - cut <= self.HOLD_CHARS:
            while cut > 0 and self._buf[cut - 1] in " \t":
                cut -= 1
            ready, self._buf = self._buf[:cut], self._buf[cut:]
        else:  # trailing blanks wait: they belong to a citation that may follow
            cut = len(self._buf.rstrip(" \t"))
            ready, self._buf = self._buf[:cut], self._buf[cut:]
        return self._clean(ready)

    def flush(self) -> str:
        if not self._started:
            self._buf, self._started = _strip_label(self._buf.lstrip()), True
        ready, self._buf = self._buf, ""
        return self._clean(ready)

    def _clean(self, text: str) -> str:
        def cite(match: re.Match[str]) -> str:
            pmids = [int(p) for p in re.findall(r"\d{1,9}", match.group(1))]
            held = self.known(pmids)
            kept = [p for p in pmids if p in held]
            for pmid in pmids:
                bucket = self.cited if pmid in held else self.removed
                if pmid not in bucket:
                    bucket.append(pmid)
            lead = " " if match.group(0)[:1] in " \t" else ""
            return lead + "".join(f"[PMID:{p}]" for p in kept) if kept else ""

        return _CITATION_RE.sub(cite, text)


def _strip_label(text: str) -> str:
    """`text` without a leading "Final answer:" label."""
    match = _FINAL_MARK_RE.match(text)
    return text[match.end() :] if match else text


def final_text(reply: str) -> str:
    """The answer part of a final reply: the text after its "Final answer:" line, else the whole reply."""
    match = _FINAL_MARK_RE.search(reply or "")
    return (reply[match.end() :] if match else reply or "").strip()


FINAL_TOOL = "final_answer"  # the planner's schema: the final answer is an action of its own
ANSWER_CHARS = 6000


def planner_schema(cfg: Config) -> ReplySchema:
    """A planner turn as a schema: {"reasoning", "action"}, the action one of the ask tools (typed arguments, no extra
    keys) or {"tool": "final_answer", "args": {"answer": text}}."""
    schema = action_schema(ask_specs(cfg).values()).schema
    answer = {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_CHARS}},
              "required": ["answer"], "additionalProperties": False}  # fmt: skip
    final = {"type": "object", "properties": {"tool": {"type": "string", "enum": [FINAL_TOOL]}, "args": answer},
             "required": ["tool", "args"], "additionalProperties": False}  # fmt: skip
    schema["properties"]["action"]["anyOf"].append(final)
    return ReplySchema("ask_plan", schema)


def planner_text(content: str) -> str:
    """A constrained planner reply in the text protocol: "reasoning\nAction: {...}" for a tool, "reasoning\nFinal
    answer: ..." for the answer (so one parser serves both modes)."""
    try:
        doc = json.loads(content)
    except ValueError:
        return content
    action = doc.get("action") if isinstance(doc, dict) else None
    if isinstance(action, dict) and action.get("tool") == FINAL_TOOL and isinstance(action.get("args"), dict):
        return f"{str(doc.get('reasoning', '')).strip()}\nFinal answer: {action['args'].get('answer', '')}"
    return action_reply_text(content)


def chunks(text: str, size: int = STREAM_CHUNK_CHARS) -> Iterator[str]:
    """`text` in pieces of about `size` characters, split after whitespace."""
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end)
            end = space + 1 if space > start else end
        yield text[start:end]
        start = end


def stream_reply(brain: Brain, messages: list[Message]) -> Iterator[str]:
    """The brain's reply as it is generated: `brain.chat_stream` when it has one (OllamaBrain), else one piece."""
    chat_stream: Callable[[list[Message]], Iterator[str]] | None = getattr(brain, "chat_stream", None)
    if callable(chat_stream):
        yield from chat_stream(messages)
    else:
        yield brain.chat(messages)


# ---------------------------------------------------------------------------- the loop


@dataclass(frozen=True)
class Step:
    """Telemetry of one step: an LLM call (decide, repair, finalize) or a tool run."""

    kind: str
    ms: int
    tokens_in: int = 0
    tokens_out: int = 0
    tool: str | None = None
    ok: bool = True
    new_pmids: int = 0
    mode: str | None = None  # a decide turn: json_schema (constrained), text_fallback (refused), text (rules)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class AskResult:
    """Everything one `ask` run produced: the answer as streamed, citations, stop reason (one of STOP_REASONS), telemetry."""

    question: str
    answer: str = ""
    brain: str = ""
    stop_reason: str = "answered"
    error: str | None = None
    citations: list[int] = field(default_factory=list)
    removed_citations: list[int] = field(default_factory=list)
    no_support: bool = False
    turns: int = 0
    tool_calls: int = 0
    repairs: int = 0
    steps: list[Step] = field(default_factory=list)
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    playbooks_used: list[str] = field(default_factory=list)
    playbook_id: str | None = None
    sequence: list[tuple[str, str]] = field(default_factory=list)  # (plan JSON, shown tool result JSON)
    latency_ms: int = 0
    run_id: int | None = None

    @property
    def tokens_in(self) -> int:
        return sum(s.tokens_in for s in self.steps)

    @property
    def tokens_out(self) -> int:
        return sum(s.tokens_out for s in self.steps)

    # the success heuristic's view (ra_agent.mindkb.RunLike)
    @property
    def exited_early(self) -> bool:
        return self.stop_reason == "answered"

    @property
    def final(self) -> str:
        return self.answer

    @property
    def tool_steps(self) -> int:
        return self.tool_calls

    @property
    def success(self) -> bool:
        return is_success(self)


class _Run:
    """State of one ask run: the conversation, the evidence seen so far and the telemetry."""

    def __init__(self, cfg: Config, store: Store, brain: Brain, result: AskResult):
        self.cfg = cfg
        self.store = store
        self.brain = brain
        self.result = result
        self.enc = encoder_for(cfg)
        self.messages: list[Message] = []
        self.retrieved: set[int] = set()
        self.read: set[int] = set()

    def tokens(self, messages: list[Message]) -> int:
        return count_tokens("\n".join(m["content"] for m in messages), self.enc)

    def chat(self, messages: list[Message], kind: str) -> str:
        t0 = time.perf_counter()
        reply = self.brain.chat(messages)
        self.note(Step(kind, _ms(t0), self.tokens(messages), count_tokens(reply, self.enc)))
        return reply

    def plan(self, messages: list[Message]) -> str:
        """A decide turn, schema-constrained where the brain can (`planner_schema`), as text-protocol text."""
        t0 = time.perf_counter()
        asked = ask_structured(self.brain, messages, planner_schema(self.cfg))
        reply = planner_text(asked.text) if asked.mode == "json_schema" else asked.text
        self.note(Step("decide", _ms(t0), self.tokens(messages), count_tokens(reply, self.enc), mode=asked.mode))
        return reply

    def note(self, step: Step) -> None:
        self.result.steps.append(step)
        log.info("ask step %d: %s%s %d ms, tokens %d/%d%s", len(self.result.steps), step.kind,
                 f" {step.tool}" if step.tool else "", step.ms, step.tokens_in, step.tokens_out,
                 f", {step.new_pmids} new PMIDs" if step.kind == "tool" else "")  # fmt: skip

    def decide(self, reply: str) -> ValidAction | NoAction | ActionError:
        """Parse and validate a planner reply; one "FIX JSON ONLY" repair turn on a malformed or invalid Action."""
        first = check_action(parse_action(reply), self.cfg)
        if not isinstance(first, ActionError):
            return first
        self.result.repairs += 1
        log.info("ask: invalid Action (%s: %s); one repair turn", first.kind, first.message)
        fixed = self.chat(repair_messages(self.messages, reply, f"{REPAIR_PROMPT} Problem: {first.message}"), "repair")
        parsed = parse_action(fixed)
        if isinstance(parsed, NoAction):
            parsed = parse_action(f"Action: {fixed.strip()}")
        second = check_action(parsed, self.cfg)
        if isinstance(second, ActionError):
            return replace(second, message=f"still invalid after one repair turn: {second.message}", repaired=True)
        return replace(second, repaired=True)

    def observe(self, run: ToolRun) -> int:
        """Record a tool run; returns how many PMIDs it brought that the same tool had not brought before."""
        seen = self.retrieved if run.tool == "find_similar" else self.read
        new = [p for p in run.pmids if p not in seen] if run.ok else []
        seen.update(new)
        if run.tool == "find_similar" and run.ok:
            for item in run.result["data"]:
                if item["pmid"] in new:
                    self.result.retrieved.append({"pmid": item["pmid"], "score": item["score"], "title": item["title"],
                                                  "snippet": item["snippet"]})  # fmt: skip
                log.debug("retrieved PMID %s score %.4f: %s", item["pmid"], item["score"], item["snippet"][:120])
        return len(new)

    def known(self, pmids: list[int]) -> set[int]:
        """The PMIDs a citation may name: those a tool returned in this run (find_similar, read_note)."""
        return set(pmids) & (self.retrieved | self.read)

    def best_score(self) -> float | None:
        """The best similarity find_similar returned in this run (None: it never ran or found nothing)."""
        return max((r["score"] for r in self.result.retrieved), default=None)


def _ms(t0: float) -> int:
    return int((time.perf_counter() - t0) * 1000)


def _first_turn(cfg: Config, question: str, block: str, limit: int) -> list[Message]:
    tools = describe_specs(ask_specs(cfg).values())
    system = SYSTEM_PROMPT.format(tools=tools, no_support=NO_SUPPORT)
    intro = f"Earlier successful runs on similar questions:\n{block}\n" if block else ""
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": FIRST_TURN.format(playbooks=intro, question=question, budget=_budget(limit))},
    ]


def ask(
    cfg: Config,
    store: Store,
    question: str,
    *,
    brain: Brain,
    embedder: Embedder,
    max_tool_calls: int | None = None,
    on_final_token: Callable[[str], None] | None = None,
    mindkb: PlaybookStore | None = None,
) -> AskResult:
    """Answer `question` from the local corpus in at most `max_tool_calls` tool calls ([ask] max_tool_calls).

    Decide turns are non-streaming; only the final answer reaches `on_final_token`. The run is logged,
    written to the ask_run table, and stored as a Mind-KB playbook when it succeeds. `mindkb` defaults
    to the configured store ([mindkb] enabled, backend).
    """
    question = " ".join(question.split())
    if not question:
        raise ValueError("ask: the question is empty")
    limit = cfg.ask.max_tool_calls if max_tool_calls is None else max_tool_calls
    if not 1 <= limit <= 8:
        raise ValueError(f"ask: max_tool_calls must be within 1-8, got {limit}")
    t_start, started_ts = time.perf_counter(), int(time.time())
    result = AskResult(question=question, brain=brain.name)
    run = _Run(cfg, store, brain, result)
    if mindkb is None and cfg.mindkb.enabled:
        mindkb = open_playbook_store(cfg, store, embedder)
    block = ""
    if mindkb is not None:
        block, used = select_playbooks(mindkb, question, cfg.mindkb.top_k, cfg.mindkb.token_budget,
                                       min_score=cfg.mindkb.min_score, enc=run.enc,
                                       exclude_rules=not is_rules_brain(brain))  # fmt: skip
        result.playbooks_used = [p.id for p in used]
    run.messages = _first_turn(cfg, question, block, limit)
    tools = AskTools(cfg, store, embedder)
    # every tool result shares what the first turn leaves of the prompt budget (the conversation grows each call)
    room = prompt_budget(cfg) - run.tokens(run.messages) - (limit + 1) * TURN_TOKENS
    tools.result_tokens = max(100, min(cfg.ask.tool_result_tokens, room // limit))
    draft: str | None = None
    stale = 0
    try:
        for _ in range(limit + 1):
            result.turns += 1
            reply = run.plan(run.messages)
            decision = run.decide(reply)
            if isinstance(decision, NoAction):
                draft = final_text(reply)
                break
            if isinstance(decision, ActionError):
                result.stop_reason, result.error = "schema_error", f"{decision.kind}: {decision.message}"
                break
            if result.tool_calls >= limit:
                result.stop_reason = "tool_limit"
                run.messages += [{"role": "assistant", "content": reply}]
                break
            tool_run = tools.run(decision)
            result.tool_calls += 1
            new = run.observe(tool_run)
            run.note(Step("tool", tool_run.took_ms, tool=tool_run.tool, ok=tool_run.ok, new_pmids=new))
            shown = canonical_json(tool_run.shown)
            plan = canonical_json({"tool": decision.tool, "args": decision.args})
            result.sequence.append((plan, shown))
            said = reply if not decision.repaired else f"Action: {plan}"
            left = limit - result.tool_calls
            turn = TOOL_TURN.format(tool=tool_run.tool, call=result.tool_calls, result=shown, budget=_budget(left))
            run.messages += [{"role": "assistant", "content": said}, {"role": "user", "content": turn}]
            stale = 0 if new else stale + 1
            if stale >= cfg.ask.no_progress_iterations:
                result.stop_reason = "no_progress"
                break
    except BrainError as exc:
        result.stop_reason, result.error = "brain_error", str(exc)
    _finalize(run, draft, on_final_token)
    result.latency_ms = _ms(t_start)
    if mindkb is not None and result.success and not result.removed_citations and not result.no_support:
        try:
            result.playbook_id = mindkb.add(extract_playbook(question, result.sequence, result.answer, source="ask",
                                                             session=f"ask:{started_ts}", brain=brain.name))  # fmt: skip
        except Exception:
            log.exception("Mind-KB: could not store the playbook of this run")
    result.run_id = save_run(store, result, started_ts)
    log.info("ask run %s: %s via %s, %d turns, %d tool calls, %d repairs, tokens %d in / %d out, %d ms, %d cited, "
             "%d removed", result.run_id, result.stop_reason, result.brain, result.turns, result.tool_calls,
             result.repairs, result.tokens_in, result.tokens_out, result.latency_ms, len(result.citations),
             len(result.removed_citations))  # fmt: skip
    return result


def _finalize(run: _Run, draft: str | None, on_final_token: Callable[[str], None] | None) -> None:
    """Produce and emit the final answer: the planner's own, an error, or a forced (streamed) finalize call."""
    result = run.result
    emitted: list[str] = []

    def emit(piece: str) -> None:
        if piece:
            emitted.append(piece)
            if on_final_token is not None:
                on_final_token(piece)

    answer_filter = AnswerFilter(run.known)
    best = run.best_score()
    weak = best is not None and best < run.cfg.ask.support_floor and not (draft and NO_SUPPORT in draft)
    if result.stop_reason == "answered" and weak:
        result.no_support = True  # below the calibrated floor no cited sentence is trustworthy
        note = f"{NO_SUPPORT} (best similarity {best:.2f} < support_floor {run.cfg.ask.support_floor:.2f})"
        for piece in chunks(note):
            emit(piece)
    elif result.stop_reason in ("schema_error", "brain_error"):
        what = "the planner's tool call was still invalid after one repair turn" if result.stop_reason == "schema_error" \
            else "the language model did not answer"  # fmt: skip
        for piece in chunks(f"No answer: {what} ({result.error}). Try again or rephrase the question."):
            emit(piece)
    else:
        if draft is not None:
            pieces = chunks(draft)
        else:
            why = {"tool_limit": f"the limit of {result.tool_calls} tool calls is reached",
                   "no_progress": "the last tool calls brought no new papers"}[result.stop_reason]  # fmt: skip
            pieces = _streamed(run, _with_turn(run.messages, FINALIZE_TURN.format(reason=result.stop_reason, why=why)))
        try:
            for piece in pieces:
                emit(answer_filter.feed(piece))
            emit(answer_filter.flush())
        except BrainError as exc:
            result.stop_reason, result.error = "brain_error", str(exc)
            emit(answer_filter.flush())
            emit(f"\n\n(The answer stopped early: {exc}.)")
        result.citations, result.removed_citations = answer_filter.cited, answer_filter.removed
        if not result.citations and result.error is None:
            result.no_support = True
            if NO_SUPPORT not in "".join(emitted):
                for part in chunks(("\n\n" if emitted else "") + NO_SUPPORT):
                    emit(part)
        if result.removed_citations:
            log.warning("ask: removed citations of PMIDs no tool returned in this run: %s", result.removed_citations)
    result.answer = "".join(emitted)


def _with_turn(messages: list[Message], text: str) -> list[Message]:
    """The conversation with `text` as the next user turn (joined to a trailing user turn rather than after it)."""
    if messages and messages[-1]["role"] == "user":
        return [*messages[:-1], {"role": "user", "content": f"{messages[-1]['content']}\n{text}"}]
    return [*messages, {"role": "user", "content": text}]


def _streamed(run: _Run, messages: list[Message]) -> Iterator[str]:
    """Stream the finalize call, recording its telemetry when the stream ends."""
    t0 = time.perf_counter()
    parts: list[str] = []
    try:
        for piece in stream_reply(run.brain, messages):
            parts.append(piece)
            yield piece
    finally:
        run.note(Step("finalize", _ms(t0), run.tokens(messages), count_tokens("".join(parts), run.enc)))


# ---------------------------------------------------------------------------- telemetry


def save_run(store: Store, result: AskResult, started_ts: int) -> int:
    """Persist a run's telemetry in ask_run; returns its id."""
    with store.transaction():
        cursor = store.conn.execute(
            "INSERT INTO ask_run(started_ts, question, brain, stop_reason, success, turns, steps, tool_calls, repairs, "
            "tokens_in, tokens_out, latency_ms, citations, removed_citations, retrieved, step_log, playbooks_used, "
            "playbook_id, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            (
                started_ts, result.question, result.brain, result.stop_reason, int(result.success), result.turns,
                len(result.steps), result.tool_calls, result.repairs, result.tokens_in, result.tokens_out,
                result.latency_ms, json.dumps(result.citations), json.dumps(result.removed_citations),
                json.dumps([{"pmid": r["pmid"], "score": r["score"]} for r in result.retrieved]),
                json.dumps([s.as_dict() for s in result.steps]), json.dumps(result.playbooks_used),
                result.playbook_id, result.error,
            ),
        )  # fmt: skip
        (row,) = cursor.fetchall()  # RETURNING on both engines (PostgreSQL has no lastrowid); read to the end
        return int(row[0])


def recent_runs(store: Store, n: int) -> list[dict[str, Any]]:
    """The last `n` ask runs, newest first (JSON columns decoded)."""
    rows = store.conn.execute("SELECT * FROM ask_run ORDER BY id DESC LIMIT ?", (max(0, n),))
    out = []
    for row in rows:
        run = dict(row)
        for key in ("citations", "removed_citations", "retrieved", "step_log", "playbooks_used"):
            run[key] = json.loads(run[key])
        out.append(run)
    return out


def run_count(store: Store) -> int:
    """How many ask runs the store has recorded."""
    return int(store.conn.execute("SELECT COUNT(*) FROM ask_run").fetchone()[0])


def select_ask_brain(cfg: Config) -> Brain:
    """Ollama when configured and reachable with the model, else the deterministic AskRulesBrain."""
    return select_brain(cfg, lambda: AskRulesBrain(cfg))
