"""Benchmark: arm-level data extraction (rules:arm-numbers-v2) against hand-made gold sets, next to two baselines.

Gold (tests/fixtures/arm_data/, see PROVENANCE.md):
- heldout2.tsv: the fresh held-out batch, 43 demo trial abstracts read by hand before any extractor ran on them;
  reported first, and the figure to quote;
- gold.tsv: 40 demo abstracts split once by sorted PMID: even positions the development half (the rules were
  tuned on it), odd positions the first held-out half, compromised (the rules were changed after a draft showed
  three of its abstracts; PROVENANCE.md gives its clean first figure).
A gold datum counts as found when the extractor returns, for the same PMID, a datum whose drug is named in the gold
arm label, at the same time point (weeks), with the same events and total. Precision: share of extracted data that
match a gold datum (the gold lists every efficacy result the abstract states with both numbers, so an unmatched
datum is a wrong or unsupported one). Outcome: among the found data, the share whose outcome class (healing,
relapse, remission, eradication, symptom relief, other; `outcome_class_of` reads the gold label by keywords) is
the extractor's.

Baselines (same run):
- count pairs: every "x/y", "x of y" in a sentence, given the drug named nearest to it and the sentence's first time
  point; percentages are not converted;
- count pairs + percent × n: also every percentage times the size the abstract states for the nearest drug's arm
  ("drug ... (n = 188)", "188 patients received drug"), rounded, without checking that the count reproduces the
  printed percentage or that the sentence is not per-protocol.

    python bench/bench_arm_extraction.py [--csv data/demo/Cohen_2006_ProtonPumpInhibitors.csv] [--show-misses]
"""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.synthesis.compare import outcome_key
from ra_agent.evidence.synthesis.extract import DRUG, EXTRACTOR, extract_arm_data, time_points
from ra_agent.models import Paper

ROOT = Path(__file__).resolve().parents[1]
GOLD_DIR = ROOT / "tests" / "fixtures" / "arm_data"
GOLD = GOLD_DIR / "gold.tsv"
HELDOUT2 = GOLD_DIR / "heldout2.tsv"

Key = tuple[int, str, float | None, int, int]  # (pmid, drug, weeks, events, total)


@dataclass(frozen=True)
class GoldDatum:
    pmid: int
    arm: str  # "omeprazole 20 mg + amoxicillin + clarithromycin"
    outcome: str
    weeks: float | None
    events: int
    total: int

    @property
    def drugs(self) -> set[str]:
        return {w.lower() for w in re.findall(r"[A-Za-z][\w/-]*", self.arm)}

    def matches(self, key: Key) -> bool:
        pmid, drug, weeks, events, total = key
        return (pmid, weeks, events, total) == (self.pmid, self.weeks, self.events, self.total) and drug in self.drugs


Extracted = tuple[Key, str]  # a datum's key and its outcome class


