"""Whether an LLM's PICO value is grounded in its abstract: a span of the text or a faithful paraphrase of one
sentence, its numbers all in the text; values that are not are blanked and the record says why.

The rule is a normalised token overlap (`GROUNDED_SHARE`): lower case, British spellings and hyphenated compounds
folded ("gastro-oesophageal" = "gastroesophageal"), plurals stripped, English stop words ignored.

- P, I, C, O and PopulationAge: each ";"-separated part of the value is kept when it is a span of the text or
  when at least GROUNDED_SHARE of its content words occur in ONE sentence (the title counts as one), and every
  number it states occurs in the text; the parts that fail are dropped (the value keeps the others).
- StudyDesign is a classification in the prompt's words (`DESIGN_CLASS_WORDS`: "RCT", "cohort", "narrative
  review", ...), which need not be in the text, except that a randomised design needs "random..." in it; its
  qualifiers ("double-blind", "crossover", "prospective", ...) must occur in the text (GROUNDED_SHARE of them,
  anywhere: design cues are spread over title and methods).
- SampleSize: its number must occur in the text, in digits or in words ("eighty-one").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from ra_agent.evidence.pico.quality import regular_singular
from ra_agent.evidence.pico.text import NUMBER, parse_number, sentences
from ra_agent.models import Paper

GROUNDED_SHARE = 0.6  # share of a value's content words that must occur in one sentence of the abstract
GROUNDING_RULE = "grounding:token-overlap-v1"
_SPELLINGS = (("oesophag", "esophag"), ("randomis", "randomiz"), ("haem", "hem"), ("anaem", "anem"),
              ("paediatr", "pediatr"), ("tumour", "tumor"), ("oedema", "edema"), ("centre", "center"),
              ("behaviour", "behavior"), ("leukaem", "leukem"), ("foetal", "fetal"), ("labour", "labor"))  # fmt: skip
# the design classes the prompt names: a classification, not a span of the text
DESIGN_CLASS_WORDS = frozenset("rct randomized controlled clinical trial cohort case control casecontrol report series "
                               "cross sectional crosssectional systematic review meta analysis metaanalysis narrative "
                               "study observational".split())  # fmt: skip
_RANDOMISED = frozenset({"rct", "randomized"})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_HYPHENATED = re.compile(r"\b([a-z0-9]+(?:-[a-z0-9]+)+)\b")
_TOKEN = re.compile(r"[a-z0-9]+")


def _fold(text: str) -> str:
    text = _THOUSANDS.sub("", text.lower().replace("\u2010", "-").replace("\u2011", "-").replace("\u2013", "-"))
    for british, american in _SPELLINGS:
        text = text.replace(british, american)
    return " ".join(text.split())


def _words(text: str) -> set[str]:
    """The content-word stems of folded text, hyphenated compounds both whole and in parts."""
    joined = _HYPHENATED.sub(lambda m: f"{m.group(1)} {m.group(1).replace('-', '')}", text)
    return {
        regular_singular(w)
        for w in _TOKEN.findall(joined)
        if not w.isdigit() and len(w) > 1 and w not in ENGLISH_STOP_WORDS
    }


def _value_words(text: str) -> set[str]:
    """A value's content words: a hyphenated compound counts once (joined), as the text may split it or not."""
    return _words(_HYPHENATED.sub(lambda m: m.group(1).replace("-", ""), text)) - {""}


def _numbers(text: str) -> list[str]:
    return [n.rstrip("0").rstrip(".") if "." in n else n for n in _NUMBER.findall(text)]


