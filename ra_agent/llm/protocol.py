"""The Action protocol every LLM reply follows: tool specs, parse the `Action:` JSON, one repair turn, argument checks."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import json5

if TYPE_CHECKING:
    from ra_agent.llm.base import Brain

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- registry

ARG_TYPES = ("str", "int", "bool", "object", "list[str]", "list[int]", "str|list[str]")
TOOL_KINDS = ("heavy", "cluster", "goal", "aux")


@dataclass(frozen=True)
class ArgSpec:
    """One argument: its type (one of ARG_TYPES), whether it is required, its default and limits.

    `max_items` is the per-call batch size of a list argument: a longer list is not an error, the
    executor splits it into several calls (`ValidAction.calls`), as embed_text's batches are.
    """

    type: str
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] = ()
    max_items: int | None = None
    minimum: int | None = None  # int arguments and list[int] items
    pattern: re.Pattern[str] | None = None  # str arguments
    description: str = ""

    def __post_init__(self) -> None:
        if self.type not in ARG_TYPES:
            raise ValueError(f"unknown argument type {self.type!r}")


@dataclass(frozen=True)
class ToolSpec:
    """A tool the LLM may name in an Action; `kind` says how it is gated (see TOOL_KINDS)."""

    name: str
    args: Mapping[str, ArgSpec]
    description: str
    kind: str = "heavy"
    exactly_one_of: tuple[str, ...] = ()

    @property
    def gated(self) -> bool:
        """Heavy tools obey cfg.tools.enable_<name> and the handbook's Tools_allowed."""
        return self.kind == "heavy"

    def signature(self) -> str:
        """A one-line call signature for prompts, e.g. `search_pubmed(query: str, retmax: int = 2000, ...)`."""
        parts = []
        for name, spec in self.args.items():
            typ = " | ".join(json.dumps(c) for c in spec.choices) if spec.choices else spec.type
            default = "" if spec.required or spec.default is None else f" = {json.dumps(spec.default)}"
            parts.append(f"{name}: {typ}{default}")
        joined = ", ".join(parts)
        if self.exactly_one_of:
            joined += f"  (exactly one of {', '.join(self.exactly_one_of)})"
        return f"{self.name}({joined})"


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Outcome:
    """What the executor does with a reply: history event, new goal status (None = unchanged), log fields."""

    event: str
    status: str | None
    log: Mapping[str, Any]


_MALFORMED = ("multiple_actions", "trailing_text", "missing_tool")
_REJECTED = ("unknown_tool", "tool_not_allowed", "forbidden_change")
_SCHEMA = ("missing_arg", "extra_arg", "extra_keys", "bad_arg")
ERROR_KINDS = ("json_error", *_MALFORMED, *_REJECTED, *_SCHEMA)
# A schema slip is not fatal (issue 13): it gets one repair turn naming the violation; when the repair
# fails too, the cycle ends as an error event and the goal goes on (loop guards bound repeated failures).
OUTCOMES: dict[str, Outcome] = {
    "no_action": Outcome("no_action", None, {"no_action": True}),
    "json_error": Outcome("json_error", None, {"json_error": True}),
    **{k: Outcome("no_action", None, {"error": k}) for k in _MALFORMED},
    **{k: Outcome("error", None, {"error": k}) for k in _REJECTED},
    **{k: Outcome("error", None, {"error": k}) for k in _SCHEMA},
}
# Kinds answered with one repair turn; tool_not_allowed and forbidden_change are policy refusals, not slips.
REPAIRABLE = ("json_error", *_MALFORMED, "unknown_tool", *_SCHEMA)


@dataclass(frozen=True)
class ReplyLimits:
    """Size and nesting limits on a reply (issue 13): checked before any JSON parser sees it."""

    max_reply_chars: int = 200_000
    max_json_depth: int = 32
    max_arg_chars: int = 4000

    @classmethod
    def from_config(cls, llm: Any) -> ReplyLimits:
        """The limits of an `[llm]` config section."""
        return cls(llm.max_reply_chars, llm.max_json_depth, llm.max_arg_chars)


