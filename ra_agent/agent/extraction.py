"""`ra extract`: a handbook's review question as an extraction sheet a review team finishes, and their sheet read back.

The question's studies (study id → its reports' PMIDs) come from `sheet_question`, the one place this module reads
the handbook's review questions; the sheet's rows, validation and store are `evidence.synthesis.sheet`'s. The
draft's synthesis reads the stored reviewer numbers (`sheet.reviewer_data`) whatever built the draft.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ra_agent.config import Config
from ra_agent.evidence.synthesis import Pooled, Synthesis, synthesise
from ra_agent.evidence.synthesis.arms import arm_role
from ra_agent.evidence.synthesis.sheet import (
    ReviewerData,
    SheetError,
    read_sheet,
    reviewer_data,
    sheet_rows,
    store_reviewer,
    write_sheet,
)
from ra_agent.models import Paper
from ra_agent.store.db import Store

__all__ = ["SheetError", "SheetQuestion", "export_sheet", "import_sheet", "question_synthesis", "reviewer_summary",
           "sheet_question"]  # fmt: skip


@dataclass(frozen=True)
class SheetQuestion:
    """A handbook's review question as the sheet needs it."""

    id: str
    pico: str
    studies: dict[str, list[int]]  # study id -> its reports' PMIDs, first report first
    papers: dict[int, Paper]  # the reports, by PMID
    question: object  # what `evidence.synthesis.question.from_review_question` reads (the ReviewQuestion)
    topic: object


def sheet_question(cfg: Config, store: Store, handbook: str | Path, question_id: str | None = None) -> SheetQuestion:
    """The handbook's review question `question_id` (default: the topic's own question, the first) as the handbook's
    question set holds it (`agent.questions.load_question_set`: the studies `ra questions` prints)."""
    from ra_agent.agent.questions import handbook_topic, load_question_set

    questions = load_question_set(cfg, store, handbook).questions
    topic = handbook_topic(handbook)
    wanted = {p for q in questions for reports in q.studies.values() for p in reports}
    papers = {p.pmid: p for p in store.papers(sorted(wanted))}
    if not questions:
        raise SheetError(f"{handbook}: the handbook's topic has no review question over this store's records")
    by_id = {q.id: q for q in questions}
    if question_id is not None and question_id not in by_id:
        raise SheetError(f"{handbook}: no review question {question_id!r} (its questions: {', '.join(by_id)})")
    q = by_id[question_id] if question_id else questions[0]
    studies = {sid: [p for p in reports if p in papers] for sid, reports in q.studies.items()}
    studies = {sid: reports for sid, reports in studies.items() if reports}
    return SheetQuestion(q.id, q.pico, studies, {p: papers[p] for r in studies.values() for p in r}, q, topic)


def question_synthesis(cfg: Config, sq: SheetQuestion, *, reviewer: ReviewerData | None = None,
                       forest_dir: Path | None = None) -> Synthesis:  # fmt: skip
    """The synthesis of the question's reports (rules extraction, the config's pooling model), with `reviewer`'s
    numbers in."""
    from ra_agent.evidence.synthesis.question import from_review_question

    papers = [sq.papers[p] for reports in sq.studies.values() for p in reports]
    return synthesise(papers, question=from_review_question(sq.question, sq.topic), method=cfg.sr.tau2_estimator,
                      model=cfg.sr.pooling_model, reviewer=reviewer, forest_dir=forest_dir, stem="extraction_forest")  # fmt: skip


def _pico_arms(papers: Mapping[int, Paper]) -> dict[int, list[str]]:
    """Each report's arms as ra's PICO rules name them (for the empty rows of a report without numbers)."""
    from ra_agent.evidence.pico.arms import find_arms
    from ra_agent.evidence.pico.text import Doc
    from ra_agent.evidence.synthesis.compare import arms_named

    out = {}
    for pmid, paper in papers.items():
        found = [f.value for f in find_arms(Doc(paper)) if f is not None]
        out[pmid] = [label for label, _ in arms_named("; ".join(found))]
    return out


@dataclass(frozen=True)
class SheetExport:
    path: Path
    question: SheetQuestion
    rows: int
    with_numbers: int  # rows ra filled
    studies_with_data: int

    def lines(self) -> list[str]:
        """What `ra extract --sheet` prints."""
        q = self.question
        return [f"question {q.id}: {q.pico}",
                f"wrote {self.path}: {self.rows} rows ({self.with_numbers} with ra's numbers) for {len(q.studies)} "
                f"studies ({self.studies_with_data} with arm data)"]  # fmt: skip


