"""Helpers shared by the embedding tests (importable because pytest puts this folder on sys.path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ra_agent.config import Config

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
SAMPLE_SIZE = 150  # demo abstracts embedded once per session


def embed_cfg(tmp_path: Path | None = None, *, hardware: dict | None = None, **embedding) -> Config:
    """Default config with [embedding] overrides, its workspace in `tmp_path`."""
    sections: dict = {"embedding": embedding, "hardware": hardware or {}}
    if tmp_path is not None:
        sections["workspace"] = {"data_dir": str(tmp_path)}
    return Config().with_overrides(**sections)


def unit_rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """n random float32 unit vectors."""
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)
