"""Does `ra ask` cite the evidence a reviewer would cite first? Today's code (a git revision) against this tree.

24 questions written from the demo corpus (data/demo/, the Cohen 2006 proton-pump-inhibitor export) by reading
its titles and abstracts; for each, the PMIDs a reviewer would cite first: the head-to-head randomised trials of
the two treatments named, and the systematic reviews or meta-analyses of exactly that question. Eight questions
(`held_out=True`) were set aside before any knob of the evidence ranking was chosen and are reported apart.

Each arm answers every question with the rule-based planner (no LLM, deterministic) on a private copy of the same
embedded workspace (Mind-KB off, so no arm learns from another's runs) and reports:
- hit rate: questions whose answer cites at least one expected PMID;
- recall: expected PMIDs cited / expected PMIDs, averaged over questions.
The baseline arm imports ra_agent from `git archive <--baseline-rev>` (default: BASELINE_REV, the last commit
before `ra ask` ranked by evidence design, 3846e79: plain similarity ranking), the other from this tree; both run
this same script as a worker. Prints the baseline's commit; never asserts.

Usage: python bench/bench_ask_evidence.py --data-dir /path/to/workspace/data [--baseline-rev REV]
(the workspace: `ra import data/demo/Cohen_2006_ProtonPumpInhibitors.csv && ra embed`, or after `ra demo`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the last commit before the evidence ranking (3846e79 "ra ask cites the best evidence first"); not `main`, which
# holds the change itself since it was merged (both arms would be the same code)
BASELINE_REV = "3846e79^"


@dataclass(frozen=True)
class Question:
    text: str
    expected: tuple[int, ...]
    held_out: bool = False


QUESTIONS = (
    # tuning set: read while choosing [ask] evidence_weight and head_to_head_bonus
    Question("Is esomeprazole better than omeprazole for healing erosive oesophagitis?",
             (11280530, 11012468, 11683686, 12755837)),
    Question("Lansoprazole versus omeprazole for healing reflux oesophagitis", (8944373, 9248117, 8899084, 11721754)),
    Question("Is pantoprazole as effective as omeprazole in reflux oesophagitis?",
             (8824655, 7654895, 10705625, 12743434, 11563998)),
    Question("Rabeprazole compared with omeprazole for healing erosive GERD", (11199361, 11876701)),
    Question("Is rabeprazole better than ranitidine for active duodenal ulcer?", (10763941,)),
    Question("Lansoprazole versus ranitidine for NSAID-associated gastric ulcers", (10826458,)),
    Question("Omeprazole versus antireflux surgery for long-term management of GERD",
             (10958215, 11220717, 11343480, 11559644, 11034468)),
    Question("Does acid suppression improve asthma in patients with gastro-oesophageal reflux?",
             (11182012, 10559084, 8016006, 9672330)),
    Question("Proton pump inhibitors versus H2-antagonists for bleeding peptic ulcer", (11421865, 10971227)),
    Question("Does intravenous omeprazole prevent rebleeding after endoscopic treatment of bleeding peptic ulcers?",
             (10922420, 11447983, 11600458, 10523140)),
    Question("Does omeprazole help reflux laryngitis?", (11802014, 8166150, 12185876)),
    Question("Esomeprazole versus lansoprazole for erosive esophagitis", (11922549,)),
    Question("Pantoprazole versus omeprazole for acute duodenal ulcer", (7614102, 8527617)),
    Question("Lansoprazole versus omeprazole in duodenal ulcer healing", (10485504, 7770708)),
    Question("Famotidine versus omeprazole in triple therapy for Helicobacter pylori eradication", (10468682, 11507356)),
    Question("Is a short course of omeprazole useful in noncardiac chest pain?", (12352293, 9649457, 9699931)),
    # held out: written with the others, never run while tuning
    Question("Pantoprazole versus esomeprazole for relief of GERD symptoms", (12969085, 12811310), True),
    Question("Esomeprazole compared with lansoprazole for maintenance of healed reflux oesophagitis", (12562445,), True),
    Question("Is rabeprazole better than ranitidine for erosive gastroesophageal reflux disease?", (10950032,), True),
    Question("Does omeprazole relieve chronic cough caused by gastro-oesophageal reflux?", (11106204, 10566703), True),
    Question("Lansoprazole for chronic idiopathic laryngitis", (11316215,), True),
    Question("Pantoprazole for reflux-associated laryngitis", (12795454,), True),
    Question("Omeprazole versus ranitidine for intermittent treatment of symptomatic reflux disease",
             (10024259, 10662395), True),
    Question("Regular-dose versus high-dose omeprazole in peptic ulcer bleeding", (11761026,), True),
)  # fmt: skip


def worker(data_dir: Path, out: Path, tuning_only: bool = False) -> None:
    """Answer every question with the rules planner on `data_dir` (a private copy); write {question: citations}."""
    from ra_agent.ask.flow import ask
    from ra_agent.ask.rules import AskRulesBrain
    from ra_agent.config import load_config
    from ra_agent.embed.embedder import SentenceTransformerEmbedder
    from ra_agent.workspace import open_store

    config = data_dir.parent / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n'
                      '[llm]\nbrain = "rules"\n[mindkb]\nenabled = false\n')  # fmt: skip
    cfg = load_config(config)
    embedder = SentenceTransformerEmbedder(cfg)
    answers = {}
    with open_store(cfg) as store:
        for q in QUESTIONS:
            if tuning_only and q.held_out:
                continue
            result = ask(cfg, store, q.text, brain=AskRulesBrain(cfg), embedder=embedder)
            answers[q.text] = result.citations
    out.write_text(json.dumps(answers))


def run_arm(name: str, code: Path, data_dir: Path, tmp: Path, tuning_only: bool = False) -> dict[str, list[int]]:
    """One arm in its own process, ra_agent imported from `code`, on a private copy of the workspace."""
    home = tmp / name
    shutil.copytree(data_dir, home / "data")
    out = home / "answers.json"
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1", "RA_BENCH_TUNING_ONLY": str(int(tuning_only))}
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(home / "data"), str(out)],
                   env=env, check=True, cwd=home, stdout=subprocess.DEVNULL)  # fmt: skip
    return json.loads(out.read_text())


def export_revision(rev: str, target: Path) -> Path:
    """`git archive REV` of this repository unpacked into `target`."""
    archive = target / "rev.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target / "tree", filter="data")
    return target / "tree"


def commit_of(rev: str) -> str:
    """The short hash and subject of `rev` in this repository."""
    out = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", rev], check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    return out if len(out) <= 90 else out[:87] + "..."


def dirty() -> bool:
    """Whether this tree's ra_agent differs from its HEAD commit (the arm runs the files as they are)."""
    out = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "ra_agent"], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return bool(out.strip())


