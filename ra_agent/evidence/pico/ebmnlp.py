"""EBM-NLP token-labelled abstracts as Papers, and value precision / recall / token F1 of P, I and O against them."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.models import AbstractSection, Paper

FIELD_LABELS = {"P": "I-PAR", "I": "I-INT", "O": "I-OUT"}  # I-INT also marks comparator arms
PRECISE_SHARE = 0.5  # a value is precise when at least this share of its content tokens falls on labelled tokens
SECTION_WORDS = frozenset(
    "BACKGROUND OBJECTIVE OBJECTIVES AIM AIMS PURPOSE METHOD METHODS METHODOLOGY RESULTS RESULT CONCLUSION CONCLUSIONS "
    "DESIGN SETTING SETTINGS PATIENTS PATIENT PARTICIPANTS SUBJECTS INTERVENTION INTERVENTIONS MEASUREMENTS MEASURES "
    "OUTCOME OUTCOMES FINDINGS INTERPRETATION CONTEXT MATERIALS MATERIAL INTRODUCTION STUDY TRIAL DISCUSSION "
    "LIMITATIONS FUNDING RESEARCH SIGNIFICANCE IMPLICATIONS UNLABELLED TREATMENT REGISTRATION POPULATION "
    "HYPOTHESIS RATIONALE IMPORTANCE EXPOSURE EXPOSURES SAMPLE SUMMARY PROCEDURES".split()
)
STOPWORDS = frozenset(
    "a an the of and or with in to for on at by from as plus was were is are be been this that these those than "
    "who which their its it his her they we our vs versus".split()
)
_CAPS = re.compile(r"^(?:[A-Z]{2,}|AND|&|,|/|OF)$")
_LABEL_JOINERS = frozenset({"AND", "&", ",", "/", "OF"})
_SUBTOKEN = re.compile(r"[a-z0-9]+")
_CLOSE_LEFT = frozenset({",", ".", ";", ":", ")", "]", "%", "?", "!"})


class EbmNlpFormatError(ValueError):
    """An EBM-NLP file has a line that is not `token POS O label`; the message names file and line."""


@dataclass(frozen=True)
class Token:
    text: str
    label: str  # "O", "I-PAR", "I-INT" or "I-OUT"


@dataclass
class LabelledAbstract:
    """One EBM-NLP abstract: its PMID and tokens as the file splits them into sentences."""

    pmid: int
    sentences: list[list[Token]] = field(default_factory=list)

    @cached_property
    def units(self) -> list[list[Token]]:
        """Sentences re-split after every "." token (the file merges some); unit 0 is the title."""
        out: list[list[Token]] = []
        for sentence in self.sentences:
            current: list[Token] = []
            for token in sentence:
                current.append(token)
                if token.text == ".":
                    out.append(current)
                    current = []
            if current:
                out.append(current)
        return out

    def has(self, field_name: str) -> bool:
        """Whether any token carries the label of P, I or O."""
        return any(t.label == FIELD_LABELS[field_name] for unit in self.units for t in unit)

    def paper(self) -> Paper:
        """The abstract as ra reads a PubMed record: title, a "LABEL: text" abstract and its labelled sections."""
        parts: list[tuple[str, list[str]]] = []
        for unit in self.units[1:]:
            label = section_label(unit)
            words = [t.text for t in unit[len(label.split()) if label else 0 :]]
            words = words[1:] if words[:1] == [":"] else words
            if label or not parts:
                parts.append((label, words))
            else:
                parts[-1][1].extend(words)
        sections = [AbstractSection(label, detokenize(words)) for label, words in parts if words]
        if any(s.label for s in sections):
            abstract = " ".join(f"{s.label}: {s.text}" if s.label else s.text for s in sections)
        else:
            abstract = " ".join(s.text for s in sections)
            sections = [AbstractSection("", abstract)] if abstract else []
        title = detokenize(t.text for t in self.units[0]) if self.units else ""
        return Paper(pmid=self.pmid, title=title, abstract=abstract, sections=sections, source="ebmnlp")


def detokenize(tokens: Iterable[str]) -> str:
    """Tokens joined as running text ("group I ( n = 20 ) ." → "group I (n = 20).")."""
    out = ""
    for token in tokens:
        out += token if not out or out.endswith(("(", "[")) or token in _CLOSE_LEFT else " " + token
    return out


def section_label(unit: Sequence[Token]) -> str:
    """The ALL-CAPS section label opening a sentence ("MAIN OUTCOME MEASURES"), "" when there is none."""
    run: list[str] = []
    for token in unit:
        if not _CAPS.match(token.text):
            break
        run.append(token.text)
    while run and run[-1] in _LABEL_JOINERS:
        run.pop()
    if run and len(run) < len(unit) and any(w in SECTION_WORDS for w in run):
        return " ".join(run)
    return ""


def read_ebmnlp(path: str | Path) -> list[LabelledAbstract]:
    """Every abstract of an EBM-NLP CoNLL file: `-DOCSTART- (PMID)`, `token POS O label` lines, blank line per sentence."""
    path = Path(path)
    docs: list[LabelledAbstract] = []
    sentence: list[Token] = []

    def close() -> None:
        if sentence and docs:
            docs[-1].sentences.append(list(sentence))
        sentence.clear()

    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if line.startswith("-DOCSTART-"):
                close()
                m = re.search(r"\((\d+)\)", line)
                if not m:
                    raise EbmNlpFormatError(f"{path}:{number}: -DOCSTART- line without a (PMID)")
                docs.append(LabelledAbstract(int(m.group(1))))
            elif not line.strip():
                close()
            else:
                parts = line.split()
                if len(parts) < 2 or not docs or parts[-1] not in {"O", *FIELD_LABELS.values()}:
                    raise EbmNlpFormatError(f"{path}:{number}: expected 'token POS O label', got {line.strip()!r}")
                sentence.append(Token(parts[0], parts[-1]))
        close()
    return [d for d in docs if d.sentences]


def read_intervention_labels(root: str | Path) -> list[LabelledAbstract]:
    """EBM-NLP's difficulty release unpacked (bepnye/EBM-NLP `ebm_nlp_difficulty.tar.gz`): `documents/<PMID>.tokens`,
    one token a line, and `annotations/<subset>/interventions/<PMID>.ann`, one 0/1 a line. Intervention labels only
    (I-INT or O: these abstracts say nothing of P or O). An abstract labelled in two subsets keeps the first subset's
    labels in name order ("difficult" before "random")."""
    root = Path(root)
    docs: dict[int, LabelledAbstract] = {}
    for ann in sorted(root.glob("annotations/*/interventions/*.ann")):
        pmid = int(ann.stem) if ann.stem.isdigit() else None
        if pmid is None or pmid in docs:
            continue
        tokens_path = root / "documents" / f"{pmid}.tokens"
        try:
            words = tokens_path.read_text(encoding="utf-8").split("\n")
        except OSError as exc:
            raise EbmNlpFormatError(f"{tokens_path}: tokens of {ann} unreadable ({exc})") from exc
        labels = ann.read_text(encoding="utf-8").split()
        words = words[: len(words) - 1] if words and not words[-1] else words
        if len(words) != len(labels) or set(labels) - {"0", "1"}:
            raise EbmNlpFormatError(f"{ann}: {len(labels)} labels of 0/1 expected for {len(words)} tokens")
        tokens = [Token(w, FIELD_LABELS["I"] if lab == "1" else "O") for w, lab in zip(words, labels, strict=True)]
        docs[pmid] = LabelledAbstract(pmid, [tokens])
    return [docs[p] for p in sorted(docs)]


def interventions_only(doc: LabelledAbstract) -> LabelledAbstract:
    """The abstract with its intervention labels only (P and O labels read as outside), as the intervention tagger
    learns them."""
    label = FIELD_LABELS["I"]
    sentences = [[Token(t.text, t.label if t.label == label else "O") for t in s] for s in doc.sentences]
    return LabelledAbstract(doc.pmid, sentences)


def halves(docs: Sequence[LabelledAbstract]) -> dict[str, list[LabelledAbstract]]:
    """The split by PMID parity: the learned tagger is trained (and the rules were developed) on "even"; "odd" is
    the held-out part bench/eval_pico.py reports on."""
    return {"even": [d for d in docs if d.pmid % 2 == 0], "odd": [d for d in docs if d.pmid % 2 == 1]}


# --------------------------------------------------------------------------- measures


def content_tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric sub-tokens without stop words ("omeprazole 20 mg" → omeprazole, 20, mg)."""
    return [t for t in _SUBTOKEN.findall(text.lower()) if t not in STOPWORDS]


