"""Redraw the evidence-gap map pictures of docs/ from a real run on the bundled demo corpus.

In a scratch workspace: `ra import data/demo/*.csv`, then `ra questions seek_gap_ppi_gerd --map`; copies
its gap_map.png to docs/gap_map.png, opens its gap_map.html in Debian's Chromium (headless, offline), clicks the
handbook's own question and saves the page as docs/gap_map_html.png. The README shows both under the dossier
excerpt (docs/gap_map.md).

    .venv/bin/python scripts/gap_map_pictures.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHROMIUM = "/usr/bin/chromium"


def ra(data_dir: Path, *args: str) -> str:
    env = {**os.environ, "RA_WORKSPACE__DATA_DIR": str(data_dir), "RA_INGEST__OFFLINE": "true"}
    done = subprocess.run([sys.executable, "-m", "ra_agent.cli", "--config", str(ROOT / "config.toml"), *args],
                          env=env, capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
    return done.stdout


def screenshot(html: Path, question_id: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-dev-shm-usage"])  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1700, "height": 1000})
            page.goto(html.as_uri())
            cell = page.locator(f'g.cells_0_marks path[aria-label*="id: {question_id}"]')
            cell.wait_for(timeout=30_000)
            box = cell.bounding_box()
            assert box, "the handbook's question has no mark"
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_selector(f'g.concat_1_marks text[aria-label*="({question_id})"]')
            page.mouse.move(5, 5)
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ra-gap-map-") as scratch:
        data_dir = Path(scratch) / "data"
        ra(data_dir, "import", *map(str, sorted((ROOT / "data" / "demo").glob("*.csv"))))
        printed = ra(data_dir, "questions", "seek_gap_ppi_gerd", "--map")
        folder = Path(re.search(r"^questions.json and one dossier per question: (.+)$", printed, re.M).group(1))
        questions = json.loads((folder / "questions.json").read_text(encoding="utf-8"))["questions"]
        root = next(q for q in questions if q["parent"] is None)
        shutil.copyfile(folder / "gap_map.png", DOCS / "gap_map.png")
        screenshot(folder / "gap_map.html", root["id"], DOCS / "gap_map_html.png")
    print(printed.rstrip())
    print(f"wrote {DOCS / 'gap_map.png'} and {DOCS / 'gap_map_html.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
