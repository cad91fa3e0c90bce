"""Where prisma_check's full answer for a cluster is kept (<data_dir>/sr/<cluster_id>.prisma.json): save and load."""

from __future__ import annotations

import json
from pathlib import Path

from ra_agent.config import Config
from ra_agent.evidence.prisma.check import PrismaResult
from ra_agent.fileio import atomic_write
from ra_agent.workspace import Workspace


def prisma_result_path(cfg: Config, cluster_id: str) -> Path:
    """Where prisma_check keeps its last full answer for a cluster."""
    return Workspace.of(cfg).root / "sr" / f"{cluster_id}.prisma.json"


def save_prisma(cfg: Config, cluster_id: str, result: PrismaResult) -> None:
    """Keep prisma_check's full answer for a cluster (read back by the SR draft)."""
    path = prisma_result_path(cfg, cluster_id)
    atomic_write(path, json.dumps({"cluster_id": cluster_id, **result.to_json()}, ensure_ascii=False, indent=2))


def load_prisma(cfg: Config, cluster_id: str) -> PrismaResult | None:
    """prisma_check's last full answer for a cluster, or None."""
    path = prisma_result_path(cfg, cluster_id)
    if not path.exists():
        return None
    return PrismaResult.from_json(json.loads(path.read_text(encoding="utf-8")))
