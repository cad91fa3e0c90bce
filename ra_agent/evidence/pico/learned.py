"""The learned PICO tagger: linear-chain CRFs over token features, trained on EBM-NLP labels, and its spans as fields.

Two CRFs label tokens: the P/I/O tagger (EBM-NLP's crowd labels I-PAR, I-INT, I-OUT) gives P and O, the intervention
tagger (the expert intervention labels of EBM-NLP's difficulty release) gives I. Contiguous runs are spans. Spans
become ra's fields: P the most confident population span, I and C the distinct intervention spans split by the trial's
arm structure (control arms such as placebo or usual care go to C; otherwise the second arm named, or the rules'
comparator when the tagger names none), O the most confident distinct outcome spans that are not treatments.
StudyDesign, PopulationAge and SampleSize stay with the design and population rules. Every value carries the sentence
it came from as its cue. `scripts/train_pico_tagger.py` builds the shipped models (deterministic: the same data give
the same files); `scripts/tune_pico_spans.py` chose the span rules on dev parts.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ra_agent.evidence.pico.arms import _DOSE_ONLY, _KEY_STOP, _key_word, _rank_active, comparison_votes, find_arms
from ra_agent.evidence.pico.crf_features import _position, section_kinds, sentence_features, tokenize
from ra_agent.evidence.pico.design import find_design
from ra_agent.evidence.pico.ebmnlp import FIELD_LABELS, LabelledAbstract, content_tokens, section_label
from ra_agent.evidence.pico.population import (
    find_age,
    find_population,
    find_sample_size,
    people_phrase,
    population_phrase,
)
from ra_agent.evidence.pico.rules import RULES_NAME
from ra_agent.evidence.pico.text import Doc, Found, _snippet, sentences
from ra_agent.models import Paper

MODEL_PATH = Path(__file__).with_name("models") / "pico-crf-v1.crfsuite"
INTERVENTION_MODEL_PATH = MODEL_PATH.with_name("pico-crf-int-v1.crfsuite")
MODEL_BASE = "learned:pico-crf-v2"
LABELS = {v: k for k, v in FIELD_LABELS.items()}  # "I-PAR" → "P", ...
MAX_ARMS = 2
COMPARATOR_MENTIONS = 2  # a second active arm is the comparator when named this often (or the rules name it)
ARM_WORDS = 8  # arms of more content words than this rank after the shorter ones
MAX_SPAN_TOKENS = 40


@dataclass(frozen=True)
class SpanRules:
    """A span is kept when the tagger's mean marginal probability of its label reaches the field's minimum, picked by
    scripts/tune_pico_spans.py (trained on PMIDs = 0, scored on 2 mod 4 of the training half; never the held-out)."""

    min_p: float = 0.6
    min_i: float = 0.5
    min_o: float = 0.8
    outcome_floor: float = 0.3  # no outcome span reaches min_o: the most confident one at or above this is taken
    more_arms: float = 0.95  # an experimental arm after the first is named only when the tagger is this sure of it
    max_outcomes: int = 3

    def minimum(self, field_name: str) -> float:
        return {"P": self.min_p, "I": self.min_i, "O": self.min_o}[field_name]


SPAN_RULES = SpanRules()

_GENERIC = frozenset(
    "treatment treatments therapy therapies group groups arm arms intervention interventions drug drugs study "
    "medication medications regimen regimens both two three all each either active control controls".split()
)
_GENERIC_OUTCOME = frozenset(
    "efficacy safety tolerability effectiveness effect effects outcome outcomes results response clinical effective "
    "safe tolerated well superior better".split()
)
# Drug-name stems of the WHO International Nonproprietary Names (common ones): a word ending so names a drug.
_DRUG_STEM = re.compile(
    r"(?:azepam|azolam|caine|cillin|conazole|coxib|cycline|dipine|dronate|floxacin|gliptin|glitazone|lukast|mab|"
    r"mycin|nidazole|olol|parin|platin|pride|prazole|pril|profen|rubicin|sartan|semide|setron|statin|taxel|terol|"
    r"tidine|tinib|toin|trexate|triptan|vir|zosin)$"
)
_DESIGN_WORDS = frozenset(
    "double single triple blind placebo controlled randomized randomised open label crossover parallel trial study "
    "group groups".split()
)


class PicoModelError(RuntimeError):
    """The shipped PICO model file is missing or unreadable; the message names the file."""


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


def _model_files() -> tuple[Path, Path]:
    return MODEL_PATH, INTERVENTION_MODEL_PATH


@cache
def model_version() -> str:
    """The tagger's name and the first 8 hex digits of its two model files' SHA-256 ("learned:pico-crf-v2@1a2b3c4d")."""
    digest = hashlib.sha256()
    for path in _model_files():
        try:
            digest.update(path.read_bytes())
        except OSError as exc:
            raise PicoModelError(f"{path}: PICO model unreadable ({exc}); run scripts/train_pico_tagger.py") from exc
    return f"{MODEL_BASE}@{digest.hexdigest()[:8]}"


@cache
def spans_version() -> str:
    """How tokens are read and spans become fields: "spans@" + 8 hex digits of the SHA-256 of this module and of the
    token features (`crf_features`). It goes into `pico_code_version`, so a change to that code (not only a new model
    file) shows the extractions stale in Dagster."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(Path(__file__).with_name("crf_features.py").read_bytes())
    return "spans@" + digest.hexdigest()[:8]


