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

from .browser_support import Ui, chromium_or_fail, private_env, run_demo, ui_server

DEMO_TIMEOUT_S = 900


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium (checked before the demo runs: a missing browser fails fast)."""
    return chromium_or_fail()


@pytest.fixture
def demo_ui(chromium: str, demo_template: Path, tmp_path: Path) -> Iterator[Ui]:  # noqa: F811
    """`scripts/demo.sh`, then `scripts/ui.sh` on the same DAGSTER_HOME and workspace (both private to the test)."""
    data_dir = tmp_path / "data"
    shutil.copytree(demo_template / "data", data_dir)
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = private_env(home, data_dir)
    run_demo(env, tmp_path / "demo.log", timeout=DEMO_TIMEOUT_S)
    with ui_server(env, home, data_dir, tmp_path / "ui.log") as ui:
        yield ui
