"""One question, one answer (issue 34): for every question of the demo's handbook and of the shared key (CD006468's
catheter records), the studies, counts and verdict shown by `ra questions`, written in its dossier, in its SR draft,
in the review_questions asset's metadata and read by a goal's Success are identical; a goal never succeeds on a
question with too few trials."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import dagster as dg
import pytest

from ra_agent.agent.cycle import _check_success
from ra_agent.agent.goal_questions import question_entries, question_metrics
from ra_agent.agent.handbook import parse_handbook
from ra_agent.agent.prompt import observe
from ra_agent.agent.questions import handbook_key, load_question_set, questions_root
from ra_agent.agent.runner import start_goal
from ra_agent.cli import main
from ra_agent.config import load_config
from ra_agent.evidence.reports.sr_draft import sr_draft
from ra_agent.workspace import open_store
from ra_assets.defs.findings.assets import review_questions
from ra_assets.resources import build_resources

from .conftest import DEMO, HANDBOOK

ROOT = Path(__file__).resolve().parents[2]
SHARED_KEY = ROOT / "tests" / "fixtures" / "gaps" / "CD006468_catheter_subset.csv"
CD_HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
PRINTED = re.compile(r"^\s*(q-[0-9a-f]{10})  .+?  studies (\d+), reports (\d+)  -> (gap|covered, update warranted|"
                     r"covered|too few trials): ", re.M)  # fmt: skip
COUNTS = re.compile(r"^- Counts: (\d+) stud(?:y|ies)(?: \((\d+) reports?\))?", re.M)
VERDICT = re.compile(r"\*\*Verdict: (.+?)\.\*\*")
STUDY_ROW = re.compile(r"^\| (s-\d+) \| ([^|]+) \|", re.M)  # a dossier's study and its reports


def config_for(project: Path, corpus: Path) -> Path:
    """The project's config.toml as the demo tests' Config holds it (the same knobs: its stored set stays current)."""
    path = project / "config.toml"
    path.write_text(f'[workspace]\ndata_dir = "data"\ndemo_corpus = "{corpus}"\n[ingest]\noffline = true\n'
                    "[goal]\nloop_delay_s = 0\n")  # fmt: skip
    return path


def listed_studies(folder: Path, text: str) -> dict[str, list[int]]:
    """A dossier's studies with their reports; a narrower question's short dossier lists them in its parent's."""
    if "\n## Studies" not in text:
        (parent,) = re.findall(r"same studies as its parent question: see \[(q-[0-9a-f]{10})\]", text)
        text = (folder / f"{parent}.md").read_text(encoding="utf-8")
    rows = STUDY_ROW.findall(text.split("\n## Studies", 1)[1].split("\n## ", 1)[0])
    return {sid: [int(p) for p in re.findall(r"\[PMID:(\d+)\]", cited)] for sid, cited in rows}


