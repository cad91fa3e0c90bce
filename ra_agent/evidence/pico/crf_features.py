"""The learned PICO tagger's tokens and token features (`learned`): words, section kinds, shapes, affixes and
neighbours, as the shipped CRF models were trained on them."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from functools import lru_cache

_TOKEN = re.compile(r"\b[A-Z]\.(?=\s+[a-z])|[A-Za-z0-9]+(?:[-'’.,/][A-Za-z0-9]+)*|[^\sA-Za-z0-9]")  # "H. pylori"
_SECTION_KINDS = (
    ("bg", re.compile(r"BACKGROUND|INTRODUCTION|CONTEXT|IMPORTANCE|RATIONALE")),
    ("obj", re.compile(r"OBJECTIVE|AIM|PURPOSE|HYPOTHES|QUESTION")),
    ("meth", re.compile(r"DESIGN|SETTING|METHOD|MATERIAL|PROCEDURE|STUDY")),
    ("pop", re.compile(r"PATIENT|PARTICIPANT|SUBJECT|POPULATION|SAMPLE")),
    ("int", re.compile(r"INTERVENTION|TREATMENT|EXPOSURE")),
    ("out", re.compile(r"OUTCOME|MEASURE|END ?POINT")),
    ("res", re.compile(r"RESULT|FINDING")),
    ("conc", re.compile(r"CONCLUSION|INTERPRETATION|DISCUSSION|SIGNIFICANCE|IMPLICATION|RELEVANCE")),
)


def tokenize(text: str) -> list[tuple[str, int, int]]:
    """(token, start, end) of words (hyphenated, decimals kept whole) and single punctuation marks."""
    return [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def section_kinds(label: str) -> list[str]:
    """Coarse kinds of a section label ("DESIGN, SETTING, AND PARTICIPANTS" → meth, pop); "title", "none", "other"."""
    if label in ("", "title"):
        return [label or "none"]
    kinds = [kind for kind, rx in _SECTION_KINDS if rx.search(label.upper())]
    return kinds or ["other"]


# Word shape: upper-case letters X, lower-case letters and digits x (the shipped model was trained so; the "num"
# feature marks digits), runs cut to two ("Omeprazole" → "Xxx", "20-mg" → "xx-xx").
_SHAPE = str.maketrans(string.ascii_uppercase + string.ascii_lowercase + string.digits, "X" * 26 + "x" * 26 + "x" * 10)
_RUNS = re.compile(r"(.)\1+")


def _shape(word: str) -> str:
    return _RUNS.sub(r"\1\1", word.translate(_SHAPE))


@lru_cache(maxsize=200_000)
def _word_features(word: str) -> tuple[str, ...]:
    """The features of a word on its own (cached: abstracts repeat their words)."""
    low = word.lower()
    out = [f"w={low}", f"s3={low[-3:]}", f"s4={low[-4:]}", f"p3={low[:3]}", f"sh={_shape(word)}"]
    if any(c.isdigit() for c in word):
        out.append("num")
    if word[:1].isupper():
        out.append("cap")
    if word.isupper() and len(word) > 1:
        out.append("allcap")
    if "-" in word:
        out.append("hyph")
    return tuple(out)


def sentence_features(words: Sequence[str], kinds: Sequence[str], position: str) -> list[list[str]]:
    """Features of each token of one sentence: the word, its shape and affixes, neighbours, section and position."""
    base = [_word_features(w) for w in words]
    lows = [w.lower() for w in words]
    context = [f"sec={k}" for k in kinds] + [f"pos={position}"]
    rows = []
    n = len(words)
    for i in range(n):
        row = [*base[i], *context]
        for off in (-2, -1, 1, 2):
            j = i + off
            row.append(f"w{off:+d}={lows[j]}" if 0 <= j < n else f"w{off:+d}=<edge>")
        row += [f"{f}@-1" for f in base[i - 1][:2]] if i else ["bos"]
        row += [f"{f}@+1" for f in base[i + 1][:2]] if i + 1 < n else ["eos"]
        if i:
            row.append(f"bi={lows[i - 1]}|{lows[i]}")
        rows.append(row)
    return rows


def _position(index: int, total: int) -> str:
    return "title" if index == 0 else str(min(4, 5 * index // max(total, 1)))