def _open(path: Path):
    import pycrfsuite

    tagger = pycrfsuite.Tagger()  # pyright: ignore[reportAttributeAccessIssue] - compiled module, no stubs
    try:
        tagger.open(str(path))
    except (OSError, ValueError) as exc:
        raise PicoModelError(f"{path}: cannot open the PICO model ({exc})") from exc
    return tagger


@dataclass(frozen=True)
class Taggers:
    """The two CRFs: `pio` labels P / I / O tokens (EBM-NLP's crowd labels); `interventions` labels intervention
    tokens (the difficulty release's labels), and its labels replace `pio`'s I labels (`None`: keep them, as the
    tuning script compares)."""

    pio: object
    interventions: object | None


@cache
def crf_taggers() -> Taggers:
    """The shipped CRFs, opened once per process."""
    return Taggers(_open(MODEL_PATH), _open(INTERVENTION_MODEL_PATH))


def tag_items(items: Sequence[Sequence[str]], taggers: Taggers | None = None) -> tuple[list[str], list[float]]:
    """A P / I / O / "" (outside) label per token of one sentence's features, and the tagger's marginal probability
    of it: P and O from the P/I/O tagger, I from the intervention tagger (the shipped models unless `taggers`)."""
    taggers = taggers or crf_taggers()
    pio, interventions = taggers.pio, taggers.interventions
    labels = pio.tag(items)  # pyright: ignore[reportAttributeAccessIssue]
    tags = [LABELS.get(t, "") for t in labels]
    confidence = [pio.marginal(t, i) if t != "O" else 1.0 for i, t in enumerate(labels)]  # pyright: ignore
    for i, label in enumerate(interventions.tag(items) if interventions else ()):  # pyright: ignore
        if label != "O":
            tags[i], confidence[i] = "I", interventions.marginal(label, i)  # pyright: ignore
        elif tags[i] == "I":
            tags[i], confidence[i] = "", 1.0
    return tags, confidence


def tag_paper(paper: Paper, taggers: Taggers | None = None) -> list[TaggedSentence]:
    """The paper's sentences, each token labelled by `tag_items`."""
    rows = paper_sentences(paper)
    for row, items in zip(rows, paper_items(rows), strict=True):
        row.tags, row.confidence = tag_items(items, taggers)
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
_RESULT_LEAD = re.compile(  # an outcome span opening with its result ("no significant difference in healing")
    r"^(?:(?:no|a|any|the)\s+)?(?:(?:statistically\s+)?significant(?:ly)?\s+)?"
    r"(?:differences?|changes?|improvements?|reductions?|increases?|decreases?)\s+(?:in|of)\s+",
    re.I,
)
_ENROLLED = re.compile(  # a P or O span's own verb and what follows ("... were enrolled", "... was low")
    r"(?<!\bwho)(?<!\bthat)(?<!\bwhich)\s+(?:has|have|had|is|are|was|were)\b.*$",
    re.I,
)
_TRIM_TAIL = re.compile(r"(?:\s+(?:the|a|an|of|and|or|with|in|to|for|on|was|were|at|by))+$|[\s,;:(\[]+$", re.I)


