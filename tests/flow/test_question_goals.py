"""Goal runs under the default coverage rule (the review question) with the rules brain: the demo's goal and
Cochrane review CD006468's catheter records (tests/fixtures/gaps) as a goal tree; bad input ends with a stated
reason."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from ra_agent.agent.cyclelog import log_dir
from ra_agent.agent.questions import load_question_set
from ra_agent.agent.runner import run_goal, run_with_spawned, start_goal
from ra_agent.config import Config
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.workspace import open_store

ROOT = Path(__file__).resolve().parents[2]
HANDBOOK = "handbooks/seek_gap_ppi_gerd.md"
GAPS = ROOT / "tests" / "fixtures" / "gaps"
SUBSET = GAPS / "CD006468_catheter_subset.csv"
CD_HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
# the pH-monitoring mix of the demo: a PPI as a diagnostic test, asthma, cough, chest pain
PH_MIX = (9489902, 11392580, 11106204, 9649457, 12352293)


def dossiers(cfg, states) -> dict[str, str]:
    paths = {h["path"] for s in states for h in s.events("report_written") if h["kind"] == "gap_dossier"}
    return {p: (cfg.data_dir / p).read_text(encoding="utf-8") for p in sorted(paths)}


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0] if f"## {heading}" in text else ""


def assert_one_question_per_dossier(found: dict[str, str]) -> None:
    keys = []
    for text in found.values():
        (question,) = re.findall(r"^- Question id: (q-[0-9a-f]{10})$", text, re.M)
        (verdict,) = [v.strip(" .") for v in re.findall(r"\*\*Verdict: ([^*(]+)", text)]
        keys.append((question, verdict))
        for heading in ("Studies", "Reviews checked", "Trials since the newest covering review",
                        "Not checked by this run"):  # fmt: skip
            assert section(text, heading).strip(), heading
        studies = section(text, "Studies")
        rows = re.findall(r"^\| s-\d+ \|.*\| ([^|]+) \|$", studies, re.M)
        assert rows and all(r.startswith(("randomised (", "a further report")) for r in rows)  # each with why it counts
        assert "intervention and outcome stated" not in text  # not the old cluster-level eligibility rule
    assert len(keys) == len(set(keys))  # never two dossiers with the same verdict on the same question


def test_a_demo_goal_under_the_review_question_rule(demo, demo_project):
    """The demo's seek_gap goal: it ends for a stated reason (not max_cycles); its dossier is about the topic's
    question (PPIs for GERD), covered by a review of PPIs for reflux oesophagitis with an update warranted, and none
    of the pH-monitoring mix is listed as the question's study; the goal's answer says so in plain words."""
    from ra_agent.agent.goal_questions import goal_answer

    brain = RulesBrain()
    with open_store(demo) as store:
        goal = start_goal(demo, store, demo_project / HANDBOOK, brain.name)
        state = run_goal(demo, store, goal.goal_id, brain)
    assert state.status == "stopped" and state.cycle < demo.goal.max_cycles
    assert not state.stop_reason().startswith("max_cycles") and state.success_questions == []
    found = dossiers(demo, [state])
    assert len(found) == 1  # the covered question it pivoted from: one dossier, on record before the pivot
    assert_one_question_per_dossier(found)
    (text,) = found.values()
    assert text.startswith("# Evidence-gap dossier: Proton pump inhibitor for people with gastroesophageal reflux\n")
    assert "**Verdict: covered, update warranted.**" in text
    assert re.search(r"^Covered by .+ \(2002\) \[PMID:11683686\]; update warranted: \d+ trials since\.$", text, re.M)
    studies = section(text, "Studies")
    assert not [p for p in PH_MIX if f"[PMID:{p}]" in studies]
    assert "do not answer it" in text and "Pharmacogenetics" in section(text, "Reviews checked")
    # goal_state holds the question in focus and those done; the cycle log says which question each cycle worked on
    (topic_id,) = re.findall(r"^- Question id: (q-[0-9a-f]{10})$", text, re.M)
    assert topic_id in state.questions_done or state.question_id == topic_id
    logged = "\n".join(p.read_text(encoding="utf-8") for p in sorted(log_dir(demo).glob("*_cycle*.md")))
    mine = [s for s in logged.split("\n---\n") if f"goal_id: {state.goal_id} " in s]
    assert mine and any(f"- question: {topic_id}\n" in s for s in mine)
    answer = goal_answer(demo, state)
    assert answer.startswith("covered by Systematic review of proton pump inhibitors for the acute treatment of "
                             "reflux oesophagitis (2002) [PMID:11683686]; update warranted: ")  # fmt: skip


def cd_cfg(project: Path) -> Config:
    cfg = Config().with_overrides(
        workspace={"data_dir": str(project / "data"), "demo_corpus": str(SUBSET)},
        ingest={"offline": True},
        goal={"loop_delay_s": 0},
        clustering={"min_cluster_size": 10, "min_samples": 5},
    )
    return dataclasses.replace(cfg, root=str(project))


@pytest.fixture(scope="module")
def cd_template(request, tmp_path_factory, workspace_builder) -> Path:
    """CD006468's 420 catheter records imported, embedded (vectors cached by content), indexed and clustered."""
    project = tmp_path_factory.mktemp("cd006468")
    (project / "handbooks").mkdir()
    shutil.copy(CD_HANDBOOK, project / "handbooks" / CD_HANDBOOK.name)
    workspace_builder(request, cd_cfg(project), "ra_cd006468_vectors")
    with open_store(cd_cfg(project)) as store:  # judged once: a copy of the project keeps its questions
        load_question_set(cd_cfg(project), store, project / "handbooks" / CD_HANDBOOK.name)
    return project


