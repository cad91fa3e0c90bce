"""The evidence-gap map (`ra questions HANDBOOK --map`) on the demo corpus and on Cochrane review CD006468's records
(tests/fixtures/gaps): every cell read back from gap_map.html's own data is its question, as `ra questions` printed
it and questions.json holds it; the dossiers mark their cell; an empty map is one line and no picture."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ra_agent.config import load_config
from ra_agent.evidence.questions.build import questions_for_topic
from ra_agent.evidence.questions.gap_map import COLUMN_KINDS, FILES, TOPIC_KIND, build_gap_map
from ra_agent.evidence.questions.gap_map_draw import write_gap_map
from ra_agent.evidence.questions.topic import Topic
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store

ROOT = Path(__file__).resolve().parents[3]
GAPS = (ROOT / "tests" / "fixtures" / "gaps" / "CD006468_catheter_subset.csv", ROOT / "bench" / "handbooks" /
        "seek_gap_cd006468.md")  # fmt: skip
DEMO = (ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv", ROOT / "handbooks" / "seek_gap_ppi_gerd.md")
PRINTED = re.compile(
    r"^\s*(q-[0-9a-f]{10})\s.*\sstudies \d+, reports (\d+)\s+-> (.+?): ", re.M
)  # ra questions' line per question


def html_datasets(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The datasets of the Vega-Lite specification a gap_map.html carries (what the browser draws)."""
    found = re.search(r"const spec = (\{.*\});\n", path.read_text(encoding="utf-8"))
    assert found, f"{path}: no Vega-Lite specification"
    return json.loads(found.group(1))["datasets"]


def map_run(tmp_path: Path, monkeypatch, capsys, corpus: Path, handbook: Path):
    """`ra import` then `ra questions HANDBOOK --map` in a fresh workspace: (printed output, the set's folder)."""
    from ra_agent.cli import main

    monkeypatch.setenv("RA_WORKSPACE__DATA_DIR", str(tmp_path / "ws"))
    config = str(ROOT / "config.toml")
    assert main(["--config", config, "import", str(corpus)]) == 0
    capsys.readouterr()
    assert main(["--config", config, "questions", str(handbook), "--map"]) == 0
    out = capsys.readouterr().out
    folder = re.search(r"^questions.json and one dossier per question: (.+)$", out, re.M)
    assert folder, out
    return out, Path(folder.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("corpus,handbook", [GAPS, DEMO], ids=["cd006468", "demo"])
def test_each_cell_of_the_map_is_its_question(tmp_path, monkeypatch, capsys, corpus, handbook):
    out, folder = map_run(tmp_path, monkeypatch, capsys, corpus, handbook)
    png, html = (folder / name for name in FILES)
    assert f"evidence-gap map:\n  {png}\n  {html}\n" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = {qid: (int(reports), verdict) for qid, reports, verdict in PRINTED.findall(out)}
    stored = {q["id"]: q for q in json.loads((folder / "questions.json").read_text(encoding="utf-8"))["questions"]}
    cells = {c["question_id"]: c for c in html_datasets(html)["cells"]}
    assert len(cells) == len(html_datasets(html)["cells"]) == len(stored) == len(printed) >= 8
    for qid, q in stored.items():
        cell = cells[qid]
        assert (cell["studies"], cell["reports"], cell["verdict"]) == (len(q["studies"]), len(q["trials"]),
                                                                      q["verdict"]), qid  # fmt: skip
        assert (cell["reports"], cell["verdict"]) == printed[qid]
        assert cell["review_year"] == (q["newest"] or {}).get("year")
        assert cell["question"] == stored_in_words(q) and (cell["scope"] == "in the handbook's scope") == q["in_scope"]
        dossier = (folder / f"{qid}.md").read_text(encoding="utf-8")
        assert f"**▶ {len(q['studies'])} {q['verdict']} ◀**" in dossier and "[gap_map.html](gap_map.html)" in dossier
    root = next(q for q in stored.values() if q["parent"] is None)
    assert cells[root["id"]]["kind"] == TOPIC_KIND and cells[root["id"]]["studies"] >= 6
    if handbook == DEMO[1]:  # the demo's question needs an update; some of its comparisons do not
        assert {"covered", "covered, update warranted"} <= {c["verdict"] for c in cells.values()}
    assert any(not q["in_scope"] for q in stored.values())  # dose comparisons: outside both handbooks' scope
    lines = [line for line in html_datasets(html)["lines"] if line["question_id"] == root["id"]]
    first = sorted(reports[0] for reports in root["studies"].values())
    assert {f"https://pubmed.ncbi.nlm.nih.gov/{p}/" for p in first} <= {line["url"] for line in lines}


def stored_in_words(q: dict[str, Any]) -> str:
    """A question in words from its stored fields (as `ReviewQuestion.in_words` says it)."""
    versus = "" if q["comparator"] == "any" else f" versus {q['comparator']}"
    return f"{q['intervention'][:1].upper()}{q['intervention'][1:]}{versus} for people with {q['population']}"


@pytest.fixture(scope="module")
def key_questions(tmp_path_factory):
    """CD006468's records and its handbook's question set over them (the rules)."""
    from ra_agent.agent.questions import load_question_set
    from ra_agent.workspace import Workspace

    cfg = load_config(ROOT / "config.toml", environ={}).with_overrides(
        workspace={"data_dir": str(tmp_path_factory.mktemp("gap_map")), "demo_corpus": ""}
    )
    with Store(Workspace.of(cfg).db_path) as store:
        import_file(store, GAPS[0], cfg)
        papers = store.papers(store.all_pmids())
        questions = load_question_set(cfg, store, GAPS[1]).questions
    return cfg, papers, questions


def test_rows_are_the_class_then_narrower_classes_and_columns_go_by_kind(key_questions):
    _, papers, questions = key_questions
    gap_map = build_gap_map(questions, {p.pmid: p.title for p in papers}, "2026-01-01", records=len(papers))
    assert gap_map.rows[0] == questions[0].intervention == "anticoagulant"
    narrower = set(gap_map.rows[1:])
    assert {"vitamin K antagonist", "low-molecular-weight heparin"} <= narrower == set(gap_map.row_parents)
    kinds = [COLUMN_KINDS.index(c.kind) for c in gap_map.columns]
    assert kinds == sorted(kinds) and gap_map.columns[0].kind == TOPIC_KIND and len(set(kinds)) >= 4
    placed = [(c.row, c.column) for c in gap_map.cells]
    assert len(placed) == len(set(placed)) == len(questions)
    assert "corpus of 2026-01-01 (420 records" in gap_map.subtitle and gap_map.title.startswith("Evidence-gap map")


def test_a_topic_whose_questions_hold_no_study_is_one_line_and_no_picture(key_questions, tmp_path):
    cfg, papers, _ = key_questions
    topic = Topic.from_seed_query("antipsychotics AND schizophrenia")
    questions, _, _ = questions_for_topic(topic, papers, pivot=cfg.sr.sr_overlap_pivot,
                                          update_after=cfg.sr.update_after_trials,
                                          min_trials=cfg.sr.min_eligible_trials)  # fmt: skip
    gap_map = build_gap_map(questions, {}, "2026-01-01")
    for name in FILES:  # a map drawn before the corpus changed
        (tmp_path / name).write_text("stale", encoding="utf-8")
    drawn = write_gap_map(gap_map, tmp_path)
    assert gap_map.empty and drawn.png is drawn.html is None
    assert "\n" not in drawn.statement and "holds a study" in drawn.statement and "schizophrenia" in drawn.statement
    assert not any((tmp_path / name).exists() for name in FILES)
