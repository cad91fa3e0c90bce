"""`ra ask` right after `ra import` (no `ra embed`): it embeds what is missing first, or says how many papers it cannot see."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from ra_agent.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
QUESTION = "Does omeprazole heal reflux oesophagitis better than ranitidine?"

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.mark.slow
def test_ask_after_import_embeds_the_missing_papers_first(tmp_path, capsys):
    config = tmp_path / "config.toml"
    config.write_text('[workspace]\ndata_dir = "ws"\ndemo_corpus = ""\n[ingest]\noffline = true\n[llm]\nbrain = "rules"\n'
                      "[mindkb]\nenabled = false\n")  # fmt: skip
    export = tmp_path / "ppi.csv"
    with DEMO.open(encoding="utf-8", newline="") as src:
        export.write_text("".join(line for _, line in zip(range(81), src, strict=False)), encoding="utf-8")
    assert main(["--config", str(config), "import", str(export)]) == 0
    with sqlite3.connect(tmp_path / "ws" / "ra.sqlite") as db:
        with_text = db.execute("SELECT COUNT(*) FROM paper WHERE trim(title || abstract) != ''").fetchone()[0]
    capsys.readouterr()

    assert main(["--config", str(config), "ask", QUESTION, "--no-embed"]) == 0
    out, err = capsys.readouterr()
    assert f"ra: warning: {with_text} papers are not embedded (ra embed)" in err
    assert "Citations: none (the corpus holds no support)" in out
    assert not (tmp_path / "ws" / "emb" / "ACTIVE").exists()

    assert main(["--config", str(config), "ask", QUESTION]) == 0
    out, err = capsys.readouterr()
    assert f"ra ask: {with_text} papers are not embedded yet; embedding them first" in err
    assert f"ra ask: embedded {with_text} papers" in err
    assert "Citations:\n  [PMID:" in out
    assert main(["--config", str(config), "ask", QUESTION]) == 0
    assert "not embedded" not in capsys.readouterr().err  # nothing left to embed
