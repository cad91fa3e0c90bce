"""The browser test's fixtures: Chromium, and the demo run through Dagster on a private instance that ui.sh then opens.

The workspace starts from the flow tests' demo template (the bundled corpus imported and embedded; the vectors
are cached in pytest's cache by model and texts, so in a full run the flow tests have already paid for them);
`scripts/demo.sh` then runs every step of the main job as Dagster runs on that instance.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from flow.conftest import demo_template  # noqa: F401  (the session fixture, shared with the flow tests)

from .browser_support import Ui, chromium_or_fail, demo_log, private_env, run_demo, ui_server

DEMO_TIMEOUT_S = 900


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium (requested by the browser test only: the instance checks run without it)."""
    return chromium_or_fail()


@pytest.fixture(scope="module")
def demo_ui(demo_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:  # noqa: F811
    """`scripts/demo.sh`, then `scripts/ui.sh` on the same DAGSTER_HOME and workspace (both private to the module;
    its tests run in file order: the instance checks before the browser test launches a run)."""
    root = tmp_path_factory.mktemp("demo_ui")
    data_dir = root / "data"
    shutil.copytree(demo_template / "data", data_dir)
    home = root / "dagster_home"
    home.mkdir()
    env = private_env(home, data_dir)
    # The reports' previews, agent_reports_job and the `reports` asset need a goal that succeeds: with the default
    # pivot the 2002 review covers the demo's question (no success, no reports run); a review must hold 99% of a
    # question's studies to cover it here, so the topic's question is the gap the handbook's Success asks for.
    env["RA_SR__SR_OVERLAP_PIVOT"] = "0.99"
    run_demo(env, demo_log(data_dir), timeout=DEMO_TIMEOUT_S)
    with ui_server(env, home, data_dir, root / "ui.log") as ui:
        yield ui
