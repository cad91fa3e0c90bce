"""The extraction sheet's round trip on the demo corpus: `ra extract`'s export of the conduct_SR handbook's question,
one arm's events changed by a "reviewer", the sheet read back; the pooled risk ratio and its CI are then the ones
recomputed here, by hand, from the edited numbers; a row with events > total is refused naming its row and column,
and nothing is stored. Validation of every kind of bad cell on small sheets."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from openpyxl import load_workbook

from ra_agent.agent.extraction import SheetError, export_sheet, import_sheet, question_synthesis, sheet_question
from ra_agent.config import Config
from ra_agent.evidence.synthesis.sheet import COLUMNS, read_sheet, reviewer_data, reviewer_dir
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
CONDUCT_SR = ROOT / "handbooks" / "conduct_sr_ppi.md"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo corpus imported into a fresh workspace, and the conduct_SR handbook's question read once."""
    root = tmp_path_factory.mktemp("sheet_ws")
    cfg = Config().with_overrides(workspace={"data_dir": str(root), "demo_corpus": ""})
    store = Store(Workspace.of(cfg).db_path)
    import_file(store, DEMO, cfg)
    try:
        yield cfg, store, sheet_question(cfg, store, CONDUCT_SR)
    finally:
        store.close()


def _rows(path: Path) -> tuple[list[str], list[list]]:
    book = load_workbook(path)
    sheet = book["extraction"]
    lines = [list(r) for r in sheet.iter_rows(values_only=True)]
    return [str(c) for c in lines[0]], lines[1:]


def _log_rr_dl(counts: list[tuple[int, int, int, int]]) -> tuple[float, float, float]:
    """Pooled RR and 95% CI, DerSimonian-Laird random effects on log RR (textbook formulas; 0.5 per zero cell)."""
    a, n1, c, n2 = (np.array(x, float) for x in zip(*counts, strict=True))
    zero = (a == 0) | (c == 0) | (a == n1) | (c == n2)
    a, c, n1, n2 = a + 0.5 * zero, c + 0.5 * zero, n1 + zero, n2 + zero
    y, v = np.log((a / n1) / (c / n2)), 1 / a - 1 / n1 + 1 / c - 1 / n2
    w = 1 / v
    q = float(np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2))
    tau2 = max(0.0, (q - (len(y) - 1)) / (np.sum(w) - np.sum(w**2) / np.sum(w)))
    w = 1 / (v + tau2)
    mu, se = float(np.sum(w * y) / np.sum(w)), math.sqrt(1 / float(np.sum(w)))
    return math.exp(mu), math.exp(mu - 1.959964 * se), math.exp(mu + 1.959964 * se)


def test_round_trip_on_the_demo(demo, tmp_path: Path) -> None:
    cfg, store, question = demo
    exported = export_sheet(cfg, store, CONDUCT_SR, tmp_path / "sheet.xlsx", question=question)
    header, rows = _rows(exported.path)
    assert header == list(COLUMNS) and len(rows) == exported.rows > 50
    col = {name: header.index(name) for name in header}
    assert exported.with_numbers > 20 and any(r[col["events"]] is None for r in rows)  # gaps left empty
    assert all(r[col["study_id"]] in question.studies for r in rows)
    filled = [r for r in rows if r[col["events"]] is not None]
    assert all(r[col["source_sentence"]] and r[col["extracted_by"]].startswith("rules:") for r in filled)

    # the main comparison before the edit: edit one arm of one of its trials
    before = question_synthesis(cfg, question).main()
    assert before is not None and before.trials >= 3
    oc = before.contrasts
    trial = oc.trials[0]
    arm = trial.intervention.arms[0]
    analysis = trial.intervention.data[0].analysis
    target = next(r for r in rows if r[col["pmid"]] == trial.pmid and r[col["arm"]] == arm and
                  r[col["outcome"]] == oc.outcome and r[col["time_weeks"]] == oc.weeks and
                  (r[col["analysis"]] or "") == analysis)  # fmt: skip
    delta = -7 if target[col["events"]] >= 7 else 1  # a change the sheet takes: 0 <= events <= total
    assert target[col["events"]] + delta <= target[col["total"]]
    new_events = target[col["events"]] + delta
    book = load_workbook(exported.path)
    sheet = book["extraction"]
    sheet.cell(row=rows.index(target) + 2, column=col["events"] + 1, value=new_events)
    edited = tmp_path / "edited.xlsx"
    book.save(edited)

    got = import_sheet(cfg, store, CONDUCT_SR, edited, question=question)
    assert got.given == 1 and got.removed == 0
    after = next(r for r in got.pooled if r.contrasts.comparison == oc.comparison and r.contrasts.label == oc.label)
    assert trial.pmid in after.reviewer
    # recompute from the edited sheet: each trial's sides summed over their arms' rows
    _, edited_rows = _rows(edited)

    def side(pmid: int, data) -> tuple[int, int]:
        found = [r for r in edited_rows if r[col["pmid"]] == pmid and oc.outcome == r[col["outcome"]] and
                 r[col["time_weeks"]] == oc.weeks and any(r[col["arm"]] == d.arm and (r[col["analysis"]] or "") ==
                                                          d.analysis for d in data)]  # fmt: skip
        assert len(found) == len(data)
        return sum(r[col["events"]] for r in found), sum(r[col["total"]] for r in found)

    counts = [(*side(t.pmid, t.intervention.data), *side(t.pmid, t.comparator.data)) for t in after.contrasts.trials]
    assert counts[0][0] == sum(d.events for d in trial.intervention.data) + delta
    rr, low, high = _log_rr_dl(counts)
    assert (after.effect, after.ci_low, after.ci_high) == pytest.approx((rr, low, high), rel=1e-6)
    assert (after.effect, after.ci_low) != pytest.approx((before.effect, before.ci_low), rel=1e-6)

    # a row with events > total is refused, naming file, row and column; the stored reviewer data are unchanged
    stored = {p.name: p.read_bytes() for p in reviewer_dir(cfg).iterdir()}
    sheet.cell(row=rows.index(target) + 2, column=col["events"] + 1, value=target[col["total"]] + 1)
    bad = tmp_path / "bad.xlsx"
    book.save(bad)
    with pytest.raises(SheetError) as err:
        import_sheet(cfg, store, CONDUCT_SR, bad, question=question)
    message = str(err.value)
    assert message == (f"{bad}: row {rows.index(target) + 2}, column 'events': events {target[col['total']] + 1} > "
                       f"total {target[col['total']]}")  # fmt: skip
    assert {p.name: p.read_bytes() for p in reviewer_dir(cfg).iterdir()} == stored
    data = reviewer_data(cfg)
    assert data is not None and [r.events for r in data.rows] == [new_events]

    # the same sheet as .csv reads back with nothing of the reviewer's in it
    plain = export_sheet(cfg, store, CONDUCT_SR, tmp_path / "sheet.csv", question=question)
    with plain.path.open(encoding="utf-8") as fh:
        assert next(csv.reader(fh)) == list(COLUMNS)
    assert [(r.pmid, r.events) for r in read_sheet(plain.path, question.studies)] == []  # the stored edit is ra_* now