_ARM_MARK = re.compile(r"(?:^|(?<=\s))\(?(?:[IVX]{1,4}|[A-Ha-h]|[1-9])\)\s*")  # "II) ", "(b) "
_SIZE_NOTE = re.compile(r"\s*\(?\s*\b[nN]\s*=\s*\d+\s*\)?")  # "(n = 40)"
_ARM_SPLIT = re.compile(r"\s*;\s*|,?\s+(?:vs\.?|versus|compared (?:with|to)|or)\s+|(?<=\)),\s+(?:and\s+)?", re.I)
_CONTROL = re.compile(
    r"^(?:(?:an?|the|identical|matching|matched|inactive|dummy|oral|intravenous|saline)\s+)*"
    r"(?:placebos?|sham|vehicle|usual care|standard care|no (?:treatment|therapy|intervention|supplementation))\b|"
    r"^(?:the\s+)?controls?(?:\s+(?:groups?|arms?|conditions?|subjects|patients))?$",
    re.I,
)


_KEY_WORD = re.compile(r"[a-z][\w-]{3,}")  # as arms._key_word reads an arm's words
_CLAUSE = re.compile(r"(?:^|\s+)(?:was|were|is|are|had|has|have|who|which|that)\b.*$", re.I)
_LEAD_LABEL = re.compile(r"^[^:]{1,40}:\s+(?=\S)")  # "card data: daily resolution ..."


def split_arms(text: str) -> list[str]:
    """An intervention span cut into its arms ("A vs. B", "A; B", "A (dose), B (dose)"), arm markers and "(n = 40)"
    notes dropped."""
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
    """Contiguous runs of one label, as the text they cover in their sentence, each with its mean confidence (the
    fields keep those that reach `SpanRules`' minimum)."""
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
                if tag == "I":
                    parts = split_arms(text)
                else:
                    cleaned = _clean(_LEAD_LABEL.sub("", _ENROLLED.sub("", text)))
                    cleaned = _RESULT_LEAD.sub("", cleaned) if tag == "O" else cleaned
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


def _population(found: list[Span]) -> tuple[Span | None, Span | None]:
    """(population, bare): the most confident population span outside the title that says who was studied
    (`population_phrase`: not a setting, a bare count, symbols or an exclusion), the earliest on ties, the title's as
    fallback; and, when a more confident span counts the people without their condition ("173 patients"), that span
    and no population: the rules' population phrase ("patients with ...") says more than a less confident span, and
    the bare span is the last resort."""
    for span in sorted(found, key=lambda s: (s.sentence == 0, -s.confidence, s.start)):
        phrase = population_phrase(span.text)
        if phrase:
            return replace(span, text=phrase), None
        if people_phrase(span.text):
            return None, span
    return None, None


@dataclass(frozen=True)
class ArmHints:
    """What the rules read of the trial's arm structure (`arms.find_arms`): their I and C values and the document,
    whose "A superior to B" sentences and title rank the arms."""

    rules_i: str = ""
    rules_c: str = ""
    rules_c_cue: str = ""
    doc: Doc | None = None

    @classmethod
    def of(cls, doc: Doc) -> ArmHints:
        rules_i, rules_c = find_arms(doc)
        c_value, c_cue = (rules_c.value, rules_c.cue) if rules_c else ("", "")
        return cls(rules_i.value if rules_i else "", c_value, c_cue, doc)


def _arm_keys(arms: Sequence[Span], found: Sequence[Span]) -> dict[int, str]:
    """Each arm's drug or device word: of its distinctive words (`arms._key_word`'s), the first that opens another of
    the intervention spans found ("proton pump inhibitor rabeprazole" → rabeprazole when "rabeprazole" is named
    alone), else its first."""
    words = {id(s): [w for w in _KEY_WORD.findall(s.text.lower()) if w not in _KEY_STOP] for s in {*arms, *found}}
    firsts = Counter(words[id(s)][0] for s in found if words[id(s)])
    keys = {}
    for span in arms:
        own = words[id(span)]
        opening = [w for w in own if firsts[w] - (w == own[0] and span in found) > 0]
        keys[id(span)] = (opening or own or [" ".join(sorted(span.key))])[0]
    return keys


