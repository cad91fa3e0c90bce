"""Cycle logs: memo-80 Markdown template, one file per day and cycle number, gzip and deletion of old logs."""

from __future__ import annotations

import gzip
import re
from datetime import UTC, date, datetime
from typing import Any

from ra_agent.agent.cyclelog import CycleLog, CycleRecord, render_messages, rotate_logs, truncate_middle

WHEN = datetime(2025, 8, 4, 14, 22, tzinfo=UTC)
RESPONSE = (
    "Thought: cluster 07e3a1dca9b4 has 5 eligible trials.\n\n"
    'Action: {"tool": "search_pubmed", "args": {"query": "adult refractory ketone ester epilepsy"}}'
)


def record(**overrides) -> CycleRecord:
    values: dict[str, Any] = dict(
        cycle=17,
        goal_id="6a4f46a1b2e6",
        primary_goal="seek_gap",
        topic="KD epilepsy adults",
        brain="ollama:gemma3n:e4b",
        prompt="P" * 3000 + "MIDDLE" + "Q" * 3000,
        response=RESPONSE,
        notes=["tool=search_pubmed   cand=2000  accepted=123", "expansion_halt: RAM"],
        delta_papers=123,
        ram_used_bytes=int(13.1 * 1024**3),
    )
    values.update(overrides)
    return CycleRecord(**values)


def test_cycle_log_follows_the_memo_template(cfg):
    path = CycleLog(cfg).write(record(), WHEN)
    assert path == cfg.data_dir / "logs" / "2025-08-04_cycle17.md"
    text = path.read_text()
    assert text.startswith("## Cycle 17  (2025-08-04 14:22 UTC)")
    for heading in (
        "### Goal",
        "### Brain Prompt (truncated)",
        "### Brain Response",
        "### Executor Notes",
        "### Resource Stats",
    ):
        assert heading in text
    assert "goal_id: 6a4f46a1b2e6   primary: seek_gap   topic: KD epilepsy adults" in text
    assert "brain: ollama:gemma3n:e4b" in text
    assert "characters omitted" in text and "MIDDLE" not in text  # prompt truncated to prompt_log_chars
    assert "> Thought: cluster 07e3a1dca9b4 has 5 eligible trials.\n>\n> Action: {" in text  # response verbatim
    assert "- tool=search_pubmed   cand=2000  accepted=123\n- expansion_halt: RAM\n- json_status: ok" in text
    assert "RAM used: 13.1 GiB  VRAM used: n/a  Δpapers: +123" in text


def test_repair_turn_reasoning_and_measured_ram(cfg):
    text = CycleLog(cfg).write(
        record(json_status="repaired", repair_response='{"tool": "run_pico"}', thinking="step 1", ram_used_bytes=None,
               prompt=[{"role": "user", "content": "short prompt"}]),
        WHEN,
    ).read_text()  # fmt: skip
    assert '### Repair Turn\n\nReply:\n\n> {"tool": "run_pico"}' in text
    assert "### Brain Reasoning\n\n> step 1" in text and "- json_status: repaired" in text
    assert "> [user]\n> short prompt" in text
    assert re.search(r"^RAM used: \d+ MiB|^RAM used: \d+\.\d GiB", text, re.M)  # the process RSS, measured


def test_same_cycle_number_of_two_goals_shares_the_file(cfg):
    log = CycleLog(cfg)
    first = log.write(record(), WHEN)
    second = log.write(record(goal_id="0123456789ab", brain="rules:handbook-policy-v1"), WHEN)
    assert first == second
    text = first.read_text()
    assert text.count("## Cycle 17") == 2 and "\n---\n\n## Cycle 17" in text
    assert "goal_id: 0123456789ab" in text and "brain: rules:handbook-policy-v1" in text


def test_rotation_gzips_previous_days_and_deletes_old_logs(cfg):
    folder = cfg.data_dir / "logs"
    folder.mkdir(parents=True)
    (folder / "2025-08-03_cycle4.md").write_text("yesterday")
    (folder / "2025-07-05_cycle1.md").write_text("30 days old: kept")
    (folder / "2025-07-04_cycle1.md").write_text("31 days old")
    (folder / "2025-07-01_cycle2.md.gz").write_bytes(gzip.compress(b"old zip"))
    (folder / "notes.txt").write_text("not a cycle log")
    CycleLog(cfg).write(record(cycle=1), WHEN)
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "2025-07-05_cycle1.md.gz", "2025-08-03_cycle4.md.gz", "2025-08-04_cycle1.md", "notes.txt",
    ]  # fmt: skip
    assert gzip.decompress((folder / "2025-08-03_cycle4.md.gz").read_bytes()) == b"yesterday"
    assert rotate_logs(cfg, date(2025, 8, 4)) == {"gzipped": 0, "deleted": 0}  # idempotent


def test_rotation_without_zipping_keeps_markdown(cfg):
    plain = cfg.with_overrides(logging={"zip_old_logs": False, "retain_days": 7})
    folder = plain.data_dir / "logs"
    folder.mkdir(parents=True)
    (folder / "2025-08-03_cycle4.md").write_text("yesterday")
    (folder / "2025-07-20_cycle1.md").write_text("too old")
    assert rotate_logs(plain, date(2025, 8, 4)) == {"gzipped": 0, "deleted": 1}
    assert [p.name for p in folder.iterdir()] == ["2025-08-03_cycle4.md"]


def test_helpers():
    assert truncate_middle("abcdef", 10) == "abcdef"
    cut = truncate_middle("a" * 10 + "b" * 10, 4)
    assert cut.startswith("aa\n[… 16 characters omitted …]\nbb")
    assert truncate_middle("abc", 0) == "[3 characters not logged]"
    assert (
        render_messages([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
        == "[system]\ns\n\n[user]\nu"
    )