def answers_everywhere(config: Path, handbook: Path, capsys) -> dict[str, dict[str, tuple]]:
    """question id -> (studies, reports, verdict) as each reader shows it."""
    cfg = load_config(config)
    assert main(["--config", str(config), "questions", str(handbook)]) == 0
    printed = {m[0]: (int(m[1]), int(m[2]), m[3]) for m in PRINTED.findall(capsys.readouterr().out)}

    with open_store(cfg) as store:
        qset = load_question_set(cfg, store, handbook)
        folder = questions_root(cfg) / qset.key
        dossiers = {}
        for q in qset.questions:
            text = (folder / f"{q.id}.md").read_text(encoding="utf-8")
            (studies, reports), (verdict,) = COUNTS.findall(text)[0], VERDICT.findall(text)
            dossiers[q.id] = (int(studies), int(reports or studies), verdict)
            assert listed_studies(folder, text) == q.studies, q.id  # the same studies, each with the same reports
        drafts = {}
        for q in qset.questions:
            if not q.studies:
                continue
            text = sr_draft(cfg, store, qset, q, goal_id="one-answer", brain_name="rules", prisma=None,
                            out_dir=cfg.data_dir / "drafts").read_text(encoding="utf-8")  # fmt: skip
            heading = re.search(r"^### Included studies \((\d+) studies(?: \((\d+) reports\))?\)", text, re.M)
            verdict = re.search(rf"^_Draft of review question `{q.id}` \(.+\): (.+)\._$", text, re.M)
            assert heading and verdict, q.id
            table = text.split("### Included studies", 1)[1].split("\n### ", 1)[0]  # not the later sections' tables
            included = re.findall(r"^\| \[PMID:(\d+)\] \|", table, re.M)
            assert [int(p) for p in included] == [r[0] for r in q.studies.values()]  # each study by its first report
            drafts[q.id] = (int(heading[1]), int(heading[2] or heading[1]), verdict[1])
        goal = start_goal(cfg, store, handbook, "rules")
        success = {e["question_id"]: e for e in question_entries(cfg, goal, qset)}

    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("handbook", [qset.key])
        result = dg.materialize([review_questions], partition_key=qset.key, instance=instance,
                                resources=build_resources(str(config)))  # fmt: skip
        assert result.success
        checked = {c.check_name: c for c in result.get_asset_check_evaluations()}["review_questions_well_formed"]
        assert checked.passed, checked.metadata
        meta = result.asset_materializations_for_node("review_questions")[0].metadata
    asset = {q["id"]: (q["studies"], q["reports"], q["verdict"]) for q in meta["per_question"].value}
    shown = {q["id"]: q["study_reports"] for q in meta["per_question"].value}
    assert shown == {q.id: {sid: list(r) for sid, r in q.studies.items()} for q in qset.questions}
    table = meta["table"].value
    for q in qset.questions:  # the Markdown table the UI shows holds the same numbers
        assert f"| {q.id} | {q.in_words}" in table and f"| {len(q.studies)} | {len(q.trials)} | {q.verdict} |" in table
    return {
        "set": {q.id: (len(q.studies), len(q.trials), q.verdict) for q in qset.questions},
        "ra questions": printed,
        "dossier": dossiers,
        "asset": asset,
        "draft": drafts,
        "success": {
            qid: (question_metrics(e)["eligible_trials"], e["reports"], e["verdict"]) for qid, e in success.items()
        },  # fmt: skip
    }


def assert_one_answer(seen: dict[str, dict[str, tuple]]) -> None:
    truth = seen["set"]
    assert truth and len(truth) >= 3
    for reader, answers in seen.items():
        expected = truth if reader != "draft" else {k: v for k, v in truth.items() if v[0]}
        assert answers == expected, reader


def test_every_question_of_the_demo_has_one_answer(demo_project, capsys):
    config = config_for(demo_project, DEMO)
    assert_one_answer(answers_everywhere(config, demo_project / HANDBOOK, capsys))


def test_every_question_of_the_shared_key_has_one_answer(tmp_path, capsys):
    project = tmp_path / "cd006468"
    (project / "handbooks").mkdir(parents=True)
    shutil.copy(CD_HANDBOOK, project / "handbooks" / CD_HANDBOOK.name)
    config = config_for(project, SHARED_KEY)
    assert main(["--config", str(config), "import", str(SHARED_KEY)]) == 0
    assert_one_answer(answers_everywhere(config, project / "handbooks" / CD_HANDBOOK.name, capsys))


@pytest.mark.parametrize(("success", "met"), [("eligible_trials <= 2", False), ("eligible_trials >= 60", True)])
def test_success_is_a_questions_and_never_one_with_too_few_trials(demo, demo_project, success, met):
    """A Success that only questions with too few trials for a review meet (the demo's comparisons of 2 studies, some
    of them covered) is never met; one only the topic's question meets (98 studies; the next has 42) stops the goal
    on it, named by its id."""
    text = (demo_project / HANDBOOK).read_text(encoding="utf-8")
    handbook_path = demo_project / "handbooks" / "success_probe.md"
    handbook_path.write_text(re.sub(r"Success:\n(  .+\n)+", f"Success: {success}\n", text), encoding="utf-8")
    handbook = parse_handbook(handbook_path.read_text(encoding="utf-8"), handbook_path)
    with open_store(demo) as store:
        qset = load_question_set(demo, store, handbook_path)
        few = [q for q in qset.questions if len(q.studies) <= 2]
        assert few and all(len(q.studies) < demo.sr.min_eligible_trials for q in few)
        goal = start_goal(demo, store, handbook_path, "rules")
        requests = _check_success(demo, store, goal, handbook, observe(demo, store, goal, handbook))
    assert handbook_key(demo, handbook_path) == qset.key
    if not met:
        assert requests == [] and goal.status == "in_progress" and goal.success_questions == []
        return
    assert goal.success_questions == [qset.topic_question.id] and [r.stage for r in requests] == ["reports"]
    assert goal.stop_reason() == f"success: {qset.topic_question.id} met {success}"
