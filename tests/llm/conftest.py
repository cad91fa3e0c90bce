"""Fixtures for the LLM tests: both loopback backends (Ollama /api/chat, OpenAI /v1/chat/completions), the demo workspace."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flow.conftest import demo, demo_project, demo_template  # noqa: F401  (the demo workspace fixtures)
from replay import Fault
from replay.ollama_server import OllamaReplayServer
from replay.openai_server import OpenAIReplayServer

from ra_agent.config import Config


@pytest.fixture
def real_model_report(record_property):
    """A function that keeps a line for the terminal summary's "real model" section (tests/conftest.py): the
    real-model tests' figures (cycles, tokens per second, modes) show in `pytest -q` (scripts/test.sh) though passing
    tests' prints are hidden. The line travels in the test's report, so it reaches the summary from an xdist worker."""
    return lambda line: record_property("real_model", line)


@dataclass
class Loopback:
    """One running loopback LLM server and the [llm] settings that point ra at it."""

    backend: str
    server: OllamaReplayServer | OpenAIReplayServer

    @property
    def chat_path(self) -> str:
        return "/api/chat" if self.backend == "ollama" else "/v1/chat/completions"

    def settings(self, **extra) -> dict:
        where = {"ollama_host": self.server.root_url} if self.backend == "ollama" else {
            "openai_base_url": f"{self.server.root_url}/v1"}  # fmt: skip
        return {"brain": self.backend, "timeout_s": 10.0, "probe_timeout_s": 2.0, **where, **extra}

    def configure(self, cfg: Config, **extra) -> Config:
        return cfg.with_overrides(llm=self.settings(**extra))

    def script(self, *replies: str) -> None:
        self.server.script(*replies)

    def fail_chat(self, *faults: Fault) -> None:
        """Queue faults for the next chat requests (Fault.passthrough() lets one through)."""
        self.server.inject(self.chat_path, *faults)

    @property
    def chat_requests(self) -> list[dict]:
        return self.server.chat_requests


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    """Defaults, with the workspace and the project root in tmp_path."""
    base = Config().with_overrides(workspace={"data_dir": str(tmp_path / "data"), "demo_corpus": ""})
    return dataclasses.replace(base, root=str(tmp_path))


@pytest.fixture(params=["ollama", "openai"])
def loopback(request) -> Iterator[Loopback]:
    """Each test runs once against a loopback Ollama and once against a loopback OpenAI-compatible server."""
    server = OllamaReplayServer() if request.param == "ollama" else OpenAIReplayServer()
    with server:
        yield Loopback(request.param, server)


# scripts/setup.sh writes this when it could not build or install the local LLM (outside CI): the reason
NO_LLM = Path(__file__).resolve().parents[2] / ".venv" / ".ra-no-llm"


def why_no_llm() -> str:
    """What scripts/setup.sh said about the local LLM, for a real-model test's skip or failure."""
    if NO_LLM.exists():
        return f"scripts/setup.sh could not install it: {NO_LLM.read_text(encoding='utf-8').strip()}"
    return "scripts/setup.sh installs it"