@dataclass
class AbstractText:
    """An abstract as the grounding rule reads it: the folded text, its sentences' words, its numbers."""

    text: str
    sentences: list[tuple[str, set[str]]] = field(default_factory=list)  # (label, words) per sentence
    words: set[str] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, paper: Paper) -> AbstractText:
        abstract = paper.abstract or " ".join(s.text for s in paper.sections)
        units = [("title", paper.title or "")] + [(f"sentence {i}", s) for i, s in enumerate(sentences(abstract), 1)]
        folded = [(label, _fold(s)) for label, s in units if s.strip()]
        text = " ".join(s for _, s in folded)
        groups = [(label, _words(s)) for label, s in folded]
        spelled = {str(n) for m in re.finditer(NUMBER, text) if (n := parse_number(m.group(0))) is not None}
        return cls(text, groups, set().union(*(w for _, w in groups)) if groups else set(), {*_numbers(text), *spelled})

    @staticmethod
    def has(words: set[str], where: set[str]) -> int:
        return sum(w in where for w in words)


def _needed(n: int) -> int:
    return max(1, math.ceil(GROUNDED_SHARE * n))


def _missing_numbers(value: str, text: AbstractText) -> list[str]:
    return [n for n in _numbers(_fold(value)) if n not in text.numbers]


def _ground_part(part: str, text: AbstractText) -> tuple[str, str]:
    """("", where it was found) when `part` is grounded, else (why not, "")."""
    folded = _fold(part)
    missing = _missing_numbers(part, text)
    if missing:
        return f"{', '.join(missing[:3])} not in the text", ""
    if len(folded) >= 3 and folded in text.text:
        return "", "a span of the text"
    words = _value_words(folded)
    if not words:
        return ("", "its numbers are in the text") if _numbers(folded) else ("no content word", "")
    label, best = max(((label, text.has(words, w)) for label, w in text.sentences), key=lambda lw: lw[1],
                      default=("", 0))  # fmt: skip
    if best >= _needed(len(words)):
        return "", f"{best}/{len(words)} content words in {label}"
    return f"at most {best} of its {len(words)} content words in one sentence (needs {_needed(len(words))})", ""


def ground_value(key: str, value: str, text: AbstractText) -> tuple[str, list[str], list[str]]:
    """(the grounded value, where each kept part was found, why each dropped part was dropped)."""
    if not value.strip():
        return "", [], []
    if key == "SampleSize":
        numbers = _numbers(_fold(value))
        if not numbers:
            return "", [], [f"{value!r}: no number"]
        missing = _missing_numbers(value, text)
        if missing:
            return "", [], [f"{value!r}: {', '.join(missing)} not in the text"]
        return value, ["its number is in the text"], []
    if key == "StudyDesign":
        words = _value_words(_fold(value))
        qualifiers = words - DESIGN_CLASS_WORDS
        found = text.has(qualifiers, text.words)
        if words & _RANDOMISED and not any(w.startswith("random") for w in text.words):
            return "", [], [f"{value!r}: a randomised design, but the text never says random..."]
        if qualifiers and found < _needed(len(qualifiers)):
            return "", [], [f"{value!r}: {found} of its {len(qualifiers)} qualifiers in the text"]
        if not words:
            return "", [], [f"{value!r}: no design word"]
        return value, [f"{found}/{len(qualifiers)} qualifiers in the text"], []
    kept, where, dropped = [], [], []
    for part in (p.strip() for p in value.split(";")):
        if not part:
            continue
        why, found = _ground_part(part, text)
        if why:
            dropped.append(f"{part!r}: {why}")
        else:
            kept.append(part)
            where.append(found)
    return "; ".join(kept), where, dropped


def ground_fields(fields: dict[str, str], paper: Paper, keys: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The fields with ungrounded values (or parts) blanked, and per field why what was dropped was dropped."""
    text = AbstractText.of(paper)
    grounded, dropped = dict(fields), {}
    for key in keys:
        value, _, why = ground_value(key, fields.get(key, ""), text)
        grounded[key] = value
        if why:
            dropped[key] = "; ".join(why)
    return grounded, dropped


__all__ = ["GROUNDED_SHARE", "GROUNDING_RULE", "AbstractText", "ground_fields", "ground_value"]
