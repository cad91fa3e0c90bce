"""Living evidence in the Dagster UI (Playwright driving Debian's Chromium): the demo corpus arrives by year (up to
2000, then 2001: the first review answering the demo handbook's questions), its review_questions partition is
materialised after each step, and the asset's Checks tab shows verdicts_unchanged warning (the yellow warning tag,
not an error) with the summary and the changed verdicts of the second step.

The materialisations run in this process on a private instance; Dagster's webserver alone then serves that
instance (no daemon: no sensor runs the asset again and replaces the check's result), stopped with everything it
started, also on failure (browser_support.ui_server)."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from gaps_replay import DEMO, DEMO_HANDBOOK, write_years, year_of
from playwright.sync_api import expect, sync_playwright

from ra_agent.agent import register_handbook
from ra_agent.cli import main
from ra_agent.config import load_config
from ra_assets.defs.findings.assets import review_questions
from ra_assets.partitions import handbook_partitions, partition_name
from ra_assets.resources import build_resources

from .browser_support import CHROMIUM_ARGS, ROOT, private_env, ui_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
TIMEOUT_MS = 60_000  # every locator and assertion auto-waits this long (a loaded 2-core machine is slow)
CHECK = "verdicts_unchanged"
WARNING_ICON = "warning_outline"  # Dagster's icon of a failed check of severity WARN (an ERROR one is red)


def judge(config: Path, instance: dg.DagsterInstance, key: str) -> dg.AssetCheckEvaluation:
    """review_questions of the handbook's partition materialised on `instance`: its verdicts_unchanged result."""
    result = dg.materialize([review_questions], partition_key=key, resources=build_resources(str(config)),
                            instance=instance, selection=[review_questions])  # fmt: skip
    assert result.success
    return next(e for e in result.get_asset_check_evaluations() if e.check_name == CHECK)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory):
    """The demo records up to 2000 imported and judged, then those of 2001 and judged again, on a private instance
    that the webserver serves: (ui, the two check results)."""
    root = tmp_path_factory.mktemp("living_ui")
    home, data_dir = root / "dagster_home", root / "data"
    home.mkdir()
    shutil.copy(ROOT / "scripts" / "dagster.yaml", home / "dagster.yaml")  # as scripts/profile.sh seeds it
    config = root / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{data_dir}"\ndemo_corpus = ""\n[ingest]\noffline = true\n'
                      '[llm]\nbrain = "rules"\n')  # fmt: skip
    key = register_handbook(load_config(config, environ={}), DEMO_HANDBOOK)
    checks = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(partition_name(handbook_partitions), [key])
        for after, upto in [(-1, 2000), (2000, 2001)]:  # -1: the records without a year come first
            records = write_years(root / f"records_{upto}.csv", after, upto, DEMO)
            assert main(["--config", str(config), "import", str(records)]) == 0
            checks.append(judge(config, instance, key))
    with ui_server(private_env(home, data_dir), home, data_dir, root / "ui.log", daemon=False) as ui:
        yield ui, checks


def test_the_check_warns_in_the_ui_after_a_replay_step(replayed, chromium: str, tmp_path: Path):
    ui, (first, warned) = replayed
    assert first.passed  # a first evaluation: nothing to compare with
    assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
    summary = warned.metadata["summary"].value
    topic = warned.metadata["per_question"].value[0]  # the topic's question comes first
    covering = topic["covering_after"]
    assert year_of(DEMO)[covering] == 2001 and covering in topic["new_reviews"]  # a review of the step's records
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1600, "height": 1200}).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        try:
            page.goto(f"{ui.url}/assets/review_questions?view=checks")
            # in the checks list: the check's entry (the innermost element holding its name and the warning icon)
            entry = page.locator("div").filter(has=page.get_by_title(CHECK, exact=True))
            entry = entry.filter(has=page.get_by_role("img", name=WARNING_ICON)).last
            expect(entry).to_be_visible()
            expect(entry.get_by_text("Failed", exact=True)).to_be_visible()
            entry.click()
            page.wait_for_url(f"**checkDetail={CHECK}**")
            result = page.locator(".BaseTag").filter(has=page.get_by_role("img", name=WARNING_ICON))
            expect(result.get_by_text("Failed", exact=True)).to_be_visible()  # Evaluation result: Failed, in yellow
            expect(page.get_by_text(summary, exact=True).first).to_be_visible()  # the latest execution's summary
            assert "verdicts changed" in summary and "1 new review" in summary
            row = page.get_by_role("row").filter(has_text="changes").filter(has_text="Show Markdown").first
            row.get_by_text("Show Markdown").click()
            dialog = page.get_by_role("dialog")
            # the changes in Markdown: the topic's question moved from gap to covered by the step's review
            line = dialog.get_by_role("listitem").filter(has_text=f"{topic['id']} {topic['question']}: gap -> covered")
            expect(line).to_contain_text(f"covered by PMID {covering} (2001) (was none)")
            page.screenshot(path=str(tmp_path / "verdicts_unchanged.png"), full_page=True)
        except Exception as exc:
            page.screenshot(path=str(tmp_path / "verdicts_unchanged-FAILED.png"), full_page=True)
            raise AssertionError(f"{exc}\nscreenshot: {tmp_path}; webserver log: {ui.log}") from exc
        finally:
            browser.close()
