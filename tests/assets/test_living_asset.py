"""Living evidence in Dagster: review_questions is requested by its automation condition when records arrive, and
its verdicts_unchanged check warns (severity WARN, not passed) with the changes in its metadata when a verdict
changed. Real records: CD006468's catheter records (tests/fixtures/gaps) arriving in time order."""

from __future__ import annotations

import dagster as dg
from gaps_replay import HANDBOOK, write_years

from ra_agent.agent import register_handbook
from ra_agent.config import load_config
from ra_agent.workspace import Workspace
from ra_assets.defs.findings.assets import review_questions
from ra_assets.defs.ingest.assets import papers
from ra_assets.partitions import handbook_partitions, partition_name
from ra_assets.resources import build_resources


def check_result(result: dg.ExecuteInProcessResult, name: str) -> dg.AssetCheckEvaluation:
    return next(e for e in result.get_asset_check_evaluations() if e.check_name == name)


def test_records_arriving_request_the_questions_and_a_changed_verdict_warns(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[workspace]\ndata_dir = "data"\ndemo_corpus = ""\n[ingest]\noffline = true\n[llm]\n'
                      'brain = "rules"\n[sr]\nupdate_after_trials = 2\n')  # fmt: skip
    cfg = load_config(config, environ={})
    inbox = Workspace.of(cfg).imports_dir
    inbox.mkdir(parents=True, exist_ok=True)
    key = register_handbook(cfg, HANDBOOK)
    resources = build_resources(str(config))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(partition_name(handbook_partitions), [key])
    defs = dg.Definitions(assets=[papers, review_questions], resources=resources)

    def tick(cursor=None):
        only = dg.AssetSelection.assets(review_questions)
        return dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=only, cursor=cursor)

    def judge() -> dg.ExecuteInProcessResult:
        result = dg.materialize([review_questions], partition_key=key, resources=resources, instance=instance,
                                selection=[review_questions])  # fmt: skip
        assert result.success
        return result

    start = tick()
    assert start.total_requested == 0  # nothing arrived yet
    write_years(inbox / "to2008.csv", 0, 2008)
    assert dg.materialize([papers], resources=resources, instance=instance).success
    arrived = tick(start.cursor)
    assert arrived.total_requested == 1  # the records arrived: the handbook's questions are requested
    first = check_result(judge(), "verdicts_unchanged")
    assert first.passed and first.severity == dg.AssetCheckSeverity.WARN  # a first evaluation: nothing to compare
    handled = tick(arrived.cursor)
    assert handled.total_requested == 0

    write_years(inbox / "to2010.csv", 2008, 2010)  # the 2009 trials after the 2008 reviews
    assert dg.materialize([papers], resources=resources, instance=instance).success
    assert tick(handled.cursor).total_requested == 1
    warned = check_result(judge(), "verdicts_unchanged")
    assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
    meta = {k: v.value for k, v in warned.metadata.items()}
    assert meta["transitions"] >= 1 and meta["compared_with"]
    assert "covered -> covered, update warranted" in meta["changes"]
    assert "PMID 19217991, PMID 19567452" in meta["changes"]

    # materialised again with nothing new: the stored set is read, nothing re-judged, the check passes
    again = check_result(judge(), "verdicts_unchanged")
    assert again.passed and "nothing re-judged" in again.description
