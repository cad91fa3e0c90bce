"""The learned PICO tagger: a linear-chain CRF over token features, trained on EBM-NLP labels, and its spans as fields.

Tokens get P / I / O labels (EBM-NLP's I-PAR, I-INT, I-OUT); contiguous runs are spans. Spans become ra's fields:
P the most confident population span, I and C the distinct intervention spans split by the trial's arm structure
(control arms such as placebo or usual care, and the arm the rules call the comparator, go to C), O the most confident
distinct outcome spans. StudyDesign, PopulationAge and SampleSize stay with the design and population rules. Every
value carries the sentence it came from as its cue. `scripts/train_pico_tagger.py` builds the shipped model
(deterministic: the same data give the same file).
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from ra_agent.evidence.pico.arms import _DOSE_ONLY, find_arms
from ra_agent.evidence.pico.design import find_design
from ra_agent.evidence.pico.ebmnlp import FIELD_LABELS, LabelledAbstract, content_tokens, section_label
from ra_agent.evidence.pico.population import find_age, find_sample_size
from ra_agent.evidence.pico.text import Doc, Found, _snippet, sentences
from ra_agent.models import Paper

MODEL_PATH = Path(__file__).with_name("models") / "pico-crf-v1.crfsuite"
MODEL_BASE = "learned:pico-crf-v1"
LABELS = {v: k for k, v in FIELD_LABELS.items()}  # "I-PAR" → "P", ...
MAX_ARMS = 2
MORE_ARMS_CONFIDENCE = 0.95  # an experimental arm after the first is named only when the tagger is this sure of it
MAX_OUTCOMES = 3
ARM_WORDS = 8  # arms of more content words than this rank after the shorter ones
MAX_SPAN_TOKENS = 40
# A span is kept when the tagger's mean marginal probability of its label is at least this much. These thresholds and
# the arm and outcome counts were chosen with a model trained on PMIDs = 0 mod 4 and scored on PMIDs = 2 mod 4 (both
# inside the training half), never on the held-out half.
MIN_CONFIDENCE = {"P": 0.8, "I": 0.7, "O": 0.8}

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
_GENERIC = frozenset(
    "treatment treatments therapy therapies group groups arm arms intervention interventions drug drugs study "
    "medication medications regimen regimens both two three all each either active control controls".split()
)
_GENERIC_OUTCOME = frozenset(
    "efficacy safety tolerability effectiveness effect effects outcome outcomes results response clinical effective "
    "safe tolerated well superior better".split()
)
_DESIGN_WORDS = frozenset(
    "double single triple blind placebo controlled randomized randomised open label crossover parallel trial study "
    "group groups".split()
)


class PicoModelError(RuntimeError):
    """The shipped PICO model file is missing or unreadable; the message names the file."""


# --------------------------------------------------------------------------- tokens and features


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


# --------------------------------------------------------------------------- the view both training and tagging read


@dataclass
class TaggedSentence:
    """One sentence of an abstract: its text, section label, tokens with offsets, and (after tagging) their labels."""

    text: str
    label: str
    tokens: list[tuple[str, int, int]]
    tags: list[str]
    confidence: list[float] | None = None  # the tagger's marginal probability of each token's label


def paper_sentences(paper: Paper) -> list[TaggedSentence]:
    """The title, then each sentence of each section, tokenized (tags all "O" until tagged)."""
    doc = Doc(paper)
    out = [TaggedSentence(paper.title, "title", tokenize(paper.title), [])]
    for section in doc.sections:
        for text in sentences(section.text):
            out.append(TaggedSentence(text, section.label, tokenize(text), []))
    return [s for s in out if s.tokens]


def paper_items(rows: Sequence[TaggedSentence]) -> list[list[list[str]]]:
    """Features of every sentence of one abstract."""
    total = len(rows)
    return [
        sentence_features([t for t, _, _ in row.tokens], section_kinds(row.label), _position(i, total))
        for i, row in enumerate(rows)
    ]


def training_sequences(doc: LabelledAbstract) -> list[tuple[list[list[str]], list[str]]]:
    """(features, labels) per sentence of a labelled abstract, read the way tagging reads a paper: the title,
    then sentences with their section label (the ALL-CAPS lead words, carried to the section's later sentences)
    taken off the text and given as a feature."""
    units = doc.units
    total = len(units)
    out = []
    current = ""
    for i, unit in enumerate(units):
        if i == 0:
            label, tokens = "title", unit
        else:
            lead = section_label(unit)
            tokens = unit[len(lead.split()) :] if lead else unit
            if lead:
                current = lead
                tokens = tokens[1:] if tokens[:1] and tokens[0].text == ":" else tokens
            label = current
        if not tokens:
            continue
        words = [t.text for t in tokens]
        out.append((sentence_features(words, section_kinds(label), _position(i, total)), [t.label for t in tokens]))
    return out


# --------------------------------------------------------------------------- the model


@cache
def model_version() -> str:
    """The shipped model's name and the first 8 hex digits of its SHA-256 ("learned:pico-crf-v1@1a2b3c4d")."""
    try:
        digest = hashlib.sha256(MODEL_PATH.read_bytes()).hexdigest()[:8]
    except OSError as exc:
        raise PicoModelError(f"{MODEL_PATH}: PICO model unreadable ({exc}); run scripts/train_pico_tagger.py") from exc
    return f"{MODEL_BASE}@{digest}"


@cache
def crf_tagger():
    """The shipped CRF, opened once per process."""
    import pycrfsuite

    tagger = pycrfsuite.Tagger()  # pyright: ignore[reportAttributeAccessIssue] - compiled module, no stubs
    try:
        tagger.open(str(MODEL_PATH))
    except (OSError, ValueError) as exc:
        raise PicoModelError(f"{MODEL_PATH}: cannot open the PICO model ({exc})") from exc
    return tagger


def tag_paper(paper: Paper) -> list[TaggedSentence]:
    """The paper's sentences with a P / I / O / "O" (outside) label per token."""
    rows = paper_sentences(paper)
    tagger = crf_tagger()
    for row, items in zip(rows, paper_items(rows), strict=True):
        labels = tagger.tag(items)
        row.tags = [LABELS.get(t, "") for t in labels]
        row.confidence = [tagger.marginal(t, i) if t != "O" else 1.0 for i, t in enumerate(labels)]
    return rows


# --------------------------------------------------------------------------- spans to fields


@dataclass(frozen=True)
class Span:
    field: str  # "P", "I" or "O"
    text: str
    sentence: int  # index into the tagged sentences (0 = title)
    start: int  # token index of the span's first token in the whole abstract
    confidence: float = 1.0  # mean marginal probability of the span's label over its tokens

    @property
    def key(self) -> frozenset[str]:
        return frozenset(content_tokens(self.text))


_TRIM_LEAD = re.compile(
    r"^(?:(?:the|a|an|of|and|or|with|in|to|for|on|either|both|receive|received|total of|overall)\s+)+", re.I
)
_ENROLLED = re.compile(  # a P or O span's own verb and what follows ("... were enrolled", "... was low")
    r"(?<!\bwho)(?<!\bthat)(?<!\bwhich)\s+(?:has|have|had|is|are|was|were)\b.*$",
    re.I,
)
_TRIM_TAIL = re.compile(r"(?:\s+(?:the|a|an|of|and|or|with|in|to|for|on|was|were|at|by))+$|[\s,;:(\[]+$", re.I)


_ARM_MARK = re.compile(r"(?:^|(?<=\s))\(?(?:[IVX]{1,4}|[A-Ha-h]|[1-9])\)\s*")  # "II) ", "(b) "
_SIZE_NOTE = re.compile(r"\s*\(?\s*\b[nN]\s*=\s*\d+\s*\)?")  # "(n = 40)"
_ARM_SPLIT = re.compile(r"\s*;\s*|,?\s+(?:vs\.?|versus|compared (?:with|to)|or)\s+", re.I)
_CONTROL = re.compile(
    r"^(?:(?:an?|the|identical|matching|matched|inactive|dummy|oral|intravenous|saline)\s+)*"
    r"(?:placebos?|sham|vehicle|usual care|standard care|no (?:treatment|therapy|intervention|supplementation))\b|"
    r"^(?:the\s+)?controls?(?:\s+(?:groups?|arms?|conditions?|subjects|patients))?$",
    re.I,
)


_CLAUSE = re.compile(r"\s+(?:was|were|is|are|had|has|have|who|which|that)\b.*$", re.I)
_LEAD_LABEL = re.compile(r"^[^:]{1,40}:\s+(?=\S)")  # "card data: daily resolution ..."


def split_arms(text: str) -> list[str]:
    """An intervention span cut into its arms ("A vs. B", "A; B"), arm markers and "(n = 40)" notes dropped."""
    text = _SIZE_NOTE.sub("", _ARM_MARK.sub("", text))
    parts = (_clean(_CLAUSE.sub("", part)) for part in _ARM_SPLIT.split(text))
    return [p for p in parts if content_tokens(p) and not _DOSE_ONLY.match(p) and not _names_design(p)]


def _names_design(text: str) -> bool:
    """Whether a span only names the design ("placebo-controlled", "double-blind"), not an arm."""
    words = set(content_tokens(text))
    return words <= _DESIGN_WORDS and bool(words - {"placebo", "group", "groups"})


def _clean(text: str) -> str:
    """A span without leading/trailing function words and with balanced parentheses: one that closes a parenthesis
    before opening one ends there ("pantoprazole) and 57 and 67% (ranitidine" → "pantoprazole")."""
    close, open_ = text.find(")"), text.find("(")
    if close >= 0 and (open_ < 0 or close < open_) and content_tokens(text[:close]):
        text = text[:close]
    text = _TRIM_TAIL.sub("", _TRIM_LEAD.sub("", text.strip(" ,;:.")))
    if text.count("(") > text.count(")"):
        text = text[: text.rfind("(")].rstrip(" ,;:") if text.rfind("(") > 0 else text.replace("(", "")
    if text.count(")") > text.count("("):
        text = text.replace(")", "") if not text.startswith(")") else text.lstrip(") ")
    return text.strip()


def spans(rows: Sequence[TaggedSentence]) -> list[Span]:
    """Contiguous runs of one label, as the text they cover in their sentence."""
    out: list[Span] = []
    offset = 0
    for index, row in enumerate(rows):
        i = 0
        while i < len(row.tags):
            tag = row.tags[i]
            j = i
            while j + 1 < len(row.tags) and row.tags[j + 1] == tag:
                j += 1
            if tag:
                j_end = min(j, i + MAX_SPAN_TOKENS - 1)
                text = row.text[row.tokens[i][1] : row.tokens[j_end][2]]
                conf = row.confidence[i : j_end + 1] if row.confidence else [1.0]
                mean = sum(conf) / len(conf)
                if mean >= MIN_CONFIDENCE[tag]:
                    if tag == "I":
                        parts = split_arms(text)
                    else:
                        cleaned = _clean(_LEAD_LABEL.sub("", _ENROLLED.sub("", text)))
                        parts = [cleaned] if content_tokens(cleaned) else []
                    out += [Span(tag, part, index, offset + i, mean) for part in parts]
            i = j + 1
        offset += len(row.tokens)
    return out


def _distinct(candidates: Iterable[Span], generic: frozenset[str] = _GENERIC) -> list[Span]:
    """Spans that say more than generic words, one per family: a span whose content words are a subset of a kept
    span's is dropped, and one whose content words include a kept span's takes its place ("omeprazole" →
    "omeprazole 20 mg")."""
    kept: list[Span] = []
    for span in candidates:
        key = span.key
        if not key - generic or any(key <= k.key for k in kept):
            continue
        wider = [i for i, k in enumerate(kept) if k.key < key]
        if wider:
            kept[wider[0]] = span
            kept = [k for i, k in enumerate(kept) if i == wider[0] or i not in wider]
        else:
            kept.append(span)
    return kept


def _cue(rows: Sequence[TaggedSentence], span: Span, name: str) -> str:
    row = rows[span.sentence]
    where = "title" if span.sentence == 0 else f"sentence {span.sentence}" + (f" ({row.label})" if row.label else "")
    return f"{name} {where}: '{_snippet(row.text, 120)}'"


def _population(found: list[Span]) -> Span | None:
    """The most confident population span outside the title, the earliest on ties; the title's as fallback."""
    body = [s for s in found if s.sentence > 0] or found
    return max(body, key=lambda s: (s.confidence, -s.start), default=None)


def _arms(found: list[Span], rules_c: str) -> tuple[list[Span], list[Span]]:
    """Intervention spans as (experimental arms, comparator arms): an arm is a comparator when it reads as a control
    (placebo, sham, usual care, no treatment, control) or is the arm the rules took as the comparator; experimental
    arms are ranked short ones first, then by how often they are named, then by first mention."""
    control_words = set(content_tokens(rules_c)) - _GENERIC
    distinct = _distinct(found)
    counts = {id(s): sum(bool(s.key & o.key - _GENERIC) for o in found) for s in distinct}
    control, active = [], []
    for span in distinct:
        is_control = _CONTROL.match(span.text) or (control_words and span.key - _GENERIC <= control_words)
        (control if is_control else active).append(span)
    ranked = sorted(active, key=lambda s: (len(s.key) > ARM_WORDS, -counts[id(s)], s.start))
    ranked = ranked[:1] + [s for s in ranked[1:] if s.confidence >= MORE_ARMS_CONFIDENCE][: MAX_ARMS - 1]
    return sorted(ranked, key=lambda s: s.start), control[:MAX_ARMS]


def _outcomes(found: list[Span]) -> list[Span]:
    """The most confident distinct outcome spans, in text order."""
    ranked = sorted(found, key=lambda s: (-s.confidence, s.start))
    return sorted(_distinct(ranked, _GENERIC_OUTCOME)[:MAX_OUTCOMES], key=lambda s: s.start)


def fields_from_spans(
    rows: Sequence[TaggedSentence], name: str, rules_c: str = ""
) -> tuple[dict[str, str], dict[str, str]]:
    """(field → value, field → cue) of P, I, C and O from the tagged sentences."""
    found = spans(rows)
    by_field = {f: [s for s in found if s.field == f] for f in ("P", "I", "O")}
    values: dict[str, str] = {}
    cues: dict[str, str] = {}
    population = _population(by_field["P"])
    if population:
        values["P"], cues["P"] = population.text, _cue(rows, population, name)
    active, control = _arms(by_field["I"], rules_c)
    named = [s for s in control if not _CONTROL.match(s.text)]  # comparators only by the rules' hint
    if not active and named:  # the only named arm is the intervention, whatever the rules took it for
        active, control = named[:1], [s for s in control if s is not named[0]]
    for key, chosen in (("I", active), ("C", control), ("O", _outcomes(by_field["O"]))):
        if chosen:
            values[key] = "; ".join(s.text for s in chosen)
            cues[key] = " | ".join(_cue(rows, s, name) for s in chosen)
    return values, cues


def extract(paper: Paper) -> dict[str, Found]:
    """Every field for one paper: P, I, C, O from the tagger's spans; StudyDesign, PopulationAge and SampleSize
    (and the comparator hint from the arm structure) from the rules."""
    name = model_version()
    doc = Doc(paper)
    _, rules_c = find_arms(doc)
    values, cues = fields_from_spans(tag_paper(paper), name, rules_c.value if rules_c else "")
    found = {k: Found(v, cues[k]) for k, v in values.items()}
    for key, rule in (("StudyDesign", find_design), ("PopulationAge", find_age), ("SampleSize", find_sample_size)):
        hit = rule(doc)
        if hit is not None and hit.value:
            found[key] = hit
    return found


__all__ = [
    "MODEL_BASE",
    "MODEL_PATH",
    "crf_tagger",
    "PicoModelError",
    "Span",
    "TaggedSentence",
    "extract",
    "fields_from_spans",
    "model_version",
    "paper_items",
    "paper_sentences",
    "section_kinds",
    "sentence_features",
    "spans",
    "tag_paper",
    "tokenize",
    "training_sequences",
]
