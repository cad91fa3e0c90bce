"""`ra llm serve` starts llama.cpp's server in the background and prints the settings that use it;
`ra llm stop` leaves no process behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import pytest

from ra_agent.llm import serve

from .conftest import why_no_llm

pytestmark = pytest.mark.slow


def ra(*args: str, config) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ra_agent.cli", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def test_serve_prints_working_settings_and_stop_leaves_no_process(tmp_path):
    missing = serve.missing_packages()
    if missing:
        reason = f"{', '.join(missing)} not installed ({why_no_llm()})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    config = tmp_path / "config.toml"
    config.write_text('[workspace]\ndata_dir = "data"\n')
    state = tmp_path / "data" / serve.STATE_FILE
    try:
        started = ra("llm", "serve", "--n-ctx", "2048", config=config)
        assert started.returncode == 0, started.stderr
        info = json.loads(state.read_text())
        url = re.search(r'openai_base_url = "(http://127\.0\.0\.1:\d+/v1)"', started.stdout)
        assert url and url.group(1) == f"http://127.0.0.1:{info['port']}/v1", started.stdout
        assert f"RA_LLM__OPENAI_BASE_URL={url.group(1)}" in started.stdout and 'brain = "openai"' in started.stdout
        models = httpx.get(f"{url.group(1)}/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == [serve.MODEL_ALIAS]
        again = ra("llm", "serve", config=config)  # a second serve finds the running one
        assert again.returncode == 0 and f"pid {info['pid']}" in again.stdout
    finally:
        stopped = ra("llm", "stop", config=config)
    assert stopped.returncode == 0 and f"pid {info['pid']}" in stopped.stdout
    assert not serve.alive(info["pid"]) and not state.exists()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{info['port']}/v1/models", timeout=2)
    assert ra("llm", "stop", config=config).stdout.strip() == "no llama.cpp server was running"
