"""gap_map.html in a real browser (Debian's Chromium, headless, offline): opened from disk, a hovered cell shows its
question in words and its studies' PMIDs, a clicked cell lists its studies with links to PubMed, and the question
list marks a dossier's cell."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from ra_agent.agent.questions import load_question_set, map_files
from ra_agent.config import Config
from ra_agent.ingest.importers import import_file
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

from .browser_support import CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ROOT / "tests" / "fixtures" / "gaps" / "CD006468_catheter_subset.csv"
HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
PUBMED = "https://pubmed.ncbi.nlm.nih.gov/"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """CD006468's records imported, its handbook's questions and their map drawn: (questions, gap_map.html)."""
    cfg = Config().with_overrides(workspace={"data_dir": str(tmp_path_factory.mktemp("gap_map_ui")), "demo_corpus": ""})
    with Store(Workspace.of(cfg).db_path) as store:
        import_file(store, SUBSET, cfg)
        qset = load_question_set(cfg, store, HANDBOOK)
        files = map_files(cfg, store, qset)
    questions = qset.questions
    assert files.html is not None
    return questions, files.html


def centre(page: Page, selector: str) -> tuple[float, float]:
    box = page.locator(selector).first.bounding_box()
    assert box, f"{selector} is not drawn"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_the_map_opens_from_disk_and_a_cell_shows_its_question_and_studies(drawn, chromium, tmp_path):
    questions, html = drawn
    root = questions[0]
    first = sorted(reports[0] for reports in root.studies.values())
    narrower = next(q for q in questions if q.parent and q.intervention != root.intervention and q.studies)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1500, "height": 1000})
            requests: list[str] = []
            context.on("request", lambda request: requests.append(request.url))
            context.route(f"{PUBMED}**", lambda route: route.fulfill(body="PubMed (offline stand-in)"))
            page = context.new_page()
            page.goto(html.as_uri())
            cell = f'g.cells_0_marks path[aria-label*="id: {root.id}"]'
            page.wait_for_selector(cell, timeout=30_000)
            assert page.locator("g.cells_0_marks path").count() == len(questions)

            page.mouse.move(*centre(page, cell))  # hover: the tooltip names the question and its studies
            tooltip = page.locator("#vg-tooltip-element")
            tooltip.wait_for(state="visible")
            assert root.in_words in tooltip.inner_text() and str(first[0]) in tooltip.inner_text()

            page.mouse.click(*centre(page, cell))  # click: the list of its studies, each a link to PubMed
            study = f'g.concat_1_marks text[aria-label*="url: {PUBMED}{first[-1]}/"]'
            page.wait_for_selector(study)
            listed = page.locator("g.concat_1_marks text").all_text_contents()
            assert listed[0].startswith(root.in_words) and page.locator(cell).get_attribute("stroke-width") == "4"
            page.mouse.move(5, 5)
            page.screenshot(path=str(tmp_path / "gap_map_clicked.png"), full_page=True)
            with page.expect_popup() as opened:
                page.mouse.click(*centre(page, study))
            assert opened.value.url == f"{PUBMED}{first[-1]}/"

            page.select_option("select", narrower.id)  # a dossier's pointer: pick its question, its cell is marked
            page.wait_for_selector(f'g.concat_1_marks text[aria-label*="({narrower.id})"]')
            marked = f'g.cells_0_marks path[aria-label*="id: {narrower.id}"]'
            assert page.locator(marked).get_attribute("stroke-width") == "4"
            assert page.locator(cell).get_attribute("stroke-width") == "0"
            assert [u for u in requests if not u.startswith(("file://", PUBMED))] == []  # nothing fetched: offline
        finally:
            browser.close()