def export_sheet(cfg: Config, store: Store, handbook: str | Path, path: Path, question_id: str | None = None, *,
                 question: SheetQuestion | None = None) -> SheetExport:  # fmt: skip
    """Write the question's extraction sheet (.xlsx or .csv) at `path`: ra's numbers (with the reviewer's already
    imported ones in), one row per study × outcome × time point × arm. `question`: the question when the caller has
    read it already (`sheet_question`)."""
    sq = question or sheet_question(cfg, store, handbook, question_id)
    syn = question_synthesis(cfg, sq, reviewer=reviewer_data(cfg))
    main = syn.main()
    counts: dict[tuple[str, float | None], int] = {}
    for rows in syn.data.values():
        for d in rows:
            point = (d.outcome.split(":", 1)[0], d.weeks)
            counts[point] = counts.get(point, 0) + 1
    default = ((main.contrasts.outcome, main.contrasts.weeks) if main else
               max(counts, key=lambda k: counts[k]) if counts else ("", None))  # fmt: skip
    classes = tuple(getattr(syn.question, "intervention", ()) or ())
    rows = sheet_rows(sq.studies, syn.data, _pico_arms(sq.papers), default,
                      role=(lambda arm: arm_role(arm, classes)) if classes else None)  # fmt: skip
    write_sheet(rows, path)
    filled = sum(r.total is not None for r in rows)
    return SheetExport(path, sq, len(rows), filled, sum(1 for reports in sq.studies.values()
                                                          if any(syn.data.get(p) for p in reports)))  # fmt: skip


@dataclass(frozen=True)
class SheetImport:
    path: Path  # the stored reviewer data
    question: SheetQuestion
    given: int  # rows whose numbers are the reviewer's
    removed: int  # of them, rows cleared ("the report gives no such number")
    pooled: Sequence[Pooled]  # the question's pooled estimates made again with them
    sheet: Path  # the reviewer's sheet read

    def lines(self) -> list[str]:
        """What `ra extract --from` prints: the rows taken in, and each pooled estimate made again."""
        rows = "1 row" if self.given == 1 else f"{self.given} rows"
        out = [f"question {self.question.id}: the reviewer's numbers in {rows} of {self.sheet} ({self.removed} "
               f"cleared); stored in {self.path}"]  # fmt: skip
        for r in self.pooled:
            by = " (reviewer's numbers)" if r.reviewer else ""
            out.append(f"  {r.contrasts.comparison.label}, {r.contrasts.label}: {r.estimate()}; {r.trials} trials{by}")
        out.append("the SR draft and its forest plots use them when made again (ra run, or the reports asset)")
        return out


def import_sheet(cfg: Config, store: Store, handbook: str | Path, sheet: Path, question_id: str | None = None, *,
                 question: SheetQuestion | None = None) -> SheetImport:  # fmt: skip
    """Read a reviewer's sheet: every row validated first (`SheetError` names file, row and column and nothing is
    stored), then its numbers stored for every later synthesis, and the question's pooled estimates made again."""
    sq = question or sheet_question(cfg, store, handbook, question_id)
    rows = read_sheet(Path(sheet), sq.studies)
    stored = store_reviewer(cfg, str(handbook), sq.id, Path(sheet), rows)
    syn = question_synthesis(cfg, sq, reviewer=reviewer_data(cfg))
    return SheetImport(stored, sq, len(rows), sum(r.removed for r in rows), syn.pooled, Path(sheet))


@dataclass(frozen=True)
class ReviewerSummary:
    """What the stored reviewer data hold (for the Dagster asset)."""

    files: list[str]
    rows: int
    removed: int
    sheets: dict[str, int]  # sheet file -> rows of it in use
    content: list[bytes]  # the files' bytes, for the asset's data version


def reviewer_summary(cfg: Config) -> ReviewerSummary:
    """The stored reviewer data: files, rows (cleared ones among them) and rows per sheet."""
    from ra_agent.evidence.synthesis.sheet import reviewer_dir

    folder = reviewer_dir(cfg)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    rows = (reviewer_data(cfg) or ReviewerData()).rows
    sheets: dict[str, int] = {}
    for row in rows:
        name = row.source.rsplit(" row ", 1)[0]
        sheets[name] = sheets.get(name, 0) + 1
    return ReviewerSummary([str(p) for p in files], len(rows), sum(r.removed for r in rows), sheets,
                           [p.read_bytes() for p in files])  # fmt: skip
