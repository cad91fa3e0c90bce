"""A handbook's questions kept as one unit (`QuestionSet`): computed once and read back while the corpus, the handbook
and the knobs are as they were; keyed by the handbook's resolved path (a copy elsewhere never overwrites them); written
as one unit (no dossier of a question that no longer exists, an interrupted write leaves the previous folder whole);
unsafe handbook names refused in one line. On the shared key (CD006468's catheter records, tests/fixtures/gaps)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from ra_agent.agent.questions import current_question_set, load_question_set, questions_root
from ra_agent.cli import main
from ra_agent.config import load_config
from ra_agent.evidence.questions import question_set as question_set_module
from ra_agent.evidence.questions.question_set import QuestionSetError, question_set_key, read_question_set
from ra_agent.workspace import open_store

ROOT = Path(__file__).resolve().parents[3]
SUBSET = ROOT / "tests" / "fixtures" / "gaps" / "CD006468_catheter_subset.csv"
HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
LINE = re.compile(r"^\s*(q-[0-9a-f]{10})  (.+?)(?: \[outside the handbook's scope\])?  studies (\d+), reports (\d+)  "
                  r"-> (gap|covered, update warranted|covered|too few trials): ", re.M)  # fmt: skip


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """A project with the shared key's 420 records imported (config.toml beside its data/)."""
    project = tmp_path_factory.mktemp("question_set")
    (project / "config.toml").write_text('[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = '
                                         'true\n[llm]\nbrain = "rules"\n')  # fmt: skip
    assert main(["--config", str(project / "config.toml"), "import", str(SUBSET)]) == 0
    return project


@pytest.fixture
def project(imported: Path, tmp_path: Path) -> Path:
    shutil.copytree(imported, tmp_path / "p")
    return tmp_path / "p"


def questions(project: Path, handbook: Path, capsys) -> tuple[str, dict]:
    assert main(["--config", str(project / "config.toml"), "questions", str(handbook)]) == 0
    out = capsys.readouterr().out
    folder = project / "data" / "questions" / question_set_key(handbook)
    return out, json.loads((folder / "questions.json").read_text(encoding="utf-8"))


def test_ra_questions_prints_the_stored_set_and_keeps_one_dossier_per_question(project, capsys):
    out, payload = questions(project, HANDBOOK, capsys)
    folder = project / "data" / "questions" / question_set_key(HANDBOOK)
    printed = {m[0]: (m[1], int(m[2]), int(m[3]), m[4]) for m in LINE.findall(out)}
    assert list(printed) == [q["id"] for q in payload["questions"]]  # every question, in the set's order
    for q in payload["questions"]:  # the same numbers on screen and on disk
        assert printed[q["id"]][1:] == (len(q["studies"]), len(q["trials"]), q["verdict"])
        dossier = (folder / f"{q['id']}.md").read_text(encoding="utf-8")
        assert f"**Verdict: {q['verdict']}.**" in dossier
    root = payload["questions"][0]
    dossier = (folder / f"{root['id']}.md").read_text(encoding="utf-8")
    assert dossier.splitlines()[2].startswith("Covered by ")  # the answer in plain words comes first
    for heading in ("- PICO:", f"## Studies ({len(root['studies'])} studies", "why it counts", "## Reviews checked",
                    "### Reviews whose own question encompasses it", "## Trials since the newest covering review",
                    "## Not checked by this run"):  # fmt: skip
        assert heading in dossier
    rows = re.findall(r"^\| (s-\d+) \| (.+?) \| ", dossier, re.M)
    assert [sid for sid, _ in rows] == list(root["studies"])  # each study once, with every report of it
    assert all(
        re.findall(r"\[PMID:(\d+)\]", reports) == [str(p) for p in root["studies"][sid]] for sid, reports in rows
    )
    children = [q for q in payload["questions"] if q["parent"] == root["id"]]
    assert children and sorted(p.stem for p in folder.glob("q-*.md")) == sorted(q["id"] for q in payload["questions"])
    # read back, not judged again, while nothing changed
    computed = payload["computed_ts"]
    _, again = questions(project, HANDBOOK, capsys)
    assert again["computed_ts"] == computed


