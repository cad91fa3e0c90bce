"""Strict handbook parser (memo 60 §1): front-matter keys, value types, tool whitelist and a safe Success expression.

A handbook is Markdown: a front-matter block between two `---` lines, then free prose the LLM reads.
The front matter is a strict YAML subset: `Key: value`; `Key:` followed by indented `- item` lines
(or an inline `[a, b]` list); `Success` may continue on indented lines; `#` starts a comment; values
may be quoted. Only the six keys of memo 60 exist, each at most once.

`Success` is a boolean expression over cluster-manifest metrics (METRIC_NAMES), parsed by a
recursive-descent parser into an AST and evaluated without `eval`:

    expr := or ;  or := and ("OR" and)* ;  and := not ("AND" not)* ;  not := "NOT" not | cmp
    cmp  := atom (("==" | "!=" | ">=" | "<=" | ">" | "<") atom)? ;  atom := number | true | false | null
            | metric | "(" expr ")"

Keywords and metric names are case-insensitive; ≥ ≤ ≠ are accepted for >= <= !=. A comparison
involving a missing (null) metric is false; `metric == null` / `metric != null` test for presence.
"""

from __future__ import annotations

import bisect
import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra_agent.agent.actions import HEAVY_TOOLS, REGISTRY_SPECS
from ra_agent.agent.goal import PRIMARY_GOALS

HANDBOOK_KEYS = ("Primary_goal", "Seed_query", "Tools_allowed", "Exploration", "Success", "Stop_after")
# the metrics a Success expression may use: cluster_metrics columns (memo 40 §7) plus the SR checks
METRIC_NAMES = (
    "eligible_trials",
    "PRISMA_compliant",
    "sr_overlap",
    "size",
    "ers",
    "cvgr",
    "het_numeric",
    "dispersion",
    "mean_year",
)
_METRIC_BY_LOWER = {m.lower(): m for m in METRIC_NAMES}


class HandbookError(ValueError):
    """A handbook that does not load; the message names the file, the line and the key."""

    def __init__(self, source: str, line: int, key: str | None, message: str):
        self.source, self.line, self.key = source, line, key
        super().__init__(f"{source}:{line}: {key}: {message}" if key else f"{source}:{line}: {message}")


# ---------------------------------------------------------------------------- Success expressions

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_SYMBOL = {">=": "≥", "<=": "≤", "!=": "≠", "==": "=", ">": ">", "<": "<"}


def _literal_text(value: Any) -> str:
    return json.dumps(value)  # true / false / null / numbers, as written in handbooks


@dataclass(frozen=True)
class Const:
    value: int | float | bool | None

    def value_in(self, metrics: Mapping[str, Any]) -> Any:
        return self.value

    def evaluate(self, metrics: Mapping[str, Any]) -> bool:
        return bool(self.value)

    def describe(self) -> str:
        return _literal_text(self.value)

    def __str__(self) -> str:
        return _literal_text(self.value)


@dataclass(frozen=True)
class Metric:
    name: str  # the spelling of METRIC_NAMES

    def value_in(self, metrics: Mapping[str, Any]) -> Any:
        return metrics.get(self.name.lower())

    def evaluate(self, metrics: Mapping[str, Any]) -> bool:
        value = self.value_in(metrics)
        return value is not None and bool(value)

    def describe(self) -> str:
        return f"{self.name} is true"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Compare:
    op: str
    left: Const | Metric
    right: Const | Metric

    def evaluate(self, metrics: Mapping[str, Any]) -> bool:
        left, right = self.left.value_in(metrics), self.right.value_in(metrics)
        null_literal = [side for side in (self.left, self.right) if isinstance(side, Const) and side.value is None]
        if null_literal:
            other = right if self.left is null_literal[0] else left
            return {"==": other is None, "!=": other is not None}.get(self.op, False)
        if left is None or right is None:
            return False
        try:
            return bool(_COMPARE[self.op](left, right))
        except TypeError:
            return False

    def describe(self) -> str:
        if isinstance(self.right, Const) and (self.right.value is None or isinstance(self.right.value, bool)):
            verb = {"==": "is", "!=": "is not"}.get(self.op, _SYMBOL[self.op])
            return f"{self.left} {verb} {self.right}"
        return f"{self.left} {_SYMBOL[self.op]} {self.right}"

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class Not:
    operand: Condition

    def evaluate(self, metrics: Mapping[str, Any]) -> bool:
        return not self.operand.evaluate(metrics)

    def describe(self) -> str:
        return f"not ({self.operand.describe()})"

    def __str__(self) -> str:
        inner = str(self.operand)
        return f"NOT ({inner})" if isinstance(self.operand, BoolOp) else f"NOT {inner}"


