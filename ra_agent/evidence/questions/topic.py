"""A goal's topic: the population, intervention and comparator concepts of its handbook's seed query, and the
words and MeSH headings that find them in a record, taken from general sources only.

Where a concept's terms come from (each a general source, none written for one review):
- its own words in the seed query (any ending, British/American spelling, with or without hyphens);
- the handbook's prose: a parenthesis right after the concept lists its kinds or synonyms ("gastro-oesophageal
  reflux disease (GORD/GERD, erosive or non-erosive oesophagitis, heartburn)");
- the MeSH headings the corpus's records carry: a heading whose words are the concept's ("Central Venous
  Catheters" for "central venous catheter"), or the heading the indexers give most records whose title says the
  concept (carried by >= half of them, >= 1.5 times as often as in the corpus, and by records that mostly say the
  concept: "Neoplasms" for "cancer"); a heading naming a linked one is narrower and counts too ("Hematologic
  Neoplasms");
- the abbreviations the records define for it ("central venous catheter (CVC)", initials checked).
Intervention and comparator concepts are classes of `evidence.classes` (WHO INN stems and ATC groups).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ra_agent.evidence.classes import PLACEBO, agents_in, classes_named, lineage
from ra_agent.evidence.questions.model import PLACEBO_ARM
from ra_agent.models import Paper

log = logging.getLogger(__name__)

# British spellings made American, at word starts ("gastro-oesophageal", not inside "gastroesophageal"), in one pass
_BRITISH = {"oesophag": "esophag", "tumour": "tumor", "haem": "hem", "randomis": "randomiz", "behaviour": "behavior",
            "paediatr": "pediatr", "leukaem": "leukem", "anaem": "anem", "oedema": "edema", "foetal": "fetal",
            "ischaem": "ischem", "centre": "center"}  # fmt: skip
_SPELLING = re.compile(r"(?:(?<![a-z])|(?<=o)(?=oesophag))(" + "|".join(_BRITISH) + ")")
# words naming who, not which condition ("people with cancer" -> cancer)
PEOPLE = re.compile(
    r"^(?:(?:the|a|an)\s+)?(?:people|persons?|patients?|participants?|individuals?|subjects?|those)"
    r"(?:\s+(?:with|who have|who has|having|suffering from|diagnosed with))?\s+",
    re.I,
)
# MeSH check tags and publication-level headings: never a concept's heading
CHECK_TAGS = frozenset((
    "Humans", "Animals", "Male", "Female", "Adult", "Aged", "Middle Aged", "Aged, 80 and over", "Young Adult",
    "Adolescent", "Child", "Child, Preschool", "Infant", "Infant, Newborn", "Pregnancy", "Treatment Outcome",
    "Prospective Studies", "Retrospective Studies", "Follow-Up Studies", "Time Factors", "Risk Factors",
    "Double-Blind Method", "Single-Blind Method", "Random Allocation",
))  # fmt: skip
MESH_MIN_RECORDS, MESH_SHARE, MESH_LIFT, MESH_REVERSE = 10, 0.5, 1.5, 0.6
# an abbreviation a record defines in parentheses: "central venous catheters (CVCs)"
ABBREVIATION = re.compile(r"\(([A-Z]{3,6})s?\)")


class TopicError(ValueError):
    """A seed query the review-question rules cannot read; the message says which part and why (one line)."""


def normalise(text: str) -> str:
    """Lower-case text with British spellings made American (oesophagus → esophagus), for matching only."""
    return _SPELLING.sub(lambda m: _BRITISH[m.group(1)], (text or "").lower())


def spellings(word: str) -> set[str]:
    """Every spelling `normalise` reads as `word` (lower case): "oesophag" and "esophag" for "esophag"; each
    American form inside the word may stand in its British spelling."""
    out = {word}
    for british, american in _BRITISH.items():
        out |= {w[:i] + british + w[i + len(american) :] for w in out for i in _occurrences(w, american)}
    return out


def _occurrences(text: str, part: str) -> list[int]:
    return [m.start() for m in re.finditer(f"(?={re.escape(part)})", text)]


def _respell(pattern: str) -> str:
    return _SPELLING.sub(lambda m: _BRITISH[m.group(1)], pattern)


def is_abbreviation(pattern: str) -> bool:
    bare = pattern.removesuffix("s?")
    return bare.isalpha() and bare.isupper()


_compiled: dict[tuple[str, ...], re.Pattern[str]] = {}


def compile_terms(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One case-insensitive regex for `patterns`, to be searched in `normalise`d text."""
    if patterns not in _compiled:
        _compiled[patterns] = re.compile(rf"\b(?:{'|'.join(_respell(p) for p in patterns) or '(?!)'})\b", re.I)
    return _compiled[patterns]


