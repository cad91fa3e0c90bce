"""A question's dossier: the Markdown a reviewer reads (PICO, verdict, eligible trials with reasons, covering reviews
with why, trials since, what was not checked), questions.json beside the dossiers, and the structural check of the
written files."""

from __future__ import annotations

import json
from pathlib import Path

from ra_agent.config import Config
from ra_agent.evidence.questions.gap_map import GapMap, map_link
from ra_agent.evidence.questions.model import RULES, VERDICTS, ReviewQuestion
from ra_agent.evidence.questions.topic import Topic
from ra_agent.fileio import atomic_write
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace


def questions_dir(cfg: Config, handbook_path: str | Path) -> Path:
    """Where `ra questions --write` puts a handbook's dossiers: <data_dir>/questions/<handbook stem>/."""
    return Workspace.of(cfg).root / "questions" / Path(handbook_path).stem


def same_as_parent(question: ReviewQuestion, parent: ReviewQuestion | None) -> bool:
    """A narrower question with its parent's verdict on the same covering review adds no dossier of its own."""
    return (
        parent is not None
        and question.verdict == parent.verdict
        and question.verdict.startswith("covered")
        and (question.covering and question.covering.pmid) == (parent.covering and parent.covering.pmid)
    )


def dossier_markdown(question: ReviewQuestion, papers: dict[int, Paper], topic: Topic) -> str:
    """The question's dossier: PICO, verdict, eligible trials with reasons, covering reviews with why, trials
    since the newest covering review, and what this run could not check."""
    m = question.metrics
    lines = [
        f"# Review question {question.id}: {question.verdict}",
        "",
        f"- PICO: {question.pico}",
        f"- Outcomes the trials report: {', '.join(question.outcomes) or 'none found'}",
        f"- Topic (handbook seed query): {topic.describe()}",
        f"- Verdict: **{question.verdict}**: {question.verdict_reason}",
        f"- Metrics: eligible_trials {m['eligible_trials']}, newest trial {m['newest_trial']}, "
        f"sr_overlap {m['sr_overlap']}, PRISMA_compliant not checked",
        f"- Judged by: {question.judged_by}",
        "",
        f"## Eligible trials ({len(question.trials)})",
        "",
        "| PMID | year | title | why eligible |",
        "|---|---|---|---|",
    ]
    for pmid in question.trial_pmids:
        paper = papers.get(pmid)
        title = (paper.title if paper else "").replace("|", "/")[:120]
        lines.append(f"| {pmid} | {question.years.get(pmid) or ''} | {title} | {question.trials[pmid]} |")
    lines += ["", f"## Reviews whose own question encompasses it ({len(question.reviews)})", ""]
    if not question.reviews:
        lines.append("None found in the local corpus.")
    for review in question.reviews:
        covers = (
            "covers" if question.covering and review.pmid == question.covering.pmid else f"share {review.share:.0%}"
        )
        lines.append(f"- PMID {review.pmid} ({review.year}) {review.title[:120]}: {review.why}; could include "
                     f"{len(review.trials_covered)} of {len(question.trials)} trials ({review.basis}) [{covers}]")  # fmt: skip
    lines += ["", "## Trials since the newest covering review", ""]
    if question.covering is None:
        lines.append("No review covers the question.")
    else:
        since = ", ".join(str(p) for p in question.trials_since) or "none"
        lines.append(f"Since PMID {question.covering.pmid} ({question.covering.year}): {since}")
    lines += ["", "## Not checked by this run", "", *(f"- {item}" for item in question.unchecked), ""]
    return "\n".join(lines)


def write_dossiers(
    cfg: Config, folder: Path, topic: Topic, questions, papers, gap_map: GapMap | None = None
) -> list[Path]:
    """questions.json and one dossier per question in `folder` (a narrower question like its parent refers to it);
    with `gap_map` (drawn into the same folder), each dossier ends with its cell on the map (`gap_map.map_link`)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {q.id: q for q in questions}
    written = []
    for question in questions:
        parent = by_id.get(question.parent or "")
        path = folder / f"{question.id}.md"
        if same_as_parent(question, parent):
            assert parent is not None
            text = (f"# Review question {question.id}: {question.verdict}\n\n- PICO: {question.pico}\n"
                    f"- Same verdict on the same review as its parent question: see [{parent.id}]({parent.id}.md)\n")  # fmt: skip
        else:
            text = dossier_markdown(question, papers, topic)
        link = map_link(gap_map, question.id) if gap_map else None
        atomic_write(path, f"{text.rstrip()}\n\n{link.markdown}" if link else text)
        written.append(path)
    judged_by = "; ".join(sorted({q.judged_by for q in questions})) or RULES  # the rules, or an LLM judge by name
    payload = {"topic": topic.describe(), "judged_by": judged_by, "questions": [q.as_dict() for q in questions]}
    atomic_write(folder / "questions.json", json.dumps(payload, indent=2) + "\n")
    return written


def question_file_problems(cfg: Config, store: Store) -> tuple[int, list[str]]:
    """Structural check of every cluster's written questions (questions/clusters/*/questions.json): (questions
    read, problems). Each question has a well-formed id, a known verdict, a dossier file, a reason for each of its
    trials, and trials and covering reviews that are papers of the store."""
    import re

    root = Workspace.of(cfg).root / "questions" / "clusters"
    problems: list[str] = []
    seen = 0
    for path in sorted(root.glob("*/questions.json")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: unreadable ({exc})")
            continue
        for q in payload.get("questions", []):
            seen += 1
            where = f"{path.parent.name}/{q.get('id')}"
            if not re.fullmatch(r"q-[0-9a-f]{10}", str(q.get("id", ""))):
                problems.append(f"{where}: malformed id")
            if q.get("verdict") not in VERDICTS:
                problems.append(f"{where}: unknown verdict {q.get('verdict')!r}")
            if not (path.parent / f"{q.get('id')}.md").exists():
                problems.append(f"{where}: no dossier file")
            if any(not str(why).strip() for why in q.get("trials", {}).values()):
                problems.append(f"{where}: a trial without its reason")
            pmids = {int(p) for p in q.get("trials", {})} | {int(r["pmid"]) for r in q.get("reviews", [])}
            missing = sorted(pmids - store.existing_pmids(pmids))
            if missing:
                problems.append(f"{where}: PMIDs not in the store {missing[:5]}")
    return seen, problems