DEFAULT_LIMITS = ReplyLimits()


@dataclass(frozen=True)
class ParsedAction:
    """A syntactically valid Action (not yet checked against the registry)."""

    tool: str
    args: dict[str, Any]
    raw: str
    repaired: bool = False


@dataclass(frozen=True)
class NoAction:
    """The reply ends without an Action: thoughts only, the cycle ends without side effects."""

    reason: str = "the reply has no 'Action:' block"

    @property
    def outcome(self) -> Outcome:
        return OUTCOMES["no_action"]


@dataclass(frozen=True)
class ActionError:
    """A rejected Action; `kind` is one of ERROR_KINDS and selects the outcome."""

    kind: str
    message: str
    tool: str | None = None
    raw: str | None = None
    repaired: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"unknown action error kind {self.kind!r}")

    @property
    def outcome(self) -> Outcome:
        return OUTCOMES[self.kind]


@dataclass(frozen=True)
class ValidAction:
    """An Action that passed validation; `args` has every default filled in."""

    tool: str
    args: dict[str, Any]
    spec: ToolSpec = field(repr=False)
    repaired: bool = False

    @property
    def args_json(self) -> str:
        """Canonical JSON of the arguments (sorted keys), e.g. for the tool_call row and idempotency keys."""
        return json.dumps(self.args, sort_keys=True, ensure_ascii=False)

    def calls(self) -> list[dict[str, Any]]:
        """The arguments split into calls that respect every `max_items` (embed_text splits silently)."""
        for name, spec in self.spec.args.items():
            value = self.args.get(name)
            if spec.max_items and isinstance(value, list) and len(value) > spec.max_items:
                step = spec.max_items
                return [{**self.args, name: value[i : i + step]} for i in range(0, len(value), step)]
        return [dict(self.args)]


# ---------------------------------------------------------------------------- parsing

# An Action marker starts a line (after optional Markdown decoration: quote, list dash, bold/italics).
_ACTION_RE = re.compile(r"^[ \t>*_-]*Action[*_]*[ \t]*:[*_]*[ \t]*", re.M)
_FENCE_OPEN_RE = re.compile(r"^```[A-Za-z0-9]*[ \t]*\n?")
_TRAILER_RE = re.compile(r"^[\s`*_]*$")  # closing fences and emphasis may follow the object

REPAIR_PROMPT = (
    "FIX JSON ONLY. Return ONLY valid JSON for the prior message: the Action object "
    '{"tool": "<tool name>", "args": {...}} and no other text.'
)
SCHEMA_REPAIR_PROMPT = (
    "FIX THE ACTION ONLY. Your Action was rejected: {problem}. Return ONLY the corrected Action object "
    '{{"tool": "<tool name>", "args": {{...}}}} with the arguments the schema allows, and no other text.'
)
_RAW_CHARS = 2000  # characters of a faulty Action kept in an ActionError (history, logs)


def _object_end(text: str, max_depth: int) -> tuple[int | None, int]:
    """(index just past the JSON(5) object that starts text[0] == '{', deepest nesting seen).

    Strings and escapes are respected; one linear pass. The scan stops with (None, depth) as soon as
    the nesting ({ and [) goes deeper than `max_depth`, so no parser ever recurses that far.
    """
    depth, nest, quote, escaped = 0, 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += ch == "{"
            nest += 1
            if nest > max_depth:
                return None, nest
        elif ch in "}]":
            nest -= 1
            if ch == "}":
                depth -= 1
                if depth == 0:
                    return i + 1, nest
    return None, nest


def _loads(raw: str) -> Any:
    """JSON first (C parser, fast on big objects; a raw newline or tab inside a string, which a grammar-constrained
    small model writes, is read as that character), then json5 for the usual small-model slips."""
    try:
        return json.loads(raw, strict=False)
    except ValueError:
        return json5.loads(raw)