def test_a_change_of_the_corpus_the_handbook_or_the_knobs_judges_the_questions_again(project, capsys, monkeypatch):
    cfg = load_config(project / "config.toml", environ={})
    with open_store(cfg) as store:
        first = load_question_set(cfg, store, HANDBOOK)
        assert current_question_set(cfg, store, HANDBOOK) == first
        other = cfg.with_overrides(sr={"update_after_trials": 50})  # an [sr] knob that changes a verdict
        assert current_question_set(other, store, HANDBOOK) is None
        judged = load_question_set(other, store, HANDBOOK)
        assert judged.state.knobs_sha1 != first.state.knobs_sha1
        assert not any(q.verdict == "covered, update warranted" for q in judged.questions)
        store.conn.execute("DELETE FROM paper WHERE pmid=?", (judged.topic_question.trial_pmids[0],))
        store.conn.commit()
        assert current_question_set(other, store, HANDBOOK) is None  # the corpus changed


def test_a_copy_of_the_handbook_elsewhere_keeps_its_own_questions(project, capsys, tmp_path):
    """Issue 40 item 2: a copy with another Seed_query run from another folder never touches the shipped handbook's
    questions; dossiers of questions that no longer exist are removed; leftovers of interrupted writes too."""
    _, shipped = questions(project, HANDBOOK, capsys)
    shipped_folder = project / "data" / "questions" / question_set_key(HANDBOOK)
    before = {p.name: p.read_bytes() for p in shipped_folder.iterdir()}
    copy = tmp_path / "elsewhere" / HANDBOOK.name
    copy.parent.mkdir()
    copy.write_text(HANDBOOK.read_text(encoding="utf-8").replace(
        "anticoagulants AND cancer AND central venous catheter", "heparin AND cancer"), encoding="utf-8")  # fmt: skip
    _, copied = questions(project, copy, capsys)
    assert question_set_key(copy) != question_set_key(HANDBOOK) and copied["handbook"] == str(copy.resolve())
    assert {p.name: p.read_bytes() for p in shipped_folder.iterdir()} == before
    # a dossier of a question the set no longer holds, and a temporary folder a killed write left behind
    copy_folder = shipped_folder.parent / question_set_key(copy)
    (copy_folder / "q-0000000000.md").write_text("stale", encoding="utf-8")
    leftover = shipped_folder.parent / f".{question_set_key(copy)}.tmp-killed"
    leftover.mkdir()
    (leftover / "questions.json").write_text("{", encoding="utf-8")
    copy.write_text(copy.read_text(encoding="utf-8") + "\nOne more line of prose.\n", encoding="utf-8")
    _, again = questions(project, copy, capsys)
    assert not (copy_folder / "q-0000000000.md").exists() and not leftover.exists()
    assert sorted(p.stem for p in copy_folder.glob("q-*.md")) == sorted(q["id"] for q in again["questions"])


def test_an_interrupted_write_leaves_the_previous_set_whole(project, capsys, monkeypatch):
    _, first = questions(project, HANDBOOK, capsys)
    cfg = load_config(project / "config.toml", environ={})
    key = question_set_key(HANDBOOK)
    renames = []
    real_replace = os.replace

    def killed_between_the_renames(src, dst):
        if Path(dst).parent == questions_root(cfg):  # the swap's renames (files written inside the new folder aside)
            renames.append((src, dst))
            if len(renames) == 2:  # the previous folder moved aside, the new one not yet in place
                raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(question_set_module.os, "replace", killed_between_the_renames)
    with open_store(cfg) as store, pytest.raises(KeyboardInterrupt):
        load_question_set(cfg.with_overrides(sr={"update_after_trials": 50}), store, HANDBOOK)
    monkeypatch.setattr(question_set_module.os, "replace", real_replace)
    assert not (questions_root(cfg) / key).exists()  # killed mid-swap
    restored = read_question_set(questions_root(cfg), key)  # the next reader puts the previous folder back
    assert restored is not None and restored.computed_ts == first["computed_ts"]
    assert not list(questions_root(cfg).glob(f".{key}.*-*"))


def test_a_handbook_name_that_is_no_safe_folder_name_is_refused_in_one_line(project, capsys, tmp_path):
    dots = tmp_path / "...md"
    shutil.copy(HANDBOOK, dots)
    with pytest.raises(QuestionSetError, match=r"'\.\.' is not a safe folder name"):
        question_set_key(dots)
    assert main(["--config", str(project / "config.toml"), "questions", str(dots)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a safe folder name" in err[0]
    assert not (project / "data" / "questions" / "questions.json").exists()
