"""Spawned goals: the new handbook an alternative PICO theme becomes (docs/architecture.md, Review questions)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path

from ra_agent.config import Config
from ra_agent.evidence.sr.alternative import clean_query
from ra_agent.fileio import atomic_write

log = logging.getLogger(__name__)


# ============================================================================ spawned handbooks


def spawn_handbook(
    cfg: Config, parent_handbook_path: str | Path, new_seed_query: str, out_dir: str | Path, *, new_pico: str = ""
) -> Path:
    """Write a handbook for the alternative theme: the parent's front matter with Seed_query replaced (or added
    after Primary_goal), then prose saying where it came from, then the parent's prose. Returns its path
    (<out_dir>/<parent>__alt_<hash>.md); the file is validated with load_handbook before it is published.
    """
    from ra_agent.agent.handbook import load_handbook, parse_handbook

    parent_path = Path(parent_handbook_path)
    parent = load_handbook(parent_path)
    query = clean_query(new_seed_query)
    if query is None:
        raise ValueError(f"unusable seed query {new_seed_query!r}")
    lines = parent_path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i].rstrip() == "---")
    seed_line = f"Seed_query: {json.dumps(query, ensure_ascii=False)}"
    front = lines[start + 1 : end]
    at = next((i for i, line in enumerate(front) if re.match(r"Seed_query\s*:", line)), None)
    if at is not None:
        front[at] = seed_line
    else:
        goal_at = next(i for i, line in enumerate(front) if re.match(r"Primary_goal\s*:", line))
        front.insert(goal_at + 1, seed_line)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    origin = (
        f"# Alternative theme spawned by propose_alternative_pico from {parent_path.name}\n\n"
        f"This handbook was written by ra on {now}: an existing systematic review covers the parent's topic, so "
        f"the work continues on a theme drawn from the papers those reviews leave over.\n\n"
        + (f"- New PICO: {new_pico}\n" if new_pico else "")
        + f"- Seed query: `{query}`\n- Parent handbook: {parent_path.name} (Primary_goal {parent.primary_goal})\n"
    )
    text = "\n".join(["---", f"# spawned from {parent_path.name} on {now}", *front, "---", "", origin])
    if parent.prose:
        text += f"\n## Instructions carried over from {parent_path.name}\n\n{parent.prose}\n"
    # named by what it asks, not where the project lies: two clones that spawn the same theme name it alike
    digest = hashlib.sha1(f"{parent_path.name}\n{query}".encode()).hexdigest()[:8]
    path = Path(out_dir) / f"{parent_path.stem}__alt_{digest}.md"
    parse_handbook(text, path)  # never publish a handbook that does not load
    atomic_write(path, text)
    log.info("spawned handbook %s (Seed_query %r) from %s", path, query, parent_path)
    return path