def _parse_payload(payload: str, limits: ReplyLimits = DEFAULT_LIMITS) -> ParsedAction | ActionError:
    """Parse the text after `Action:` (or a bare repair reply): one JSON object, then nothing but fences."""
    text = _FENCE_OPEN_RE.sub("", payload.lstrip(), count=1).lstrip()
    if not text.startswith("{"):
        return ActionError("json_error", "expected a JSON object after 'Action:'", raw=payload.strip()[:_RAW_CHARS])
    end, depth = _object_end(text, limits.max_json_depth)
    if end is None and depth > limits.max_json_depth:
        message = f"the JSON nests deeper than {limits.max_json_depth} levels"
        return ActionError("json_error", message, raw=text[:_RAW_CHARS])
    if end is None:
        return ActionError("json_error", "the JSON object is not closed", raw=text[:_RAW_CHARS])
    raw = text[:end]
    try:
        obj = _loads(raw)
    except (ValueError, RecursionError) as exc:
        return ActionError("json_error", f"invalid JSON: {str(exc)[:300]}", raw=raw[:_RAW_CHARS])
    if not isinstance(obj, dict):
        return ActionError("json_error", "the Action must be a JSON object", raw=raw[:_RAW_CHARS])
    if not _TRAILER_RE.match(text[end:]):
        return ActionError("trailing_text", "the Action JSON must end the reply; text follows it", raw=raw)
    extra = sorted(set(obj) - {"tool", "args"})
    if extra:
        return ActionError("extra_keys", f"only 'tool' and 'args' are allowed at the top level, got {extra}", raw=raw)
    tool, args = obj.get("tool"), obj.get("args", {})
    if not isinstance(tool, str) or not tool.strip():
        return ActionError("missing_tool", "the Action has no 'tool' name", raw=raw)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ActionError("bad_arg", "'args' must be a JSON object", tool=tool, raw=raw)
    return ParsedAction(tool.strip(), dict(args), raw)


def parse_action(reply: str, limits: ReplyLimits = DEFAULT_LIMITS) -> ParsedAction | NoAction | ActionError:
    """Extract the single `Action:` JSON object that ends a reply (json5; code fences tolerated).

    A reply longer than `limits.max_reply_chars` is refused unread (json_error, so it gets the repair turn).
    """
    reply = reply or ""
    if len(reply) > limits.max_reply_chars:
        message = f"the reply is {len(reply):,} characters, over the {limits.max_reply_chars:,} the agent reads"
        return ActionError("json_error", message, raw=reply[-_RAW_CHARS:])
    markers = list(_ACTION_RE.finditer(reply))
    if not markers:
        return NoAction()
    if len(markers) > 1:
        return ActionError("multiple_actions", f"only one 'Action:' per reply; found {len(markers)}")
    return _parse_payload(reply[markers[0].end() :], limits)


def _parse_repair_reply(reply: str, limits: ReplyLimits = DEFAULT_LIMITS) -> ParsedAction | NoAction | ActionError:
    """A repair reply is bare JSON (fences tolerated) or a full `Action:` line."""
    reply = reply or ""
    if len(reply) > limits.max_reply_chars or _ACTION_RE.search(reply):
        return parse_action(reply, limits)
    return _parse_payload(reply, limits)


def _repair_prompt(error: ActionError) -> str:
    if error.kind == "json_error":
        return f"{REPAIR_PROMPT} Problem: {error.message}."
    return SCHEMA_REPAIR_PROMPT.format(problem=error.message.rstrip("."))


