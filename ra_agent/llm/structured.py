"""Schema-constrained replies: the JSON schema of a cycle's Action, and asking any brain for a structured reply.

A structured call names its schema (`ReplySchema`). A brain that can constrain decoding (Ollama's `format`,
an OpenAI-compatible `response_format`) sends it and reports the mode it used in `last_stats["mode"]`:
"json_schema" when the server accepted the schema, "text_fallback" when it refused it (HTTP 400/422) and the
call went out as plain text (the text protocol and its repair turn then apply). A brain without constrained
decoding (the rules) answers in the text protocol: mode "text".

`ask_json` is the one "ask, parse the JSON, one repair turn" every structured caller uses (PICO, the question
judge, the cluster audit, PRISMA, the alternative PICO); `is_rules_brain` is the one test of whether a brain is the
deterministic rules rather than a language model.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import json5

from ra_agent.llm.base import BrainError, Message, ReplySchema
from ra_agent.llm.protocol import ArgSpec, ToolSpec, repair_messages

log = logging.getLogger(__name__)

MODES = ("json_schema", "text_fallback", "text")
REASONING_CHARS = 300  # the reasoning field's cap: a small model cannot ramble past its reply budget
STRING_CHARS = 300  # a free-text argument's cap in the schema (the validator's [llm] max_arg_chars still applies)
LIST_ITEMS = 50  # items of a list argument without its own max_items
FIX_JSON = "FIX JSON ONLY: reply with only the JSON object asked for, nothing else."


def _string(max_chars: int = STRING_CHARS) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def arg_schema(spec: ArgSpec, ids: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON schema of one argument: its type, its choices as an enum, an id argument (one with a
    pattern) as an enum of `ids` when they are known."""
    if spec.choices:
        return {"enum": list(spec.choices)}
    if spec.type == "str":
        return {"enum": list(ids)} if spec.pattern is not None and ids else _string()
    if spec.type in ("int", "list[int]"):
        number: dict[str, Any] = {"type": "integer"}
        if spec.minimum is not None:
            number["minimum"] = spec.minimum
        if spec.type == "int":
            return number
        return {"type": "array", "items": number, "minItems": 1, "maxItems": spec.max_items or LIST_ITEMS}
    if spec.type == "bool":
        return {"type": "boolean"}
    if spec.type == "object":
        return {"type": "object"}
    strings = {"type": "array", "items": _string(), "minItems": 1, "maxItems": spec.max_items or LIST_ITEMS}
    return strings if spec.type == "list[str]" else {"anyOf": [_string(), strings]}


def _object(properties: Mapping[str, Any], required: Iterable[str]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required),
            "additionalProperties": False}  # fmt: skip


