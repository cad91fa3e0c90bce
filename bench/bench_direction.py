"""Benchmark: direction of effect (rules:direction-v1) against the Evidence Inference 2.0 labels, next to the
majority class, on prompts answerable from the abstract.

Data: the Evidence Inference corpus (DeYoung et al., BioNLP 2020; github.com/jayded/evidence-inference, MIT
licence; articles from the PubMed Central open-access subset), read from a checkout or a bare git copy given by
--ei (kept outside this repository): annotations/v2_annotations.csv (labels and evidence spans, v2.0 articles),
annotations/prompts_merged.csv (outcome, intervention, comparator) and annotations/abstracts/PMC<id>.abst (the
article as text: TITLE, ABSTRACT.* and BODY.* sections).

Prompts: those whose every annotation that the verifier accepted (Valid Label) quotes evidence found in the
article's ABSTRACT sections, all giving the same label ("significantly increase" read as "significantly
increased"). Split by the corpus's own v2.0 article lists: ev2_train is the development set (the rules were written
looking at it), ev2_validation + ev2_test are reported and were not looked at.

Scored: accuracy and macro-F1 of `direction.direction_of` (given the prompt's intervention, comparator and outcome
and the abstract only) against the label, beside the majority class of the development set; how often each path of
the rules decided.

    python bench/bench_direction.py --ei /path/to/evidence-inference [--set dev|report]
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ra_agent.evidence.synthesis.direction import LABELS, RULES, direction_of
from ra_agent.models import Paper

_HEADER = re.compile(r"^((?:TITLE|ABSTRACT|BODY)(?:\.[^\n]*?)?)[.:]?\s*$", re.M)


class Corpus:
    """Files of an Evidence Inference checkout (a folder with annotations/) or of its git directory."""

    def __init__(self, path: Path):
        self.path = path
        self.git = not (path / "annotations").is_dir()

    def read(self, name: str) -> str | None:
        if not self.git:
            file = self.path / name
            return file.read_text(encoding="utf-8") if file.exists() else None
        done = subprocess.run(["git", "--git-dir", str(self.path), "show", f"HEAD:{name}"], capture_output=True)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None


def abstract_of(text: str, pmcid: str) -> Paper:
    """The title and the abstract of an .abst file as a Paper: the ABSTRACT.* sections ("RESULTS: ..." labels kept),
    or, for an unstructured abstract, the paragraphs after the title line in the TITLE block."""
    parts = _HEADER.split(text)
    sections = [(parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]
    head = next((body for name, body in sections if name == "TITLE"), "").split("\n", 1)
    title, rest = head[0].strip(), (head[1].strip() if len(head) > 1 else "")
    structured = [f"{name.split('.', 1)[1] if '.' in name else 'ABSTRACT'}: {body}"
                  for name, body in sections if name.startswith("ABSTRACT") and body]  # fmt: skip
    return Paper(pmid=int(pmcid), title=title, abstract="\n".join(structured) if structured else rest)


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    pmcid: str
    intervention: str
    comparator: str
    outcome: str
    label: str


def _squash(text: str) -> str:
    return " ".join(text.split())


def load_prompts(corpus: Corpus) -> tuple[list[Prompt], dict[str, Paper]]:
    """Prompts answerable from the abstract, with one agreed label, and the abstracts (see the module docstring)."""
    annotations = list(csv.DictReader(io.StringIO(corpus.read("annotations/v2_annotations.csv") or "")))
    prompts = {
        r["PromptID"]: r for r in csv.DictReader(io.StringIO(corpus.read("annotations/prompts_merged.csv") or ""))
    }
    papers: dict[str, Paper] = {}
    labels: dict[str, set[str]] = {}
    outside: set[str] = set()
    for row in annotations:
        if row["Valid Label"] != "True" or row["PromptID"] not in prompts:
            continue
        pmcid = row["PMCID"]
        if pmcid not in papers:
            text = corpus.read(f"annotations/abstracts/PMC{pmcid}.abst")
            if text is None:
                continue
            papers[pmcid] = abstract_of(text, pmcid)
        evidence = _squash(row["Annotations"])
        in_abstract = len(evidence) > 20 and evidence in _squash(f"{papers[pmcid].title} {papers[pmcid].abstract}")
        if not in_abstract:
            outside.add(row["PromptID"])
        label = row["Label"].strip().replace("significantly increase", "significantly increased")
        labels.setdefault(row["PromptID"], set()).add(label.replace("increasedd", "increased"))
    out = []
    for pid, found in labels.items():
        if pid in outside or len(found) != 1 or next(iter(found)) not in LABELS:
            continue
        p = prompts[pid]
        out.append(Prompt(pid, p["PMCID"], p["Intervention"], p["Comparator"], p["Outcome"], next(iter(found))))
    return sorted(out, key=lambda p: int(p.prompt_id)), papers


def article_ids(corpus: Corpus, *names: str) -> set[str]:
    return {line.strip() for n in names for line in (corpus.read(f"annotations/splits/{n}_article_ids.txt") or "").splitlines() if line.strip()}  # fmt: skip


def macro_f1(pairs: Iterable[tuple[str, str]]) -> float:
    pairs = list(pairs)
    scores = []
    for label in LABELS:
        tp = sum(g == label and p == label for g, p in pairs)
        fp = sum(g != label and p == label for g, p in pairs)
        fn = sum(g == label and p != label for g, p in pairs)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)


def evaluate(name: str, predict: Callable[[Prompt], str], prompts: list[Prompt]) -> tuple[str, list[tuple[str, str]]]:
    pairs = [(p.label, predict(p)) for p in prompts]
    right = sum(g == p for g, p in pairs)
    return (f"  {name:40s} accuracy {right / len(pairs):6.1%} ({right}/{len(pairs)})  macro-F1 "
            f"{macro_f1(pairs):.3f}"), pairs  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ei", type=Path, required=True, help="an Evidence Inference checkout or its git directory")
    ap.add_argument("--set", choices=("report", "dev"), default="report", help="the reported or the development set")
    ap.add_argument("--show", type=int, default=0, help="print this many wrong answers (development set only)")
    args = ap.parse_args()
    corpus = Corpus(args.ei)
    prompts, papers = load_prompts(corpus)
    dev_ids, report_ids = article_ids(corpus, "ev2_train"), article_ids(corpus, "ev2_validation", "ev2_test")
    dev = [p for p in prompts if p.pmcid in dev_ids]
    chosen = dev if args.set == "dev" else [p for p in prompts if p.pmcid in report_ids]
    majority = Counter(p.label for p in dev).most_common(1)[0][0]
    print(f"Evidence Inference 2.0, prompts answerable from the abstract: {len(prompts)} ({len(dev)} development, "
          f"{len(prompts) - len(dev)} other); {args.set} set: {len(chosen)} prompts from "
          f"{len({p.pmcid for p in chosen})} articles, labels {dict(Counter(p.label for p in chosen))}")  # fmt: skip
    answers = {p.prompt_id: direction_of(papers[p.pmcid], p.intervention, p.comparator, p.outcome) for p in chosen}
    line, pairs = evaluate(f"ra {RULES}", lambda p: answers[p.prompt_id].label, chosen)
    print(line)
    print(evaluate(f"baseline: majority class ({majority})", lambda p: majority, chosen)[0])
    by_how = Counter(a.how for a in answers.values())
    right = Counter(a.how for p, a in zip(chosen, answers.values(), strict=True) if a.label == p.label)
    print("  decided by: " + "; ".join(f"{how} {n} ({right[how]} right)" for how, n in by_how.most_common()))
    if args.set == "dev" and args.show:
        wrong = [(p, answers[p.prompt_id]) for p in chosen if answers[p.prompt_id].label != p.label]
        for p, a in wrong[: args.show]:
            print(f"- {p.prompt_id} gold {p.label} / ra {a.label} ({a.how}) | O: {p.outcome[:60]} | I: "
                  f"{p.intervention[:40]} | C: {p.comparator[:40]}\n    {a.sentence[:300]}")  # fmt: skip
    del pairs


if __name__ == "__main__":
    main()
