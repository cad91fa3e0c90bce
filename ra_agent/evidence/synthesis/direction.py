"""Direction of effect of one intervention against one comparator on one outcome, read from a trial's abstract (rules).

The question is the Evidence Inference one (Lehman et al., NAACL 2019): did the trial find the outcome significantly
increased, significantly decreased, or not significantly different with the intervention compared with the
comparator? `direction_of` answers it in this order:
1. arm numbers: when the arm-level extractor (`extract.extract_arm_data`) gives events/totals for an arm of the
   intervention and one of the comparator at the same outcome and time point, the risk ratio's 95 % CI
   (statsmodels `effectsize_2proportions`) decides: above 1 increased, below 1 decreased, else no difference;
2. the result sentence: the abstract sentence sharing most words with the outcome (and holding a result: a P value,
   a percentage, "significant", "differ", "vs"), preferring the results section. Its significance is read from P
   values ("P < 0.05", "p = .30"), negated significance wording ("no significant", "did not differ", "similar",
   "comparable", "NS"), a 95 % CI that excludes no difference (1 for a named ratio, else 0) and "significantly";
   a significant result gets its direction from the two arms' numbers in the order the sentence
   names the arms ("28.6% vs. 40.5%", "... respectively"), else from comparative wording ("higher", "reduced",
   "fewer" ...) and which arm is its subject;
3. no significance cue in the sentence: its comparative wording ("rose", "greater", "reduced") when it has some,
   else (or when no sentence names the outcome) "no significant difference".
Every answer says which of these decided it (`Direction.how`), and is named `RULES`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.synthesis.extract import ArmDatum, extract_arm_data
from ra_agent.models import Paper

RULES = "rules:direction-v1"
INCREASED, DECREASED, NO_DIFFERENCE = "significantly increased", "significantly decreased", "no significant difference"
LABELS = (INCREASED, DECREASED, NO_DIFFERENCE)

_STOP = frozenset(
    "the a an of in on at to for with without and or by from as vs versus than that this these those was were is are be "
    "been being after before during between among within into per each all any both either group groups patients "
    "patient subjects participants arm arms treatment treated therapy receiving received given dose doses daily mg kg "
    "day days week weeks month months year years total mean rate rates level levels score scores change changes number "
    "proportion percentage use using compared comparison control standard usual care".split()
)
_TOKEN = re.compile(r"[a-z][a-z0-9]+")
_RESULT = re.compile(r"\bp\s*[<=>≤≥]|\d\s*%|\bsignifican|\bdiffer|\bvs\.?\b|\bversus\b|\bcompared\b|\bhigher\b|\blower\b|"
                     r"\bincrease|\bdecrease|\breduc", re.I)  # fmt: skip
_P = re.compile(r"\bp\s*(?:value\s*)?([<=>≤≥]|&lt;|&gt;)\s*(0?\.\d+|[01](?:\.\d+)?)", re.I)
_NEGATED = re.compile(
    r"\bno(?:t)? (?:statistically |clinically )?significant|\bnon-?significant|\bnot (?:statistically )?significant|"
    r"\b(?:did|does|do|was|were) not (?:significantly )?(?:differ|chang|improv|reduc|increas|decreas|affect|alter|reach|"
    r"vary|influence|show|lead|result)|\bno (?:statistical |significant )?(?:difference|change|effect|improvement)s?\b|"
    r"\bsimilar\b|\bcomparable\b|\bn\.?s\.?(?=[\s,;)]|$)|\bequivalent\b|\bunchanged\b|\bwere not different\b|"
    r"\bno between-group\b|\bfailed to\b",
    re.I,
)
_SIGNIFICANT = re.compile(r"(?<!no )(?<!not )(?<!non)\bsignificant(?:ly)?\b", re.I)
_UP = re.compile(r"\b(?:higher|greater|more|larger|longer|increased?|increases|increasing|improved?|improvement|better|"
                 r"elevated|raised|superior|rose|gain(?:ed)?)\b", re.I)  # fmt: skip
_DOWN = re.compile(r"\b(?:lower|less|fewer|smaller|shorter|decreased?|decreases|decreasing|reduced?|reduces|reduction|"
                   r"declined?|worse|inferior|dropped|fell|lowered|attenuated|prevented)\b", re.I)  # fmt: skip
_VALUE = re.compile(r"(?<![\w.])[-−]?\d+(?:\.\d+)?(?![\w.])")
_MASK = re.compile(r"\bp\s*[<=>≤≥]\s*0?\.\d+|\(?\s*95\s*%\s*(?:CI|confidence interval)[^)]*\)?|\b(?:CI|OR|RR|HR)\b[^;,)]*"
                   r"|\b\d+(?:\.\d+)?\s*(?:mg|kg|g|ml|µg|mcg|h|hours?|days?|weeks?|months?|years?|min)\b", re.I)  # fmt: skip


@dataclass(frozen=True)
class Direction:
    label: str  # one of LABELS
    how: str  # "arm numbers", "sentence numbers", "sentence wording", "significance only", "no significance cue"
    sentence: str = ""
    rules: str = RULES


def _stems(text: str) -> set[str]:
    return {t[:5] for t in _TOKEN.findall(text.lower()) if t not in _STOP and len(t) > 2}


_RESULTS_LABEL = re.compile(r"RESULT|FINDING|CONCLU|INTERPRET", re.I)
_SETUP_LABEL = re.compile(r"BACKGROUND|INTRODUCTION|OBJECTIVE|AIM|PURPOSE|METHOD|DESIGN|SETTING|CONTEXT", re.I)


def _units(paper: Paper) -> list[tuple[str, float]]:
    """The abstract's sentences, each with a bonus for the section it is in (results up, background/methods down)."""
    out = []
    for section in sections_of(paper):
        bonus = 0.3 if _RESULTS_LABEL.search(section.label) else -0.3 if _SETUP_LABEL.search(section.label) else 0.0
        out += [(u, bonus) for u in sentences(section.text)]
    return out