def _stem(word: str) -> str:
    """A light stem: common endings off when 5 letters stay (depression, depressive -> depress; schizophrenia,
    schizophrenic -> schizophreni)."""
    for ending in ("ions", "ion", "ives", "ive", "ed", "ing", "es", "s", "a"):
        if word.endswith(ending) and len(word) - len(ending) >= 5 and (ending != "a" or word.endswith("ia")):
            return word[: -len(ending)]
    return word


# what word_patterns puts between the parts of a hyphenated word, between words, and after the last word
PART_GAP, WORD_GAP, WORD_END = r"[- ]?", r"\w*\W+(?:\w+\W+){0,2}?", r"\w*"


def word_patterns(phrase: str) -> tuple[str, ...]:
    """The pattern of a phrase: its words in order, each stemmed with any ending, up to two words between them;
    a hyphenated word also matches written apart or together ("treatment-resistant", "treatment resistant")."""
    words = re.findall(r"[\w-]+", normalise(phrase).strip())
    pieces = [PART_GAP.join(re.escape(_stem(part)) for part in w.split("-") if part) for w in words]
    pieces = [p for p in pieces if p]
    return (WORD_GAP.join(pieces) + WORD_END,) if pieces else ()


# A first word that qualifies the condition after it: an adjective ("neovascular", "diabetic", "chronic") or a
# hyphenated qualifier ("treatment-resistant", "age-related")
MODIFIER = re.compile(r"^(?:[a-z]+-[a-z]+|[a-z]{4,}(?:al|ic|ar|ive|ous|ant|ent|ory|ary|ed|oid))$")
# words saying a condition did not respond to treatment: the general clinical vocabulary of "treatment-resistant"
RESISTANT = (r"resistan\w*|refractory|intractable|non-?respon\w*|(?:in)?adequate(?:ly)? respon\w*|partial(?:ly)? respon\w*"
             r"|fail\w* to respond|(?:not|no) respon\w*|unrespons\w*|did not improve")  # fmt: skip


def modified_phrase(phrase: str) -> tuple[str, str] | None:
    """(head pattern, modifier pattern) of a condition written "<modifier> <head>" (see `Concept.find_modified`),
    or None when its first word is no modifier or the head is a single short word."""
    words = re.findall(r"[\w-]+", normalise(phrase))
    if len(words) < 2 or not MODIFIER.match(words[0]) or len(" ".join(words[1:])) < 6:
        return None
    head = word_patterns(" ".join(words[1:]))[0]
    last = words[0].split("-")[-1]
    if re.fullmatch(RESISTANT, last):
        return head, rf"\b(?:{RESISTANT})"
    return head, rf"\b{re.escape(_stem(last)[:7])}\w*"


def _mesh_words(heading: str) -> str:
    """A MeSH heading in reading order ("Esophagitis, Peptic" -> "Peptic Esophagitis")."""
    head, _, qualifier = heading.partition(", ")
    return f"{qualifier} {head}".strip()


def _prefixes(text: str) -> set[str]:
    return {w[:6] for w in re.findall(r"[a-z0-9]+", normalise(text).replace("-", " ")) if len(w) >= 3}


