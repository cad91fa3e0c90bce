"""Handbook Success expressions: a safe parser and evaluator over a review question's metrics (no eval)."""

from __future__ import annotations

import bisect
import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# the metrics a Success expression may use: a review question's (docs/handbooks.md). eligible_trials counts its
# studies, sr_overlap the share of them its covering review could include, PRISMA_compliant the check of that review
# (false when none covers it), newest_trial the year of its newest study, trials_since_review the studies published
# after its newest covering review.
METRIC_NAMES = (
    "eligible_trials",
    "PRISMA_compliant",
    "sr_overlap",
    "newest_trial",
    "trials_since_review",
)
# a cluster's measures: clusters organise the corpus; a goal's answer is about a question, so Success refuses them
CLUSTER_METRICS = ("size", "ers", "cvgr", "het_numeric", "dispersion", "mean_year")
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


class _ThreeValued:
    """A node of a Success expression: `truth` is True, False or None (unknown); Success needs True."""

    def truth(self, metrics: Mapping[str, Any]) -> bool | None:
        raise NotImplementedError

    def evaluate(self, metrics: Mapping[str, Any]) -> bool:
        """True only when the node is known to hold: unknown counts as false for Success."""
        return self.truth(metrics) is True


@dataclass(frozen=True)
class Const(_ThreeValued):
    value: int | float | bool | None

    def value_in(self, metrics: Mapping[str, Any]) -> Any:
        return self.value

    def truth(self, metrics: Mapping[str, Any]) -> bool | None:
        return None if self.value is None else bool(self.value)

    def describe(self) -> str:
        return _literal_text(self.value)

    def __str__(self) -> str:
        return _literal_text(self.value)


@dataclass(frozen=True)
class Metric(_ThreeValued):
    name: str  # the spelling of METRIC_NAMES

    def value_in(self, metrics: Mapping[str, Any]) -> Any:
        return metrics.get(self.name.lower())

    def truth(self, metrics: Mapping[str, Any]) -> bool | None:
        value = self.value_in(metrics)
        return None if value is None else bool(value)

    def describe(self) -> str:
        return f"{self.name} is true"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Compare(_ThreeValued):
    op: str
    left: Const | Metric
    right: Const | Metric

    def truth(self, metrics: Mapping[str, Any]) -> bool | None:
        """True, False, or None (unknown) when a metric it reads is null: an unmeasured metric is neither
        above nor below a threshold. Only an explicit `== null` / `!= null` test asks about nullness itself."""
        left, right = self.left.value_in(metrics), self.right.value_in(metrics)
        null_literal = [side for side in (self.left, self.right) if isinstance(side, Const) and side.value is None]
        if null_literal:
            other = right if self.left is null_literal[0] else left
            return {"==": other is None, "!=": other is not None}.get(self.op, False)
        if left is None or right is None:
            return None
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
class Not(_ThreeValued):
    operand: Condition

    def truth(self, metrics: Mapping[str, Any]) -> bool | None:
        inner = self.operand.truth(metrics)
        return None if inner is None else not inner

    def describe(self) -> str:
        return f"not ({self.operand.describe()})"

    def __str__(self) -> str:
        inner = str(self.operand)
        return f"NOT ({inner})" if isinstance(self.operand, BoolOp) else f"NOT {inner}"


@dataclass(frozen=True)
class BoolOp(_ThreeValued):
    op: str  # "AND" | "OR"
    operands: tuple[Condition, ...]

    def truth(self, metrics: Mapping[str, Any]) -> bool | None:
        """Kleene logic: unknown AND false = false, unknown OR true = true, otherwise unknown spreads."""
        values = [o.truth(metrics) for o in self.operands]
        decisive = self.op == "OR"  # the value that settles the result on its own
        if decisive in values:
            return decisive
        return None if None in values else not decisive

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
# How deep parentheses and NOTs may nest: the parser and the evaluator recurse once per level, so a cap far
# below Python's recursion limit turns a pathological expression into a handbook error naming its line.
SUCCESS_MAX_NESTING = 50
# Digits a number in a handbook may have (Success literals, Stop_after): more says nothing a metric can reach,
# and past 4,300 digits int() itself refuses the text.
NUMBER_MAX_DIGITS = 15
_UNICODE_OPS = {"≥": ">=", "≤": "<=", "≠": "!="}
_KEYWORDS = {"and": "AND", "or": "OR", "not": "NOT"}
_LITERALS = {"true": True, "false": False, "null": None}


def number_too_long(text: str) -> str | None:
    """Why a number written in a handbook is refused (more than NUMBER_MAX_DIGITS digits), or None."""
    if (digits := sum(c.isdigit() for c in text)) <= NUMBER_MAX_DIGITS:
        return None
    shown = text if len(text) <= 20 else f"{text[:12]}...{text[-4:]}"
    return f"number {shown!r} has {digits} digits (at most {NUMBER_MAX_DIGITS})"


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
        self.depth = 0  # parentheses and NOTs open around the current token

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
                if too_long := number_too_long(text):
                    raise HandbookError(self.source, line, "Success", too_long)
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
            elif text.lower() in CLUSTER_METRICS:
                raise HandbookError(self.source, line, "Success", f"{text!r} is a cluster's measure; Success is "
                                    f"judged on a review question's metrics ({', '.join(METRIC_NAMES)})")  # fmt: skip
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

    def _nested(self, parse_inner: Callable[[], Condition]) -> Condition:
        """Parse one level deeper (after the '(' or NOT just taken), refusing nesting past SUCCESS_MAX_NESTING."""
        if self.depth >= SUCCESS_MAX_NESTING:
            raise self._error(f"nested more than {SUCCESS_MAX_NESTING} levels deep (parentheses and NOTs); "
                              "write the expression flatter", self.tokens[self.pos - 1])  # fmt: skip
        self.depth += 1
        try:
            return parse_inner()
        finally:
            self.depth -= 1

    def _not(self) -> Condition:
        if self._peek().kind == "kw" and self._peek().value == "NOT":
            self._take()
            return Not(self._nested(self._not))
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
            node = self._nested(self._or)
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