def result_sentence(units: Sequence[tuple[str, float]], outcome: str) -> str:
    """The sentence that reports the outcome: most outcome words shared, holding a result cue, in the results
    section rather than the background or methods ("" when no sentence shares a word with the outcome)."""
    wanted = _stems(outcome)
    best, best_score = "", 0.0
    for i, (unit, bonus) in enumerate(units):
        shared = len(wanted & _stems(unit)) / max(len(wanted), 1)
        if not shared:
            continue
        score = shared + (0.5 if _RESULT.search(unit) else 0.0) + bonus + 0.001 * i  # later sentences report results
        if score > best_score:
            best, best_score = unit, score
    return best


_CI = re.compile(r"(?P<kind>\b(?:OR|RR|HR|IRR|odds ratio|risk ratio|hazard ratio|rate ratio|relative risk)\b[^;]{0,40}?)?"
                 r"95\s*%\s*(?:CI|confidence interval)\]?\s*[:=,]?\s*[=]?\s*[\[(]?\s*(?P<low>[-−]?\d+(?:\.\d+)?)\s*%?\s*"
                 r"(?:-|–|to|,)\s*(?P<high>[-−]?\d+(?:\.\d+)?)", re.I)  # fmt: skip


def _ci_excludes_null(text: str) -> bool | None:
    """Whether the sentence's 95 % CIs exclude no difference (1 for a named ratio, else 0); None without a CI."""
    found = []
    for m in _CI.finditer(text):
        low, high = float(m.group("low").replace("−", "-")), float(m.group("high").replace("−", "-"))
        null = 1.0 if m.group("kind") else 0.0
        found.append(not min(low, high) <= null <= max(low, high))
    return any(found) if found else None


def _significance(text: str) -> bool | None:
    """True (significant), False (not), None (no cue): P values first, then a confidence interval, then wording."""
    ps = []
    for op, value in _P.findall(text):
        v = float(value)
        ps.append(v < 0.05 or (op in "<≤&lt;" and v <= 0.05))
    if ps and any(ps) and not (_NEGATED.search(text) and not all(ps)):
        return True
    if ps and not any(ps):
        return False
    if _NEGATED.search(text):
        return False
    ci = _ci_excludes_null(text)
    if ci is not None:
        return ci
    if _SIGNIFICANT.search(text):
        return True
    return None


def _mentions(text: str, arm: str) -> list[int]:
    """Where `text` names the arm: positions of its distinctive words (or their first five letters)."""
    lower = text.lower()
    out = []
    for stem in _stems(arm):
        out += [m.start() for m in re.finditer(rf"\b{re.escape(stem)}", lower)]
    return sorted(out)


