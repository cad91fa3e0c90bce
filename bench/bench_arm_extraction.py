"""Benchmark: arm-level data extraction (rules:arm-numbers-v1) against a hand-made gold set, next to a baseline.

Gold: tests/fixtures/arm_data/gold.tsv, 40 trial abstracts of the demo corpus read by hand (see its PROVENANCE.md).
The PMIDs are split once by their sorted order: even positions are the development half (the rules were tuned on
it), odd positions the held-out half (reported first; never used to tune). A gold datum counts as found when the
extractor returns, for the same PMID, a datum of the same drug and time point (weeks) with the same events and
total. Precision: share of extracted data that match a gold datum (the gold lists every efficacy result the
abstract states with both numbers, so an unmatched datum is a wrong or unsupported one).

Baseline (same run): every count pair "x/y", "x of y" in a sentence, given the drug named nearest to it in that
sentence and the first time point the sentence names; percentages are not converted.

    python bench/bench_arm_extraction.py [--csv data/demo/Cohen_2006_ProtonPumpInhibitors.csv] [--show-misses]
"""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable
from pathlib import Path

from ra_agent.evidence.pico.text import sections_of, sentences
from ra_agent.evidence.synthesis.extract import DRUG, EXTRACTOR, _times, extract_arm_data
from ra_agent.models import Paper

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "tests" / "fixtures" / "arm_data" / "gold.tsv"

Key = tuple[int, str, float | None, int, int]


def load_gold(path: Path = GOLD) -> dict[int, set[Key]]:
    gold: dict[int, set[Key]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        pmid, arm, _outcome, weeks, events, total = line.split("\t")
        rows = gold.setdefault(int(pmid), set())
        if arm != "-":
            rows.add((int(pmid), arm.split()[0].lower(), float(weeks), int(events), int(total)))
    return gold


def split(pmids: list[int]) -> tuple[list[int], list[int]]:
    """(development, held-out): even and odd positions of the sorted PMIDs."""
    ordered = sorted(pmids)
    return ordered[0::2], ordered[1::2]


def load_papers(csv_path: Path, pmids: set[int]) -> dict[int, Paper]:
    out = {}
    with csv_path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            pmid = int(row["pubmedID"])
            if pmid in pmids:
                out[pmid] = Paper(pmid=pmid, title=row["title"], abstract=row["abstract"])
    return out


def ra_rules(paper: Paper) -> set[Key]:
    return {(d.pmid, d.drug, d.weeks, d.events, d.total) for d in extract_arm_data(paper)}


_PAIR = re.compile(r"\b(\d+)\s*(?:/|out of|of)\s*(?:the\s+)?(\d+)\b")
_DRUG = re.compile(rf"\b{DRUG}\b", re.I)


def baseline(paper: Paper) -> set[Key]:
    out = set()
    for section in sections_of(paper):
        for s in sentences(section.text):
            times = _times(s)
            for m in _PAIR.finditer(s):
                drugs = sorted(_DRUG.finditer(s), key=lambda d: min(abs(d.start() - m.end()), abs(m.start() - d.end())))
                if drugs and int(m.group(1)) <= int(m.group(2)):
                    drug = drugs[0].group(0).lower()
                    out.add((paper.pmid, drug, times[0][1] if times else None, int(m.group(1)), int(m.group(2))))
    return out


def score(name: str, fn: Callable[[Paper], set[Key]], papers: dict[int, Paper], gold: dict[int, set[Key]],
          pmids: list[int], show: bool) -> str:  # fmt: skip
    found = extracted = correct = 0
    total = sum(len(gold[p]) for p in pmids)
    for pmid in pmids:
        got = fn(papers[pmid])
        hit = got & gold[pmid]
        found += len(hit)
        extracted += len(got)
        correct += len(hit)
        if show:
            for miss in sorted(gold[pmid] - got, key=str):
                print(f"    miss  {name}: {miss}")
            for extra in sorted(got - gold[pmid], key=str):
                print(f"    extra {name}: {extra}")
    recall = found / total if total else 0.0
    precision = correct / extracted if extracted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return (f"  {name:28s} recall {recall:6.1%} ({found}/{total})  precision {precision:6.1%} "
            f"({correct}/{extracted})  F1 {f1:.3f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv")
    ap.add_argument("--show-misses", action="store_true", help="list the misses and extras of the development half")
    args = ap.parse_args()
    gold = load_gold()
    papers = load_papers(args.csv, set(gold))
    dev, held = split(list(gold))
    for label, pmids, show in (("held-out half", held, False), ("development half", dev, args.show_misses)):
        n = sum(len(gold[p]) for p in pmids)
        print(f"{label}: {len(pmids)} abstracts, {n} gold arm data ({sum(not gold[p] for p in pmids)} abstracts "
              "state none with both numbers)")  # fmt: skip
        print(score(f"ra {EXTRACTOR}", ra_rules, papers, gold, pmids, show))
        print(score("baseline: count pairs", baseline, papers, gold, pmids, show))


if __name__ == "__main__":
    main()
