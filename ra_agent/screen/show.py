"""How `ra screen -i` shows one record: whole title, journal, year, the abstract wrapped to the terminal, and the
model's terms towards include highlighted where they occur."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from collections.abc import Iterable, Sequence

from ra_agent.models import Paper

BOLD_YELLOW, RESET = "\x1b[1;33m", "\x1b[0m"
MAX_WIDTH = 100  # wider lines are hard to read, whatever the terminal


def terminal_width() -> int:
    """The terminal's columns (80 when unknown), at most MAX_WIDTH."""
    return max(40, min(MAX_WIDTH, shutil.get_terminal_size((80, 24)).columns))


def use_colour(stream) -> bool:
    """ANSI highlighting only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    return hasattr(stream, "isatty") and stream.isatty() and not os.environ.get("NO_COLOR")


def highlight(text: str, terms: Iterable[str], *, colour: bool) -> str:
    """`text` with each term (a TF-IDF token or bigram, matched as whole words, any case) marked: bold yellow on a
    terminal, else *term*."""
    words = sorted({t for t in terms if t.strip()}, key=len, reverse=True)
    if not words:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in words) + r")\b", re.I)
    if colour:
        return pattern.sub(lambda m: f"{BOLD_YELLOW}{m.group(0)}{RESET}", text)
    return pattern.sub(lambda m: f"*{m.group(0)}*", text)


def record_lines(
    paper: Paper | None, pmid: int, rank: int, why: str, terms: Sequence[str], *, width: int, abstract: bool = True,
    colour: bool = False,
) -> list[str]:  # fmt: skip
    """The lines of one record as the interactive prompt shows it (a PMID the store lacks shows as PMID-only)."""
    title = (paper.title if paper else "") or "(no title)"
    journal = (paper.journal if paper else "") or "journal not recorded"
    year = (paper.year if paper else None) or "year not recorded"
    fill = textwrap.TextWrapper(width=width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    lines = [f"#{rank}  PMID {pmid} · {journal} · {year}"]
    lines += [highlight(x, terms, colour=colour) for x in fill.wrap(title)]
    if abstract:
        text = (paper.abstract if paper else "") or ""
        if text.strip():
            lines.append("  Abstract:")
            lines += [highlight(x, terms, colour=colour) for x in fill.wrap(" ".join(text.split()))]
        else:
            lines.append("  Abstract: none recorded (screen on the title)")
    lines += fill.wrap(f"why: {why}")
    return lines


__all__ = ["highlight", "record_lines", "terminal_width", "use_colour"]
