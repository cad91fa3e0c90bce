"""Intervention vs comparator: does each extractor put the right arm in I and in C? Measured on trials whose title
names two arms ("X versus Y"), labelled from the title by a rule in this script that no extractor uses, and
extracted with the title hidden (the extractors read only the abstract, so they cannot see the label's source).

EBM-NLP labels every arm as an intervention, so eval_pico.py cannot measure the I/C split; this does. The label:
the title's single "X versus|vs|compared with|compared to Y" (one comparison marker, X at most six words after the
last "of|with|between|:|,"), X the experimental arm and Y the comparator (the usual way trial titles are written);
each side's distinctive words (alphabetic, three letters or more, not dose or schedule words, not on the other
side) are what an arm must name. A trial counts when both sides keep a distinctive word.

- I right: I names a word of X and none of Y. C right: C names a word of Y and none of X.
- swapped: I names Y's words and C names X's. C filled: C is not empty.

Trials: abstracts that say they randomised ("random...") from the demo corpus (data/demo, proton pump inhibitor
trials) and the EBM-NLP dev split (tests/fixtures/ebmnlp, trials across medicine; `--expert` adds the expert test
split), split by PMID parity: the arm logic was developed on the even PMIDs ("dev"); the odd PMIDs are held out
and printed first. Extractors: the rules, the learned tagger, and the
baseline "first named arm": I = the first and C = the second treatment the rules' arm finder lists (no ranking).

    python bench/eval_pico_arms.py [--csv data/demo/Cohen_2006_ProtonPumpInhibitors.csv] [--show N]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ra_agent.evidence.pico.ebmnlp import read_ebmnlp
from ra_agent.evidence.pico.extract import LearnedExtractor, RuleExtractor
from ra_agent.evidence.pico.quality import load_papers
from ra_agent.models import Paper

ROOT = Path(__file__).resolve().parents[1]
_MARKER = re.compile(r"\s+(?:versus|vs\.?|compared (?:with|to))\s+", re.I)
_LEFT_CUT = re.compile(r".*(?:\b(?:of|with|between|using|comparing)\s+|[:,]\s*|--)", re.I | re.S)
_RIGHT_CUT = re.compile(r"\s+(?:in|for|on|as|during|among|after|to|at)\s+|[:;,?]|\.\s|\.$|--", re.I)
_WORD = re.compile(r"[a-z]{3,}")
_NOT_DISTINCT = frozenset(
    "the and with plus dose doses high low regular standard short long term week weeks day days daily once twice "
    "therapy treatment treatments regimen regimens group groups oral intravenous single double one two three based "
    "modified combination randomized randomised controlled trial study for together".split()
)
MAX_LEFT_WORDS = 6


@dataclass(frozen=True)
class ArmLabel:
    pmid: int
    experimental: str  # X
    comparator: str  # Y
    x_words: frozenset[str]
    y_words: frozenset[str]


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _NOT_DISTINCT


def label_from_title(paper: Paper) -> ArmLabel | None:
    """The title's two arms, or None when the title names no single comparison of two distinguishable arms."""
    markers = list(_MARKER.finditer(paper.title))
    if len(markers) != 1:
        return None
    left, right = paper.title[: markers[0].start()], paper.title[markers[0].end() :]
    left = _LEFT_CUT.sub("", left).strip()
    stop = _RIGHT_CUT.search(right)
    right = (right[: stop.start()] if stop else right).strip()
    if not left or not right or len(left.split()) > MAX_LEFT_WORDS:
        return None
    x, y = words(left), words(right)
    x_only, y_only = frozenset(x - y), frozenset(y - x)
    if not x_only or not y_only:
        return None
    return ArmLabel(paper.pmid, left, right, x_only, y_only)


@dataclass
class ArmScore:
    trials: int = 0
    i_right: int = 0
    c_right: int = 0
    both: int = 0
    swapped: int = 0
    c_filled: int = 0

    def add(self, label: ArmLabel, i_value: str, c_value: str) -> None:
        i_words, c_words = words(i_value), words(c_value)
        i_ok = bool(i_words & label.x_words) and not i_words & label.y_words
        c_ok = bool(c_words & label.y_words) and not c_words & label.x_words
        self.trials += 1
        self.i_right += i_ok
        self.c_right += c_ok
        self.both += i_ok and c_ok
        self.swapped += bool(i_words & label.y_words and c_words & label.x_words) and not i_ok
        self.c_filled += bool(c_value.strip())

    def cells(self) -> list[str]:
        n = self.trials or 1
        counts = (self.i_right, self.c_right, self.both, self.swapped, self.c_filled)
        return [f"{c / n:.2f} ({c})" for c in counts]