def _write_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in COLUMNS})
    return path


GOOD = {"study_id": "s-1", "pmid": 11, "outcome": "healing", "time_weeks": 4, "arm": "omeprazole 20 mg",
        "events": 30, "total": 40}  # fmt: skip
STUDIES = {"s-1": [11, 12], "s-2": [21]}


@pytest.mark.parametrize(
    ("change", "column", "problem"),
    [
        ({"study_id": "s-9"}, "study_id", "unknown study 's-9'"),
        ({"pmid": 21}, "pmid", "21 is not a report of study s-1 (11, 12)"),
        ({"outcome": "heal"}, "outcome", "unknown outcome 'heal'"),
        ({"events": "x"}, "events", "'x' is not a number"),
        ({"events": 2.5}, "events", "'2.5' is not a whole number"),
        ({"events": 41}, "events", "events 41 > total 40"),
        ({"total": 0}, "total", "0 < 1"),
        ({"events": "", "mean": 5.1, "sd": -1, "total": 20}, "sd", "-1 < 0"),
        ({"events": "", "mean": 5.1, "total": 20}, "sd", "a mean needs its sd and total (n)"),
        ({"mean": 5.1, "sd": 1}, "mean", "a row has events (dichotomous) or a mean (continuous), not both"),
        ({"arm": ""}, "arm", "empty (name the arm)"),
        ({"time_weeks": "-2"}, "time_weeks", "-2 < 0"),
        ({"dispersion": "IQR"}, "dispersion", "'IQR': expected SD, SE, ± or empty"),
    ],
)
def test_every_bad_cell_is_named(tmp_path: Path, change, column, problem) -> None:
    path = _write_csv(tmp_path / "s.csv", [GOOD, {**GOOD, **change}])
    with pytest.raises(SheetError) as err:
        read_sheet(path, STUDIES)
    assert str(err.value).startswith(f"{path}: row 3, column {column!r}: {problem}")


def test_reviewer_rows_are_the_changed_ones(tmp_path: Path) -> None:
    as_ra = {**GOOD, "ra_events": 30, "ra_total": 40}
    filled = {**GOOD, "arm": "ranitidine", "events": 12, "total": 38}  # ra found nothing: the reviewer filled it
    cleared = {**GOOD, "pmid": 12, "events": "", "total": "", "ra_events": 5, "ra_total": 9}
    path = _write_csv(tmp_path / "s.csv", [as_ra, filled, cleared])
    got = read_sheet(path, STUDIES)
    assert [(r.arm, r.events, r.total, r.removed, r.source) for r in got] == [
        ("ranitidine", 12, 38, False, "s.csv row 3"), ("omeprazole 20 mg", None, None, True, "s.csv row 4")]  # fmt: skip
    with pytest.raises(SheetError, match=r"s\.xls: a sheet is \.xlsx or \.csv"):
        read_sheet(tmp_path / "s.xls", STUDIES) if (tmp_path / "s.xls").write_text("x") else None
    (tmp_path / "h.csv").write_text("study_id,pmid\ns-1,11\n", encoding="utf-8")
    with pytest.raises(SheetError, match=r"h\.csv: row 1: missing column\(s\) 'outcome'"):
        read_sheet(tmp_path / "h.csv", STUDIES)
