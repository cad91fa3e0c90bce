"""The extraction sheet a review team finishes: one row per study × outcome × time point × arm with ra's numbers, the
sentence each came from and the extractor, empty where ra found nothing; read back, every row validated, and the
reviewer's numbers kept beside ra's (with their source: the sheet file and row) to win in every synthesis.

Writing (`sheet_rows`, `write_sheet`) and reading (`read_sheet`) take .xlsx (openpyxl) and .csv. A sheet is read
whole or not at all: the first bad row raises `SheetError` naming the file, the row (as a spreadsheet shows it,
the header being row 1) and the column. A row's numbers are the reviewer's when they differ from the `ra_` columns
ra wrote (a changed count, a filled gap, or numbers cleared to say the abstract does not report them); rows left as
ra wrote them are not stored. `store_reviewer` keeps one file per handbook under `<data_dir>/extraction/`;
`reviewer_data` reads them all for the synthesis (`ReviewerData.apply`), the latest import winning. See
docs/synthesis.md.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ra_agent.config import Config
from ra_agent.evidence.synthesis.extract import OUTCOME_CLASSES, ArmDatum, arms_in
from ra_agent.fileio import atomic_write
from ra_agent.workspace import Workspace

REVIEWER = "reviewer"
COLUMNS = ("study_id", "pmid", "outcome", "time_weeks", "arm", "role", "events", "total", "mean", "sd", "dispersion",
           "analysis", "outcome_words", "source_sentence", "arm_size_sentence", "extracted_by", "ra_events", "ra_total",
           "ra_mean", "ra_sd")  # fmt: skip
EDITABLE = ("events", "total", "mean", "sd")
DISPERSIONS = ("", "SD", "SE", "±")
HELP = (
    "One row per study × outcome × time point × arm. Correct or fill events/total (dichotomous) or mean/sd/total (n, "
    "continuous; sd a standard deviation); clear them when the report gives none. ra_* columns are what ra read: "
    "leave them as they are. Import with: ra extract HANDBOOK --from THIS_FILE"
)


class SheetError(ValueError):
    """A sheet that cannot be taken in: the message names the file, the row and the column."""


@dataclass(frozen=True)
class SheetRow:
    """One row of the sheet as ra writes it."""

    study_id: str
    pmid: int
    outcome: str  # an outcome class (`extract.OUTCOME_CLASSES`)
    weeks: float | None
    arm: str
    role: str = ""  # "I" (receives the question's intervention) or "C"; "" when no question classes were given
    events: int | None = None
    total: int | None = None
    mean: float | None = None
    sd: float | None = None
    dispersion: str = ""
    analysis: str = ""
    outcome_words: str = ""
    sentence: str = ""
    size_sentence: str = ""
    extractor: str = ""

    def cells(self) -> list[Any]:
        ra = (self.events, self.total, self.mean, self.sd)
        return [self.study_id, self.pmid, self.outcome, self.weeks, self.arm, self.role, *ra, self.dispersion,
                self.analysis, self.outcome_words, self.sentence, self.size_sentence, self.extractor, *ra]  # fmt: skip


@dataclass(frozen=True)
class ReviewerRow:
    """A number set a reviewer gave for one study × outcome × time point × arm (None numbers: "not reported")."""

    study_id: str
    pmid: int
    outcome: str
    weeks: float | None
    arm: str
    events: int | None
    total: int | None
    mean: float | None
    sd: float | None
    dispersion: str
    source: str  # "sheet.xlsx row 12"
    analysis: str = ""  # "ITT", "PP" or "": with the arm, outcome and time point, what the row is about

    @property
    def key(self) -> tuple[int, str, float | None, str, str]:
        return (self.pmid, self.outcome, _weeks_key(self.weeks), self.arm, self.analysis)

    @property
    def removed(self) -> bool:
        return self.total is None and self.events is None and self.mean is None


def _weeks_key(weeks: float | None) -> float | None:
    return None if weeks is None else round(weeks, 3)


def _datum_key(d: ArmDatum) -> tuple[int, str, float | None, str, str]:
    return (d.pmid, d.outcome.split(":", 1)[0], _weeks_key(d.weeks), d.arm, d.analysis)


@dataclass
class ReviewerData:
    """The reviewer's numbers of every imported sheet (the latest import of a key wins)."""

    rows: list[ReviewerRow] = field(default_factory=list)

    def apply(self, data: Mapping[int, list[ArmDatum]], found_by: Mapping[int, str]
              ) -> tuple[dict[int, list[ArmDatum]], dict[int, str], int]:  # fmt: skip
        """The extracted `data` with the reviewer's numbers in: a row with ra's key replaces its numbers (the datum
        keeps its sentence, its extractor becomes "reviewer (<sheet> row <n>)"), a row ra had not is added, a row
        whose numbers were cleared removes ra's datum. Only trials in `data` are touched. Returns the data, the
        extractor per trial and how many reviewer rows were used."""
        out = {pmid: list(rows) for pmid, rows in data.items()}
        names = dict(found_by)
        used = 0
        for row in self.rows:
            if row.pmid not in out:
                continue
            used += 1
            rows = out[row.pmid]
            at = next((i for i, d in enumerate(rows) if _datum_key(d) == row.key), None)
            if row.removed:
                if at is not None:
                    rows.pop(at)
            elif at is not None:
                rows[at] = _given(rows[at], row)
            else:
                drug = next((d for _, d in arms_in(row.arm)), row.arm.lower())
                new = ArmDatum(row.pmid, row.arm, drug, row.outcome, row.weeks, 0, 0, "", "", analysis=row.analysis)
                rows.append(_given(new, row))
            base = names.get(row.pmid, "")
            if REVIEWER not in base:
                names[row.pmid] = f"{REVIEWER} ({Path(row.source.rsplit(' row ', 1)[0]).name})" + (
                    f" + {base}" if base else ""
                )
        return out, names, used


