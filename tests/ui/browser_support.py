"""Support for the real-browser test: Debian's Chromium, the demo and `scripts/ui.sh` on a private instance, GraphQL."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from flow.test_e2e_dagster_dev import free_port, graphql, wait_for  # the flow e2e test's helpers

ROOT = Path(__file__).resolve().parents[2]
LOCATION = "ra"  # workspace.yaml's code location
# scripts/setup.sh writes this when it could not install Chromium (no apt, not root, no sudo): the reason
NO_CHROMIUM = ROOT / ".venv" / ".ra-no-chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage"]  # the suite runs as root (sandbox refused), in containers


def chromium_or_fail() -> str:
    """Debian's Chromium; a missing one fails the test, and skips it only where scripts/setup.sh could not install it
    (it recorded why in .venv/.ra-no-chromium) and the run is not CI."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found:
        return found
    reason = NO_CHROMIUM.read_text(encoding="utf-8").strip() if NO_CHROMIUM.exists() else ""
    if reason and not os.environ.get("CI"):
        pytest.skip(f"Chromium is missing and scripts/setup.sh could not install it: {reason}")
    pytest.fail("Chromium is missing (/usr/bin/chromium): `bash scripts/setup.sh` installs Debian's chromium package")


def private_env(home: Path, data_dir: Path) -> dict[str, str]:
    """The caller's environment without its ra/Dagster settings, on a private instance and workspace, offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RA_", "DAGSTER_"))}
    return {
        **env,
        "DAGSTER_HOME": str(home),
        "RA_WORKSPACE__DATA_DIR": str(data_dir),
        "RA_INGEST__OFFLINE": "true",  # the test must never call NCBI or Crossref
        "HF_HUB_OFFLINE": "1",
    }


def stop_group(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM to the process group, SIGKILL after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def processes_of(home: Path) -> list[psutil.Process]:
    """Live processes started with DAGSTER_HOME=`home` (ours: the test made that folder)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get("DAGSTER_HOME") == str(home):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def kill_leftovers(home: Path) -> list[str]:
    """SIGKILL whatever still runs with DAGSTER_HOME=`home` (code servers, run workers); names them."""
    left = processes_of(home)
    names = [f"{p.pid} {' '.join(p.cmdline())[:120]}" for p in left if p.is_running()]
    for proc in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(left, timeout=10)
    return names


def demo_log(data_dir: Path) -> Path:
    """Where the demo fixture keeps the output of scripts/demo.sh (beside the workspace)."""
    return data_dir.parent / "demo.log"


