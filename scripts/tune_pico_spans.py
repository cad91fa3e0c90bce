"""Choose the learned tagger's intervention model and span rules (`learned.SpanRules`) on dev parts, never on the
held-out half.

Dev models are trained inside the training data only: the P/I/O tagger on PMIDs = 0 (mod 4) of the training half
(even PMIDs of the EBM-NLP dev split); intervention taggers on the difficulty release's abstracts outside the dev
split with PMID != 2 (mod 4), alone ("expert") or with the I labels of PMIDs = 0 (mod 4) ("crowd+expert"). They are
scored on two dev parts: PMIDs = 2 (mod 4) of the training half (crowd labels) and the difficulty release's PMIDs =
2 (mod 4) outside the dev split (expert intervention labels). The odd half, which bench/eval_pico.py reports on, is
not read.

1. Intervention labels: the P/I/O tagger's own I labels vs each intervention tagger's (token P/R/F1 on every
   mention, and value precision / any-value recall / precise recall of I with the shipped span rules).
2. Span rules, with the P/I/O tagger and the "expert" intervention tagger: each field's knobs varied around the
   shipped values (P: min_p; I: min_i, more_arms; O: min_o, outcome_floor, max_outcomes). The pick per field: the
   highest precise recall among settings with value precision >= 0.75 (a margin over the issue's 0.70), or >= 0.70
   when none reaches 0.75, token F1 breaking ties; the shipped values are marked.

    python scripts/tune_pico_spans.py --interventions DIR [--data tests/fixtures/ebmnlp/ebmnlp_dev.txt]
        [--model-dir /tmp/pico-dev] [--fields PIO]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pycrfsuite
from train_pico_tagger import intervention_docs, stop_at_once, train

from ra_agent.evidence.pico import learned
from ra_agent.evidence.pico.ebmnlp import (
    FIELD_LABELS,
    FieldScore,
    LabelledAbstract,
    halves,
    interventions_only,
    read_ebmnlp,
    read_intervention_labels,
    score_values,
)
from ra_agent.evidence.pico.text import Doc

ROOT = Path(__file__).resolve().parents[1]
PRECISION_FLOORS = (0.75, 0.70)
GRID = {
    "P": {"min_p": (0.6, 0.7, 0.8, 0.9)},
    "I": {"min_i": (0.5, 0.6, 0.7, 0.8), "more_arms": (0.9, 0.95, 1.01)},
    "O": {"min_o": (0.6, 0.7, 0.8, 0.9), "outcome_floor": (1.01, 0.5, 0.3), "max_outcomes": (1, 2, 3)},
}


def dev_split(docs: Sequence[LabelledAbstract]) -> tuple[list[LabelledAbstract], list[LabelledAbstract]]:
    """(train, dev) inside the training half: PMIDs = 0 and = 2 (mod 4)."""
    even = halves(docs)["even"]
    return [d for d in even if d.pmid % 4 == 0], [d for d in even if d.pmid % 4 == 2]


def open_model(path: Path):
    tagger = pycrfsuite.Tagger()  # pyright: ignore[reportAttributeAccessIssue] - compiled module, no stubs
    tagger.open(str(path))
    return tagger


Tagged = list[tuple[LabelledAbstract, list[learned.TaggedSentence], learned.ArmHints]]


def tag_dev(docs: Sequence[LabelledAbstract], taggers: learned.Taggers) -> Tagged:
    """Each dev abstract with its tagged sentences (by the dev models) and the rules' arm structure."""
    out = []
    for doc in docs:
        paper = doc.paper()
        out.append((doc, learned.tag_paper(paper, taggers), learned.ArmHints.of(Doc(paper))))
    return out


def score(tagged: Tagged, rules: learned.SpanRules) -> dict[str, FieldScore]:
    values = {}
    for doc, rows, hints in tagged:
        found, _ = learned.fields_from_spans(rows, "dev", hints, rules)
        arms = "; ".join(v for v in (found.get("I", ""), found.get("C", "")) if v)
        values[doc.pmid] = {"P": found.get("P", ""), "I": arms, "O": found.get("O", "")}
    return score_values([doc for doc, _, _ in tagged], values)


def intervention_tokens(docs: Sequence[LabelledAbstract], taggers: learned.Taggers) -> str:
    """Token P / R / F1 of the intervention label on every mention."""
    tp = fp = fn = 0
    for doc in docs:
        for items, gold in learned.training_sequences(doc):
            tags, _ = learned.tag_items(items, taggers)
            for got, want in zip(tags, gold, strict=True):
                tp += got == "I" and want == FIELD_LABELS["I"]
                fp += got == "I" and want != FIELD_LABELS["I"]
                fn += got != "I" and want == FIELD_LABELS["I"]
    p, r = tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0
    return f"{p:.3f} / {r:.3f} / {2 * tp / (2 * tp + fp + fn) if tp else 0.0:.3f}"


