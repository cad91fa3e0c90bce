"""`ra screen` as a person meets it: the interactive prompt in a real terminal (a pty) shows each record's abstract,
and on a machine where PubMed cannot be reached `ra screen --from` says so once and goes on offline."""

from __future__ import annotations

import os
import pty
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from demo_corpus import demo_rows, write_demo_subset
from screen_support import warm_cache

from ra_agent.config import Config

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROWS = 60  # the first rows of the demo CSV: quick to embed


def _config(tmp_path: Path, data_dir: Path, extra: str = "[ingest]\noffline = true\n") -> Path:
    config = tmp_path / "config.toml"
    config.write_text(f'[workspace]\ndata_dir = "{data_dir}"\ndemo_corpus = ""\n{extra}')
    return config


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "COLUMNS": "90", "LINES": "40"}


def _in_a_terminal(args: list[str], answers: list[str] | Callable[[str], str], timeout: float = 600) -> str:
    """Run `ra ARGS` on a pseudo-terminal, typing an answer after each prompt (the next of `answers`, or
    `answers(printed so far)`); everything it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ra_agent.cli", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=_env(), cwd=ROOT, close_fds=True)  # fmt: skip
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    todo = [] if callable(answers) else list(answers)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
                if out.rstrip().endswith(b">") and (todo or callable(answers)):
                    answer = answers(_clean(out)) if callable(answers) else todo.pop(0)
                    os.write(master, answer.encode() + b"\n")
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=30) == 0, out.decode(errors="replace")[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return _clean(out)


def _clean(out: bytes) -> str:
    return ANSI.sub("", out.decode(errors="replace").replace("\r", ""))


def _squash(text: str) -> str:
    return " ".join(text.split())


def test_the_interactive_prompt_shows_each_records_abstract_in_a_terminal(workspace, tmp_path, cache_dir):
    rows = demo_rows()[:ROWS]
    csv_path = write_demo_subset(tmp_path / "ppi_head.csv", rows)
    config = _config(tmp_path, workspace.data_dir)
    by_pmid = {r["pubmedID"]: r for r in rows}
    out = _in_a_terminal(["--config", str(config), "screen", "--from", str(csv_path), "-i"], ["e not a trial", "s"])
    warm_cache(workspace, cache_dir)
    shown = re.findall(r"^#\d+\s+PMID (\d+) · ", out, re.M)
    assert len(shown) == 2, out[-3000:]  # one record, an exclude, then the next record, then stop
    flat = _squash(out)
    for pmid in shown:
        row = by_pmid[pmid]
        assert _squash(row["title"]) in flat  # the whole title, however long
        if row["abstract"].strip():
            words = _squash(row["abstract"]).split()
            assert " ".join(words[:25]) in flat and " ".join(words[-10:]) in flat  # wrapped, not cut
    record = [line for line in out.splitlines() if line.startswith("  ")]  # a record's title, abstract and why
    assert len(record) > 6 and max(map(len, record)) <= 90  # wrapped to the terminal's COLUMNS
    # --no-abstract: the same record, title and year only
    out = _in_a_terminal(["--config", str(config), "screen", "-i", "--no-abstract"], ["s"])
    (pmid,) = re.findall(r"^#\d+\s+PMID (\d+) · ", out, re.M)
    abstract = _squash(by_pmid[pmid]["abstract"]).split()
    assert _squash(by_pmid[pmid]["title"]) in _squash(out) and " ".join(abstract[:12]) not in _squash(out)


def test_the_prompt_states_the_stopping_aid_and_says_stop_only_when_the_rule_does(workspace, tmp_path, cache_dir):
    """60 demo records, 57 seeded with their labels (3 includes, the last at row 58); the 3 left are excludes. The
    aid speaks after 3 decisions (stop_min_screened 0.05): before each record the prompt prints the rule's line as
    `stop_status` computes it from the decisions so far, and "you may stop" only once buscar_ranked's p < 0.05."""
    from ra_agent.screen.stopping import stop_status

    rows = demo_rows()[:ROWS]
    undecided = (56, 58, 59)
    labels = [int(row["label_included"]) for row in rows]
    assert sum(labels[i] for i in undecided) == 0 and labels[57] == 1
    for i in undecided:
        rows[i] = {**rows[i], "label_included": ""}
    csv_path = write_demo_subset(tmp_path / "ppi_head.csv", rows)
    config = _config(tmp_path, workspace.data_dir, "[ingest]\noffline = true\n[screen]\nstop_min_screened = 0.05\n")
    by_pmid = {row["pubmedID"]: int(labels[i]) for i, row in enumerate(rows)}

    def answer(printed: str) -> str:  # the record's true label; stop once the aid says so
        if "you may stop" in printed:
            return "s"
        pmid = re.findall(r"^#\d+\s+PMID (\d+) · ", printed, re.M)[-1]
        return "i" if by_pmid[pmid] else "e"

    out = _in_a_terminal(["--config", str(config), "screen", "--from", str(csv_path), "--seed-labels",
                          "label_included", "-i"], answer)  # fmt: skip
    warm_cache(workspace, cache_dir)
    screen = Config().with_overrides(screen={"stop_min_screened": 0.05}).screen
    seeded = [labels[i] for i in range(ROWS) if i not in undecided]
    blocks = re.findall(r"^(import:ppi_head\.csv: \d+ of 60 screened.*?)(?=^model: |^#)", out, re.M | re.S)
    assert len(blocks) == 3, out[-3000:]  # 57, 58 and 59 decided: two records excluded, then stop
    for made, block in enumerate(blocks):
        status = stop_status(seeded + [0] * made, ROWS, screen)
        printed = [line for line in block.splitlines()[1:] if line.strip()]
        assert printed == status.lines(), (made, block)
        assert printed[0].startswith("stopping aid (buscar_ranked): p = ")
        assert ("you may stop" in block) == status.stop == (made == 2), (made, status)
    assert "recall >= 95% with 95% confidence, if the ranking puts includes no later than a random order" in out