@dataclass(frozen=True)
class Concept:
    """One population concept: its label, the patterns that find it in text, the MeSH headings that carry it,
    and where its terms came from."""

    label: str
    patterns: tuple[str, ...]
    headings: tuple[str, ...] = ()
    sources: tuple[str, ...] = ("seed query",)
    # (head phrase pattern, modifier pattern) of each alternative written "<modifier> <head>" ("neovascular" +
    # "age-related macular degeneration", "treatment-resistant" + "depression"): see `find_modified`
    modified: tuple[tuple[str, str], ...] = ()
    listed: tuple[str, ...] = ()  # the synonyms or kinds the handbook's prose lists for it (`Topic.with_prose`)

    @property
    def regex(self) -> re.Pattern[str]:
        """The concept's words (abbreviations excepted), matched in `normalise`d text."""
        return compile_terms(tuple(p for p in self.patterns if not is_abbreviation(p)))

    def find(self, text: str, mesh: Iterable[str] = ()) -> str | None:
        """The first words in `text` (or MeSH heading in `mesh`) that express this concept, or None."""
        plain = normalise(text)
        for version in (plain, plain.replace("-", "")):
            match = self.regex.search(version)
            if match:
                return match.group(0)
        capitals = [p for p in self.patterns if is_abbreviation(p)]
        match = re.search(rf"\b(?:{'|'.join(capitals)})\b", text or "") if capitals else None
        if match:
            return match.group(0)
        for heading in mesh:
            if any(heading == h or re.search(rf"\b{re.escape(h)}\b", heading) for h in self.headings):
                return f"MeSH {heading}"
        return None

    def find_modified(self, subject: str, record: str) -> str | None:
        """The concept said in two places: its head phrase in `subject` (a title or a sentence stating who was
        studied) and its modifier anywhere in `record` ("choroidal neovascularization in age-related macular
        degeneration" for "neovascular age-related macular degeneration"; "depression" with "failed to respond to
        antidepressants" for "treatment-resistant depression"), or None."""
        plain, whole = normalise(subject), normalise(record)
        for head, modifier in self.modified:
            match = re.search(head, plain)
            if match and (said := re.search(modifier, whole)):
                return f"{match.group(0)} ({said.group(0)})"
        return None


@dataclass(frozen=True)
class Topic:
    """A goal's topic: population concepts (all must hold), intervention classes (one must hold) and comparator
    classes (empty: any comparator; PLACEBO_ARM for placebo or no treatment)."""

    population: tuple[Concept, ...]
    intervention: tuple[str, ...]
    seed_query: str = ""
    comparator: tuple[str, ...] = ()

    @classmethod
    def from_seed_query(cls, seed_query: str) -> Topic:
        """The concepts of a seed query. A boolean query: each AND-clause is one concept (its OR-alternatives its
        terms); the first clause naming a treatment class or agent is the intervention, a later one naming
        treatments or placebo the comparator, every other clause a population concept. A query without AND is
        read as words ("proton pump inhibitors for reflux": intervention for/in population). TopicError when it
        names no population or no intervention the class table knows. Field tags and quotes are dropped."""
        text = re.sub(r"\[[^\]]*\]|\"", " ", seed_query or "")
        text = re.split(r"\s+NOT\s+", text)[0]
        clauses = [c for c in re.split(r"\s+AND\s+", text) if c.strip(" ()")]
        if len(clauses) == 1 and not re.search(r"\s+OR\s+", clauses[0]):
            clauses = _clauses_of_words(clauses[0])
        population, intervention, comparator, unknown = [], [], [], []
        for clause in clauses:
            alternatives = [a.strip(" ()") for a in re.split(r"\s+OR\s+", clause.strip(" ()")) if a.strip(" ()")]
            named = [c for a in alternatives for c in _classes_in(a)]
            placebo = any(PLACEBO.search(a) for a in alternatives)
            if named or placebo:
                wanted = comparator if intervention else intervention
                wanted.extend(c for c in [*named, *([PLACEBO_ARM] if placebo else [])] if c not in wanted)
                unknown += [a for a in alternatives if not _classes_in(a) and not PLACEBO.search(a)]
            elif alternatives:
                patterns = tuple(p for a in alternatives for p in word_patterns(PEOPLE.sub("", a)))
                modified = tuple(m for a in alternatives if (m := modified_phrase(PEOPLE.sub("", a))))
                population.append(Concept(" or ".join(PEOPLE.sub("", a) for a in alternatives), patterns,
                                          modified=modified))  # fmt: skip
        if unknown:
            log.info("seed query %r: %s not in the class table (evidence.classes); left out", seed_query, unknown)
        if PLACEBO_ARM in intervention:
            raise TopicError(f"seed query {seed_query!r}: placebo cannot be the intervention")
        if not intervention:
            raise TopicError(
                f"seed query {seed_query!r} names no intervention the class table knows (evidence/classes.py: "
                "WHO INN stems, ATC groups, psychological therapy families)"
            )
        if not population:
            raise TopicError(
                f"seed query {seed_query!r} names no population or condition (write 'I AND P' or 'I for P')"
            )
        return cls(_narrowest(population), tuple(intervention), seed_query, tuple(comparator))

    def with_prose(self, prose: str) -> Topic:
        """The topic with the synonyms or kinds the handbook's prose lists in a parenthesis right after a
        population concept ("... reflux disease (GORD/GERD, erosive or non-erosive oesophagitis, heartburn)")."""
        concepts = []
        for concept in self.population:
            extra: list[str] = []
            for text in (normalise(prose), normalise(prose).replace("-", "")):
                for match in concept.regex.finditer(text):
                    inside = re.match(r"\w*(?:\s+\w+)?\s*\(([^()]{2,300})\)", text[match.end() :])
                    if inside:
                        extra += [t for t in _listed(inside.group(1)) if t not in extra]
            patterns = tuple(dict.fromkeys([*concept.patterns, *(p for t in extra for p in word_patterns(t))]))
            sources = (*concept.sources, "handbook prose") if extra else concept.sources
            concepts.append(replace(concept, patterns=patterns, sources=sources, listed=tuple(extra)))
        return replace(self, population=tuple(concepts))

    def definition(self) -> str:
        """What the handbook's prose adds to the seed query's concepts, in words ("" when nothing): part of a
        question's identity, since two handbooks whose prose lists other synonyms ask about other people."""
        return "; ".join(f"{c.label}: {', '.join(sorted(c.listed))}" for c in self.population if c.listed)

    def with_corpus(self, papers: Sequence[Paper]) -> Topic:
        """The topic with the MeSH headings and the abbreviations the records themselves give its concepts."""
        return self.with_statistics(PaperCounts(papers))

    def with_statistics(self, corpus: CorpusStatistics) -> Topic:
        """`with_corpus` over the corpus `corpus` reads: records in memory (`PaperCounts`), or the store's indexes
        (`questions.candidates.IndexCounts`); the same topic from the same records."""
        return _with_abbreviations(_with_headings(self, corpus), corpus)

    def versus(self) -> str:
        """The comparators in words, "" when the query names none; one of the intervention's own class is the rest
        of that class ("lansoprazole or pantoprazole versus omeprazole": versus another proton pump inhibitor)."""
        return " or ".join(f"another {c}" if c in self.intervention else c for c in self.comparator)

    def describe(self) -> str:
        return (
            f"population: {' AND '.join(c.label for c in self.population) or 'any'}; "
            f"intervention: {' or '.join(self.intervention)}; comparator: {self.versus() or 'any'}"
        )

    def terms(self) -> list[str]:
        """Each population concept with where its terms came from (for dossiers)."""
        out = []
        for c in self.population:
            heads = f"; MeSH {', '.join(c.headings)}" if c.headings else ""
            out.append(f"{c.label} ({', '.join(c.sources)}{heads})")
        return out


