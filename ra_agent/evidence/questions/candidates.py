"""The records a topic's questions read, through the store's indexes: the corpus statistics the topic's terms come
from (`IndexCounts`: MeSH heading counts from the `paper_mesh` index, the records that may say a concept from the
full-text index) and the candidates (`candidates`): the records that may say every population concept of the
topic, in their title or abstract or through one of the concept's MeSH headings, the reviews among them included.

The rules (`Concept.find`, `Concept.find_modified`, `trials.eligibility`, `review_asks.review_answers`) then judge
the candidates as they would judge the whole corpus: a record that says no population concept is never an eligible
trial, a further report, a review answering a question or one naming the topic. The full-text queries are built from
the concepts' own patterns (`topic.word_patterns`) to find more records than the patterns accept, never fewer:

- each word is a prefix query cut where a stemmer could cut it (`store.fulltext.stem_safe_prefixes`), in every
  spelling `topic.normalise` reads as it (British and American), a hyphenated word's parts as one word or apart;
- `Concept.find` also reads the text without hyphens, so a word may stand in the text with one hyphen anywhere
  inside it ("gastro-esophageal" for "gastroesophageal"): each such split is queried as a phrase;
- the words of a phrase pattern are ANDed (the pattern allows words between them and a record's title and abstract
  are read as one text); an abbreviation (`CVC`) is a word; the head phrase of a modified concept
  (`Concept.find_modified`) may start inside a word, so it is queried by its later words and its modifier.

A pattern these rules cannot read constrains nothing: its concept's records are then read in full (logged). Not
covered: a concept's abbreviation learnt from a word the text glues to digits or to letters outside a-z ("5CVC"), or
cut by the 80-character window `topic._with_abbreviations` reads. The candidates depend on the store and the topic
only, so the vector index cannot add a record the rules would accept: it is not read.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from itertools import product

from ra_agent.evidence.questions.topic import (
    PART_GAP,
    WORD_END,
    WORD_GAP,
    Concept,
    Topic,
    is_abbreviation,
    normalise,
    spellings,
)
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.store.fulltext import (
    EVERY_RECORD,
    WORD,
    AllOf,
    AnyOf,
    Phrase,
    Query,
    Stemmer,
    matching,
    stem_safe_prefixes,
)

log = logging.getLogger(__name__)

BATCH = 500  # PMIDs per IN (...) read


# ============================================================================ patterns as full-text queries


def pattern_pieces(pattern: str) -> list[list[str]] | None:
    """A `topic.word_patterns` pattern as its words, each the list of its hyphen-joined parts ("gastro[- ]?esophag\\w*
    ...reflux\\w*" -> [["gastro", "esophag"], ["reflux"]]); None for a pattern of another shape."""
    if not pattern.endswith(WORD_END):
        return None
    pieces = [[re.sub(r"\\(.)", r"\1", part) for part in piece.split(PART_GAP)]
              for piece in pattern[: -len(WORD_END)].split(WORD_GAP)]  # fmt: skip
    if not all(WORD.fullmatch(part) for piece in pieces for part in piece):
        return None
    rebuilt = WORD_GAP.join(PART_GAP.join(re.escape(p) for p in piece) for piece in pieces) + WORD_END
    return pieces if rebuilt == pattern else None


def _word_forms(parts: Sequence[str]) -> set[tuple[str, ...]]:
    """The ways a word of these parts stands in the text as index words: every spelling, parts apart or together,
    and each with one more split anywhere (a hyphen `Concept.find` reads past)."""
    forms: set[tuple[str, ...]] = set()
    for spelt in product(*(sorted(spellings(p)) for p in parts)):
        for apart in product((False, True), repeat=len(spelt) - 1):
            words = [spelt[0]]
            for part, new_word in zip(spelt[1:], apart, strict=True):
                if new_word:
                    words.append(part)
                else:
                    words[-1] += part
            forms.add(tuple(words))
            forms |= {
                (*words[:i], w[:cut], w[cut:], *words[i + 1 :]) for i, w in enumerate(words) for cut in range(1, len(w))
            }
    return forms


class ConceptQueries:
    """Full-text queries for what `Concept.find` and `Concept.find_modified` read in a record's text (cached)."""

    def __init__(self, stemmer: Stemmer):
        self.stemmer = stemmer
        self.unreadable: set[str] = set()  # patterns read as "every record" (logged once)
        self._built: dict[tuple, Query] = {}

    def text(self, concept: Concept) -> Query:
        """Records whose text may say the concept as `Concept.find` reads text: its patterns, on the text with and
        without hyphens, and its abbreviations (each a word)."""
        key = ("text", concept)
        if key not in self._built:
            queries = [self.patterns(concept)]
            for abbreviation in (p for p in concept.patterns if is_abbreviation(p)):
                bare = abbreviation.removesuffix("s?").lower()
                if not WORD.fullmatch(bare):
                    queries.append(self._unreadable(abbreviation))
                    continue
                queries += [Phrase((bare + end,)) for end in ("", "s")[: 1 + abbreviation.endswith("s?")]]
            self._built[key] = AnyOf(tuple(queries))
        return self._built[key]

    def patterns(self, concept: Concept, fewest_words: int = 1) -> Query:
        """Records whose text may match one of the concept's patterns (`Concept.regex`) spanning at least
        `fewest_words` words."""
        key = ("patterns", concept, fewest_words)
        if key not in self._built:
            patterns = [p for p in _alternatives(concept.regex.pattern) if p != "(?!)"]
            pieces = [(p, pattern_pieces(p)) for p in patterns]
            self._built[key] = AnyOf(tuple(self.words(parts) if parts is not None else self._unreadable(p)
                                           for p, parts in pieces if _span(parts) >= fewest_words))  # fmt: skip
        return self._built[key]

    def words(self, pieces: Sequence[Sequence[str]]) -> Query:
        """Records holding each word (given as its parts), in any of its forms (`_word_forms`)."""
        forms = [_word_forms(parts) for parts in pieces]
        return AllOf(tuple(AnyOf(tuple(self.phrases(sorted(piece)))) for piece in forms))

    def phrases(self, forms: Sequence[Sequence[str]]) -> list[Query]:
        """A phrase query per form (consecutive words), its last word a prefix cut where a stemmer could cut it
        (dropped when no prefix is safe)."""
        safe = stem_safe_prefixes([f[-1] for f in forms], self.stemmer)
        out: list[Query] = []
        for words in forms:
            last = safe[words[-1]]
            if last:
                out.append(Phrase((*words[:-1], last), prefix=True))
            else:
                out.append(Phrase(tuple(words[:-1])) if len(words) > 1 else EVERY_RECORD)
        return out

    def head(self, head: str) -> Query:
        """Records that may hold a modified concept's head phrase (`Concept.find_modified` searches it without a
        word boundary, so its first word may start inside a word: its later words, each at a word's start)."""
        pieces = pattern_pieces(head)
        if pieces is None:
            return self._unreadable(head)
        return self.words(pieces[1:]) if len(pieces) > 1 else EVERY_RECORD

    def modifier(self, modifier: str) -> tuple[Query, list[str]]:
        """Records that may hold a modifier pattern (`Concept.find_modified` reads it at a word's start in the
        normalised title, abstract and MeSH headings): a phrase query per way its leading words may read, and the
        first of those words (to find the MeSH headings holding them)."""
        leads = leading_words(modifier)
        if leads is None:
            return self._unreadable(modifier), []
        forms = [spelt for words in leads for spelt in product(*(sorted(spellings(w)) for w in words))]
        return AnyOf(tuple(self.phrases(forms))), sorted({words[0] for words in leads})

    def _unreadable(self, pattern: str) -> Query:
        if pattern not in self.unreadable:
            self.unreadable.add(pattern)
            log.warning("review-question candidates: pattern %r has no full-text form; its concept reads every record",
                        pattern)  # fmt: skip
        return EVERY_RECORD


def _alternatives(compiled: str) -> list[str]:
    """The patterns `topic.compile_terms` joined into one regex (\\b(?:p1|p2|...)\\b)."""
    if not (compiled.startswith(r"\b(?:") and compiled.endswith(r")\b")):
        return [compiled]
    return compiled[len(r"\b(?:") : -len(r")\b")].split("|")


def _span(pieces: list[list[str]] | None) -> int:
    """How many words a pattern's match can span at most (a word's parts apart, two words between words); a pattern of
    another shape (None) counts as spanning any number."""
    if pieces is None:
        return 1_000
    return sum(len(parts) for parts in pieces) + 2 * (len(pieces) - 1)


# A modifier pattern's leading literal: the regex subset `topic.modified_phrase` writes (\b, literals, (?:...|...)
# groups, quantifiers, \w*, \W+ and character classes)
_TOKEN = re.compile(r"\\[bBwWdDsS]|\\.|\[(?:\\.|[^\]])*\]|\(\?:|\(|\)|\||[?*+]\??|\{\d*,?\d*\}\??|.", re.S)
_QUANTIFIER = re.compile(r"[?*+]\??|\{\d*,?\d*\}\??")
Start = tuple[str, bool]  # a match's first characters, and whether the literal may still grow


def leading_words(regex: str) -> list[list[str]] | None:
    """The words every match of `regex` starts with, one list per way it can start ("\\b(?:(?:in)?adequate(?:ly)?
    respon\\w*)" -> [["inadequate", "respon"], ["inadequately", "respon"], ["adequate", "respon"], ...]); the last
    word may continue. None when a match may start otherwise (the regex does not start with \\b, a way starts with
    no letter or digit, or a construct this reader does not know)."""
    tokens = _TOKEN.findall(regex)
    if not tokens or tokens[0] != r"\b":
        return None
    try:
        starts, end = _alternation(tokens, 1)
    except ValueError:
        return None
    if end != len(tokens):
        return None
    out = []
    for text, _ in starts:
        if not re.match(r"[a-z0-9]", text.lower()):
            return None
        out.append(re.findall(r"[a-z0-9]+", text.lower()))
    return out


def _alternation(tokens: list[str], i: int) -> tuple[list[Start], int]:
    """The starts of `a|b|...` from tokens[i] to the `)` closing it or the end (returned: the index of either)."""
    starts: list[Start] = []
    while True:
        part, i = _sequence(tokens, i)
        starts += part
        if i >= len(tokens) or tokens[i] == ")":
            return list(dict.fromkeys(starts)), i
        i += 1  # "|"


def _sequence(tokens: list[str], i: int) -> tuple[list[Start], int]:
    """The starts of one alternative, atom by atom, up to the `|` or `)` that ends it."""
    starts: list[Start] = [("", True)]
    while i < len(tokens) and tokens[i] not in ("|", ")"):
        atom, i = _atom(tokens, i)
        quantifier = tokens[i] if i < len(tokens) and _QUANTIFIER.fullmatch(tokens[i]) else ""
        i += bool(quantifier)
        grown: list[Start] = []
        for text, growing in starts:
            if not growing or atom is None:  # a character class or \w: what follows is unknown
                grown.append((text, False))
            elif quantifier[:1] == "?":  # the atom or nothing
                grown += [(text, True), *((text + piece, more) for piece, more in atom)]
            elif quantifier and not re.match(r"\+|\{[1-9]", quantifier):  # any number, none included
                grown.append((text, False))
            else:  # once, or once and maybe more
                grown += [(text + piece, more and not quantifier) for piece, more in atom]
        starts = list(dict.fromkeys(grown))
    return starts, i


def _atom(tokens: list[str], i: int) -> tuple[list[Start] | None, int]:
    """One atom's starts (None: not a literal) and the index after it."""
    token = tokens[i]
    if token in ("(?:", "("):
        starts, i = _alternation(tokens, i + 1)
        if i >= len(tokens):
            raise ValueError("a group is not closed")
        return starts, i + 1
    if token in (r"\b", r"\B"):
        return [("", True)], i + 1
    if re.fullmatch(r"\\[wWdDsS]|\[.*|\.", token):
        return None, i + 1
    if _QUANTIFIER.fullmatch(token):
        raise ValueError(f"a quantifier without an atom: {token!r}")
    return [(token[1:] if token.startswith("\\") else token, True)], i + 1


# ============================================================================ the corpus through the store's indexes


class IndexCounts:
    """`topic.CorpusStatistics` of a store, read through its indexes (a heading's count and first record from
    `paper_mesh`; the records that may say a concept from the full-text index), then the candidates of a topic."""

    def __init__(self, store: Store):
        self.store = store
        self.queries = ConceptQueries(Stemmer(store))
        self._carried: dict[str, int] = {}
        self._matches: dict[tuple[Query, str | None], set[int] | None] = {}

    # ------------------------------------------------------------------ topic.CorpusStatistics
    @cached_property
    def _indexed(self) -> int:
        return self.store.conn.execute("SELECT COUNT(*) FROM paper WHERE mesh <> '[]'").fetchone()[0]

    def indexed(self) -> int:
        return self._indexed

    @cached_property
    def _headings(self) -> list[str]:
        """Every descriptor of `paper_mesh`, one index seek each (a loose index scan)."""
        rows = self.store.conn.execute(
            "WITH RECURSIVE d(x) AS (SELECT MIN(descriptor) FROM paper_mesh UNION ALL "
            "SELECT (SELECT MIN(descriptor) FROM paper_mesh WHERE descriptor > d.x) FROM d WHERE d.x IS NOT NULL) "
            "SELECT x FROM d WHERE x IS NOT NULL"
        )
        return [r[0] for r in rows]

    def headings(self) -> list[str]:
        return self._headings

    def in_corpus_order(self, headings: Sequence[str]) -> list[str]:
        first = {h: self.store.conn.execute("SELECT MIN(pmid) FROM paper_mesh WHERE descriptor = ?", (h,)).fetchone()[0]
                 for h in headings}  # fmt: skip
        mesh = {p.pmid: list(dict.fromkeys(p.mesh)) for p in self._read(sorted(set(first.values())))}
        return sorted(headings, key=lambda h: (first[h], mesh[first[h]].index(h)))

    def carried(self, heading: str) -> int:
        if heading not in self._carried:
            sql = "SELECT COUNT(*) FROM paper_mesh WHERE descriptor = ?"
            self._carried[heading] = self.store.conn.execute(sql, (heading,)).fetchone()[0]
        return self._carried[heading]

    def titled(self, concept: Concept) -> Iterable[Paper]:
        return self._read(self._match(self.queries.text(concept), "title"), with_mesh=True)

    def carrying(self, heading: str, concept: Concept) -> Iterable[Paper]:
        carrying = self._with_headings([heading])
        said = self._match(self.queries.text(concept))
        return self._read(carrying if said is None else carrying & said)

    def defining(self, concepts: Sequence[Concept]) -> Iterable[Paper]:
        found: set[int] = set()
        for concept in concepts:  # an abbreviation of 3 to 6 letters stands for as many words (topic.ABBREVIATION)
            pmids = self._match(self.queries.patterns(concept, fewest_words=3), "abstract")
            if pmids is None:
                return self._read(None)
            found |= pmids
        return self._read(found)

    # ------------------------------------------------------------------ candidates
    def concept_records(self, concept: Concept) -> set[int] | None:
        """The records that may say `concept` as the rules read it (`Concept.find` on the title, abstract and MeSH
        headings; `Concept.find_modified`); None: every record."""
        said = self._match(self.queries.text(concept))
        if said is None:
            return None
        found = said | self._with_headings(self._descriptors(concept.headings))
        for head, modifier in concept.modified:
            in_text, leads = self.queries.modifier(modifier)
            modified = self._match(in_text)
            if modified is not None:
                modified |= self._with_headings(self._descriptors_with_words(leads))
            head_records = self._match(self.queries.head(head))
            both = [s for s in (head_records, modified) if s is not None]
            if not both:
                return None
            found |= set.intersection(*both)
        return found

    def candidates(self, topic: Topic) -> list[Paper]:
        """The records that may say every population concept of `topic` (a topic with its corpus terms:
        `Topic.with_statistics(self)`), in PMID order."""
        sets = [s for s in (self.concept_records(c) for c in topic.population) if s is not None]
        return self.store.papers(sorted(set.intersection(*sets))) if sets else self._all()

    # ------------------------------------------------------------------ reads
    def _match(self, query: Query, column: str | None = None) -> set[int] | None:
        key = (query, column)
        if key not in self._matches:
            self._matches[key] = matching(self.store, query, column)
        return self._matches[key]

    def _with_headings(self, descriptors: Iterable[str]) -> set[int]:
        out: set[int] = set()
        for part in _batches(list(descriptors)):
            sql = f"SELECT pmid FROM paper_mesh WHERE descriptor IN ({','.join('?' * len(part))})"
            out.update(r[0] for r in self.store.conn.execute(sql, part))
        return out

    def _descriptors(self, headings: Sequence[str]) -> list[str]:
        """The descriptors `Concept.find` takes for a concept's headings: the heading, or one naming it."""
        if not headings:
            return []
        named = re.compile("|".join(rf"\b{re.escape(h)}\b" for h in headings))
        return [d for d in self.headings() if d in headings or named.search(d)]

    def _descriptors_with_words(self, words: Sequence[str]) -> list[str]:
        """The descriptors holding a word that starts with one of `words` (as normalised text)."""
        if not words:
            return []
        starts = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + ")")
        return [d for d in self.headings() if starts.search(normalise(d))]

    def _read(self, pmids: Iterable[int] | None, with_mesh: bool = False) -> list[Paper]:
        """Papers with PMID, title, abstract and MeSH headings only (what the corpus statistics read), in PMID order;
        None: every paper (with MeSH headings only, if `with_mesh`)."""
        where = " AND mesh <> '[]'" if with_mesh else ""
        if pmids is None:
            rows: Iterator = self.store.conn.execute(f"SELECT pmid, title, abstract, mesh FROM paper WHERE 1=1{where} "
                                                     "ORDER BY pmid")  # fmt: skip
            return [_light(r) for r in rows]
        out = []
        for part in _batches(sorted(pmids)):
            sql = f"SELECT pmid, title, abstract, mesh FROM paper WHERE pmid IN ({','.join('?' * len(part))}){where}"
            out += [_light(r) for r in self.store.conn.execute(sql, part)]
        return sorted(out, key=lambda p: p.pmid)

    def _all(self) -> list[Paper]:
        pmids = [r[0] for r in self.store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
        return [p for part in _batches(pmids) for p in self.store.papers(part)]


def _light(row) -> Paper:
    return Paper(pmid=row[0], title=row[1], abstract=row[2], mesh=json.loads(row[3]))


def _batches(items: list, size: int = BATCH) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