def _arms(found: list[Span], hints: ArmHints, rules: SpanRules) -> tuple[list[Span], list[Span]]:
    """Intervention spans as (experimental arms, comparator arms), from the trial's arm structure.

    An arm is a control when it reads as one (placebo, sham, usual care, no treatment, control) or says no more
    than the rules' comparator. The other arms group by their drug or device word (`_arm_keys`), ordered short
    ones first, then by how often they are named, then by first mention; the groups rank as the rules rank arms
    (the abstract's "A superior to B" sentences, then the title). The first group's arm is the intervention (a
    second group's joins it when the tagger is `more_arms` sure of it and a control exists); with no control, the
    next group named at least COMPARATOR_MENTIONS times (or the rules' I or C), short and sharing no word with the
    intervention, is the comparator."""
    c_key, i_key = _key_word(hints.rules_c), _key_word(hints.rules_i)
    # the rules' comparator marks a control only when it is another treatment than their intervention (two doses of
    # one drug say nothing about which drug the trial tests)
    control_words = set(content_tokens(hints.rules_c)) - _GENERIC if c_key != i_key else set()
    control, active = [], []
    for span in _distinct(found):
        is_control = _CONTROL.match(span.text) or (control_words and span.key - _GENERIC <= control_words)
        (control if is_control else active).append(span)
    keys = _arm_keys([*control, *active], found)
    groups: dict[str, list[Span]] = {}
    counts = {id(s): sum(bool(s.key & o.key - _GENERIC) for o in found) for s in active}
    for span in sorted(active, key=lambda s: (len(s.key) > ARM_WORDS, -counts[id(s)], s.start)):
        groups.setdefault(keys[id(span)], []).append(span)
    found_words = [set(_KEY_WORD.findall(s.text.lower())) for s in found]
    named = {k: sum(k in words for words in found_words) for k in groups}
    control_keys = {keys[id(s)] for s in control}
    order = list(groups)
    if hints.doc is not None and len(order) > 1:  # controls rank too: "A superior to placebo" votes for A
        order = _rank_active([*order, *(control_keys - set(order))], hints.doc)  # a key word is its own key word
    order = [k for k in order if k in groups and k not in control_keys]
    if not order:
        return [], control[:MAX_ARMS]
    experimental = groups[order[0]][:1]
    lead_words = set(_KEY_WORD.findall(experimental[0].text.lower())) - _KEY_STOP
    rest = [
        groups[k][0]
        for k in order[1:]
        if (named[k] >= COMPARATOR_MENTIONS or k in (c_key, i_key))
        and len(groups[k][0].key) <= ARM_WORDS
        and not lead_words & set(_KEY_WORD.findall(groups[k][0].text.lower()))
    ]
    if control:  # another active arm joins the intervention, unless the abstract compares the intervention with it
        lead = order[0]
        compared = [s for s in rest if hints.doc is not None and _compared_with(lead, keys[id(s)], hints.doc)]
        experimental += [s for s in rest if s.confidence >= rules.more_arms and s not in compared][: MAX_ARMS - 1]
        return sorted(experimental, key=lambda s: s.start), [*control, *compared][:MAX_ARMS]
    return experimental, rest[:1]


def _compared_with(lead: str, other: str, doc: Doc) -> bool:
    """Whether a sentence says the lead arm is superior to / compared with / versus the other ("whether lansoprazole
    was superior to continued H2-receptor antagonist therapy"): the other is what the trial tests it against."""
    return comparison_votes([lead, other], doc)[lead] > 0


def _names_only_treatments(span: Span, treatment_words: set[str]) -> bool:
    """Whether every word of an outcome span (of three letters or more, generic outcome words aside) is a word the
    tagger labels as an intervention in this abstract or has a drug-name stem ("phenytoin, (R)-warfarin, and
    cisapride"): treatments, not an outcome."""
    words = [w for w in span.key - _GENERIC_OUTCOME if len(w) >= 3 and not w.isdigit()]
    return bool(words) and all(w in treatment_words or _DRUG_STEM.search(w) for w in words)


def _opens_with(span: Span, treatment_words: set[str]) -> bool:
    """Whether an outcome span opens with a treatment ("omeprazole generate very high healing rates"): a sentence
    read as an outcome, not a measure (a measure of a drug names it after: "AUC of cisapride")."""
    words = content_tokens(span.text)
    return len(words) > 1 and words[0] in treatment_words