@dataclass(frozen=True)
class BoolOp:
    op: str  # "AND" | "OR"
    operands: tuple[Condition, ...]

    def evaluate(self, metrics: Mapping[str, Any]) -> bool:
        combine = all if self.op == "AND" else any
        return combine(o.evaluate(metrics) for o in self.operands)

    def _join(self, render: Callable[[Condition], str], joiner: str) -> str:
        def wrapped(o: Condition) -> str:
            return f"({render(o)})" if isinstance(o, BoolOp) else render(o)

        return joiner.join(wrapped(o) for o in self.operands)

    def describe(self) -> str:
        return self._join(lambda o: o.describe(), f" {self.op.lower()} ")

    def __str__(self) -> str:
        return self._join(str, f" {self.op} ")


Condition = Compare | Not | BoolOp | Metric | Const


def iter_nodes(node: Condition) -> Iterator[Condition]:
    """Every node of a condition tree, depth first."""
    yield node
    if isinstance(node, Not):
        yield from iter_nodes(node.operand)
    elif isinstance(node, BoolOp):
        for o in node.operands:
            yield from iter_nodes(o)


def normalise_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metric values keyed by lower-case name (PRISMA_compliant and prisma_compliant are one metric)."""
    return {str(k).lower(): v for k, v in metrics.items()}


_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)|(?P<num>-?(?:\d+\.\d*|\.\d+|\d+))|(?P<op>==|!=|>=|<=|>|<|≥|≤|≠)"
    r"|(?P<par>[()])|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<bad>.)"
)
_UNICODE_OPS = {"≥": ">=", "≤": "<=", "≠": "!="}
_KEYWORDS = {"and": "AND", "or": "OR", "not": "NOT"}
_LITERALS = {"true": True, "false": False, "null": None}


@dataclass(frozen=True)
class _Token:
    kind: str  # num | op | par | kw | lit | metric | end
    value: Any
    line: int


class _SuccessParser:
    """Recursive descent over the Success tokens; errors carry the file line of the offending token."""

    def __init__(self, pieces: list[tuple[int, str]], source: str):
        self.source = source
        self.text = "\n".join(text for _, text in pieces)
        self.piece_lines = [line for line, _ in pieces]
        self.piece_starts = []
        offset = 0
        for _, text in pieces:
            self.piece_starts.append(offset)
            offset += len(text) + 1
        self.tokens = list(self._tokenize())
        self.pos = 0

    def _line(self, offset: int) -> int:
        return self.piece_lines[bisect.bisect_right(self.piece_starts, offset) - 1]

    def _error(self, message: str, token: _Token | None = None) -> HandbookError:
        line = (token or self.tokens[min(self.pos, len(self.tokens) - 1)]).line
        return HandbookError(self.source, line, "Success", message)

    def _tokenize(self) -> Iterator[_Token]:
        for m in _TOKEN_RE.finditer(self.text):
            kind, text, line = m.lastgroup, m.group(), self._line(m.start())
            if kind == "ws":
                continue
            if kind == "bad":
                hint = " (use '==' to compare)" if text == "=" else ""
                raise HandbookError(self.source, line, "Success", f"unexpected character {text!r}{hint}")
            if kind == "num":
                yield _Token("lit", float(text) if "." in text else int(text), line)
            elif kind == "op":
                yield _Token("op", _UNICODE_OPS.get(text, text), line)
            elif kind == "par":
                yield _Token("par", text, line)
            elif text.lower() in _KEYWORDS:
                yield _Token("kw", _KEYWORDS[text.lower()], line)
            elif text.lower() in _LITERALS:
                yield _Token("lit", _LITERALS[text.lower()], line)
            elif text.lower() in _METRIC_BY_LOWER:
                yield _Token("metric", _METRIC_BY_LOWER[text.lower()], line)
            else:
                raise HandbookError(
                    self.source, line, "Success", f"unknown metric {text!r} (allowed: {', '.join(METRIC_NAMES)})"
                )
        yield _Token("end", None, self.piece_lines[-1])

    def _peek(self) -> _Token:
        return self.tokens[self.pos]

    def _take(self) -> _Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def parse(self) -> Condition:
        if self._peek().kind == "end":
            raise self._error("the expression is empty")
        node = self._or()
        if self._peek().kind != "end":
            raise self._error(f"unexpected {self._peek().value!r}")
        return node

    def _chain(self, op: str, parse_operand: Callable[[], Condition]) -> Condition:
        operands = [parse_operand()]
        while self._peek().kind == "kw" and self._peek().value == op:
            self._take()
            operands.append(parse_operand())
        return operands[0] if len(operands) == 1 else BoolOp(op, tuple(operands))

    def _or(self) -> Condition:
        return self._chain("OR", self._and)

    def _and(self) -> Condition:
        return self._chain("AND", self._not)

    def _not(self) -> Condition:
        if self._peek().kind == "kw" and self._peek().value == "NOT":
            self._take()
            return Not(self._not())
        return self._comparison()

    def _comparison(self) -> Condition:
        start = self._peek()
        left = self._atom()
        if self._peek().kind != "op":
            if isinstance(left, Const) and not isinstance(left.value, bool):
                raise self._error(f"{left} is not a condition (compare it with a metric)", start)
            return left
        op = self._take().value
        right_token = self._peek()
        right = self._atom()
        if isinstance(left, BoolOp | Not | Compare) or isinstance(right, BoolOp | Not | Compare):
            raise self._error(f"'{op}' compares values, not conditions", right_token)
        if op not in ("==", "!=") and any(
            isinstance(side, Const) and (side.value is None or isinstance(side.value, bool)) for side in (left, right)
        ):
            raise self._error(f"'{op}' needs numbers, not true/false/null", right_token)
        if self._peek().kind == "op":
            raise self._error("comparisons cannot be chained; join them with AND")
        if isinstance(left, Const) and isinstance(right, Metric):
            left, right, op = right, left, {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
        return Compare(op, left, right)

    def _atom(self) -> Condition:
        token = self._take()
        if token.kind == "lit":
            return Const(token.value)
        if token.kind == "metric":
            return Metric(token.value)
        if token.kind == "par" and token.value == "(":
            node = self._or()
            if self._peek().value != ")":
                raise self._error("missing ')'")
            self._take()
            return node
        found = "the end of the expression" if token.kind == "end" else repr(token.value)
        self.pos -= 1
        raise self._error(f"expected a metric, number, true/false/null or '(' but found {found}", token)


def parse_success(text: str, *, source: str = "<Success>", first_line: int = 1) -> Condition:
    """Parse a Success expression (HandbookError on bad syntax or an unknown metric)."""
    pieces = [(first_line + i, line) for i, line in enumerate(text.split("\n"))]
    return _SuccessParser(pieces, source).parse()


# ---------------------------------------------------------------------------- front matter


@dataclass
class _Entry:
    key: str
    line: int
    value: str  # text after the colon (comment stripped)
    items: list[tuple[int, int, str]] = field(default_factory=list)  # (line, indent, text)
    continuation: list[tuple[int, str]] = field(default_factory=list)


_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)[ \t]*:(.*)$")


def _strip_comment(text: str) -> str:
    """Drop a `#` comment that is outside quotes and starts the text or follows whitespace."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].rstrip()
    return text.rstrip()


