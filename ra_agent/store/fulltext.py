"""Full-text queries that rules build (not queries a user types): phrases of words as the index splits them, the last
word optionally a prefix, joined by AND and OR, read through SQLite's FTS5 index or PostgreSQL's tsvector index; and
the prefix of a word that a prefix query may use when the index keeps stems (`stem_safe_prefix`).

Both indexes keep stems, not words (FTS5's `porter`, PostgreSQL's Snowball English: schema migrations 1 and 8), and
both stem the word of a prefix query before matching it: "schizophreni*" is looked up as the stem "schizophreni",
while "schizophrenic" is indexed as "schizophren". `stem_safe_prefix` cuts a word back to a prefix that the stem of
every longer word keeps: before any ending either stemmer may remove or rewrite (the suffixes of the Porter and
Porter 2 algorithms, in the order their steps remove them), and until the stemmer leaves the prefix itself alone.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Union

from ra_agent.store.dialect import FTS_CONFIG
from ra_agent.store.schema import POSTGRESQL

if TYPE_CHECKING:
    from ra_agent.store.db import Store

WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Phrase:
    """Consecutive words (lower-case letters and digits, as the index splits text); `prefix`: the last is a prefix."""

    words: tuple[str, ...]
    prefix: bool = False


@dataclass(frozen=True)
class AllOf:
    """Every part matches (no part: every record)."""

    parts: tuple[Query, ...]


@dataclass(frozen=True)
class AnyOf:
    """One part matches (no part: no record)."""

    parts: tuple[Query, ...]


Query = Union[Phrase, AllOf, AnyOf]  # noqa: UP007 (a recursive alias needs the names as strings resolved late)
EVERY_RECORD, NO_RECORD = AllOf(()), AnyOf(())


def simplified(query: Query) -> Query:
    """The same query with nested groups of one kind flattened, repeated parts dropped and empty groups resolved."""
    if isinstance(query, Phrase):
        return query
    kind = type(query)
    parts: dict[Query, None] = {}
    for part in (simplified(p) for p in query.parts):
        if part == (NO_RECORD if kind is AllOf else EVERY_RECORD):
            return part  # AND nothing / OR everything
        if part == (EVERY_RECORD if kind is AllOf else NO_RECORD):
            continue
        for inner in part.parts if isinstance(part, kind) else (part,):
            parts[inner] = None
    if len(parts) == 1:
        return next(iter(parts))
    return kind(tuple(parts))


def fts5_expression(query: Query) -> str:
    """The query in FTS5's syntax (no empty group: see `simplified`)."""
    if isinstance(query, Phrase):
        return f'"{" ".join(query.words)}"' + ("*" if query.prefix else "")
    joiner = " AND " if isinstance(query, AllOf) else " OR "
    return "(" + joiner.join(fts5_expression(p) for p in query.parts) + ")"


def tsquery_expression(query: Query) -> str:
    """The query as `to_tsquery` text (no empty group: see `simplified`); words are letters and digits only."""
    if isinstance(query, Phrase):
        words = [f"'{w}'" for w in query.words]
        if query.prefix:
            words[-1] += ":*"
        return "(" + " <-> ".join(words) + ")"
    joiner = " & " if isinstance(query, AllOf) else " | "
    return "(" + joiner.join(tsquery_expression(p) for p in query.parts) + ")"


def matching(store: Store, query: Query, column: str | None = None) -> set[int] | None:
    """The PMIDs of the papers the query matches, in `column` ("title" or "abstract"; None: either), through the
    store's full-text index; None when the query constrains nothing (every paper matches). PostgreSQL indexes title
    and abstract as one text: there a column query matches in either (more papers, never fewer)."""
    query = simplified(query)
    if query == EVERY_RECORD:
        return None
    if query == NO_RECORD:
        return set()
    if store.dialect == POSTGRESQL:
        sql = f"SELECT pmid FROM paper_fts WHERE fts @@ to_tsquery('{FTS_CONFIG}', ?)"
        return {r[0] for r in store.conn.execute(sql, (tsquery_expression(query),))}
    expression = fts5_expression(query)
    if column:
        expression = f"{{{column}}} : {expression}"
    return {r[0] for r in store.conn.execute("SELECT rowid FROM paper_fts WHERE paper_fts MATCH ?", (expression,))}