Unit = list[tuple[str, str, int]]  # (sub-token, label, token position) per sentence


def _units(doc: LabelledAbstract) -> list[Unit]:
    units, position = [], 0
    for unit in doc.units:
        row = []
        for token in unit:
            row += [(sub, token.label, position) for sub in _SUBTOKEN.findall(token.text.lower())]
            position += 1
        units.append(row)
    return units


def value_share(units: Sequence[Unit], field_name: str, value: str) -> tuple[float, set[int]]:
    """(share of the value's content tokens on tokens labelled for the field, the token positions it covers).

    Each "; "-separated part (an arm) is aligned to the sentence holding most of its content tokens (the earliest
    on ties); a token counts when one of its occurrences in that sentence is labelled, else it is off label."""
    label = FIELD_LABELS[field_name]
    total = on = 0
    positions: set[int] = set()
    for part in (p for p in value.split(";") if p.strip()):
        wanted = content_tokens(part)
        if not wanted or not units:
            continue
        keys = set(wanted)
        best = max(range(len(units)), key=lambda i: (len(keys & {u[0] for u in units[i]}), -i))
        hits: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for sub, tag, pos in units[best]:
            if sub in keys:
                hits[sub].append((tag, pos))
        for token in wanted:
            total += 1
            positions.update(pos for _, pos in hits.get(token, []))
            on += any(tag == label for tag, _ in hits.get(token, []))
    return (on / total if total else 0.0), positions