def _given(d: ArmDatum, row: ReviewerRow) -> ArmDatum:
    continuous = row.mean is not None
    return replace(d, events=0 if continuous else int(row.events or 0), total=int(row.total or 0),
                   mean=row.mean if continuous else None, sd=row.sd if continuous else None,
                   dispersion=(row.dispersion or "SD") if continuous else "", spread=row.sd if continuous else None,
                   extractor=f"{REVIEWER} ({row.source})")  # fmt: skip


# ----------------------------------------------------------------------------- writing


def sheet_rows(studies: Mapping[str, Sequence[int]], data: Mapping[int, Sequence[ArmDatum]],
               arms: Mapping[int, Sequence[str]] | None = None, default: tuple[str, float | None] = ("", None),
               role: Any = None) -> list[SheetRow]:  # fmt: skip
    """The sheet's rows: per study (in id order) and report, ra's data, then an empty row for each arm of the study
    missing at an outcome × time point another arm has, and, for a report without data, one empty row per arm its
    PICO names (`arms`) at the `default` outcome and time point. `role(arm) -> "I"|"C"` names each arm's side."""
    out: list[SheetRow] = []
    for study_id in sorted(studies, key=_study_order):
        for pmid in studies[study_id]:
            rows = list(data.get(pmid, ()))
            labels = list(dict.fromkeys(d.arm for d in rows)) or list(dict.fromkeys(arms.get(pmid, ()) if arms else ()))
            points = list(dict.fromkeys((d.outcome.split(":", 1)[0], d.weeks) for d in rows)) or (
                [default] if default[0] else []
            )
            side = (lambda arm: role(arm)) if role else (lambda arm: "")
            for d in rows:
                out.append(SheetRow(study_id, pmid, d.outcome.split(":", 1)[0], d.weeks, d.arm, side(d.arm),
                                    None if d.continuous else d.events, d.total, d.mean, d.sd, d.dispersion,
                                    d.analysis, d.outcome_words, d.sentence, d.size_sentence, d.extractor))  # fmt: skip
            have = {(d.outcome.split(":", 1)[0], d.weeks, d.arm) for d in rows}
            for outcome, weeks in points:
                for arm in labels:
                    if (outcome, weeks, arm) not in have:
                        out.append(SheetRow(study_id, pmid, outcome, weeks, arm, side(arm)))
    return out


def _study_order(study_id: str) -> tuple[int, str]:
    digits = "".join(ch for ch in study_id if ch.isdigit())
    return (int(digits) if digits else 0, study_id)