def _unquote(text: str, source: str, line: int, key: str) -> str:
    text = text.strip()
    if text[:1] == '"':
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise HandbookError(source, line, key, f"bad double-quoted string {text}") from None
        if not isinstance(value, str):
            raise HandbookError(source, line, key, f"bad double-quoted string {text}")
        return value
    if text[:1] == "'":
        if len(text) < 2 or text[-1] != "'" or "'" in text[1:-1].replace("''", ""):
            raise HandbookError(source, line, key, f"bad single-quoted string {text}")
        return text[1:-1].replace("''", "'")
    return text


def _split_front_matter(lines: list[str], source: str) -> tuple[int, int]:
    """(index of the opening '---', index of the closing '---')."""
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or lines[start].rstrip() != "---":
        raise HandbookError(source, (start or 0) + 1, None, "a handbook starts with a '---' front-matter line")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise HandbookError(source, start + 1, None, "the front matter is not closed by a '---' line")
    return start, end


def _read_entries(lines: list[str], start: int, end: int, source: str) -> dict[str, _Entry]:
    entries: dict[str, _Entry] = {}
    current: _Entry | None = None
    for index in range(start + 1, end):
        number, line = index + 1, lines[index]
        body = line.lstrip(" ")
        if body.startswith("\t"):
            raise HandbookError(
                source, number, current.key if current else None, "tabs are not allowed for indentation"
            )
        if not body.strip() or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        if indent == 0:
            current = _read_key_line(line, number, entries, source)
            continue
        if current is None:
            raise HandbookError(source, number, None, "bad indentation: an indented line must follow a 'Key:' line")
        text = _strip_comment(body)
        if text == "-" or text.startswith("- "):
            _add_item(current, number, indent, text[1:].strip(), source)
        elif current.items:
            raise HandbookError(source, number, current.key, "bad indentation: expected another '- item' line")
        else:
            current.continuation.append((number, text))
    return entries