def _outcomes(found: list[Span], treatments: list[Span], rules: SpanRules) -> list[Span]:
    """The most confident distinct outcome spans that name more than treatments and do not open with one, in text
    order; when none reaches `min_o`, the most confident one reaching `outcome_floor`."""
    treatment_words = {w for s in treatments for w in s.key}
    kept = [s for s in found if not _names_only_treatments(s, treatment_words) and not _opens_with(s, treatment_words)]
    ranked = sorted(kept, key=lambda s: (-s.confidence, s.start))
    chosen = _distinct([s for s in ranked if s.confidence >= rules.min_o], _GENERIC_OUTCOME)[: rules.max_outcomes]
    if not chosen:
        chosen = _distinct([s for s in ranked if s.confidence >= rules.outcome_floor], _GENERIC_OUTCOME)[:1]
    return sorted(chosen, key=lambda s: s.start)


def fields_from_spans(
    rows: Sequence[TaggedSentence], name: str, hints: ArmHints = ArmHints(), rules: SpanRules = SPAN_RULES
) -> tuple[dict[str, str], dict[str, str]]:
    """(field → value, field → cue) of P, I, C and O from the tagged sentences; `hints` carry the rules' arm
    structure (their comparator is the fallback when the tagger names none)."""
    found = spans(rows)
    by_field = {f: [s for s in found if s.field == f and s.confidence >= rules.minimum(f)] for f in ("P", "I")}
    outcomes = _outcomes([s for s in found if s.field == "O"], [s for s in found if s.field == "I"], rules)
    values: dict[str, str] = {}
    cues: dict[str, str] = {}
    population, bare = _population(by_field["P"])
    rules_p = find_population(hints.doc) if population is None and hints.doc is not None else None
    if population:
        values["P"], cues["P"] = population.text, _cue(rows, population, name)
    elif rules_p:
        values["P"], cues["P"] = rules_p.value, f"{RULES_NAME} (no population span) {rules_p.cue}"
    elif bare:
        values["P"], cues["P"] = people_phrase(bare.text), _cue(rows, bare, name)
    active, control = _arms(by_field["I"], hints, rules)
    named = [s for s in control if not _CONTROL.match(s.text)]  # comparators only by the rules' hint
    if not active and named:  # the only named arm is the intervention, whatever the rules took it for
        active, control = named[:1], [s for s in control if s is not named[0]]
    for key, chosen in (("I", active), ("C", control), ("O", outcomes)):
        if chosen:
            values[key] = "; ".join(s.text for s in chosen)
            cues[key] = " | ".join(_cue(rows, s, name) for s in chosen)
    i_keys = {_key_word(v) for v in values.get("I", "").split("; ")}
    if "C" not in values and hints.rules_c and _key_word(hints.rules_c) not in i_keys:
        values["C"], cues["C"] = hints.rules_c, f"{RULES_NAME} (no comparator span) {hints.rules_c_cue}"
    return values, cues


def extract(paper: Paper, taggers: Taggers | None = None, rules: SpanRules = SPAN_RULES) -> dict[str, Found]:
    """Every field for one paper: P, I, C, O from the tagger's spans; StudyDesign, PopulationAge and SampleSize
    (and the comparator hint from the arm structure) from the rules. `taggers` and `rules` default to the shipped
    models and span rules (scripts/tune_pico_spans.py passes others)."""
    name = model_version()
    doc = Doc(paper)
    values, cues = fields_from_spans(tag_paper(paper, taggers), name, ArmHints.of(doc), rules)
    found = {k: Found(v, cues[k]) for k, v in values.items()}
    for key, rule in (("StudyDesign", find_design), ("PopulationAge", find_age), ("SampleSize", find_sample_size)):
        hit = rule(doc)
        if hit is not None and hit.value:
            found[key] = hit
    return found


__all__ = [
    "ArmHints",
    "MODEL_BASE",
    "MODEL_PATH",
    "INTERVENTION_MODEL_PATH",
    "Taggers",
    "crf_taggers",
    "PicoModelError",
    "SPAN_RULES",
    "Span",
    "SpanRules",
    "TaggedSentence",
    "extract",
    "fields_from_spans",
    "model_version",
    "paper_items",
    "paper_sentences",
    "section_kinds",
    "sentence_features",
    "spans",
    "spans_version",
    "tag_items",
    "tag_paper",
    "tokenize",
    "training_sequences",
]