def load_gold(path: Path = GOLD) -> dict[int, list[GoldDatum]]:
    """PMID → its gold data (an empty list: the abstract states no result with both numbers). Each line: pmid, arm,
    outcome, weeks ("-": none stated), events, total, tab-separated; a line with arm "-" lists an abstract without
    data; "#" lines are comments. A malformed line raises ValueError naming the file and line."""
    gold: dict[int, list[GoldDatum]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            pmid, arm, outcome, weeks, events, total = line.split("\t")
            rows = gold.setdefault(int(pmid), [])
            if arm != "-":
                rows.append(GoldDatum(int(pmid), arm, outcome, None if weeks == "-" else float(weeks), int(events),
                                      int(total)))  # fmt: skip
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: expected pmid, arm, outcome, weeks, events, total ({exc})") from exc
    return gold


def split(pmids: Iterable[int]) -> tuple[list[int], list[int]]:
    """(development, held-out): even and odd positions of the sorted PMIDs."""
    ordered = sorted(pmids)
    return ordered[0::2], ordered[1::2]


# Outcome classes of gold labels, by keyword, first match wins (independent of the extractor's own regexes).
OUTCOME_CLASSES = (
    ("eradication", r"eradicat|\bcure|clearance|pylori[- ]negative"),
    ("relapse", r"relapse|recurren"),
    ("remission", r"remission|maintained|remained healed"),
    ("healing", r"heal"),
    ("symptom relief", r"relief|resol|improve|free|heartburn|pain|well-being|symptom"),
)


def outcome_class_of(label: str) -> str:
    """The outcome class a gold label names ("ulcer healing (per protocol)" → "healing"), else "other"."""
    return next((name for name, rx in OUTCOME_CLASSES if re.search(rx, label, re.I)), "other")


def load_papers(csv_path: Path, pmids: set[int]) -> dict[int, Paper]:
    out = {}
    with csv_path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            pmid = int(row["pubmedID"])
            if pmid in pmids:
                out[pmid] = Paper(pmid=pmid, title=row["title"], abstract=row["abstract"])
    return out


def ra_rules(paper: Paper) -> list[Extracted]:
    return [((d.pmid, d.drug, d.weeks, d.events, d.total), outcome_key(d.outcome))
            for d in extract_arm_data(paper) if not d.continuous]  # fmt: skip


_PAIR = re.compile(r"\b(\d+)\s*(?:/|out of|of)\s*(?:the\s+)?(\d+)\b")
_PERCENT = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*%")
_DRUG = re.compile(rf"\b{DRUG}\b", re.I)


def _units(paper: Paper) -> list[str]:
    return [s for section in sections_of(paper) for s in sentences(section.text)]


def _nearest_drug(sentence: str, start: int, end: int) -> str | None:
    drugs = sorted(_DRUG.finditer(sentence), key=lambda d: min(abs(d.start() - end), abs(start - d.end())))
    return drugs[0].group(0).lower() if drugs else None


def _first_weeks(sentence: str) -> float | None:
    times = time_points(sentence)
    return times[0][1] if times else None


def baseline(paper: Paper) -> list[Extracted]:
    """Count pairs with the nearest drug (see the module docstring)."""
    out = []
    for s in _units(paper):
        for m in _PAIR.finditer(s):
            drug = _nearest_drug(s, m.start(), m.end())
            if drug and int(m.group(1)) <= int(m.group(2)):
                out.append(((paper.pmid, drug, _first_weeks(s), int(m.group(1)), int(m.group(2))), "other"))
    return out


def _arm_sizes(text: str) -> dict[str, int]:
    """Drug → the first size the abstract states for it: "drug ... (n = 188)" or "188 patients received drug"."""
    sizes: dict[str, int] = {}
    for m in re.finditer(rf"\b({DRUG})\b[^.;()]{{0,40}}\(\s*n\s*=\s*(\d+)", text, re.I):
        sizes.setdefault(m.group(1).lower(), int(m.group(2)))
    for m in re.finditer(rf"\b(\d+)\s+(?:patients|subjects)\s+(?:received|were given|taking|on)\s+(?:\S+\s+){{0,3}}?({DRUG})\b",
                         text, re.I):  # fmt: skip
        sizes.setdefault(m.group(2).lower(), int(m.group(1)))
    return sizes


def baseline_percent(paper: Paper) -> list[Extracted]:
    """Count pairs, and every percentage times the stated size of the nearest drug's arm (see the module docstring)."""
    out = baseline(paper)
    sizes = _arm_sizes(paper.abstract)
    for s in _units(paper):
        for m in _PERCENT.finditer(s):
            drug = _nearest_drug(s, m.start(), m.end())
            if drug and drug in sizes:
                n = sizes[drug]
                out.append(((paper.pmid, drug, _first_weeks(s), round(float(m.group(1)) * n / 100), n), "other"))
    return out


@dataclass(frozen=True)
class Score:
    found: int
    gold: int
    correct: int
    extracted: int
    outcome_right: int  # found data whose outcome class is the gold's

    @property
    def recall(self) -> float:
        return self.found / self.gold if self.gold else 0.0

    @property
    def precision(self) -> float:
        return self.correct / self.extracted if self.extracted else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(fn: Callable[[Paper], list[Extracted]], papers: dict[int, Paper], gold: dict[int, list[GoldDatum]],
          pmids: Iterable[int], show: Callable[[str], None] | None = None) -> Score:  # fmt: skip
    """Recall, precision and outcome agreement of `fn` on `pmids` (each extracted key counted once)."""
    found = gold_n = correct = extracted = outcome_right = 0
    for pmid in pmids:
        got = dict(fn(papers[pmid]))  # key → outcome class
        rows = gold[pmid]
        gold_n += len(rows)
        extracted += len(got)
        correct += sum(any(g.matches(k) for g in rows) for k in got)
        for g in rows:
            hit = [k for k in got if g.matches(k)]
            found += bool(hit)
            outcome_right += bool(hit) and any(got[k] == outcome_class_of(g.outcome) for k in hit)
            if show and not hit:
                show(f"    miss  {g}")
        for k in got:
            if show and not any(g.matches(k) for g in rows):
                show(f"    extra {k}")
    return Score(found, gold_n, correct, extracted, outcome_right)


def line(name: str, s: Score, with_outcome: bool) -> str:
    text = (f"  {name:36s} recall {s.recall:6.1%} ({s.found}/{s.gold})  precision {s.precision:6.1%} "
            f"({s.correct}/{s.extracted})  F1 {s.f1:.3f}")  # fmt: skip
    if with_outcome:
        text += f"  outcome class right {s.outcome_right}/{s.found}"
    return text


EXTRACTORS = (
    (f"ra {EXTRACTOR}", ra_rules, True),
    ("baseline: count pairs", baseline, False),
    ("baseline: count pairs + percent x n", baseline_percent, False),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv")
    ap.add_argument("--show-misses", action="store_true", help="list the misses and extras of the development half")
    args = ap.parse_args()
    gold, fresh = load_gold(GOLD), load_gold(HELDOUT2)
    papers = load_papers(args.csv, set(gold) | set(fresh))
    dev, held = split(gold)
    sets = (
        ("fresh held-out batch (heldout2.tsv, 2026-11-26)", fresh, sorted(fresh), False),
        ("first held-out half of gold.tsv (compromised, see PROVENANCE.md)", gold, held, False),
        ("development half of gold.tsv", gold, dev, args.show_misses),
    )
    for label, source, pmids, show in sets:
        n = sum(len(source[p]) for p in pmids)
        print(f"{label}: {len(pmids)} abstracts, {n} gold arm data ({sum(not source[p] for p in pmids)} abstracts "
              "state none with both numbers)")  # fmt: skip
        for name, fn, with_outcome in EXTRACTORS:
            print(line(name, score(fn, papers, source, pmids, print if show and with_outcome else None), with_outcome))


if __name__ == "__main__":
    main()