def resolve_action(
    reply: str,
    ask_repair: Callable[[str], str],
    check: Callable[[ParsedAction], Any] = lambda p: p,
    limits: ReplyLimits = DEFAULT_LIMITS,
) -> Any:
    """Parse a reply and `check` its Action, with one repair turn for any slip in REPAIRABLE (issue 13).

    A JSON error gets the "FIX JSON ONLY" turn, a schema or tool-name slip a "FIX THE ACTION ONLY"
    turn naming the violation; either way there is exactly one repair turn. The repaired Action is parsed
    and checked again and its result returned (marked `repaired`). A repair turn the brain cannot answer
    (timeout, HTTP error: BrainError) ends as json_error; the caller's goal goes on.
    """
    from ra_agent.llm.base import BrainError

    first = parse_action(reply, limits)
    if isinstance(first, ParsedAction):
        first = check(first)
    if not (isinstance(first, ActionError) and first.kind in REPAIRABLE):
        return first
    log.info("Action rejected (%s: %s): sending one repair prompt", first.kind, first.message[:200])
    try:
        answer = ask_repair(_repair_prompt(first))
    except BrainError as exc:
        log.warning("the repair turn failed: %s", exc)
        message = f"the repair turn failed ({str(exc)[:300]}) after: {first.message[:300]}"
        return ActionError("json_error", message, tool=first.tool, raw=first.raw, repaired=True)
    second = _parse_repair_reply(answer, limits)
    if isinstance(second, ParsedAction):
        return check(replace(second, repaired=True))
    if isinstance(second, ActionError) and second.kind != "json_error":
        return replace(second, repaired=True)
    detail = second.message if isinstance(second, ActionError) else "the repair reply holds no JSON object"
    log.warning("Action still invalid after the repair turn: %s", detail)
    kind = "json_error" if first.kind == "json_error" or isinstance(second, ActionError) else first.kind
    return ActionError(kind, f"still invalid after one repair turn: {detail}", tool=first.tool, raw=first.raw,
                       repaired=True)  # fmt: skip


def parse_with_repair(
    reply: str, ask_repair: Callable[[str], str], limits: ReplyLimits = DEFAULT_LIMITS
) -> ParsedAction | NoAction | ActionError:
    """parse_action plus one repair turn (docs/llm.md) for a malformed reply; no schema is checked here.

    `ask_repair(prompt)` sends the repair prompt as the next turn after the faulty reply and returns the
    brain's answer (see `repair_asker`); callers with a schema use `resolve_action` instead.
    """
    return resolve_action(reply, ask_repair, limits=limits)


def repair_messages(messages: list[dict[str, str]], reply: str, prompt: str = REPAIR_PROMPT) -> list[dict[str, str]]:
    """The conversation for the repair turn: the prompt, the faulty reply, then the FIX JSON ONLY instruction.

    The instruction is sent as a user turn, not a system line, because chat templates
    (Gemma's among them) fold system text into user turns anyway and a mid-conversation system turn is
    not portable. A huge faulty reply is sent back cut to its head and tail (DEFAULT_LIMITS.max_arg_chars).
    """
    if len(reply) > 2 * _RAW_CHARS:
        reply = f"{reply[:_RAW_CHARS]}\n[… {len(reply) - 2 * _RAW_CHARS:,} characters omitted …]\n{reply[-_RAW_CHARS:]}"
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": prompt}]


@dataclass
class RepairTurn:
    """One repair turn as the cycle log shows it: the prompt sent and the reply (or why none came)."""

    prompt: str
    reply: str | None = None
    error: str | None = None


@dataclass
class RepairAsker:
    """An `ask_repair` that asks `brain` in the same conversation and keeps every turn in `turns`.

    Uses the brain's JSON mode (`chat_json`) when it has one: a repair reply must be bare JSON.
    """

    brain: Brain
    messages: list[dict[str, str]]
    reply: str
    turns: list[RepairTurn] = field(default_factory=list)

    def __call__(self, prompt: str) -> str:
        turn = RepairTurn(prompt)
        self.turns.append(turn)
        conversation = repair_messages(self.messages, self.reply, prompt)
        chat = getattr(self.brain, "chat_json", None) or self.brain.chat
        try:
            answer: str = chat(conversation)
        except Exception as exc:
            turn.error = f"{type(exc).__name__}: {exc}"
            raise
        turn.reply = answer
        return answer


def repair_asker(brain: Brain, messages: list[dict[str, str]], reply: str) -> RepairAsker:
    """An `ask_repair` for resolve_action / parse_with_repair that asks `brain` in the same conversation."""
    return RepairAsker(brain, messages, reply)