# ----------------------------------------------------------------------------- stems


class Stemmer:
    """The stems a store's full-text index keeps for words (FTS5's porter, or PostgreSQL's `ra_fts`), cached."""

    def __init__(self, store: Store):
        self.store = store
        self.cache: dict[str, str] = {}
        self._porter: sqlite3.Connection | None = None

    def stems(self, words: Iterable[str]) -> dict[str, str]:
        """word -> stem for `words` (and every word asked before)."""
        wanted = [w for w in dict.fromkeys(words) if w not in self.cache]
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            self.cache.update(self._postgresql(part) if self.store.dialect == POSTGRESQL else self._fts5(part))
        return self.cache

    def stem(self, word: str) -> str:
        return self.stems([word])[word]

    def _postgresql(self, words: list[str]) -> dict[str, str]:
        rows = self.store.conn.execute(
            f"SELECT w, array_to_string(tsvector_to_array(to_tsvector('{FTS_CONFIG}', w)), ' ') "
            f"FROM unnest(ARRAY[{','.join('?' * len(words))}]::text[]) AS w",
            words,
        )
        return {w: stem or w for w, stem in rows}

    def _fts5(self, words: list[str]) -> dict[str, str]:
        """Stems as FTS5's `porter unicode61` tokenizer makes them (the SQLite library the store uses)."""
        if self._porter is None:
            self._porter = sqlite3.connect(":memory:")
            self._porter.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
            self._porter.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self._porter.execute("DELETE FROM t")
        self._porter.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(words, 1)))
        stems = dict(self._porter.execute("SELECT doc, term FROM v"))
        return {w: stems.get(i, w) for i, w in enumerate(words, 1)}


# The endings the Porter (FTS5) and Porter 2 (Snowball English) stemmers remove or rewrite, step by step, as they
# stand in the word before any step ran ("ational" is one ending though step 2 makes it "ate" and step 4 drops that;
# an ending ending in i also stands as y: "ably" is "abli" after step 1c). A stem is the word cut inside these
# endings, in this order from the word's end: 1a, 1b, [a doubled consonant 1b undoubles], 1c's y, 2, 3, 4, 5's e or l;
# an ending of steps 2-4 may stand only in part (see _endings).
_STEP_1A = ("es", "ed", "s")  # sses -> ss, ies -> i: "es"; ied -> i: "ed"; s -> ""
_STEP_1B = ("eed", "eedly", "ed", "edly", "ing", "ingly")
_STEP_2 = ("ational", "tional", "enci", "anci", "izer", "bli", "abli", "alli", "entli", "eli", "ousli", "ization",
           "ation", "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "logi", "ogi",
           "fulli", "lessli", "li")  # fmt: skip
_STEP_3 = ("icate", "ative", "alize", "iciti", "ical", "ful", "ness", "tional", "ational")
_STEP_4 = ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism", "ate",
           "iti", "ous", "ive", "ize")  # fmt: skip


def _with_y(endings: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*endings, *(e[:-1] + "y" for e in endings if e.endswith("i"))]))


DOUBLED = "doubled consonant"
_CHAIN: tuple[tuple[str, ...], ...] = (
    ("e", "l"),
    _with_y(_STEP_4),
    _with_y(_STEP_3),
    _with_y(_STEP_2),
    ("y",),
    (DOUBLED,),
    _STEP_1B,
    _STEP_1A,
)
_REWRITTEN = (1, 2, 3)  # the stages of steps 4, 3 and 2 in _CHAIN
# Porter 2's exceptional words (stemmed as listed, whatever their endings)
EXCEPTIONS = {"skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie", "idly": "idl",
              "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli", "singly": "singl"}  # fmt: skip


# per stage of _CHAIN: the beginnings of its endings (a word's rest may end inside one), and the pieces of the word
# one ending may take (the whole ending; for steps 2-4 also a beginning of it, the rest written by a later-placed
# step's rewrite: "ability": 2 makes "biliti" "ble", 4 drops "able"; "abbreviated": 1b drops "ed" and adds "e" to
# "at", 4 drops "ate")
_BEGINNINGS = [{e[:n] for e in stage for n in range(1, len(e) + 1)} for stage in _CHAIN]
_PIECES = [_BEGINNINGS[k] if k in _REWRITTEN else set(stage) for k, stage in enumerate(_CHAIN)]


