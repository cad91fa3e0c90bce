"""A goal's evidence-gap dossier of a review question: the question's dossier from its set (`evidence.questions`: its
answer in plain words, verdict, studies, reviews checked, trials since) with what the goal added: the PRISMA check of
its covering review and the PICO of its studies. The verdict is the question's; nothing here decides another."""

from __future__ import annotations

import logging
from pathlib import Path

from ra_agent.config import Config
from ra_agent.evidence.prisma.check import PrismaResult
from ra_agent.evidence.questions.dossier import dossier_markdown
from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.question_set import QuestionSet
from ra_agent.evidence.reports.common import (
    extractors,
    generated_line,
    pico_table,
    prisma_section,
    publish,
    question_evidence,
)
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

PRISMA_UNCHECKED = "PRISMA compliance"  # the set's "not checked" item a goal's prisma_check answers


def gap_dossier(
    cfg: Config,
    store: Store,
    qset: QuestionSet,
    question: ReviewQuestion,
    *,
    goal_id: str,
    brain_name: str,
    prisma: PrismaResult | None,
    out_dir: Path | None = None,
) -> Path:
    """Write gap_dossier_<question id>.md (in `out_dir`, default <data_dir>/reports): titled by the question in
    words, its answer in plain words first, then its dossier as the set holds it, the PRISMA check of its covering
    review (`prisma`, the goal's prisma_check) and the PICO of each study's first report. Every cited PMID is
    checked against the store."""
    additions = ["## PRISMA check of the covering review\n\n" + prisma_section(prisma)]
    papers = {p.pmid: p for p in store.papers(sorted(question.trials))}
    if question.studies:
        ev = question_evidence(cfg, store, qset, question)
        source = f"`{ev.pico_file.name}`" if ev.pico_file.exists() else "the default extractor (run_pico has not run)"
        additions.append(f"## PICO of its studies\n\nThe first report of each study, from {source} (extractor: "
                         f"{extractors(ev)}); which reports count is the question's rule above, not this "
                         f"extraction.\n\n{pico_table(ev.firsts, ev.records)}")  # fmt: skip
    body = dossier_markdown(question, papers, qset, additions, checked=[PRISMA_UNCHECKED] if prisma else [])
    rest = body.split("\n", 1)[1].strip()
    text = f"# Evidence-gap dossier: {question.in_words}\n\n{generated_line(goal_id, brain_name)}\n\n{rest}\n"
    path = (out_dir or Workspace.of(cfg).reports_dir) / f"gap_dossier_{question.id}.md"
    return publish(store, path, text)
