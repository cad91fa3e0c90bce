"""Fixtures for the agent-core tests: a workspace config on tmp_path and a loopback Ollama server."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from replay.ollama_server import OllamaReplayServer

from ra_agent.config import Config


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    """Defaults, with the workspace and the project root (STOP/PAUSE files) in tmp_path."""
    base = Config().with_overrides(workspace={"data_dir": str(tmp_path / "data"), "demo_corpus": ""})
    return dataclasses.replace(base, root=str(tmp_path))


@pytest.fixture
def ollama_cfg(cfg: Config, ollama_server: OllamaReplayServer) -> Config:
    return cfg.with_overrides(llm={"ollama_host": ollama_server.host, "timeout_s": 5.0, "probe_timeout_s": 2.0})