# What the stem left before a stage's ending must hold for the stemmers to remove it there (Porter's measure m, the
# number of vowel-consonant runs, equals the Porter 2 regions: m >= 1 is R1, m >= 2 is R2): step 5 m >= 1 (e; l: 2),
# step 4 m >= 2, steps 3 and 2 m >= 1, 1c's y and 1b a vowel (Porter 2's y: two letters), 1a nothing. Only what
# both stemmers require (the weaker), so a cut either may make is kept.
_NEEDS = (("measure", 1), ("measure", 2), ("measure", 1), ("measure", 1), ("vowel or two", 0), ("vowel", 0),
          ("vowel", 0), ("", 0))  # fmt: skip


def measure(stem: str) -> int:
    """Porter's m: the vowel-consonant runs of `stem` (y is a vowel after a consonant)."""
    kinds = []
    for i, ch in enumerate(stem):
        vowel = ch in "aeiou" or (ch == "y" and i > 0 and kinds[-1] == "c")
        kinds.append("v" if vowel else "c")
    return "".join(kinds).count("vc")


def _allows(stage: int, stem: str) -> bool:
    """Whether a stemmer may remove an ending of `stage` that leaves `stem` (see _NEEDS)."""
    need, least = _NEEDS[stage]
    has_vowel = any(ch in "aeiouy" for ch in stem)
    if need == "measure":
        return measure(stem) >= least
    if need == "vowel or two":
        return has_vowel or len(stem) >= 2
    return has_vowel if need == "vowel" else True


@lru_cache(maxsize=65536)
def _first_stages(rest: str, before: str, stage: int = 0) -> frozenset[int]:
    """The stages (of _CHAIN, from `stage` on) whose ending may begin `rest` (after the letter `before`), the rest
    of `rest` being further endings the stemmers remove or rewrite, in _CHAIN's order."""
    found = set()
    for k in range(stage, len(_CHAIN)):
        if _CHAIN[k] == (DOUBLED,):
            if before == rest[:1] and rest[0] not in "aeiou" and _endings(rest[1:], rest[0], k + 1):
                found.add(k)
            continue
        if rest in _BEGINNINGS[k] or any(
            rest[:n] in _PIECES[k] and _endings(rest[n:], rest[n - 1], k + 1) for n in range(1, len(rest))
        ):
            found.add(k)
    return frozenset(found)


def _endings(rest: str, before: str, stage: int) -> bool:
    return not rest or bool(_first_stages(rest, before, stage))


def _cut(word: str) -> int:
    """Where a stemmer may first cut `word` or a longer word starting with it: the first place from which the rest
    may be endings it removes, with the stem before it holding what the first of them needs."""
    for i in range(len(word)):
        if any(_allows(k, word[:i]) for k in _first_stages(word[i:], word[i - 1 : i])):
            return i
    return len(word)


def stem_safe_prefixes(words: Iterable[str], stemmer: Stemmer) -> dict[str, str]:
    """For each word, the prefix for a prefix query that finds every word starting with it in an index of stems: cut
    before the first place from which the rest could be endings a stemmer removes ("catheter" -> "cathet", "venous"
    -> "ven"), then shortened until the stemmer leaves it as it is (the query's prefix is stemmed too); "" when no
    prefix is safe."""
    cut: dict[str, str] = {}
    for word in dict.fromkeys(words):
        prefix = word[: _cut(word)]
        for exceptional, stem in EXCEPTIONS.items():
            if exceptional.startswith(word):
                prefix = prefix[: next((i for i, (a, b) in enumerate(zip(prefix, stem, strict=False)) if a != b),
                                       min(len(prefix), len(stem)))]  # fmt: skip
        cut[word] = prefix
    stems = stemmer.stems(p[:n] for p in cut.values() for n in range(1, len(p) + 1))
    out = {}
    for word, prefix in cut.items():
        while prefix and not prefix.startswith(stems[prefix]):
            prefix = prefix[:-1]
        out[word] = prefix
    return out