@dataclass
class FieldScore:
    """Counts behind value precision, recall and token F1 of one field."""

    present: int = 0  # abstracts with a token labelled for the field
    returned: int = 0  # non-empty values
    found: int = 0  # present and returned
    precise: int = 0  # returned values with >= PRECISE_SHARE of their content tokens on labelled tokens
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def value_precision(self) -> float:
        return self.precise / self.returned if self.returned else 0.0

    @property
    def recall(self) -> float:
        """Share of abstracts with a labelled field that get any value (a wrong value counts: a filled-cell rate)."""
        return self.found / self.present if self.present else 0.0

    @property
    def precise_recall(self) -> float:
        """Share of abstracts with a labelled field whose value is precise (on the field's labels): the strict
        recall, which a value on the wrong words does not earn."""
        return self.precise / self.present if self.present else 0.0

    @property
    def token_f1(self) -> float:
        """Micro F1 over token positions (every labelled mention is gold, so one value per field recalls little)."""
        return 2 * self.tp / (2 * self.tp + self.fp + self.fn) if self.tp else 0.0


def score_values(docs: Sequence[LabelledAbstract], values: Mapping[int, Mapping[str, str]]) -> dict[str, FieldScore]:
    """FieldScore of P, I and O for `values` (PMID → field → value; I holds every arm, comparators included)."""
    out = {f: FieldScore() for f in FIELD_LABELS}
    for doc in docs:
        units = _units(doc)
        got = values.get(doc.pmid, {})
        for field_name, label in FIELD_LABELS.items():
            score = out[field_name]
            gold = {pos for unit in units for _, tag, pos in unit if tag == label}
            value = got.get(field_name, "")
            score.present += bool(gold)
            predicted: set[int] = set()
            if content_tokens(value):
                share, predicted = value_share(units, field_name, value)
                score.returned += 1
                score.found += bool(gold)
                score.precise += share >= PRECISE_SHARE
            score.tp += len(predicted & gold)
            score.fp += len(predicted - gold)
            score.fn += len(gold - predicted)
    return out


FieldValues = Callable[[Paper], Mapping[str, str]]


def run_values(extract: FieldValues, docs: Sequence[LabelledAbstract]) -> dict[int, dict[str, str]]:
    """PMID → {P, I, O} from an extractor's fields; I joins the I and C arms ("A; B; placebo")."""
    out = {}
    for doc in docs:
        found = extract(doc.paper())
        arms = "; ".join(v for v in (found.get("I", ""), found.get("C", "")) if v.strip())
        out[doc.pmid] = {"P": found.get("P", ""), "I": arms, "O": found.get("O", "")}
    return out


# --------------------------------------------------------------------------- the named baseline

_LEAD_SECTIONS = {
    "P": ("PARTICIPANTS|PATIENTS|SUBJECTS|POPULATION|SAMPLE|SETTING", "METHODS?|DESIGN"),
    "I": ("INTERVENTIONS?|TREATMENTS?", "METHODS?|DESIGN"),
    "O": ("OUTCOMES?|MEASURES|MEASUREMENTS|END ?POINTS?", "RESULTS?|FINDINGS"),
}
SECTION_LEAD_BASELINE = "baseline:section-lead"


def section_lead(paper: Paper) -> dict[str, str]:
    """The baseline: per field, the first sentence of the matching section (else of METHODS or RESULTS), else the title."""
    sections = sections_of(paper)
    out = {}
    for field_name, patterns in _LEAD_SECTIONS.items():
        text = ""
        for pattern in patterns:
            text = text or next((s.text for s in sections if re.search(pattern, s.label)), "")
        first = sentences(text)[:1] if text else []
        out[field_name] = first[0] if first else paper.title
    return out


__all__ = [
    "FIELD_LABELS",
    "PRECISE_SHARE",
    "SECTION_LEAD_BASELINE",
    "EbmNlpFormatError",
    "FieldScore",
    "LabelledAbstract",
    "content_tokens",
    "detokenize",
    "halves",
    "interventions_only",
    "read_ebmnlp",
    "read_intervention_labels",
    "run_values",
    "score_values",
    "section_label",
    "section_lead",
    "value_share",
]
