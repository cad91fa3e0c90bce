"""The project's handbooks (`handbooks/*.md` beside config.toml) as a Dagster config Enum, read when definitions load."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from ra_agent.config import default_config_path

DEFAULT_HANDBOOK = "seek_gap_ppi_gerd"
# the handbooks shipped with ra: used when the project beside the config file has none
SHIPPED = Path(__file__).resolve().parents[1] / "handbooks"


def first_line(path: Path) -> str:
    """The handbook's title (first Markdown heading after the front matter), for the Enum value's description."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    fences = [i for i, line in enumerate(lines) if line.rstrip() == "---"][:2]
    body = lines[fences[1] + 1 :] if len(fences) == 2 else lines
    return next((line.lstrip("# ").strip() for line in body if line.startswith("# ")), "")


@dataclass(frozen=True)
class HandbookChoices:
    """The handbooks a Launchpad user can pick: the Enum (config value = file stem) and the folder it came from."""

    folder: Path
    names: tuple[str, ...]
    enum: dg.Enum
    default: str

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.md"


def handbook_choices(config_path: str | Path | None = None) -> HandbookChoices:
    """The `handbooks/*.md` beside the config file (RA_CONFIG or ./config.toml), else the ones shipped with ra."""
    folder = Path(config_path or default_config_path()).resolve().parent / "handbooks"
    if not any(folder.glob("*.md")):
        folder = SHIPPED
    files = sorted(folder.glob("*.md"))
    names = tuple(p.stem for p in files)
    values = [dg.EnumValue(p.stem, description=first_line(p) or p.name) for p in files]
    default = DEFAULT_HANDBOOK if DEFAULT_HANDBOOK in names else names[0]
    return HandbookChoices(folder, names, dg.Enum("Handbook", values), default)
