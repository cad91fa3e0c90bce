"""What every `ra` command checks before it does any work: the bad-input error (exit 2) and the argument types."""

from __future__ import annotations

import argparse


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
