"""Spawned goals: the new handbook an alternative PICO theme becomes (docs/architecture.md, Review questions)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ra_agent.agent.handbook import Handbook, load_handbook, parse_handbook
from ra_agent.config import Config
from ra_agent.evidence.sr.alternative import clean_query
from ra_agent.fileio import atomic_write

log = logging.getLogger(__name__)


# ============================================================================ spawned handbooks


@dataclass(frozen=True)
class SpawnedHandbook:
    """The handbook of an alternative theme as drafted, not yet written: where it goes, its text, and it parsed
    (what it asks is known before the file exists)."""

    path: Path
    text: str
    handbook: Handbook

    def write(self) -> Path:
        """Publish the file (atomically) and return its path."""
        atomic_write(self.path, self.text)
        log.info("spawned handbook %s (Seed_query %r)", self.path, self.handbook.seed_query)
        return self.path


def spawn_handbook(
    cfg: Config, parent_handbook_path: str | Path, new_seed_query: str, out_dir: str | Path, *, new_pico: str = ""
) -> Path:
    """Write the handbook of an alternative theme (`draft_handbook`) and return its path."""
    return draft_handbook(cfg, parent_handbook_path, new_seed_query, out_dir, new_pico=new_pico).write()


def draft_handbook(
    cfg: Config, parent_handbook_path: str | Path, new_seed_query: str, out_dir: str | Path, *, new_pico: str = ""
) -> SpawnedHandbook:
    """The handbook for the alternative theme: the parent's front matter with Seed_query replaced (or added after
    Primary_goal), then prose saying where it came from, then the parent's prose, at
    <out_dir>/<parent>__alt_<hash>.md; parsed as load_handbook would (never a handbook that does not load), not
    written.
    """
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
    return SpawnedHandbook(path, text, parse_handbook(text, path))