# ---------------------------------------------------------------------------- validation

# A path token starts with "/" + a name character ("/etc/passwd", "/tmp"; a lone "/" in "7% / 53" is not),
# "~/", "\\\\", a drive letter, or holds "../" anywhere.
_PATH_TOKEN_RE = re.compile(r"""^(?:/[\w.~-]|~[/\\]|\\\\|[A-Za-z]:[/\\])|\.\.[/\\]""")
_FILE_SCHEME_RE = re.compile(r"\bfile:", re.I)
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_URL_REST_RE = re.compile(r"[^\s'\"<>()]+")
_MAX_SCHEME = 32  # longer "schemes" are not URLs; bounds the backward scan so detection stays linear


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def find_urls(text: str) -> Iterator[str]:
    """The URLs in `text` ("scheme://rest"), found in one linear pass.

    Each "://" is located with str.find and its scheme read backwards (at most _MAX_SCHEME characters);
    a regex starting at every letter would rescan long words and take quadratic time.
    """
    pos = text.find("://")
    while pos != -1:
        start = pos
        while start > 0 and pos - start < _MAX_SCHEME and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < pos and not text[start].isalpha():
            start += 1
        rest = _URL_REST_RE.match(text, pos + 3)
        end = rest.end() if rest else pos + 3
        if start < pos:
            yield text[start:end]
        pos = text.find("://", max(end, pos + 3))


def _security_problem(text: str, allowed_hosts: tuple[str, ...]) -> str | None:
    """Why a string argument is refused (file path or foreign URL), else None. Linear in len(text)."""
    if _FILE_SCHEME_RE.search(text) or any(_PATH_TOKEN_RE.search(tok) for tok in re.split(r"[\s'\"()\[\],;]+", text)):
        return "file paths are not accepted"
    for url in find_urls(text):
        parts = urlsplit(url)
        try:
            host = (parts.hostname or "").lower()
        except ValueError:
            return f"URL {url[:80]!r} is malformed"
        if parts.scheme.lower() not in ("http", "https"):
            return f"URL scheme {parts.scheme!r} is not accepted"
        if not any(host == h or host.endswith("." + h) for h in allowed_hosts):
            return f"URL host {host!r} is not allowed (allowed: {', '.join(allowed_hosts)})"
    return None


def _what_is_wrong(value: Any, typ: str) -> str:
    """The part of a rejected value that breaks its type, shown whole (not a list cut off after 80 characters)."""
    if isinstance(value, list) and value and (typ.endswith("list[int]") or typ.endswith("list[str]")):
        wanted = int if typ.endswith("list[int]") else str
        bad = [(i, v) for i, v in enumerate(value)
               if not isinstance(v, wanted) or isinstance(v, bool) or (isinstance(v, str) and not v.strip())]  # fmt: skip
        shown = "; ".join(f"item {i} is {json.dumps(v)[:60]}" for i, v in bad[:3])
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        return f"got a list of {len(value)} whose {shown}{more}"
    if isinstance(value, list) and not value:
        return "got an empty list"
    text = json.dumps(value)
    return f"got {text}" if len(text) <= 120 else f"got a {type(value).__name__} of {len(text)} characters"


def action_form(tool: str | None, args: Mapping[str, Any] | None, rejection: str = "") -> str:
    """A short id of an action's form: the tool and its arguments (canonical JSON), else the rejection text;
    the loop guard counts how often one form was rejected."""
    import hashlib

    body = json.dumps([tool, args], sort_keys=True, ensure_ascii=False, default=str) if args is not None else rejection
    return hashlib.sha1(f"{tool}\n{body}".encode()).hexdigest()[:12]