def tool_schemas(
    spec: ToolSpec, ids: Sequence[str] = (), overrides: Mapping[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The schema(s) of one tool's Action {"tool": name, "args": {...}}: one per alternative of `exactly_one_of`.

    `overrides` maps "tool.arg" to a schema the caller knows better (e.g. update_goal's changes)."""
    overrides = overrides or {}
    props = {n: overrides.get(f"{spec.name}.{n}") or arg_schema(a, ids) for n, a in spec.args.items()}
    required = [n for n, a in spec.args.items() if a.required]
    variants = [(props, required)]
    if spec.exactly_one_of:
        others = set(spec.exactly_one_of)
        variants = [({k: v for k, v in props.items() if k == one or k not in others}, [*required, one])
                    for one in spec.exactly_one_of]  # fmt: skip
    return [_object({"tool": {"type": "string", "enum": [spec.name]}, "args": _object(p, r)}, ["tool", "args"])
            for p, r in variants]  # fmt: skip


def action_schema(
    specs: Iterable[ToolSpec],
    ids: Sequence[str] = (),
    overrides: Mapping[str, dict[str, Any]] | None = None,
    reasoning_chars: int = REASONING_CHARS,
) -> ReplySchema:
    """The reply of a cycle: {"reasoning": text, "action": one of the tools' Actions}, no other keys."""
    actions = [s for spec in specs for s in tool_schemas(spec, ids, overrides)]
    reply = _object({"reasoning": _string(reasoning_chars), "action": {"anyOf": actions}}, ["reasoning", "action"])
    return ReplySchema("agent_action", reply)


def schema_tools(schema: ReplySchema) -> list[str]:
    """The tool names an action schema allows, in order (for logs and tests)."""
    names = []
    for option in schema.schema["properties"]["action"]["anyOf"]:
        for name in option["properties"]["tool"]["enum"]:
            if name not in names:
                names.append(name)
    return names


def action_reply_text(content: str) -> str:
    """A schema reply {"reasoning", "action"} in the text protocol ("reasoning", then "Action: {...}"), so one
    parser, validator and repair turn serve both modes; anything else is returned unchanged. A raw newline inside
    the reasoning string (llama-cpp-python's grammar lets one through) is read as a newline, not a fault."""
    try:
        doc = json.loads(content, strict=False)
    except ValueError:
        return content
    if not isinstance(doc, dict) or set(doc) != {"reasoning", "action"} or not isinstance(doc["action"], dict):
        return content
    reasoning = str(doc["reasoning"]).strip() or "(no reasoning)"
    return f"{reasoning}\nAction: {json.dumps(doc['action'], ensure_ascii=False)}"


@dataclass
class StructuredReply:
    """A reply to a structured call: its text, the mode that produced it and the call's figures."""

    text: str
    mode: str
    schema: str
    stats: dict[str, Any] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        """Mode, tokens, time to first token and total time (None where the server does not say); the
        response_format form an OpenAI-compatible server took and how its tokens were counted, when known."""
        keys = ("prompt_tokens", "completion_tokens", "ttft_s", "total_s", "tokens_per_s")
        known = {k: self.stats[k] for k in ("response_format", "tokens_counted") if self.stats.get(k)}
        return {"mode": self.mode, "schema": self.schema, **{k: self.stats.get(k) for k in keys}, **known}

    def note(self) -> str:
        """One line for the cycle log."""
        f = self.figures()
        parts = [f"mode={f['mode']}", f"schema={f['schema']}"]
        parts += [f"{k}={f[k]}" for k in ("prompt_tokens", "completion_tokens", "ttft_s", "total_s", "tokens_per_s")
                  if f[k] is not None]  # fmt: skip
        return " ".join(parts)


class ChatBrain(Protocol):
    """What a structured call needs of a brain: its name and `chat` (a brain that constrains decoding also has
    `chat_structured` and `last_stats`, which `ask_structured` uses when present)."""

    name: str

    def chat(self, messages: list[Message]) -> str: ...


def ask_structured(brain: ChatBrain, messages: list[Message], schema: ReplySchema) -> StructuredReply:
    """Ask `brain` for a reply following `schema`: constrained when the brain can (`chat_structured`), the text
    protocol otherwise. Raises BrainError when no answer comes."""
    constrained = getattr(brain, "chat_structured", None)
    if constrained is None:
        start = time.monotonic()
        text = brain.chat(messages)
        return StructuredReply(text, "text", schema.name, {"total_s": round(time.monotonic() - start, 3)})
    text = constrained(messages, schema)
    stats = dict(getattr(brain, "last_stats", {}) or {})
    return StructuredReply(text, stats.get("mode", "json_schema"), schema.name, stats)


def is_rules_brain(brain: object) -> bool:
    """Whether `brain` (a brain, a brain's name, or None for no brain) is the deterministic rules rather than a
    language model: every rule brain's name starts with "rules" ("rules:handbook-policy-v1", "rules:ask-v1"), an
    LLM brain's names its backend ("ollama:<model>", "openai:<model>"); no brain counts as the rules."""
    if brain is None:
        return True
    name = brain if isinstance(brain, str) else getattr(brain, "name", "")
    return str(name).startswith("rules")


def json_object(reply: str, key: str) -> dict[str, Any] | None:
    """The last JSON(5) object in a reply that has `key` (top level, or inside an Action's "args")."""
    text = reply or ""
    for start in reversed([m.start() for m in re.finditer(r"\{", text)]):
        end = text.rfind("}")
        while end > start:
            try:
                obj = json5.loads(text[start : end + 1])
            except ValueError:
                end = text.rfind("}", start, end)
                continue
            if isinstance(obj, dict):
                if key in obj:
                    return obj
                if isinstance(obj.get("args"), dict) and key in obj["args"]:
                    return obj["args"]
            break
    return None


@dataclass
class Parsed:
    """What `ask_json` got: the parsed answer (None when none is usable) and why not, the first reply with its mode
    and figures (None when it went out as plain chat), every turn as (prompt, reply), and the brain's error."""

    value: Any = None
    problem: str = ""  # why the last reply is unusable ("" when `value` is set)
    asked: StructuredReply | None = None
    turns: list[tuple[str, str]] = field(default_factory=list)
    error: BrainError | None = None  # the brain failed: no (further) answer came

    def failure(self, name: str) -> str:
        """Why no usable answer came from the brain called `name`, in one line ("" when one came)."""
        if self.error is not None:
            return f"{name} unavailable: {self.error}"
        return "" if self.value is not None else f"{name} gave no usable answer after one repair turn"


def ask_json(
    brain: ChatBrain,
    messages: list[Message],
    parse: Callable[[str], tuple[Any, str]],
    schema: ReplySchema | None = None,
    *,
    label: str = "",
    fix: str | Callable[[str], str] = FIX_JSON,
    json_repair: bool = True,
) -> Parsed:
    """Ask `brain`, parse the reply, and on an unusable one ask once more to fix it.

    The first reply is schema-constrained where the brain can (`ask_structured`, its mode logged under `label`), a
    plain chat without a `schema`. `parse(reply)` gives (value, "") or (None, why). The repair turn sends the faulty
    reply back with `fix` (a prompt, or a function of why the reply failed); with `json_repair` it goes through the
    brain's JSON mode (`chat_json`) when it has one. A BrainError ends the asking: it is kept in `error`."""
    out = Parsed()
    try:
        if schema is not None:
            out.asked = ask_structured(brain, messages, schema)
            log.info("%s: %s", label or f"{schema.name} by {brain.name}", out.asked.note())
            reply = out.asked.text
        else:
            reply = brain.chat(messages)
        out.turns.append((messages[-1]["content"] if messages else "", reply))
        out.value, out.problem = parse(reply)
        if out.value is None:
            log.warning("%s: reply unusable (%s); asking once to fix the JSON", label or brain.name, out.problem)
            prompt = fix(out.problem) if callable(fix) else fix
            chat = (getattr(brain, "chat_json", None) if json_repair else None) or brain.chat
            fixed = chat(repair_messages(messages, reply, prompt))
            out.turns.append((prompt, fixed))
            out.value, out.problem = parse(fixed)
    except BrainError as exc:
        out.value, out.error = None, exc
    return out


def finish_stats(stats: dict[str, Any], start: float, first: float | None) -> dict[str, Any]:
    """Add ttft_s, total_s and tokens_per_s (completion tokens over the time after the first token)."""
    end = time.monotonic()
    stats["total_s"] = round(end - start, 3)
    stats["ttft_s"] = round(first - start, 3) if first is not None else None
    tokens = stats.get("completion_tokens")
    span = end - first if first is not None else 0.0
    stats["tokens_per_s"] = round(tokens / span, 2) if tokens and span > 0 else None
    return stats


__all__ = [
    "MODES",
    "FIX_JSON",
    "ChatBrain",
    "Parsed",
    "StructuredReply",
    "action_reply_text",
    "action_schema",
    "arg_schema",
    "ask_json",
    "ask_structured",
    "finish_stats",
    "is_rules_brain",
    "json_object",
    "schema_tools",
    "tool_schemas",
]
