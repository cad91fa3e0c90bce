"""The evidence-gap map of a handbook's questions as data: one cell per question (its intervention's row, its
comparator's column), holding the question's own studies, verdict, covering reviews and trials since; the drawings
(`gap_map_draw.py`) and the dossier's pointer to its cell (`map_link`) read it. See docs/gap_map.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ra_agent.evidence.questions.model import (
    DOSE_KIND,
    NON_DRUG_KIND,
    OTHER_CLASS,
    PLACEBO_KIND,
    SAME_CLASS,
    UNNAMED,
    VERDICTS,
    ReviewQuestion,
    comparator_kind,
)

PUBMED = "https://pubmed.ncbi.nlm.nih.gov/{pmid}/"
# Okabe-Ito colours (told apart with the common colour-vision deficiencies): the gap stands out, covered recedes
VERDICT_COLOURS: dict[str, str] = dict(zip(VERDICTS, ("#D55E00", "#0072B2", "#E69F00", "#999999"), strict=True))
TOPIC_KIND = "the handbook's question"  # the column of the topic's own question (every comparison it takes)
# The column groups, left to right: the topic's question, then the kinds of comparison (model.KINDS)
COLUMN_KINDS = (TOPIC_KIND, PLACEBO_KIND, OTHER_CLASS, SAME_CLASS, DOSE_KIND, NON_DRUG_KIND, UNNAMED)
OUT_OF_SCOPE = "outside the handbook's scope"
FILES = ("gap_map.png", "gap_map.html")


@dataclass(frozen=True)
class MapRecord:
    """A record a cell lists, linked to PubMed."""

    pmid: int
    year: int | None
    title: str

    @property
    def url(self) -> str:
        return PUBMED.format(pmid=self.pmid)


@dataclass(frozen=True)
class MapStudy(MapRecord):
    """A study of a cell by its first report (the one a list of studies shows), with its number of reports."""

    study_id: str = ""
    reports: int = 1


@dataclass(frozen=True)
class MapReview(MapRecord):
    """A review answering a cell's question and its role: "covers", "newest covering" or "answers it (N%)"."""

    role: str = ""


@dataclass(frozen=True)
class Column:
    label: str  # the comparator as the question names it
    kind: str  # its group: one of COLUMN_KINDS

    @property
    def shown(self) -> str:
        return "any comparator" if self.label == "any" else self.label


@dataclass(frozen=True)
class MapCell:
    """One question on the map: where it sits and what the question holds (read, never recomputed)."""

    question_id: str
    row: str  # the intervention (class or narrower class) the question tests
    column: Column  # its comparator ("any" for the topic's question) and the kind of comparison
    in_words: str
    studies: int
    reports: int
    verdict: str
    verdict_reason: str
    in_scope: bool
    newest: MapReview | None  # the newest covering review
    study_list: tuple[MapStudy, ...]
    reviews: tuple[MapReview, ...]
    trials_since: tuple[int, ...]

    @property
    def review_year(self) -> int | None:
        return self.newest.year if self.newest else None

    @property
    def colour(self) -> str:
        return VERDICT_COLOURS.get(self.verdict, "#000000")

    @property
    def review_label(self) -> str:
        """What the cell prints under its count: the newest covering review's year ("SR 2002")."""
        return f"SR {self.review_year}" if self.review_year else ""


@dataclass(frozen=True)
class GapMap:
    """The map of one handbook's questions: title in words, the corpus's date, rows, columns and cells."""

    title: str
    subtitle: str
    corpus_date: str
    rows: tuple[str, ...]  # the topic's intervention first, then narrower classes by studies
    row_parents: Mapping[str, str]  # a narrower row -> the row it narrows
    columns: tuple[Column, ...]
    cells: tuple[MapCell, ...]
    statement: str = ""  # the one line an empty map is

    @property
    def empty(self) -> bool:
        """No question holds a study: the map is its one-line statement, never a picture."""
        return not any(cell.studies for cell in self.cells)

    def cell(self, question_id: str) -> MapCell | None:
        return next((c for c in self.cells if c.question_id == question_id), None)

    def row_label(self, row: str) -> str:
        return f"· {row}" if row in self.row_parents else row


def _studies(question: ReviewQuestion, titles: Mapping[int, str]) -> tuple[MapStudy, ...]:
    found = [
        MapStudy(reports[0], question.years.get(reports[0]), titles.get(reports[0], ""), sid, len(reports))
        for sid, reports in question.studies.items()
        if reports
    ]
    return tuple(sorted(found, key=lambda s: (s.year or 9999, s.pmid)))


def _reviews(question: ReviewQuestion) -> tuple[MapReview, ...]:
    """The covering review, the newest covering one, then the other reviews answering the question (with the share
    of its studies each could include)."""
    out: dict[int, MapReview] = {}
    for review, role in ((question.covering, "covers"), (question.newest, "newest covering")):
        if review is not None and review.pmid not in out:
            out[review.pmid] = MapReview(review.pmid, review.year, review.title, role)
    for r in question.reviews:
        out.setdefault(r.pmid, MapReview(r.pmid, r.year, r.title, f"answers it, could include {r.share:.0%}"))
    return tuple(out.values())


def _column(question: ReviewQuestion) -> Column:
    if question.parent is None:
        return Column(question.comparator, TOPIC_KIND)
    return Column(question.comparator, comparator_kind(question.comparator))


