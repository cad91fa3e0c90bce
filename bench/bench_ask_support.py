"""Calibrate `[ask] support_floor`: best cosine of on-topic vs off-topic questions against a corpus's vector index.

`ra ask` says "the corpus holds no support" when the best similarity of anything it retrieved is below
support_floor. This prints, for the workspace's active index (e.g. after `ra demo`), the best cosine of
questions the demo corpus (a proton-pump-inhibitor drug-class search) can answer and of questions from
other fields it cannot, the floor that separates them best (most questions on the right side; ties: the
midpoint of the gap), and how the configured floor (the baseline) does on the same questions. Prints; never
asserts. Usage: python bench/bench_ask_support.py --data-dir data
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from ra_agent.config import load_config
from ra_agent.embed import SentenceTransformerEmbedder
from ra_agent.store import open_active

ON_TOPIC = (
    "Is esomeprazole better than omeprazole for healing erosive oesophagitis?",
    "Does lansoprazole prevent relapse of reflux oesophagitis compared with ranitidine?",
    "How well do proton pump inhibitors relieve heartburn in endoscopy-negative reflux disease?",
    "Omeprazole versus H2-receptor antagonists for duodenal ulcer healing",
    "Which triple therapy with a proton pump inhibitor eradicates Helicobacter pylori best?",
    "Pantoprazole for prevention of NSAID-associated gastric ulcers",
    "Does on-demand PPI therapy maintain symptom control in GERD?",
    "Rabeprazole 10 mg versus 20 mg for maintenance of healed erosive GERD",
    "Intravenous proton pump inhibitor after endoscopic treatment of bleeding peptic ulcer",
    "Proton pump inhibitors for reflux laryngitis or chronic cough",
)
OFF_TOPIC = (
    "Does the ketogenic diet reduce seizures in drug-resistant childhood epilepsy?",
    "Statins for primary prevention of stroke in older adults",
    "Cognitive behavioural therapy for insomnia in adolescents",
    "Metformin versus sulfonylureas for type 2 diabetes mortality",
    "Early mobilisation after hip fracture surgery",
    "Antibiotic prophylaxis before dental extraction in patients with prosthetic joints",
    "Vitamin D supplementation and fracture risk in postmenopausal women",
    "Immunotherapy with checkpoint inhibitors for metastatic melanoma",
    "Exercise training for chronic heart failure",
    "Mindfulness-based stress reduction for anxiety in nurses",
)


def best_cosines(vectors, embedder, questions) -> np.ndarray:
    queries = np.asarray(embedder.encode(list(questions)), dtype=np.float32)
    return np.array([vectors.topk(q, 1).scores[0] for q in queries], dtype=np.float64)


def separating_floor(on: np.ndarray, off: np.ndarray) -> tuple[float, int]:
    """(floor, questions on the wrong side) over every midpoint between sorted scores."""
    scores = np.sort(np.concatenate([on, off]))
    candidates = (scores[:-1] + scores[1:]) / 2
    errors = [int((on < f).sum() + (off >= f).sum()) for f in candidates]
    best = int(np.argmin(errors))
    return float(candidates[best]), errors[best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="a workspace with an embedded corpus")
    args = parser.parse_args()
    cfg = load_config()
    cfg = dataclasses.replace(cfg, workspace=dataclasses.replace(cfg.workspace, data_dir=str(args.data_dir.resolve())))
    vectors = open_active(cfg)
    embedder = SentenceTransformerEmbedder(cfg)
    on, off = best_cosines(vectors, embedder, ON_TOPIC), best_cosines(vectors, embedder, OFF_TOPIC)
    floor, wrong = separating_floor(on, off)
    configured = cfg.ask.support_floor
    print(f"index: {len(vectors)} vectors; {len(ON_TOPIC)} on-topic and {len(OFF_TOPIC)} off-topic questions")
    print(f"on-topic best cosine:  min {on.min():.3f}  median {np.median(on):.3f}  max {on.max():.3f}")
    print(f"off-topic best cosine: min {off.min():.3f}  median {np.median(off):.3f}  max {off.max():.3f}")
    print(f"separating floor: {floor:.3f} ({wrong} of {len(on) + len(off)} questions on the wrong side)")
    print(
        f"baseline, configured support_floor {configured:.2f}: "
        f"{int((on < configured).sum())} on-topic refused, {int((off >= configured).sum())} off-topic answered"
    )


if __name__ == "__main__":
    main()
