"""Print the PICO quality report (Markdown): the learned tagger vs the rules vs the section-lead baseline, measured in
one run on the held-out half of EBM-NLP (odd PMIDs; no training or tuning step read it), plus tagging time on the
demo corpus, demo-corpus design counts and gold-set F1.

Each extractor is one row (`ROWS`: name → function of a Paper returning its fields); to add one (an LLM, say), add a
function and a row. `--expert PATH` scores held-out expert labels kept outside the repository (EBM-NLP's test split in
the same CoNLL form) the same way.

With an LLM server that answers (`--llm-base-url` / `--llm-model` / `--llm-backend`, else the `[llm]` section of
`--config`), a row for the LLM extractor is added, named by its model; `--limit N` scores every row on the first N
held-out abstracts (the LLM is slow on a CPU), and the table says it is a sample.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ra_agent.evidence.pico import learned
from ra_agent.evidence.pico.ebmnlp import (
    FIELD_LABELS,
    SECTION_LEAD_BASELINE,
    LabelledAbstract,
    halves,
    read_ebmnlp,
    run_values,
    score_values,
    section_lead,
)
from ra_agent.evidence.pico.extract import LearnedExtractor, RuleExtractor
from ra_agent.evidence.pico.quality import evaluate, gold_papers, load_gold, load_papers, markdown_report
from ra_agent.models import Paper

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = "odd"  # scripts/train_pico_tagger.py trains on the even half
Fields = Callable[[Paper], Mapping[str, str]]


def baseline_row() -> tuple[str, Fields]:
    return SECTION_LEAD_BASELINE, section_lead


def rules_row() -> tuple[str, Fields]:
    rules = RuleExtractor()
    return rules.name, lambda paper: rules.extract_one(paper).fields()


def learned_row() -> tuple[str, Fields]:
    tagger = LearnedExtractor()
    return tagger.name, lambda paper: tagger.extract_one(paper).fields()


ROWS = (baseline_row, rules_row, learned_row)


# ---------------------------------------------------------------------------- the LLM row (when a server answers)


class LlmRow:
    """The LLM extractor on one abstract at a time (schema-constrained, grounded values). A batch the LLM could not
    answer counts as empty fields here (the extractor would use its fallback: that is not the LLM's figure)."""

    def __init__(self, brain, cfg):
        from ra_agent.embed.tokens import prompt_budget
        from ra_agent.evidence.pico.llm_extract import LlmExtractor

        self.extractor = LlmExtractor(brain, batch_size=1, fallback=LearnedExtractor(), token_budget=prompt_budget(cfg))
        self.name = f"LLM {brain.name} (grounded)"
        self.failed = 0
        self.dropped: list[str] = []  # "field value: why" of each value the grounding rule dropped

    def __call__(self, paper: Paper) -> Mapping[str, str]:
        (record,) = self.extractor.extract([paper])
        if record.extractor != self.extractor.name:  # the fallback extractor answered
            self.failed += 1
            return {}
        self.dropped += [f"{k} {why}" for k, why in record.dropped.items()]
        return record.fields()

    def summary(self) -> str:
        calls = self.extractor.call_summary()
        return (
            f"{self.name}: {calls['llm_calls']} calls ({calls['llm_mode']}), {calls['llm_completion_tokens']} tokens "
            f"generated in {calls['llm_total_s']:.0f} s; {self.failed} abstracts without a usable reply (scored "
            f"empty); {len(self.dropped)} values dropped as not grounded in the abstract"
            + "".join(f"\n- e.g. {d[:160]}" for d in self.dropped[:: max(1, len(self.dropped) // 5)][:5])
        )


def llm_row(args: argparse.Namespace) -> LlmRow | None:
    """The LLM row when the configured (or flagged) server answers, else None (the reason is printed)."""
    from ra_agent.config import Config, load_config
    from ra_agent.llm.select import llm_brain

    cfg = load_config(args.config) if args.config else Config()
    flags = {"openai_base_url": args.llm_base_url, "model": args.llm_model, "backend": args.llm_backend}
    overrides = {k: v for k, v in flags.items() if v}
    if args.llm_base_url and not args.llm_backend:
        overrides["backend"] = "openai"
    cfg = cfg.with_overrides(llm={**overrides, "brain": "llm"}) if overrides else cfg
    brain = llm_brain(cfg)
    reason = brain.unavailable_reason()
    if reason:
        print(f"(no LLM row: {reason})\n")
        return None
    return LlmRow(brain, cfg)


def value_table(title: str, docs: Sequence[LabelledAbstract], rows: Mapping[str, Fields]) -> list[str]:
    """Value precision, the two recalls (any value; a precise value) and token P/R/F1 (of the values' tokens) per
    field, and token macro-F1, per row."""
    lines = [
        f"## {title}: {len(docs)} abstracts",
        "",
        "| extractor | P value prec / any-value recall / precise recall | I (all arms) value prec / any / precise | "
        "O value prec / any / precise | P token P/R/F1 | I token P/R/F1 | O token P/R/F1 | token macro-F1 | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, fields in rows.items():
        started = time.perf_counter()
        scores = score_values(docs, run_values(fields, docs))
        elapsed = time.perf_counter() - started
        values = [f"{s.value_precision:.3f} / {s.recall:.3f} / {s.precise_recall:.3f}" for s in scores.values()]
        tokens = [_prf(s.tp, s.fp, s.fn) for s in scores.values()]
        macro = sum(s.token_f1 for s in scores.values()) / len(scores)
        lines.append(f"| {name} | " + " | ".join([*values, *tokens, f"{macro:.3f}", f"{elapsed:.1f}"]) + " |")
    return lines


def _prf(tp: int, fp: int, fn: int) -> str:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return f"{p:.3f} / {r:.3f} / {f:.3f}"


def tagger_token_table(docs: Sequence[LabelledAbstract]) -> list[str]:
    """The tagger's own labels on every token (all mentions), per field: what BLURB's token F1 measures."""
    counts = {label: [0, 0, 0] for label in FIELD_LABELS.values()}
    for doc in docs:
        for items, gold in learned.training_sequences(doc):
            tags, _ = learned.tag_items(items)
            for got, want in zip((FIELD_LABELS.get(t, "O") for t in tags), gold, strict=True):
                for label, c in counts.items():
                    c[0] += got == label and want == label
                    c[1] += got == label and want != label
                    c[2] += got != label and want == label
    f1 = [2 * tp / (2 * tp + fp + fn) if tp else 0.0 for tp, fp, fn in counts.values()]
    return [
        f"Tagger labels on every token of the same {len(docs)} abstracts (all mentions; P / R / F1): "
        + " · ".join(f"{f} {_prf(*c)}" for f, c in zip(FIELD_LABELS, counts.values(), strict=True))
        + f" · token macro-F1 {sum(f1) / len(f1):.3f}",
    ]


def timing_table(demo_csv: Path) -> list[str]:
    """Seconds to extract every demo abstract with the rules and with the learned tagger (same papers, same run)."""
    papers = [p for p in load_papers(demo_csv) if p.abstract.strip()]
    lines = [f"## Extraction time on the demo corpus ({len(papers)} abstracts, {demo_csv.name})", ""]
    rules = RuleExtractor()
    tagger = LearnedExtractor()
    tagger.extract(papers[:1])  # load the model outside the timing
    for extractor in (rules, tagger):
        started = time.perf_counter()
        extractor.extract(papers)
        lines.append(f"- {extractor.name}: {time.perf_counter() - started:.1f} s")
    for path in (learned.MODEL_PATH, learned.INTERVENTION_MODEL_PATH):
        lines.append(f"- model file {path.relative_to(ROOT)}: {path.stat().st_size / 1e6:.1f} MB")
    return lines


NOTE = (
    "A value is precise when >= 50% of its content tokens (stop words dropped) fall on tokens labelled for the "
    "field in the sentence it aligns to (each '; ' arm aligned on its own). Any-value recall is the share of "
    "abstracts with a labelled field that get a value, right or wrong (a fill rate: the section-lead baseline "
    "scores 1.000); precise recall is the share that get a precise value, the strict reading the issue's bar "
    "(precision >= 0.70, recall >= 0.60) is held to. Token P/R/F1 are over the token positions the values cover "
    "against every labelled position (one value per field recalls few of them); EBM-NLP labels comparator arms as "
    "interventions, so I joins I and C. The rules were developed on the even half of this file and the P/I/O tagger "
    "was trained on it (the intervention tagger on EBM-NLP's difficulty release, outside this file); all are "
    "reported on the odd half, which no training or tuning step read, and on expert labels when --expert is given."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", type=Path, default=ROOT / "data/demo/Cohen_2006_ProtonPumpInhibitors.csv")
    parser.add_argument("--gold", type=Path, default=ROOT / "tests/fixtures/pico_gold.jsonl")
    parser.add_argument("--ebmnlp", type=Path, default=ROOT / "tests/fixtures/ebmnlp/ebmnlp_dev.txt")
    parser.add_argument("--expert", type=Path, help="held-out expert-labelled abstracts (CoNLL), scored the same way")
    parser.add_argument("--skip-demo", action="store_true", help="only the EBM-NLP tables (no demo timing or reports)")
    parser.add_argument("--details", action="store_true", help="also print each gold record next to the extraction")
    parser.add_argument("--config", type=Path, help="config.toml whose [llm] section names the LLM server")
    parser.add_argument("--llm-base-url", help="an OpenAI-compatible server, e.g. the one `ra llm serve` prints")
    parser.add_argument("--llm-model", help="the model name to ask for")
    parser.add_argument("--llm-backend", choices=("ollama", "openai"), help="default: openai with --llm-base-url")
    parser.add_argument("--limit", type=int, help="score every row on the first N held-out abstracts only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    rows = dict(make() for make in ROWS)
    llm = llm_row(args) if args.config or args.llm_base_url or args.llm_model or args.llm_backend else None
    if llm is not None:
        rows[llm.name] = llm
    held_out = halves(read_ebmnlp(args.ebmnlp))[HELD_OUT]
    sample = ""
    if args.limit:
        held_out, sample = held_out[: args.limit], f" (a sample: its first {args.limit})"
    lines = ["# PICO extractors side by side", ""]
    lines += value_table(f"EBM-NLP dev split, held-out {HELD_OUT}-PMID half{sample} (crowd labels)", held_out, rows)
    if llm is not None:
        lines += ["", llm.summary()]
    lines += ["", *tagger_token_table(held_out)]
    if args.expert:
        expert = read_ebmnlp(args.expert)
        lines += ["", *value_table(f"Expert labels ({args.expert.name})", expert, rows)]
        lines += ["", *tagger_token_table(expert)]
    lines += ["", NOTE, ""]
    print("\n".join(lines))
    if args.skip_demo:
        return
    print("\n".join([*timing_table(args.demo), ""]))
    for extractor in (LearnedExtractor(), RuleExtractor()):
        print(markdown_report(evaluate(args.demo, args.gold, ROOT, extractor)))
    if args.details:
        gold = load_gold(args.gold)
        papers = gold_papers(gold, ROOT)
        extractor = LearnedExtractor()
        for g in gold:
            record = extractor.extract_one(papers[g.pmid])
            print(f"### {g.pmid} — {papers[g.pmid].title[:100]}")
            for key, want in g.fields.items():
                print(
                    f"- {key}\n    gold: {want}\n    got:  {getattr(record, key)}\n    cue:  {record.evidence.get(key, '')}"
                )
            print()


if __name__ == "__main__":
    main()