def value_cell(s: FieldScore) -> str:
    return f"{s.value_precision:.3f} / {s.recall:.3f} / {s.precise_recall:.3f}"


def intervention_table(parts: dict[str, list[LabelledAbstract]], variants: dict[str, learned.Taggers]) -> list[str]:
    lines = [
        "## 1. Intervention labels",
        "",
        "| I labels from | "
        + " | ".join(f"{n} ({len(d)}) token P/R/F1 | value prec / any / precise" for n, d in parts.items())
        + " |",
        "|---|" + "---|---|" * len(parts),
    ]
    for name, taggers in variants.items():
        cells = []
        for docs in parts.values():
            cells += [
                intervention_tokens(docs, taggers),
                value_cell(score(tag_dev(docs, taggers), learned.SPAN_RULES)["I"]),
            ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def field_table(tagged: Tagged, field_name: str) -> tuple[list[str], dict[str, float]]:
    """Markdown rows for every setting of one field's knobs, and the picked setting."""
    knobs = GRID[field_name]
    shipped = {k: getattr(learned.SPAN_RULES, k) for k in knobs}
    lines = [f"### {field_name}", "", f"| {' | '.join(knobs)} | value prec / any / precise | token F1 |"]
    lines.append("|" + "---|" * (len(knobs) + 2))
    scored = []
    for combo in itertools.product(*knobs.values()):
        setting = dict(zip(knobs, combo, strict=True))
        s = score(tagged, replace(learned.SPAN_RULES, **setting))[field_name]
        mark = " (shipped)" if setting == shipped else ""
        lines.append(f"| {' | '.join(str(v) for v in combo)} | {value_cell(s)}{mark} | {s.token_f1:.3f} |")
        scored.append((s, setting))
    for floor in PRECISION_FLOORS:
        fit = [(s.precise_recall, s.token_f1, i) for i, (s, _) in enumerate(scored) if s.value_precision >= floor]
        if fit:
            return lines, scored[max(fit)[2]][1]
    return lines, shipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "tests/fixtures/ebmnlp/ebmnlp_dev.txt")
    parser.add_argument("--interventions", type=Path, required=True, help="EBM-NLP's difficulty release, unpacked")
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/pico-dev"), help="dev models (trained if absent)")
    parser.add_argument("--fields", default="PIO", help="which fields' span rules to vary (default PIO; '' for none)")
    args = parser.parse_args()
    stop_at_once()
    dev_file = read_ebmnlp(args.data)
    crowd_train, crowd_dev = dev_split(dev_file)
    outside = intervention_docs(dev_file, read_intervention_labels(args.interventions))
    expert_train = [d for d in outside if d.pmid % 4 != 2]
    expert_dev = [d for d in outside if d.pmid % 4 == 2]
    models = {
        "pio": crowd_train,
        "int-expert": expert_train,
        "int-crowd+expert": [interventions_only(d) for d in crowd_train] + expert_train,
    }
    for name, docs in models.items():
        path = args.model_dir / f"{name}.crfsuite"
        if not path.exists():
            print(f"training the dev model {name} on {len(docs)} abstracts -> {path}", flush=True)
            train(docs, path)
    opened = {name: open_model(args.model_dir / f"{name}.crfsuite") for name in models}
    variants = {
        "the P/I/O tagger": learned.Taggers(opened["pio"], None),
        "intervention tagger, crowd+expert": learned.Taggers(opened["pio"], opened["int-crowd+expert"]),
        "intervention tagger, expert (shipped)": learned.Taggers(opened["pio"], opened["int-expert"]),
    }
    parts = {"crowd dev": crowd_dev, "expert dev": expert_dev}
    print(f"# Dev parts: crowd PMIDs = 2 mod 4 ({len(crowd_dev)}), expert PMIDs = 2 mod 4 ({len(expert_dev)})\n")
    print("\n".join(intervention_table(parts, variants)), "\n", flush=True)
    tagged = tag_dev(crowd_dev, variants["intervention tagger, expert (shipped)"])
    print(f"## 2. Span rules on the crowd dev part ({len(crowd_dev)} abstracts)\n")
    picks = {}
    for field_name in args.fields:
        lines, pick = field_table(tagged, field_name)
        picks.update(pick)
        print("\n".join([*lines, "", f"pick: {pick}", ""]), flush=True)
    print(f"picked: {picks}\nshipped: {learned.SPAN_RULES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