def scores(answers: dict[str, list[int]], questions) -> tuple[float, float, int]:
    """(hit rate, mean recall, questions) over `questions`."""
    hits = recall = 0.0
    for q in questions:
        cited = set(answers.get(q.text, []))
        hits += bool(cited & set(q.expected))
        recall += len(cited & set(q.expected)) / len(q.expected)
    n = len(questions)
    return hits / n, recall / n, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, help="an embedded workspace holding the demo corpus")
    ap.add_argument("--baseline-rev", default=BASELINE_REV,
                    help=f"git revision whose ask is the baseline (default {BASELINE_REV}: before the evidence ranking)")  # fmt: skip
    ap.add_argument("--tuning-only", action="store_true", help="answer the tuning questions only (while tuning)")
    ap.add_argument("--worker", nargs=2, metavar=("DATA_DIR", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), os.environ.get("RA_BENCH_TUNING_ONLY") == "1")
        return
    if args.data_dir is None:
        ap.error("--data-dir is required")
    with tempfile.TemporaryDirectory(prefix="bench_ask_evidence_") as tmp:
        tmp_path = Path(tmp)
        data = args.data_dir.resolve()
        base = run_arm("baseline", export_revision(args.baseline_rev, tmp_path), data, tmp_path, args.tuning_only)
        ours = run_arm("this_tree", ROOT, data, tmp_path, args.tuning_only)
    print(f"ra ask, rules planner, demo corpus: {len(QUESTIONS)} questions; baseline = {args.baseline_rev} "
          f"(commit {commit_of(args.baseline_rev)}), this tree at {commit_of('HEAD')}"
          f"{' + uncommitted changes' if dirty() else ''}\n")  # fmt: skip
    print("| questions | n | baseline hit rate | this tree hit rate | baseline recall | this tree recall |")
    print("|---|---|---|---|---|---|")
    tuning, held_out = [q for q in QUESTIONS if not q.held_out], [q for q in QUESTIONS if q.held_out]
    arms = [("tuning", tuning)] if args.tuning_only else [("tuning", tuning), ("held out", held_out),
                                                           ("all", list(QUESTIONS))]  # fmt: skip
    for label, subset in arms:
        bh, br, n = scores(base, subset)
        oh, orc, _ = scores(ours, subset)
        print(f"| {label} | {n} | {bh:.2f} | **{oh:.2f}** | {br:.2f} | **{orc:.2f}** |")
    print("\nper question (expected PMIDs cited: baseline -> this tree)")
    for q in tuning if args.tuning_only else QUESTIONS:
        b = sorted(set(base.get(q.text, [])) & set(q.expected))
        o = sorted(set(ours.get(q.text, [])) & set(q.expected))
        mark = " (held out)" if q.held_out else ""
        print(f"- {q.text}{mark}: {len(b)}/{len(q.expected)} -> {len(o)}/{len(q.expected)} "
              f"(cited now: {ours.get(q.text, [])})")  # fmt: skip


if __name__ == "__main__":
    main()