def _classes_in(text: str) -> list[str]:
    return list(dict.fromkeys([*classes_named(text), *(a.cls for a in agents_in(text))]))


def _clauses_of_words(text: str) -> list[str]:
    """A seed query written as words: "proton pump inhibitors for reflux", "anticoagulation for people with cancer
    and central venous catheters" -> the intervention part and each population part as clauses."""
    parts = re.split(r"\s+(?:for|in|among|to (?:treat|prevent))\s+", text.strip(" ()"), maxsplit=1, flags=re.I)
    if len(parts) < 2:
        return [text]
    treatment, people = parts
    versus = re.split(r"\s+(?:versus|vs\.?|compared (?:with|to))\s+", treatment, flags=re.I)
    people = PEOPLE.sub("", people.strip())
    concepts = [PEOPLE.sub("", c) for c in re.split(r"\s+(?:and|with|who have|in|among)\s+", people, flags=re.I)]
    return [*versus, *(c for c in concepts if c.strip())]


def _listed(inside: str) -> list[str]:
    """Terms listed in a parenthesis: split at , ; / and "or"; "erosive or non-erosive oesophagitis" is
    oesophagitis of either kind, so the head noun itself. Line breaks are spaces: a handbook wraps its prose
    anywhere ("erosive or\nnon-erosive oesophagitis")."""
    inside = " ".join(inside.split())
    out = []
    for item in re.split(r"\s*[,;/]\s*", re.sub(r"^(?:e\.g\.|i\.e\.|such as|including)\s*", "", inside.strip())):
        either = re.fullmatch(r"([\w-]+) or (?:non-?|un)\1 (.+)", item.strip())
        if either:
            out.append(either.group(2))
            continue
        if re.match(r"(?:with|without|and|or|in|of|for|any|all|other)\b", item.strip(), re.I):
            continue  # "with or without aura": a qualifier of the concept itself, not a name of it
        out += [t.strip() for t in re.split(r"\s+or\s+", item) if len(t.strip()) >= 3]
    return [t for t in out if not re.fullmatch(r"(?:with|without|and|other|others|etc\.?)", t, re.I)]