def write_sheet(rows: Iterable[SheetRow], path: Path) -> Path:
    """The sheet at `path`: .xlsx (a header row, frozen, the ra_ columns grey, a second sheet explaining it) or .csv."""
    rows = list(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".csv":
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(COLUMNS)
            writer.writerows([_csv_cell(c) for c in r.cells()] for r in rows)
        return path
    if path.suffix.lower() != ".xlsx":
        raise SheetError(f"{path}: a sheet is .xlsx or .csv")
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font, PatternFill

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "extraction"
    sheet.append(list(COLUMNS))
    for r in rows:
        sheet.append(r.cells())
    grey = PatternFill("solid", fgColor="EEEEEE")
    widths = {"arm": 28, "outcome_words": 26, "source_sentence": 60, "arm_size_sentence": 40, "extracted_by": 24}
    for i, name in enumerate(COLUMNS, 1):
        cell = sheet.cell(row=1, column=i)
        cell.font = Font(bold=True)
        letter = _letter(i)
        sheet.column_dimensions[letter].width = widths.get(name, 11)
        if name.startswith("ra_") or name in ("source_sentence", "arm_size_sentence", "extracted_by"):
            for row in sheet.iter_rows(min_row=2, min_col=i, max_col=i):
                row[0].fill = grey
                row[0].alignment = Alignment(wrap_text=name.endswith("sentence"), vertical="top")
    sheet.freeze_panes = "F2"
    about = book.create_sheet("about")
    about.append([HELP])
    book.save(path)
    return path


def _letter(column: int) -> str:
    from openpyxl.utils import get_column_letter

    return get_column_letter(column)


def _csv_cell(value: Any) -> Any:
    return "" if value is None else value


# ----------------------------------------------------------------------------- reading


def _cells(path: Path) -> tuple[list[str], list[tuple[int, list[Any]]]]:
    """The header and the (row number, cells) of each non-empty row."""
    if not path.exists():
        raise SheetError(f"{path}: no such file")
    if path.suffix.lower() == ".csv":
        with path.open(encoding="utf-8-sig", newline="") as fh:
            lines = list(csv.reader(fh))
    elif path.suffix.lower() == ".xlsx":
        from openpyxl import load_workbook

        try:
            book = load_workbook(path, read_only=True, data_only=True)
        except Exception as exc:  # a broken or non-xlsx file: openpyxl raises several kinds
            raise SheetError(f"{path}: not a readable .xlsx file ({exc})") from None
        sheet = book["extraction"] if "extraction" in book.sheetnames else book.worksheets[0]
        lines = [list(r) for r in sheet.iter_rows(values_only=True)]
        book.close()
    else:
        raise SheetError(f"{path}: a sheet is .xlsx or .csv")
    if not lines:
        raise SheetError(f"{path}: the sheet is empty (expected a header row)")
    header = [str(c).strip() if c is not None else "" for c in lines[0]]
    body = [(n, list(r)) for n, r in enumerate(lines[1:], 2) if any(str(c).strip() for c in r if c is not None)]
    return header, body


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def read_sheet(path: Path, studies: Mapping[str, Sequence[int]]) -> list[ReviewerRow]:
    """The reviewer's rows of a sheet whose every row is valid (numbers, 0 <= events <= total, SD >= 0, a known study
    id with one of its reports' PMIDs, a known outcome, an arm); a bad row raises `SheetError` naming file, row and
    column. Rows whose numbers are ra's (the ra_ columns) are not returned."""
    header, body = _cells(path)
    missing = [
        c for c in ("study_id", "pmid", "outcome", "time_weeks", "arm", *EDITABLE, "dispersion") if c not in header
    ]
    if missing:
        raise SheetError(f"{path}: row 1: missing column(s) {', '.join(repr(c) for c in missing)}")
    at = {name: header.index(name) for name in header if name}
    rows = [_row(path, n, cells, at, studies) for n, cells in body]
    return [r for r in rows if r is not None]


def _row(path: Path, n: int, cells: list[Any], at: dict[str, int], studies: Mapping[str, Sequence[int]]
         ) -> ReviewerRow | None:  # fmt: skip
    """One validated row: the reviewer's numbers, or None when they are ra's."""

    def get(name: str) -> str:
        return _text(cells[at[name]]) if name in at and at[name] < len(cells) else ""

    def bad(column: str, problem: str) -> SheetError:
        return SheetError(f"{path}: row {n}, column {column!r}: {problem}")

    study = get("study_id")
    if study not in studies:
        raise bad(
            "study_id",
            f"unknown study {study!r} (the question's studies: {', '.join(sorted(studies, key=_study_order)[:8])}…)",
        )
    pmid = _int(get("pmid"), bad, "pmid", minimum=1)
    if pmid is None or pmid not in studies[study]:
        raise bad("pmid", f"{pmid} is not a report of study {study} ({', '.join(map(str, studies[study]))})")
    outcome = get("outcome")
    if outcome not in OUTCOME_CLASSES:
        raise bad("outcome", f"unknown outcome {outcome!r} (one of: {', '.join(OUTCOME_CLASSES)})")
    weeks = _float(get("time_weeks"), bad, "time_weeks", minimum=0.0)
    arm = get("arm")
    if not arm:
        raise bad("arm", "empty (name the arm)")
    events = _int(get("events"), bad, "events", minimum=0)
    total = _int(get("total"), bad, "total", minimum=1)
    mean = _float(get("mean"), bad, "mean")
    sd = _float(get("sd"), bad, "sd", minimum=0.0)
    dispersion = get("dispersion")
    if dispersion not in DISPERSIONS:
        raise bad("dispersion", f"{dispersion!r}: expected SD, SE, ± or empty")
    analysis = get("analysis")
    if analysis not in ("", "ITT", "PP"):
        raise bad("analysis", f"{analysis!r}: expected ITT, PP or empty")
    if events is not None and mean is not None:
        raise bad("mean", "a row has events (dichotomous) or a mean (continuous), not both")
    if events is not None and total is None:
        raise bad("total", f"events {events} without a total")
    if events is not None and total is not None and events > total:
        raise bad("events", f"events {events} > total {total}")
    if mean is not None and (sd is None or total is None):
        raise bad("sd" if sd is None else "total", "a mean needs its sd and total (n)")
    if events is None and mean is None and total is not None:
        raise bad("events", f"total {total} without events (or a mean)")
    ra = tuple(_loose(get(f"ra_{c}")) for c in EDITABLE)
    mine = (events, total, mean, sd)
    if all(_same(a, b) for a, b in zip(mine, ra, strict=True)):
        return None  # as ra wrote it (or empty where ra found nothing)
    return ReviewerRow(study, pmid, outcome, weeks, arm, events, total, mean, sd, dispersion, f"{path.name} row {n}",
                       analysis)  # fmt: skip


def _int(text: str, bad, column: str, minimum: int) -> int | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise bad(column, f"{text!r} is not a number") from None
    if not value.is_integer():
        raise bad(column, f"{text!r} is not a whole number")
    if value < minimum:
        raise bad(column, f"{text} < {minimum}")
    return int(value)


def _float(text: str, bad, column: str, minimum: float | None = None) -> float | None:
    if not text:
        return None
    try:
        value = float(text.replace("−", "-"))
    except ValueError:
        raise bad(column, f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise bad(column, f"{text!r} is not a finite number")
    if minimum is not None and value < minimum:
        raise bad(column, f"{text} < {minimum:g}")
    return value


def _loose(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)


# ----------------------------------------------------------------------------- the store


def reviewer_dir(cfg: Config) -> Path:
    return Workspace.of(cfg).root / "extraction"


def store_reviewer(cfg: Config, handbook: str, question_id: str, sheet: Path, rows: Sequence[ReviewerRow]) -> Path:
    """The reviewer's rows of one handbook's sheet, stored (replacing that handbook's previous import) atomically."""
    path = reviewer_dir(cfg) / f"{Path(handbook).stem}.json"
    record = {"handbook": str(handbook), "question": question_id, "sheet": str(sheet),
              "imported": datetime.now(UTC).isoformat(timespec="seconds"), "rows": [asdict(r) for r in rows]}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def reviewer_data(cfg: Config) -> ReviewerData | None:
    """Every stored import (oldest first, so that the latest wins a key), or None when there is none."""
    folder = reviewer_dir(cfg)
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise SheetError(f"{path}: unreadable reviewer data ({exc}); re-import its sheet") from None
    if not records:
        return None
    by_key: dict[tuple[int, str, float | None, str, str], ReviewerRow] = {}
    for record in sorted(records, key=lambda r: r.get("imported", "")):
        for row in record.get("rows", []):
            r = ReviewerRow(**row)
            by_key[r.key] = r
    return ReviewerData(list(by_key.values()))