def _type_problem(value: Any, spec: ArgSpec) -> str | None:
    """Why a value does not fit its ArgSpec, else None."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_str_list(v: Any) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, str) and x.strip() for x in v)

    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "str": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
        "int": (is_int, "an integer"),
        "bool": (lambda v: isinstance(v, bool), "true or false"),
        "object": (lambda v: isinstance(v, dict), "a JSON object"),
        "list[str]": (is_str_list, "a non-empty list of strings"),
        "list[int]": (lambda v: isinstance(v, list) and bool(v) and all(map(is_int, v)), "a non-empty list of integers"),
        "str|list[str]": (lambda v: (isinstance(v, str) and bool(v.strip())) or is_str_list(v), "a string or a list of strings"),
    }  # fmt: skip
    ok, expected = checks[spec.type]
    if not ok(value):
        return f"must be {expected}, {_what_is_wrong(value, spec.type)}"
    if spec.choices and value not in spec.choices:
        return f"must be one of {', '.join(map(json.dumps, spec.choices))}"
    numbers = value if isinstance(value, list) else [value]
    if spec.minimum is not None and any(is_int(n) and n < spec.minimum for n in numbers):
        return f"must be >= {spec.minimum}"
    if spec.pattern is not None and isinstance(value, str) and not spec.pattern.match(value):
        return f"is not a valid id: {value[:40]!r} is not {spec.description or 'an id'} ({spec.pattern.pattern})"
    return None


def _check_args(
    spec: ToolSpec, args: dict[str, Any], allowed_hosts: tuple[str, ...], max_chars: int
) -> tuple[str, str] | None:
    """(kind, message) of the first argument problem, else None."""
    extra = sorted(set(args) - set(spec.args))
    if extra:
        return "extra_arg", f"{spec.name} takes no argument(s) {extra}; schema: {spec.signature()}"
    given = {k: v for k, v in args.items() if v is not None}
    if spec.exactly_one_of:
        present = [k for k in spec.exactly_one_of if k in given]
        if not present:
            return "missing_arg", f"{spec.name} needs one of {', '.join(spec.exactly_one_of)}"
        if len(present) > 1:
            return "bad_arg", f"{spec.name} takes exactly one of {', '.join(spec.exactly_one_of)}, got {present}"
    missing = [k for k, a in spec.args.items() if a.required and k not in given]
    if missing:
        return "missing_arg", f"{spec.name} is missing required argument(s) {missing}; schema: {spec.signature()}"
    for name, value in given.items():
        problem = _type_problem(value, spec.args[name])
        if problem:
            return "bad_arg", f"{spec.name}.{name} {problem}"
    for text in _strings(given):
        if len(text) > max_chars:
            return (
                "bad_arg",
                f"{spec.name}: a string argument of {len(text):,} characters is over the cap of {max_chars:,}",
            )
        problem = _security_problem(text, allowed_hosts)
        if problem:
            return "bad_arg", f"{spec.name}: {problem} ({text[:80]!r})"
    return None


def check_call(
    action: ParsedAction,
    specs: Mapping[str, ToolSpec],
    allowed_hosts: Sequence[str],
    max_arg_chars: int = DEFAULT_LIMITS.max_arg_chars,
) -> ValidAction | ActionError:
    """Check a parsed Action against `specs` (a known tool, its argument schema, the URL/path rules, the
    per-string cap); fill defaults."""

    def error(kind: str, message: str) -> ActionError:
        return ActionError(kind, message, tool=action.tool, raw=action.raw, repaired=action.repaired)

    spec = specs.get(action.tool)
    if spec is None:
        return error("unknown_tool", f"unknown tool {action.tool!r} (known: {', '.join(specs)})")
    problem = _check_args(spec, action.args, tuple(allowed_hosts), max_arg_chars)
    if problem:
        return error(*problem)
    args = {k: v for k, v in action.args.items() if v is not None}
    args.update({k: a.default for k, a in spec.args.items() if k not in args and a.default is not None})
    return ValidAction(spec.name, args, spec, repaired=action.repaired)


def describe_specs(specs: Iterable[ToolSpec]) -> str:
    """Markdown list of tools (signature and purpose), for prompts."""
    return "\n".join(f"- `{s.signature()}`: {s.description}" for s in specs)