def _read_key_line(line: str, number: int, entries: dict[str, _Entry], source: str) -> _Entry:
    match = _KEY_RE.match(line)
    if not match:
        if line.startswith("-"):
            raise HandbookError(source, number, None, "bad indentation: list items must be indented under their key")
        raise HandbookError(source, number, None, f"expected 'Key: value', got {line.strip()!r}")
    key = match.group(1)
    if key not in HANDBOOK_KEYS:
        raise HandbookError(source, number, key, f"unknown key (allowed: {', '.join(HANDBOOK_KEYS)})")
    if key in entries:
        raise HandbookError(source, number, key, f"duplicate key (first set on line {entries[key].line})")
    entries[key] = _Entry(key, number, _strip_comment(match.group(2)).strip())
    return entries[key]


def _add_item(entry: _Entry, number: int, indent: int, text: str, source: str) -> None:
    if entry.value:
        raise HandbookError(source, number, entry.key, "bad indentation: a key with list items has no inline value")
    if entry.continuation:
        raise HandbookError(source, number, entry.key, "bad indentation: list items cannot follow continuation lines")
    if entry.items and entry.items[0][1] != indent:
        raise HandbookError(source, number, entry.key, "bad indentation: list items must line up")
    entry.items.append((number, indent, text))


# ---------------------------------------------------------------------------- typed values


def _scalar(entry: _Entry, source: str) -> str:
    if entry.items or entry.continuation:
        line = (entry.items or entry.continuation)[0][0]
        raise HandbookError(source, line, entry.key, "expects a single value on the key's line")
    if not entry.value:
        raise HandbookError(source, entry.line, entry.key, "needs a value")
    return entry.value


def _to_primary_goal(entry: _Entry, source: str) -> str:
    value = _unquote(_scalar(entry, source), source, entry.line, entry.key)
    if value not in PRIMARY_GOALS:
        raise HandbookError(source, entry.line, entry.key, f"{value!r} is not one of {', '.join(PRIMARY_GOALS)}")
    return value


def _to_text(entry: _Entry, source: str) -> str:
    value = _unquote(_scalar(entry, source), source, entry.line, entry.key).strip()
    if not value:
        raise HandbookError(source, entry.line, entry.key, "must not be empty")
    return value


def _to_bool(entry: _Entry, source: str) -> bool:
    value = _scalar(entry, source).lower()
    if value not in ("true", "false"):
        raise HandbookError(source, entry.line, entry.key, f"expected true or false, got {entry.value!r}")
    return value == "true"


def _to_count(entry: _Entry, source: str) -> int:
    value = _scalar(entry, source)
    if not re.fullmatch(r"\+?\d+", value) or int(value) < 1:
        raise HandbookError(source, entry.line, entry.key, f"expected an integer >= 1, got {value!r}")
    return int(value)


def _to_tools(entry: _Entry, source: str) -> tuple[str, ...]:
    if entry.continuation:
        raise HandbookError(source, entry.continuation[0][0], entry.key, "bad indentation: expected '- item' lines")
    if entry.value:
        if not (entry.value.startswith("[") and entry.value.endswith("]")):
            raise HandbookError(source, entry.line, entry.key, "expected '- item' lines or an inline [a, b] list")
        inner = entry.value[1:-1].strip()
        raw = [(entry.line, part) for part in inner.split(",")] if inner else []
    else:
        raw = [(line, text) for line, _, text in entry.items]
    tools: list[str] = []
    for line, text in raw:
        name = _unquote(text, source, line, entry.key).strip()
        if name not in REGISTRY_SPECS:
            raise HandbookError(source, line, entry.key, f"unknown tool {name!r} (known: {', '.join(REGISTRY_SPECS)})")
        if name in tools:
            raise HandbookError(source, line, entry.key, f"tool {name!r} is listed twice")
        tools.append(name)
    return tuple(tools)