def run_demo(env: dict[str, str], log: Path, timeout: float) -> None:
    """`bash scripts/demo.sh` (the main job through Dagster) on the private instance and workspace."""
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(["bash", str(ROOT / "scripts" / "demo.sh")], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(process, grace=10)
            raise AssertionError(f"scripts/demo.sh still running after {timeout:.0f}s; log {log}") from None
    assert code == 0, f"scripts/demo.sh exited {code}; log {log}:\n{log.read_text()[-3000:]}"
    print(f"scripts/demo.sh: {time.monotonic() - started:.0f}s (log {log})")


@dataclass(frozen=True)
class Ui:
    port: int
    home: Path
    data_dir: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        return graphql(self.port, query, variables)


@contextlib.contextmanager
def ui_server(env: dict[str, str], home: Path, data_dir: Path, log: Path, daemon: bool = True) -> Iterator[Ui]:
    """`scripts/ui.sh -h 127.0.0.1 -p PORT` (or, without `daemon`, Dagster's webserver alone on workspace.yaml: no
    sensor or schedule runs) until the server answers /server_info; on exit (also on failure) SIGTERM to its
    process group, SIGKILL after 60 s, then SIGKILL to anything else left with this DAGSTER_HOME."""
    ui = Ui(free_port(), home, data_dir, log)
    out = log.open("w")
    name = "scripts/ui.sh" if daemon else "dagster-webserver"
    if daemon:
        command = ["bash", str(ROOT / "scripts" / "ui.sh")]
    else:
        command = [str(Path(sys.executable).parent / name), "-w", str(ROOT / "workspace.yaml")]
    process = subprocess.Popen([*command, "-h", "127.0.0.1", "-p", str(ui.port)], cwd=ROOT, env=env, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def up() -> bool:
        assert process.poll() is None, f"{name} exited {process.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"{ui.url}/server_info", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    started = time.monotonic()
    try:
        wait_for(up, 240, f"the Dagster webserver on port {ui.port} (log {log})")
        wait_for(lambda: location_loaded(ui), 240, f"the code location {LOCATION!r} to load (log {log})")
        print(f"{name}: up after {time.monotonic() - started:.0f}s on port {ui.port} (log {log})")
        yield ui
    finally:
        failing = sys.exc_info()[0] is not None
        started = time.monotonic()
        stop_group(process, grace=60)
        print(f"{name}: stopped {time.monotonic() - started:.0f}s after SIGTERM")
        out.close()
        leftovers = kill_leftovers(home)
        if leftovers:
            print(f"{name}: killed {len(leftovers)} process(es) left after SIGTERM: {leftovers}")
        left = processes_of(home)
        if left and not failing:  # (when the test already failed, its own error is the one to read)
            raise AssertionError(f"processes left with DAGSTER_HOME={home}: {[p.pid for p in left]}")


def location_loaded(ui: Ui) -> bool:
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
    entries = ui.graphql(query)["workspaceOrError"].get("locationEntries", [])
    return any(e["name"] == LOCATION and e["loadStatus"] == "LOADED" for e in entries)


RUNS = "{ runsOrError { ... on Runs { results { runId jobName status tags { key value } } } } }"

LATEST = """
{ assetNodes { assetKey { path } groupName isPartitioned
               assetMaterializations(limit: 1) { runId timestamp } } }"""

REPORTS = """
query Reports($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) { ... on Asset {
    assetMaterializations(limit: 50) {
      runId timestamp
      metadataEntries { label ... on MarkdownMetadataEntry { mdStr } ... on JsonMetadataEntry { jsonString } }
    } } } }"""


def runs_by_id(ui: Ui) -> dict[str, dict]:
    runs = ui.graphql(RUNS)["runsOrError"]["results"]
    return {r["runId"]: {**r, "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in runs}


def latest_materializations(ui: Ui) -> dict[str, dict]:
    """Asset key -> {group, partitioned, run_id, timestamp} of its latest materialisation (None when never)."""
    nodes = ui.graphql(LATEST)["assetNodes"]
    return {
        "/".join(n["assetKey"]["path"]): {
            "group": n["groupName"],
            "partitioned": n["isPartitioned"],
            "latest": (n["assetMaterializations"] or [None])[0],
        }
        for n in nodes
    }


def report_previews(ui: Ui) -> list[dict]:
    """The `reports` materialisations that carry a Markdown preview: timestamp, run id, preview label and text, paths."""
    found = []
    data = ui.graphql(REPORTS, {"key": {"path": ["reports"]}})["assetOrError"]
    for event in data.get("assetMaterializations", []):
        entries = {e["label"]: e for e in event["metadataEntries"]}
        paths = json.loads(entries["paths"]["jsonString"]) if "paths" in entries else []
        for label, entry in entries.items():
            if label.startswith("preview_") and entry.get("mdStr"):
                found.append({"timestamp": event["timestamp"], "run_id": event["runId"], "label": label,
                              "markdown": entry["mdStr"], "paths": paths})  # fmt: skip
    return found


# `RA_README_PICTURE=docs/asset_graph.png pytest tests/ui` keeps the lineage step's view as the README's picture
README_PICTURE_ENV = "RA_README_PICTURE"


def save_picture(page, path: Path, width: int = 900, colours: int = 64) -> Path:
    """The page as it shows now, scaled to `width` pixels and reduced to `colours` (a small PNG for the README)."""
    from PIL import Image

    raw = path.with_suffix(".full.png")
    page.keyboard.press("Escape")  # an open menu (the graph's settings) must not cover the graph
    page.wait_for_load_state("networkidle")  # the nodes' materialisation state (their colour) has arrived
    page.wait_for_timeout(1000)
    page.screenshot(path=raw)
    with Image.open(raw) as shot:
        small = shot.convert("RGB").resize((width, round(shot.height * width / shot.width)), Image.LANCZOS)
        small.quantize(colors=colours).save(path, optimize=True)
    raw.unlink()
    return path
