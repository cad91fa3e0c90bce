"""What every `ra` command checks before it does any work: the bad-input error (exit 2) and the argument types."""

from __future__ import annotations

import argparse
from pathlib import Path

from ra_agent.config import default_config_path


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse exits 2 naming the option otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1-65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (1-65535)")
    return value


def entrez_date(text: str) -> str:
    """An argparse type: a date as PubMed's mindate takes it, YYYY, YYYY-MM or YYYY-MM-DD ("/" or "-")."""
    from datetime import datetime

    for pattern in ("%Y/%m/%d", "%Y/%m", "%Y"):
        try:
            datetime.strptime(text.strip().replace("-", "/"), pattern)
            return text.strip()
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD, YYYY/MM/DD, YYYY-MM or YYYY)")


def handbook_folders(config_path: str | Path | None) -> list[Path]:
    """Where handbook names are looked up: handbooks/ beside the config file, then the ones shipped with ra."""
    beside = Path(config_path or default_config_path()).resolve().parent / "handbooks"
    shipped = Path(__file__).resolve().parents[1] / "handbooks"
    return list(dict.fromkeys(f for f in (beside, shipped) if f.is_dir()))


def resolve_handbook(text: str, config_path: str | Path | None = None) -> Path:
    """A handbook path from a path or a name as the Launchpad shows it (`seek_gap_ppi_gerd`, with or without .md);
    CliError listing the handbooks there when neither exists."""
    path = Path(text)
    if path.exists():
        return path
    name = path.stem if path.suffix == ".md" else path.name
    folders = handbook_folders(config_path)
    for folder in folders:
        if (folder / f"{name}.md").is_file():
            return folder / f"{name}.md"
    known = sorted({p.stem for f in folders for p in f.glob("*.md")})
    where = f" in {folders[0]}" if folders else ""
    raise CliError(f"{text}: no such handbook; available{where}: {', '.join(known) or 'none'} "
                   "(ra run NAME, or a path to a handbook file)")  # fmt: skip