Arms = Callable[[Paper], tuple[str, str]]


def _record_arms(extractor: RuleExtractor | LearnedExtractor) -> tuple[str, Arms]:
    def arms(paper: Paper) -> tuple[str, str]:
        record = extractor.extract_one(paper)
        return record.I, record.C

    return extractor.name, arms


def rules_row() -> tuple[str, Arms]:
    return _record_arms(RuleExtractor())


def learned_row() -> tuple[str, Arms]:
    return _record_arms(LearnedExtractor())


def first_named_row() -> tuple[str, Arms]:
    """The baseline: the rules' arms in the order the abstract lists them, no ranking, no control cue."""
    rules = RuleExtractor()

    def arms(paper: Paper) -> tuple[str, str]:
        record = rules.extract_one(paper)
        listed = [a for v in (record.I, record.C) for a in v.split("; ") if a]
        listed.sort(key=lambda a: _first_mention(paper.abstract, a))
        return (listed[0] if listed else ""), (listed[1] if len(listed) > 1 else "")

    return "baseline:first-named-arm", arms


def _first_mention(text: str, arm: str) -> int:
    found = [text.lower().find(w) for w in words(arm)]
    return min([f for f in found if f >= 0], default=len(text))


ROWS = (first_named_row, rules_row, learned_row)


def arm_table(title: str, trials: Sequence[tuple[Paper, ArmLabel]], rows: Mapping[str, Arms]) -> list[str]:
    lines = [
        f"## {title}: {len(trials)} trials (title hidden from the extractors)",
        "",
        "| extractor | I right | C right | both right | swapped | C filled |",
        "|---|---|---|---|---|---|",
    ]
    for name, arms in rows.items():
        score = ArmScore()
        for paper, label in trials:
            score.add(label, *arms(replace(paper, title="")))
        lines.append(f"| {name} | " + " | ".join(score.cells()) + " |")
    return lines


_RANDOM = re.compile(r"\brandom", re.I)


def labelled_trials(papers: Sequence[Paper]) -> list[tuple[Paper, ArmLabel]]:
    """The papers whose abstract says it randomised ("random...") and whose title names two arms, with the label."""
    out = []
    for paper in papers:
        label = label_from_title(paper) if _RANDOM.search(paper.abstract) else None
        if label:
            out.append((paper, label))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", type=Path, default=ROOT / "data/demo/Cohen_2006_ProtonPumpInhibitors.csv")
    parser.add_argument("--ebmnlp", type=Path, default=ROOT / "tests/fixtures/ebmnlp/ebmnlp_dev.txt")
    parser.add_argument("--expert", type=Path, help="also EBM-NLP's expert test split (CoNLL), kept outside the repo")
    parser.add_argument("--show", type=int, default=0, help="print N held-out trials' labels and extractions")
    args = parser.parse_args()
    papers = load_papers(args.csv) + [d.paper() for d in read_ebmnlp(args.ebmnlp)]
    papers += [d.paper() for d in read_ebmnlp(args.expert)] if args.expert else []
    trials = labelled_trials(papers)
    rows = dict(make() for make in ROWS)
    held_out = [t for t in trials if t[0].pmid % 2 == 1]
    dev = [t for t in trials if t[0].pmid % 2 == 0]
    lines = ["# Intervention vs comparator on title-labelled trials", ""]
    lines += arm_table("Held out (odd PMIDs)", held_out, rows)
    lines += ["", *arm_table("Dev (even PMIDs; the arm logic was developed on these)", dev, rows), ""]
    print("\n".join(lines))
    for paper, label in held_out[: args.show]:
        print(f"- {paper.pmid}: X={label.experimental!r} Y={label.comparator!r}")
        for name, arms in rows.items():
            print(f"    {name}: I, C = {arms(replace(paper, title=''))}")


if __name__ == "__main__":
    main()