def test_the_terms_towards_include_are_highlighted_on_a_terminal():
    from ra_agent.screen.show import BOLD_YELLOW, highlight

    text = "Omeprazole versus ranitidine in reflux oesophagitis: a randomised trial"
    marked = highlight(text, ["omeprazole", "reflux oesophagitis", "ranitidin"], colour=True)
    assert f"{BOLD_YELLOW}Omeprazole" in marked and f"{BOLD_YELLOW}reflux oesophagitis" in marked
    assert f"{BOLD_YELLOW}ranitidine" not in marked  # whole words only
    assert highlight(text, ["trial"], colour=False).endswith("randomised *trial*")


def test_offline_screen_from_says_so_once_without_a_retry_storm(workspace, tmp_path, cache_dir):
    """PubMed and Crossref at a closed loopback port (a machine without network): one 'offline' notice, no
    WARNING or ERROR beyond it, no retries (the configured back-off alone would take 2 + 4 + 8 s)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = _config(tmp_path, workspace.data_dir,
                     f'[ingest]\noffline = false\neutils_base_url = "{closed}"\ncrossref_base_url = "{closed}"\n')  # fmt: skip
    csv_path = write_demo_subset(tmp_path / "ppi_head.csv", demo_rows()[:ROWS])
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ra_agent.cli", "--config", str(config), "screen", "--from",
                           str(csv_path), "--next", "2"], env=_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=900)  # fmt: skip
    warm_cache(workspace, cache_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    loud = [line for line in done.stderr.splitlines()
            if re.search(r"\b(WARNING|ERROR|Traceback)\b|^ra: (warning|error):", line)]  # fmt: skip
    assert len(loud) == 1 and "cannot be reached" in loud[0] and "offline" in loud[0], loud
    assert "provisional: offline" in done.stdout and "ppi_head.csv: 0 of 60 screened" in done.stdout
    assert "retrying" not in done.stderr and "No module named" not in done.stderr
    assert time.monotonic() - started < 600
