"""Strict handbook parser (docs/handbooks.md): front matter keys, typed values, the Handbook record."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra_agent.agent.goal import PRIMARY_GOALS
from ra_agent.agent.registry import HEAVY_TOOLS, REGISTRY_SPECS
from ra_agent.agent.success import (
    Compare,
    Condition,
    HandbookError,
    Metric,
    _literal_text,
    _SuccessParser,
    iter_nodes,
    normalise_metrics,
    number_too_long,
)
from ra_agent.config import Config

HANDBOOK_KEYS = ("Primary_goal", "Seed_query", "Tools_allowed", "Exploration", "Success", "Stop_after")


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
    if too_long := number_too_long(value):
        raise HandbookError(source, entry.line, entry.key, too_long)
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
    """A loaded handbook: the front-matter keys (docs/handbooks.md), typed, plus the Markdown prose after them.

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
        data = Path(path).read_bytes()
    except OSError as exc:
        raise HandbookError(str(path), 1, None, f"cannot read handbook: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise HandbookError(
            str(path), line, None, f"not UTF-8 (byte 0x{data[exc.start]:02x}); save it as UTF-8"
        ) from None
    return parse_handbook(text, path)


def recorded_handbook(cfg: Config, path: str | Path) -> Path:
    """A handbook path as goals record it (relative to the project root when inside it), made absolute."""
    path = Path(path)
    return path if path.is_absolute() else Path(cfg.root) / path