def _to_success(entry: _Entry, source: str) -> Condition:
    if entry.items:
        raise HandbookError(source, entry.items[0][0], entry.key, "expects an expression, not a list")
    pieces = ([(entry.line, entry.value)] if entry.value else []) + entry.continuation
    if not pieces:
        raise HandbookError(source, entry.line, entry.key, "needs an expression")
    if len(pieces) == 1 and pieces[0][1].startswith(("'", '"')):
        line, text = pieces[0]
        pieces = [(line, _unquote(text, source, line, entry.key))]
    return _SuccessParser(pieces, source).parse()


# ---------------------------------------------------------------------------- the handbook


@dataclass(frozen=True)
class Handbook:
    """A loaded handbook: the memo-60 keys, typed, plus the Markdown prose after the front matter.

    Defaults for optional keys: no Seed_query; Tools_allowed = every heavy tool (config switches still
    apply); Exploration false (semantic expansion only); no Success (the goal runs until the LLM or
    the operator stops it); Stop_after 1.
    """

    path: Path
    primary_goal: str
    seed_query: str | None = None
    tools_allowed: tuple[str, ...] = HEAVY_TOOLS
    exploration: bool = False
    success: Condition | None = None
    stop_after: int = 1
    prose: str = ""

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def success_text(self) -> str:
        """The Success expression in canonical form ('' when the handbook has none)."""
        return str(self.success) if self.success is not None else ""

    @property
    def success_metrics(self) -> tuple[str, ...]:
        """The metric names the Success expression reads, in order of first use."""
        if self.success is None:
            return ()
        names = (n.name for node in iter_nodes(self.success) for n in _operands(node) if isinstance(n, Metric))
        return tuple(dict.fromkeys(names))

    def allows(self, tool: str) -> bool:
        return tool in self.tools_allowed

    def success_met(self, metrics: Mapping[str, Any]) -> bool:
        """Evaluate Success against one cluster's metrics (no Success: never met)."""
        return self.success is not None and self.success.evaluate(normalise_metrics(metrics))

    def unmet_conditions(self, metrics: Mapping[str, Any]) -> list[str]:
        """The comparisons of Success that are false for these metrics, described for a prompt."""
        if self.success is None:
            return []
        values = normalise_metrics(metrics)
        unmet = []
        for node in iter_nodes(self.success):
            if isinstance(node, Compare | Metric) and not node.evaluate(values):
                now = [
                    f"{m.name} = {_literal_text(m.value_in(values))}" for m in _operands(node) if isinstance(m, Metric)
                ]
                unmet.append(f"{node.describe()} (now {', '.join(now)})" if now else node.describe())
        return unmet

    def describe_success(self) -> str:
        """Success in words, e.g. 'eligible_trials ≥ 6 and PRISMA_compliant is false'."""
        if self.success is None:
            return "no success condition: the goal runs until it is stopped"
        return self.success.describe()


def _operands(node: Condition) -> tuple[Any, ...]:
    return (node.left, node.right) if isinstance(node, Compare) else (node,)


_CONVERTERS: dict[str, tuple[str, Callable[[_Entry, str], Any]]] = {
    "Primary_goal": ("primary_goal", _to_primary_goal),
    "Seed_query": ("seed_query", _to_text),
    "Tools_allowed": ("tools_allowed", _to_tools),
    "Exploration": ("exploration", _to_bool),
    "Success": ("success", _to_success),
    "Stop_after": ("stop_after", _to_count),
}


def parse_handbook(text: str, path: str | Path = "<handbook>") -> Handbook:
    """Parse handbook text; `path` names the file in errors and becomes Handbook.path."""
    source = str(path)
    lines = text.splitlines()
    start, end = _split_front_matter(lines, source)
    entries = _read_entries(lines, start, end, source)
    if "Primary_goal" not in entries:
        raise HandbookError(source, start + 1, "Primary_goal", "missing mandatory key")
    values = {attr: convert(entries[key], source) for key, (attr, convert) in _CONVERTERS.items() if key in entries}
    prose = "\n".join(lines[end + 1 :]).strip()
    return Handbook(path=Path(path), prose=prose, **values)


def load_handbook(path: str | Path) -> Handbook:
    """Read and parse a handbook file; any problem is a HandbookError naming file, line and key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise HandbookError(str(path), 1, None, f"cannot read handbook: {exc.strerror or exc}") from exc
    return parse_handbook(text, path)


__all__ = [
    "HANDBOOK_KEYS",
    "METRIC_NAMES",
    "BoolOp",
    "Compare",
    "Condition",
    "Const",
    "Handbook",
    "HandbookError",
    "Metric",
    "Not",
    "iter_nodes",
    "load_handbook",
    "normalise_metrics",
    "parse_handbook",
    "parse_success",
]
