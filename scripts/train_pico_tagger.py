"""Train the learned PICO tagger's two CRFs and write the shipped models.

- the tagger (`pico-crf-v1`): P / I / O labels of the even-PMID half of the EBM-NLP dev split;
- the intervention tagger (`pico-crf-int-v1`): the intervention labels of EBM-NLP's difficulty release
  (bepnye/EBM-NLP `ebm_nlp_difficulty.tar.gz`, unpacked; see models/PROVENANCE.md) for its abstracts outside the
  dev split.

The odd-PMID half is never read here: it is the held-out part bench/eval_pico.py reports on (and the difficulty
abstracts that are in the dev split are left out, so none of the held-out half comes in by that door). CRFsuite's
L-BFGS is deterministic (no sampling, no shuffling), so the same data and settings give the same files byte for byte.

    python scripts/train_pico_tagger.py --interventions DIR [--data tests/fixtures/ebmnlp/ebmnlp_dev.txt]
        [--only tagger|interventions] [--out-dir ra_agent/evidence/pico/models]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pycrfsuite

from ra_agent.evidence.pico.ebmnlp import (
    LabelledAbstract,
    halves,
    read_ebmnlp,
    read_intervention_labels,
)
from ra_agent.evidence.pico.learned import INTERVENTION_MODEL_PATH, MODEL_PATH, training_sequences

ROOT = Path(__file__).resolve().parents[1]
PARAMS = {"c1": 0.1, "c2": 0.01, "max_iterations": 150, "feature.possible_transitions": True}
TRAIN_HALF = "even"  # bench/eval_pico.py holds out the other half


class Trainer(pycrfsuite.Trainer):  # pyright: ignore[reportAttributeAccessIssue] - compiled module, no stubs
    """CRFsuite's trainer (verbose, so its log is parsed) printing one line every ten iterations, nothing else."""

    def on_iteration(self, log, info):
        if info["num"] % 10 == 0 or info["num"] == PARAMS["max_iterations"]:
            print(f"  iteration {info['num']}/{PARAMS['max_iterations']}: loss {info['loss']:.1f}", flush=True)

    def on_start(self, log): ...
    def on_featgen_progress(self, log, percent): ...
    def on_featgen_end(self, log): ...
    def on_prepared(self, log): ...
    def on_optimization_end(self, log): ...
    def on_end(self, log): ...


def train(docs: Sequence[LabelledAbstract], out: Path) -> int:
    """Train the CRF on `docs` and write it to `out` (through a .part file); returns the number of tokens."""
    trainer = Trainer(verbose=True)
    tokens = 0
    for doc in docs:
        for items, labels in training_sequences(doc):
            trainer.append(items, labels)
            tokens += len(labels)
    trainer.set_params(PARAMS)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")  # an interrupted run leaves the old model in place
    trainer.train(str(partial))
    os.replace(partial, out)
    return tokens


def stop_at_once() -> None:
    """SIGINT/SIGTERM end the process at once, also inside CRFsuite's C loop."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def intervention_docs(
    dev: Sequence[LabelledAbstract], difficulty: Sequence[LabelledAbstract]
) -> list[LabelledAbstract]:
    """The intervention tagger's training abstracts: the difficulty release's abstracts that are not in the dev split
    at all (the even half's crowd I labels added nothing on the dev parts: scripts/tune_pico_spans.py)."""
    in_dev = {d.pmid for d in dev}
    return [d for d in difficulty if d.pmid not in in_dev]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "tests/fixtures/ebmnlp/ebmnlp_dev.txt")
    parser.add_argument("--interventions", type=Path, help="EBM-NLP's difficulty release, unpacked")
    parser.add_argument("--only", choices=("tagger", "interventions"), help="train one of the two models")
    parser.add_argument("--out-dir", type=Path, default=MODEL_PATH.parent)
    args = parser.parse_args()
    if args.only != "tagger" and args.interventions is None:
        parser.error("--interventions DIR is needed for the intervention tagger (or give --only tagger)")
    stop_at_once()
    dev = read_ebmnlp(args.data)
    jobs = {
        "tagger": (MODEL_PATH.name, lambda: halves(dev)[TRAIN_HALF]),
        "interventions": (
            INTERVENTION_MODEL_PATH.name,
            lambda: intervention_docs(dev, read_intervention_labels(args.interventions)),
        ),
    }
    for name, (filename, docs_of) in jobs.items():
        if args.only not in (None, name):
            continue
        docs, out = docs_of(), args.out_dir / filename
        print(f"{name}: training on {len(docs)} abstracts", flush=True)
        started = time.perf_counter()
        tokens = train(docs, out)
        elapsed = time.perf_counter() - started
        print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB) from {tokens} tokens in {elapsed:.0f} s")
        print(f"params {PARAMS}; SHA-256 {hashlib.sha256(out.read_bytes()).hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
