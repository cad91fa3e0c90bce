"""The PRISMA 2020 flow of a review question: its counts from the question's set (every record judged, the reports
eligible for the topic, the question's reports and studies), and the flow diagram (PNG)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.question_set import QuestionSet
from ra_agent.fileio import atomic_writer

FLOW_FIGSIZE_IN = (8, 7)
FLOW_DPI = 110
TOP_REASONS = 3  # exclusion reasons named in the flow (the most frequent), the rest counted


@dataclass(frozen=True)
class PrismaFlow:
    """PRISMA 2020 flow counts of a question: records screened = the candidates its set judged (the records that may
    name the topic's population, found through the store's indexes; the others are removed before screening);
    reports eligible = the records eligible for the topic's question; included = the question's studies with their
    reports."""

    identified: int  # every record the store held when the set was judged
    screened: int  # the candidates judged (title, abstract, MeSH, publication types)
    excluded: int  # not an eligible trial for the topic
    excluded_reasons: tuple[tuple[str, int], ...]  # the most frequent reasons, first words of each
    eligible_topic: int  # reports eligible for the topic's question
    other_comparison: int  # of those, reports of another comparison than this question's
    reports: int  # the question's reports
    included: int  # the question's studies

    def rows(self) -> list[dict[str, Any]]:
        reasons = "; ".join(f"{why} ({n})" for why, n in self.excluded_reasons)
        return [
            {"stage": "Records identified", "n": self.identified,
             "detail": "every record in the corpus (search exports, PubMed searches, expansion fetches)"},
            {"stage": "Records removed before screening", "n": self.identified - self.screened,
             "detail": "they name none of the topic's population terms or MeSH headings (the store's full-text and "
                       "MeSH indexes)"},
            {"stage": "Records screened (title/abstract)", "n": self.screened,
             "detail": "each judged by the review-question rules (title, abstract, MeSH headings, publication types)"},
            {"stage": "Records excluded", "n": self.excluded, "detail": f"most frequent reasons: {reasons}"},
            {"stage": "Reports eligible for the topic's question", "n": self.eligible_topic, "detail": ""},
            {"stage": "Reports of another comparison", "n": self.other_comparison,
             "detail": "eligible for the topic, but not comparing what this question compares"},
            {"stage": "Reports of the included studies", "n": self.reports,
             "detail": "reports of one trial (same registration, acronym, or authors and sample) are one study"},
            {"stage": "Studies included in the synthesis", "n": self.included, "detail": ""},
        ]  # fmt: skip


def _reason_head(reason: str) -> str:
    """A reason's first clause ("not randomised", "no trial of the topic's population"), for counting: at most 80
    characters cut at a word, a PMID it names left out (the flow cites no record)."""
    head = re.sub(r"\s*\bPMIDs?\s*:?\s*\d+", "", reason.split(";")[0].split(" (")[0]).strip()
    return head if len(head) <= 80 else head[:80].rsplit(" ", 1)[0] + "…"


def prisma_flow(qset: QuestionSet, question: ReviewQuestion) -> PrismaFlow:
    """The flow of `question` from its set (module text): the same counts `ra questions` and its dossier show."""
    judged = qset.eligibility
    out = [_reason_head(str(e.get("reason", ""))) for e in judged.values() if not e.get("eligible")]
    eligible = qset.eligible_reports
    return PrismaFlow(
        identified=qset.state.records,
        screened=len(judged),
        excluded=len(out),
        excluded_reasons=tuple(Counter(out).most_common(TOP_REASONS)),
        eligible_topic=eligible,
        other_comparison=eligible - len(question.trials),
        reports=len(question.trials),
        included=len(question.studies),
    )


def prisma_flow_png(flow: PrismaFlow, path: Path) -> Path:
    """A PRISMA 2020-style flow diagram (boxes and arrows) as PNG, drawn on an Agg canvas and written atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FLOW_FIGSIZE_IN, dpi=FLOW_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(1.2, 9.8)
    ax.axis("off")
    main = [
        (8.8, f"Records identified\n(n = {flow.identified}: every record in the corpus)"),
        (6.6, f"Records screened by the question's rules\n(n = {flow.screened})"),
        (4.4, f"Reports eligible for the topic's question\n(n = {flow.eligible_topic})"),
        (2.2, f"Studies included (n = {flow.included})\nwith their {flow.reports} reports"),
    ]  # fmt: skip
    side = {
        0: f"Removed before screening\n(n = {flow.identified - flow.screened}):\nno population term or heading",
        1: f"Excluded (n = {flow.excluded}):\n" + "\n".join(f"{why[:40]} {n}" for why, n in flow.excluded_reasons),
        2: f"Another comparison (n = {flow.other_comparison})",
    }
    box = {"boxstyle": "round,pad=0.4", "facecolor": "white", "edgecolor": "black"}
    for i, (y, text) in enumerate(main):
        ax.text(3.2, y, text, ha="center", va="center", fontsize=9, bbox=box)
        if i:
            ax.annotate("", xy=(3.2, y + 0.75), xytext=(3.2, main[i - 1][0] - 0.75),
                        arrowprops={"arrowstyle": "->"})  # fmt: skip
        if i in side:
            ax.text(8.4, y, side[i], ha="center", va="center", fontsize=8.5, bbox=box)
            ax.annotate("", xy=(6.4, y), xytext=(5.4, y), arrowprops={"arrowstyle": "->"})
    ax.set_title("PRISMA 2020 flow (computed by ra)", fontsize=11)
    with atomic_writer(path) as fh:
        fig.savefig(fh, format="png")
    return path
