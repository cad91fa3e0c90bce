"""Train the learned PICO tagger (a linear-chain CRF) on the even-PMID half of EBM-NLP and write the shipped model.

The odd-PMID half is never read here: it is the held-out part bench/eval_pico.py reports on. CRFsuite's L-BFGS is
deterministic (no sampling, no shuffling), so the same data and settings give the same model file byte for byte.

    python scripts/train_pico_tagger.py [--data tests/fixtures/ebmnlp/ebmnlp_dev.txt] [--out MODEL]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import pycrfsuite

from ra_agent.evidence.pico.ebmnlp import halves, read_ebmnlp
from ra_agent.evidence.pico.learned import MODEL_PATH, training_sequences

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "tests/fixtures/ebmnlp/ebmnlp_dev.txt")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop at once, also inside CRFsuite's C loop
        signal.signal(sig, signal.SIG_DFL)
    docs = halves(read_ebmnlp(args.data))[TRAIN_HALF]
    trainer = Trainer(verbose=True)
    tokens = 0
    for doc in docs:
        for items, labels in training_sequences(doc):
            trainer.append(items, labels)
            tokens += len(labels)
    trainer.set_params(PARAMS)
    print(f"training on {len(docs)} abstracts ({TRAIN_HALF} PMIDs, {tokens} tokens) from {args.data}", flush=True)
    started = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(args.out.name + ".part")  # an interrupted run leaves the old model in place
    trainer.train(str(partial))
    os.replace(partial, args.out)
    elapsed = time.perf_counter() - started
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB) in {elapsed:.0f} s; params {PARAMS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
