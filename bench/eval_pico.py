"""Print the PICO quality report (Markdown): demo-corpus design counts, gold-set F1, and EBM-NLP value precision / recall /
token F1 of the rules against the section-lead baseline measured in the same run."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ra_agent.evidence.pico.ebmnlp import SECTION_LEAD_BASELINE, markdown_table, read_ebmnlp, section_lead
from ra_agent.evidence.pico.extract import RuleExtractor
from ra_agent.evidence.pico.quality import evaluate, gold_papers, load_gold, markdown_report

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--demo", type=Path, default=ROOT / "data/demo/Cohen_2006_ProtonPumpInhibitors.csv")
    parser.add_argument("--gold", type=Path, default=ROOT / "tests/fixtures/pico_gold.jsonl")
    parser.add_argument("--ebmnlp", type=Path, default=ROOT / "tests/fixtures/ebmnlp/ebmnlp_dev.txt")
    parser.add_argument("--details", action="store_true", help="also print each gold record next to the extraction")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    quality = evaluate(args.demo, args.gold, ROOT)
    print(markdown_report(quality))
    rules = RuleExtractor()
    extractors = {SECTION_LEAD_BASELINE: section_lead, rules.name: lambda paper: rules.extract_one(paper).fields()}
    print(markdown_table(read_ebmnlp(args.ebmnlp), extractors))
    if args.details:
        gold = load_gold(args.gold)
        papers = gold_papers(gold, ROOT)
        extractor = RuleExtractor()
        scores = {row["pmid"]: row for row in quality.gold.rows}
        for g in gold:
            record = extractor.extract_one(papers[g.pmid])
            print(f"### {g.pmid} — {papers[g.pmid].title[:100]}")
            for key, want in g.fields.items():
                print(f"- {key} [{scores[g.pmid][key]}]")
                print(f"    gold: {want}\n    got:  {getattr(record, key)}\n    cue:  {record.evidence.get(key, '')}")
            print()


if __name__ == "__main__":
    main()
