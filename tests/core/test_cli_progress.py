"""The CLI's progress bar on a long step: the count, the rate and the time left, once the total is known."""

from __future__ import annotations

import re

from demo_corpus import DEMO, demo_rows

from ra_agent.cli import progress_bar
from ra_agent.config import Config
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store

# one tqdm frame: "<n>/<total> [<elapsed><<left>, <rate>rec/s]"
FRAME = re.compile(r"(\d+)/(\d+) \[(\d\d:\d\d)<(\d\d:\d\d|\?), +([\d.]+|\?)rec/s\]")


def test_the_import_bar_shows_count_rate_and_time_left(tmp_path, capsys, monkeypatch):
    """`ra import` of the bundled export, stored 200 rows a transaction: the bar's total is the file's rows, read
    before the import (so it can say how long is left), and each frame shows how many, how fast and how long."""
    monkeypatch.setenv("RA_PROGRESS", "1")  # shown although stderr is not a terminal here
    with Store(tmp_path / "ra.sqlite", commit_every=200) as store, progress_bar("import demo") as bar:
        summary = import_file(store, DEMO, Config(), progress=bar)
    frames = [FRAME.search(f) for f in re.split(r"[\r\n]", capsys.readouterr().err) if "import demo" in f]
    counts = [(int(m[1]), int(m[2])) for m in frames if m]
    rows = len(demo_rows())
    assert summary.stored == rows
    # after each transaction, then the end (drawn again as the bar closes)
    assert list(dict.fromkeys(n for n, _ in counts)) == list(range(200, rows, 200)) + [rows]
    assert {total for _, total in counts} == {rows}  # the total from the first frame on
    timed = [m for m in frames if m and m[4] != "?" and m[5] != "?"]  # time left and rate, once measured
    assert len(timed) >= len(counts) - 1 and all(float(m[5]) > 0 for m in timed)