def _cell(question: ReviewQuestion, column: Column, titles: Mapping[int, str]) -> MapCell:
    reviews = _reviews(question)
    newest = next((r for r in reviews if question.newest and r.pmid == question.newest.pmid), None)
    return MapCell(
        question_id=question.id, row=question.intervention, column=column, in_words=question.in_words,
        studies=len(question.studies), reports=len(question.trials), verdict=question.verdict,
        verdict_reason=question.verdict_reason, in_scope=question.in_scope, newest=newest,
        study_list=_studies(question, titles), reviews=reviews, trials_since=tuple(question.trials_since),
    )  # fmt: skip


def build_gap_map(
    questions: Sequence[ReviewQuestion], titles: Mapping[int, str], corpus_date: str, *, records: int | None = None
) -> GapMap:
    """The map of `questions` (the topic's question first, as `questions_for_topic` and the stored set give them).

    Rows: the topic's intervention (class), then each narrower class a question splits it into; columns: the
    topic's own question, then one per comparator grouped by kind (placebo or none, another class, the same class,
    dose or schedule, non-drug). A cell is one question; two questions on one row and comparator (never made by
    `build_questions`) keep separate columns. `titles`: PMID -> title of the studies' first reports (hover text);
    `records`: the corpus's size, for the subtitle."""
    if not questions:
        raise ValueError("a gap map needs the topic's question")
    root = next((q for q in questions if q.parent is None), questions[0])
    by_id = {q.id: q for q in questions}
    placed: dict[tuple[str, Column], str] = {}
    cells: list[MapCell] = []
    for question in questions:
        column = _column(question)
        if placed.get((question.intervention, column), question.id) != question.id:
            column = Column(f"{column.label} ({question.id})", column.kind)
        placed[(question.intervention, column)] = question.id
        cells.append(_cell(question, column, titles))
    in_row: dict[str, int] = {}
    in_column: dict[Column, int] = {}
    for cell in cells:
        in_row[cell.row] = in_row.get(cell.row, 0) + cell.studies
        in_column[cell.column] = in_column.get(cell.column, 0) + cell.studies
    row_parents = {}
    for question in questions:
        parent = by_id.get(question.parent or "")
        if question.intervention != root.intervention and parent is not None:
            row_parents.setdefault(question.intervention, parent.intervention)
    rows = [root.intervention] + sorted({c.row for c in cells} - {root.intervention}, key=lambda r: (-in_row[r], r))
    columns = sorted(in_column, key=lambda c: (COLUMN_KINDS.index(c.kind), -in_column[c], c.label))
    own = root.intervention[:1].upper() + root.intervention[1:]
    title = f"Evidence-gap map: {own} for people with {root.population}"
    size = f"{records:,} records, " if records is not None else ""
    subtitle = (f"{len(cells)} review questions, {len(root.studies)} studies in the handbook's question; corpus "
                f"of {corpus_date} ({size}local). Area: studies; colour: verdict; SR year: newest covering review")  # fmt: skip
    gap_map = GapMap(title, subtitle, corpus_date, tuple(rows), row_parents, tuple(columns), tuple(cells))
    if gap_map.empty:
        statement = (f"No evidence-gap map for {own} for people with {root.population}: none of its questions "
                     f"({len(cells)}) holds a study in the corpus of {corpus_date}")  # fmt: skip
        return GapMap(title, subtitle, corpus_date, (), {}, (), tuple(cells), statement)
    return gap_map


@dataclass
class MapLink:
    """Where a dossier finds its question on the map (`map_link`)."""

    cell: MapCell
    lines: list[str] = field(default_factory=list)

    @property
    def markdown(self) -> str:
        return "\n".join(self.lines)


def _grid_row(gap_map: GapMap, row: str, marked: str) -> str:
    cells = {c.column: c for c in gap_map.cells if c.row == row}
    shown = []
    for column in gap_map.columns:
        cell = cells.get(column)
        text = f"{cell.studies} {cell.verdict}" if cell else ""
        shown.append(f"**▶ {text} ◀**" if cell and cell.question_id == marked else text)
    return f"| {gap_map.row_label(row)} | " + " | ".join(shown) + " |"


def map_link(gap_map: GapMap, question_id: str) -> MapLink | None:
    """The dossier's section pointing to its question on the map in the same folder: links to gap_map.html (where
    the question list marks its cell) and gap_map.png, the cell's row and column, and the map's rows of the topic
    and of the question with its own cell marked. None when the map is empty or does not hold the question."""
    cell = gap_map.cell(question_id)
    if gap_map.empty or cell is None:
        return None
    column = cell.column
    kind = "" if column.kind == column.shown else f" ({column.kind})"
    lines = [
        "## On the evidence-gap map",
        "",
        f"[gap_map.html](gap_map.html) (opens offline: pick {question_id} in its question list, or click the cell, "
        f"to mark it and list its studies) · [gap_map.png](gap_map.png)",
        "",
        f"Its cell: row {cell.row!r}, column {column.shown!r}{kind}: {cell.studies} studies, {cell.verdict}"
        + (f", newest covering review {cell.review_year}" if cell.review_year else "")
        + ("" if cell.in_scope else f" ({OUT_OF_SCOPE})"),
        "",
        "| intervention \\ comparator | " + " | ".join(c.shown for c in gap_map.columns) + " |",
        "|---|" + "---|" * len(gap_map.columns),
    ]
    for row in dict.fromkeys([gap_map.rows[0], cell.row]):
        lines.append(_grid_row(gap_map, row, question_id))
    return MapLink(cell, [*lines, ""])