class CorpusStatistics(Protocol):
    """What `Topic.with_statistics` reads of a corpus: MeSH heading counts, and the records that may say a concept
    (more records than say it are fine, the rules here read each; never fewer), in PMID order (as the corpus holds
    them, for records in memory)."""

    def indexed(self) -> int:
        """How many records carry MeSH headings."""
        ...

    def headings(self) -> list[str]:
        """Every heading the records carry."""
        ...

    def in_corpus_order(self, headings: Sequence[str]) -> list[str]:
        """`headings` in the order the corpus first carries them (records in order, each record's headings in its
        own order)."""
        ...

    def carried(self, heading: str) -> int:
        """How many records carry `heading`."""
        ...

    def titled(self, concept: Concept) -> Iterable[Paper]:
        """Records carrying headings whose title may say `concept`."""
        ...

    def carrying(self, heading: str, concept: Concept) -> Iterable[Paper]:
        """The records carrying `heading` whose title or abstract may say `concept` (every one that does)."""
        ...

    def defining(self, concepts: Sequence[Concept]) -> Iterable[Paper]:
        """Records whose abstract may define an abbreviation of one of `concepts` ("central venous catheter (CVC)")."""
        ...


class PaperCounts:
    """`CorpusStatistics` of records in memory: every record is read."""

    def __init__(self, papers: Sequence[Paper]):
        self.papers = papers
        self.with_mesh = [p for p in papers if p.mesh]
        self.counts = Counter(h for p in self.with_mesh for h in dict.fromkeys(p.mesh))

    def indexed(self) -> int:
        return len(self.with_mesh)

    def headings(self) -> list[str]:
        return list(self.counts)

    def in_corpus_order(self, headings: Sequence[str]) -> list[str]:
        order = {h: i for i, h in enumerate(self.counts)}
        return sorted(headings, key=order.__getitem__)

    def carried(self, heading: str) -> int:
        return self.counts[heading]

    def titled(self, concept: Concept) -> Iterable[Paper]:
        return self.with_mesh

    def carrying(self, heading: str, concept: Concept) -> Iterable[Paper]:
        return [p for p in self.with_mesh if heading in p.mesh]

    def defining(self, concepts: Sequence[Concept]) -> Iterable[Paper]:
        return self.papers


def _with_headings(topic: Topic, corpus: CorpusStatistics) -> Topic:
    """Link each population concept to the MeSH headings the records carry for it (see the module text)."""
    indexed = corpus.indexed()
    if not indexed:
        return topic
    headings = corpus.headings()
    concepts = []
    for concept in topic.population:
        words = _prefixes(concept.label)
        named = corpus.in_corpus_order([h for h in headings if h not in CHECK_TAGS and words and words <= _prefixes(h)])
        titled = [p for p in corpus.titled(concept) if p.mesh and concept.find(p.title)]
        linked = []
        if len(titled) >= MESH_MIN_RECORDS:
            share = Counter(h for p in titled for h in dict.fromkeys(p.mesh))
            for heading, n in share.most_common(20):
                if heading in CHECK_TAGS or heading in named or agents_in(heading) or corpus.carried(heading) < 5:
                    continue
                carried = corpus.carried(heading)
                lift = (n / len(titled)) / (carried / indexed)
                if n / len(titled) < MESH_SHARE or lift < MESH_LIFT:
                    continue
                saying = [p for p in corpus.carrying(heading, concept) if concept.find(f"{p.title} {p.abstract}")]
                if len(saying) / carried >= MESH_REVERSE:
                    linked.append(heading)
        if named or linked:
            patterns = (*concept.patterns, *(p for h in linked for p in word_patterns(_mesh_words(h))))
            concept = replace(concept, patterns=tuple(dict.fromkeys(patterns)),
                              headings=tuple(dict.fromkeys([*named, *linked])),
                              sources=(*concept.sources, "MeSH headings of the records"))  # fmt: skip
        concepts.append(concept)
    return replace(topic, population=tuple(concepts))