@pytest.fixture
def cd(cd_template: Path, tmp_path: Path) -> Config:
    shutil.copytree(cd_template, tmp_path / "project")
    return cd_cfg(tmp_path / "project")


def test_the_cd006468_goal_tree_is_covered_by_a_version_of_the_review(cd):
    """As is, the goal tree on the review's catheter records: "covered" naming a version of the review, no gap,
    nothing off the topic (every dossier about cancer and central venous catheters), no goal at max_cycles."""
    versions = {int(v["pmid"]) for v in json.loads((GAPS / "CD006468_review.json").read_text())[
        "earlier_versions_in_candidates"]}  # fmt: skip
    brain = RulesBrain()
    with open_store(cd) as store:
        first = start_goal(cd, store, Path(cd.root) / "handbooks" / CD_HANDBOOK.name, brain.name)
        states = run_with_spawned(cd, store, first.goal_id, brain)
    assert all(s.status == "stopped" and not s.stop_reason().startswith("max_cycles") for s in states)
    found = dossiers(cd, states)
    assert found
    assert_one_question_per_dossier(found)
    covered = [t for t in found.values() if "**Verdict: covered" in t]
    assert covered and not [t for t in found.values() if "**Verdict: gap" in t]
    first_named = {int(m) for t in covered for m in re.findall(r"^Covered by .+ \[PMID:(\d+)\]", t, re.M)}
    assert first_named and first_named <= versions
    assert all("for people with cancer and central venous catheter" in t.splitlines()[0] for t in found.values())
    for s in states[1:]:  # a spawned goal narrows the question or is skipped, with the reason in the history
        assert s.parent_goal in {x.goal_id for x in states}


def test_a_topic_matching_nothing_and_a_corpus_without_trials_end_with_a_stated_reason(cd, tmp_path, capsys):
    """Bad input: a handbook whose topic matches no record stops its goal on "no papers match" and writes nothing;
    a corpus holding no trial (only the review records) gives questions with "too few trials" and says why."""
    from ra_agent.cli import main

    handbook = Path(cd.root) / "handbooks" / "nothing.md"
    handbook.write_text(CD_HANDBOOK.read_text(encoding="utf-8").replace(
        "anticoagulants AND cancer AND central venous catheter", "antipsychotics AND schizophrenia"
    ), encoding="utf-8")  # fmt: skip
    brain = RulesBrain()
    with open_store(cd) as store:
        goal = start_goal(cd, store, handbook, brain.name)
        state = run_goal(cd, store, goal.goal_id, brain)
    assert state.status == "stopped" and state.stop_reason().startswith("no papers match")
    assert state.events("report_written") == []

    with SUBSET.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    reviews_only = tmp_path / "reviews_only.csv"
    with reviews_only.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if re.search(r"systematic review|meta-analy", r["title"], re.I))
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{tmp_path / "ws"}"\ndemo_corpus = ""\n[ingest]\noffline = true\n')
    assert main(["--config", str(config), "import", str(reviews_only)]) == 0
    assert main(["--config", str(config), "questions", str(CD_HANDBOOK)]) == 0
    out = capsys.readouterr().out
    assert "0 eligible reports" in out and "is an eligible trial for the topic" in out
    assert "studies 0, reports 0  -> too few trials: 0 < 6" in out