def _by_numbers(text: str, intervention: str, comparator: str) -> str | None:
    """Direction from the two arms' values, taken in the order the sentence names the arms."""
    i_at, c_at = _mentions(text, intervention), _mentions(text, comparator)
    if not i_at or not c_at or i_at[0] == c_at[0]:
        return None
    masked = _MASK.sub(lambda m: " " * len(m.group(0)), text)
    values = [(m.start(), float(m.group(0).replace("−", "-"))) for m in _VALUE.finditer(masked)]
    if len(values) < 2:
        return None
    first_is_i = i_at[0] < c_at[0]
    if re.search(r"\brespectively\b", text, re.I):
        a, b = values[0][1], values[1][1]
    else:  # the value named nearest after each arm
        after_i = [v for pos, v in values if pos > i_at[0]]
        after_c = [v for pos, v in values if pos > c_at[0]]
        if not after_i or not after_c:
            return None
        i_value, c_value = after_i[0], after_c[0]
        if i_value == c_value:
            return None
        return INCREASED if i_value > c_value else DECREASED
    i_value, c_value = (a, b) if first_is_i else (b, a)
    if i_value == c_value:
        return None
    return INCREASED if i_value > c_value else DECREASED


_QUANTITY = re.compile(
    r"\bor (?:more|less|greater|higher|lower)\b|\b(?:more|less|greater|fewer) than \d|\bno more\b", re.I
)


def _comparative(text: str) -> tuple[re.Match[str], str] | None:
    """The comparative word that carries the result (the one nearest "significant", else the first) and its label;
    quantities ("50% or more", "less than 5") are not comparisons."""
    masked = _QUANTITY.sub(lambda m: " " * len(m.group(0)), text)
    words = [(m, INCREASED) for m in _UP.finditer(masked)] + [(m, DECREASED) for m in _DOWN.finditer(masked)]
    if not words:
        return None
    anchor = _SIGNIFICANT.search(masked)
    if anchor is None:
        return min(words, key=lambda w: w[0].start())
    return min(words, key=lambda w: abs(w[0].start() - anchor.start()))


def _by_wording(text: str, intervention: str, comparator: str) -> str:
    """Direction from the comparative word and the arm that is its subject (the intervention by default)."""
    found = _comparative(text)
    if found is None:
        return INCREASED
    word, label = found
    i_at, c_at = _mentions(text, intervention), _mentions(text, comparator)
    before = [(p, "i") for p in i_at if p < word.start()] + [(p, "c") for p in c_at if p < word.start()]
    subject = max(before)[1] if before else "i"
    if subject == "c":
        return DECREASED if label == INCREASED else INCREASED
    return label


def _by_arm_data(data: Sequence[ArmDatum], intervention: str, comparator: str) -> str | None:
    """The risk ratio of an intervention arm over a comparator arm at the same outcome and time point."""
    import statsmodels.stats.meta_analysis as meta  # statsmodels loads pandas and scipy

    wanted_i, wanted_c = intervention.lower(), comparator.lower()
    for d in data:
        if d.continuous or d.drug not in wanted_i or d.drug in wanted_c:
            continue
        for e in data:
            if (
                e.continuous
                or (e.outcome, e.weeks) != (d.outcome, d.weeks)
                or e.drug not in wanted_c
                or e.drug in wanted_i
            ):
                continue
            e1, n1, e2, n2 = d.events, d.total, e.events, e.total
            if 0 in (e1, e2) or e1 == n1 or e2 == n2:
                e1, n1, e2, n2 = e1 + 0.5, n1 + 1, e2 + 0.5, n2 + 1
            eff, var = meta.effectsize_2proportions(e1, n1, e2, n2, statistic="risk-ratio")
            low, high = float(eff) - 1.96 * math.sqrt(float(var)), float(eff) + 1.96 * math.sqrt(float(var))
            return INCREASED if low > 0 else DECREASED if high < 0 else NO_DIFFERENCE
    return None


def direction_of(paper: Paper, intervention: str, comparator: str, outcome: str) -> Direction:
    """The direction of effect the abstract reports (see the module docstring)."""
    found = _by_arm_data(extract_arm_data(paper), intervention, comparator)
    if found is not None:
        return Direction(found, "arm numbers")
    sentence = result_sentence(_units(paper), outcome)
    if not sentence:
        return Direction(NO_DIFFERENCE, "no significance cue")
    significant = _significance(sentence)
    if significant is None and _comparative(sentence) is not None:  # "creatinine rose by 11% on active treatment"
        return Direction(_by_wording(sentence, intervention, comparator), "wording without significance cue", sentence)
    if significant is None:
        return Direction(NO_DIFFERENCE, "no significance cue", sentence)
    if not significant:
        return Direction(NO_DIFFERENCE, "significance only", sentence)
    by_numbers = _by_numbers(sentence, intervention, comparator)
    if by_numbers is not None:
        return Direction(by_numbers, "sentence numbers", sentence)
    return Direction(_by_wording(sentence, intervention, comparator), "sentence wording", sentence)
