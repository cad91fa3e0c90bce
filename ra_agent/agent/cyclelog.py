"""Markdown cycle logs: logs/YYYY-MM-DD_cycleN.md per cycle, past days gzipped, old deleted (docs/operations.md)."""

from __future__ import annotations

import gzip
import logging
import re
import shutil
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import psutil

from ra_agent.config import Config
from ra_agent.fileio import atomic_write, atomic_writer

log = logging.getLogger(__name__)

_LOG_NAME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})_cycle\d+\.md(\.gz)?$")
_GIB = 1024**3


@dataclass
class CycleRecord:
    """What one cycle did, as the log shows it."""

    cycle: int
    goal_id: str
    primary_goal: str
    topic: str
    brain: str  # Brain.name, e.g. "ollama:gemma3n:e4b" or "rules:handbook-policy-v1"
    prompt: str | list[dict[str, str]]
    response: str  # verbatim, reasoning included
    notes: list[str] = field(default_factory=list)  # executor notes, e.g. "tool=search_pubmed cand=2000 accepted=123"
    json_status: str = "ok"  # ok | repaired | json_error | error | no_action | brain_unavailable
    repair_response: str | None = None
    repair_prompt: str | None = None  # the repair instruction sent (FIX JSON ONLY / FIX THE ACTION ONLY)
    thinking: str | None = None  # a thinking model's separate reasoning, when the brain returns one
    delta_papers: int = 0
    ram_used_bytes: int | None = None  # None: the process RSS when the log is written
    vram_used_bytes: int | None = None


def render_messages(messages: list[dict[str, str]]) -> str:
    """A chat conversation as plain text: `[role]` headers followed by the content."""
    return "\n\n".join(f"[{m.get('role', '?')}]\n{m.get('content', '')}" for m in messages)


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of a long text (limit characters in all), noting what was cut."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return f"[{len(text)} characters not logged]"
    head, tail = text[: limit // 2], text[len(text) - (limit - limit // 2) :]
    return f"{head}\n[… {len(text) - limit} characters omitted …]\n{tail}"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in (text or "(empty)").splitlines())


def _size(n: int | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / _GIB:.1f} GiB" if n >= _GIB else f"{n / 1024**2:.0f} MiB"


def render_cycle(record: CycleRecord, when: datetime, prompt_chars: int, response_chars: int = 20000) -> str:
    """One cycle's Markdown section (the cycle-log template, plus the brain's name).

    Replies are cut to `response_chars` (head + tail, the cut noted): a 20 MB reply makes a small log.
    """
    prompt = record.prompt if isinstance(record.prompt, str) else render_messages(record.prompt)
    ram = record.ram_used_bytes if record.ram_used_bytes is not None else psutil.Process().memory_info().rss
    parts = [
        f"## Cycle {record.cycle}  ({when.astimezone(UTC):%Y-%m-%d %H:%M} UTC)",
        "### Goal",
        f"goal_id: {record.goal_id}   primary: {record.primary_goal}   topic: {record.topic}\nbrain: {record.brain}",
        "### Brain Prompt (truncated)",
        _quote(truncate_middle(prompt, prompt_chars)),
    ]
    if record.thinking:
        parts += ["### Brain Reasoning", _quote(truncate_middle(record.thinking, response_chars))]
    parts += ["### Brain Response", _quote(truncate_middle(record.response, response_chars))]
    if record.repair_prompt is not None or record.repair_response is not None:
        parts += ["### Repair Turn"]
        if record.repair_prompt is not None:
            parts += ["Prompt:", _quote(truncate_middle(record.repair_prompt, response_chars))]
        parts += ["Reply:", _quote(truncate_middle(record.repair_response or "(none)", response_chars))]
    notes = [*record.notes, f"json_status: {record.json_status}"]
    parts += [
        "### Executor Notes",
        "\n".join(f"- {n}" for n in notes),
        "### Resource Stats",
        f"RAM used: {_size(ram)}  VRAM used: {_size(record.vram_used_bytes)}  Δpapers: {record.delta_papers:+d}",
    ]
    return "\n\n".join(parts) + "\n"


def log_dir(cfg: Config) -> Path:
    return cfg.data_dir / cfg.logging.log_dir


def _gzip(path: Path) -> Path:
    target = path.with_name(path.name + ".gz")
    with path.open("rb") as src, atomic_writer(target) as raw, gzip.GzipFile(fileobj=raw, mode="wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return target


def rotate_logs(cfg: Config, today: date | None = None) -> dict[str, int]:
    """Gzip the logs of previous days (if zip_old_logs) and delete logs older than retain_days (either form).

    Dates come from the file names (UTC days), so rotation is deterministic whatever the mtimes say.
    """
    folder = log_dir(cfg)
    today = today or datetime.now(UTC).date()
    counts = {"gzipped": 0, "deleted": 0}
    if not folder.is_dir():
        return counts
    for path in sorted(folder.iterdir()):
        match = _LOG_NAME_RE.match(path.name)
        if not match:
            continue
        day = date.fromisoformat(match.group(1))
        if (today - day).days > cfg.logging.retain_days:
            path.unlink()
            counts["deleted"] += 1
        elif not match.group(2) and day < today and cfg.logging.zip_old_logs:
            _gzip(path)
            counts["gzipped"] += 1
    if any(counts.values()):
        log.info("cycle logs in %s: %d gzipped, %d deleted", folder, counts["gzipped"], counts["deleted"])
    return counts


class CycleLog:
    """Writes cycle logs; several goals' cycles with the same number on one day share a file, one section each."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.dir = log_dir(cfg)
        self._rotated_on: date | None = None

    def path_for(self, cycle: int, when: datetime) -> Path:
        return self.dir / f"{when.astimezone(UTC):%Y-%m-%d}_cycle{cycle}.md"

    def write(self, record: CycleRecord, when: datetime | None = None) -> Path:
        """Append the cycle's section to its log file (atomically); rotates once per new day."""
        when = when or datetime.now(UTC)
        day = when.astimezone(UTC).date()
        if self._rotated_on != day:
            rotate_logs(self.cfg, day)
            self._rotated_on = day
        path = self.path_for(record.cycle, when)
        section = render_cycle(record, when, self.cfg.logging.prompt_log_chars, self.cfg.logging.response_log_chars)
        previous = path.read_text(encoding="utf-8") + "\n---\n\n" if path.exists() else ""
        atomic_write(path, previous + section)
        return path


__all__ = ["CycleLog", "CycleRecord", "log_dir", "render_cycle", "render_messages", "rotate_logs", "truncate_middle"]