def _with_abbreviations(topic: Topic, corpus: CorpusStatistics) -> Topic:
    """The topic with the abbreviations the records define for its concepts ("central venous catheter (CVC)" →
    CVC also matches), read from the records themselves (the letters must be the initials of the words)."""
    found: dict[str, set[str]] = {c.label: set() for c in topic.population}
    for paper in corpus.defining(topic.population):
        text = paper.abstract or ""
        for match in ABBREVIATION.finditer(text):
            abbreviation = match.group(1)
            words = re.findall(r"[A-Za-z]+", text[max(0, match.start() - 80) : match.start()])[-len(abbreviation) :]
            if "".join(w[0] for w in words).upper() != abbreviation:
                continue
            for concept in topic.population:
                if concept.regex.fullmatch(normalise(" ".join(words))) and len(found[concept.label]) < 5:
                    found[concept.label].add(abbreviation)
    population = tuple(
        replace(c, patterns=c.patterns + tuple(sorted(a for a in found[c.label] if a not in c.patterns)))
        for c in topic.population
    )
    return replace(topic, population=population)


# ============================================================================ spawned goals


@dataclass(frozen=True)
class TopicDecision:
    """keep_to_topic's answer: the seed query to use (None: skipped), what was done, and why it was skipped."""

    seed_query: str | None
    note: str = ""
    skipped: str = ""


def _narrower_or_same(child: str, parent: str) -> bool:
    return child == parent or parent in lineage(child)


def keep_to_topic(parent_seed: str | None, child_seed: str, parent_prose: str = "") -> TopicDecision:
    """A spawned goal's seed query kept inside its parent's question. A child narrows the parent's question (a
    sub-population, a comparator, an outcome, a newer period); it never moves to another condition, broadens the
    intervention or drops the comparator.

    - a child naming every population concept of the parent's (its words, or the synonyms `parent_prose` lists) is
      kept as it is; one lacking some has the parent's
      query ANDed in front of it (so it can only narrow the parent's question);
    - a child whose own intervention is broader than the parent's (anticoagulants under an LMWH parent), or whose
      question drops the parent's comparator, is skipped: `skipped` says why."""
    if not parent_seed or not child_seed:
        return TopicDecision(child_seed)
    try:
        parent = Topic.from_seed_query(parent_seed).with_prose(parent_prose)
    except TopicError:
        return TopicDecision(child_seed)  # the parent has no review question to keep to
    child_classes = _classes_in(child_seed)
    broader = [c for c in child_classes if any(c in lineage(p) and c != p for p in parent.intervention)]
    if broader and not any(any(_narrower_or_same(c, p) for p in parent.intervention) for c in child_classes):
        return TopicDecision(None, skipped=f"it broadens the intervention ({', '.join(broader)} is broader than "
                                           f"{' or '.join(parent.intervention)})")  # fmt: skip
    missing = [c.label for c in parent.population if c.find(child_seed) is None]
    query, note = child_seed, ""
    if missing:
        query = f"({parent_seed}) AND ({child_seed})"
        note = f"kept inside the parent's topic (it lacked {', '.join(missing)})"
    try:
        final = Topic.from_seed_query(query)
    except TopicError as exc:
        return TopicDecision(None, skipped=f"its question cannot be read ({exc})")
    dropped = [c for c in parent.comparator if not any(_narrower_or_same(f, c) for f in final.comparator)]
    if dropped:
        return TopicDecision(None, skipped=f"it drops the parent's comparator ({', '.join(dropped)})")
    return TopicDecision(query, note)


def _narrowest(population: Sequence[Concept]) -> tuple[Concept, ...]:
    """The population concepts without one that another makes redundant: "reflux" ANDed with "gastroesophageal
    reflux" asks nothing more (each alternative of the narrower concept says the broader one's words); of two
    concepts that say each other, the first is kept."""

    def says(narrow: Concept, broad: Concept) -> bool:
        return all(broad.find(alternative) for alternative in narrow.label.split(" or "))

    return tuple(c for i, c in enumerate(population)
                 if not any(j != i and says(d, c) and (j < i or not says(c, d)) for j, d in enumerate(population)))  # fmt: skip
