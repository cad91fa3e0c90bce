"""A record's language of publication, read from every source that says it (PubMed XML, MEDLINE text, RIS, CSV) as
PubMed's codes, on real records; empty where the source does not say."""

import csv
import re
from pathlib import Path

import pytest

from ra_agent.config import Config
from ra_agent.ingest.importers import import_file
from ra_agent.ingest.languages import language_codes
from ra_agent.ingest.medline import iter_pubmed_xml, parse_medline_text
from ra_agent.models import Paper
from ra_agent.store.db import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EUTILS = FIXTURES / "eutils"
MEDLINE = FIXTURES / "medline"
BASELINE = MEDLINE / "pmparser_baseline_pubmed26n1334.xml.gz"
CATHETER = FIXTURES / "gaps" / "CD006468_catheter_subset.csv"  # PubMed's codes in its `language` column


def papers(items) -> list[Paper]:
    return [i for i in items if isinstance(i, Paper)]


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "ra.sqlite") as s:
        yield s


@pytest.fixture(scope="module")
def catheter_rows() -> dict[int, dict]:
    with CATHETER.open(encoding="utf-8-sig", newline="") as fh:
        return {int(r["pubmedID"]): r for r in csv.DictReader(fh)}


def test_codes_and_names_become_pubmeds_codes():
    assert language_codes(["eng"]) == ["eng"] and language_codes(["English"]) == ["eng"]
    assert language_codes(["eng spa"]) == ["eng", "spa"]  # PubMed's export of a record in two languages
    assert language_codes(["English; French", "fre"]) == ["eng", "fre"]
    assert language_codes(["de"]) == language_codes(["deu"]) == language_codes(["German"]) == ["ger"]
    assert language_codes(["en-GB"]) == ["eng"] and language_codes(["pt_BR"]) == ["por"]
    assert language_codes(["und"]) == ["und"]  # PubMed's "undetermined" is what the record says
    assert language_codes(["", "Serbo-Croatian", "Klingon"]) == []  # not one language ra can name: unknown


# ---------------------------------------------------------------------------- PubMed XML
def test_pubmed_xml_reads_the_articles_language_elements():
    baseline = {p.pmid: p for p in papers(iter_pubmed_xml(BASELINE))}
    german = baseline[41605226]  # <Language>ger</Language>; no ArticleTitle, its VernacularTitle in German
    assert german.language == ["ger"] and german.title.startswith("Kommentar zu")
    assert all(p.language == ["eng"] for pmid, p in baseline.items() if pmid != 41605226)
    first, second = papers(iter_pubmed_xml(EUTILS / "pubmed1.xml"))  # efetch answers
    assert (first.pmid, first.language, second.pmid, second.language) == (12091962, ["eng"], 9997, ["eng"])
    (book,) = papers(iter_pubmed_xml(EUTILS / "klortho_efetch.pubmedbook.xml"))  # BookDocument/Language
    assert (book.pmid, book.language) == (20301295, ["eng"])


def test_pubmed_xml_keeps_every_language_in_order_and_none_when_it_names_none():
    xml = (EUTILS / "pubmed4.xml").read_bytes()  # PMID 27797938, <Language>eng</Language>
    two = xml.replace(b"<Language>eng</Language>", b"<Language>eng</Language><Language>fre</Language>")
    none = re.sub(rb"<Language>\w+</Language>", b"", xml)
    assert [p.language for p in papers(iter_pubmed_xml(two))] == [["eng", "fre"]]
    assert [p.language for p in papers(iter_pubmed_xml(none))] == [[]]


# ---------------------------------------------------------------------------- MEDLINE text
def test_medline_text_reads_la():
    four = papers(parse_medline_text(MEDLINE / "biopython_pubmed_result2.txt"))
    assert [(p.pmid, p.language) for p in four] == [(16403221, ["eng"]), (16377612, ["eng"]), (14871861, ["eng"]),
                                                    (14630660, ["eng"])]  # fmt: skip
    text = (MEDLINE / "biopython_pubmed_result1.txt").read_text()  # PMID 12230038, "LA  - eng"
    (two,) = papers(parse_medline_text(text.replace("LA  - eng\n", "LA  - eng\nLA  - ger\n").encode()))
    (none,) = papers(parse_medline_text(text.replace("LA  - eng\n", "").encode()))
    assert (two.language, none.language) == (["eng", "ger"], [])


# ---------------------------------------------------------------------------- CSV and RIS exports
def test_a_csv_language_column_is_read_for_every_row(store, catheter_rows):
    summary = import_file(store, CATHETER, Config())
    assert (summary.inserted, summary.problems) == (420, [])
    stored = {p.pmid: p.language for p in store.papers(list(catheter_rows))}
    assert stored == {pmid: r["language"].split() for pmid, r in catheter_rows.items()}
    assert stored[2411490] == ["ger"]  # "[Fibrin pleurodesis in malignant pleural effusions]", Dtsch Med Wochenschr
    assert stored[26914084] == ["eng", "spa"]  # "eng spa"


def test_a_csv_export_naming_languages_in_english_is_read_as_codes(tmp_path, store, catheter_rows):
    """Embase, Scopus and Web of Science name the language ("English", "German; English")."""
    named = {"eng": "English", "ger": "German", "eng spa": "English; Spanish"}
    picked = [catheter_rows[p] for p in (2411490, 19217991, 26914084)]
    path = tmp_path / "embase.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["PMID", "Title", "Abstract", "Language of Original Document"])
        writer.writerows([r["pubmedID"], r["title"], r["abstract"], named[r["language"]]] for r in picked)
    assert import_file(store, path, Config()).inserted == 3
    assert [store.paper(int(r["pubmedID"])).language for r in picked] == [["ger"], ["eng"], ["eng", "spa"]]


def test_ris_la_lines_are_read(tmp_path, store, catheter_rows):
    german, both = catheter_rows[2411490], catheter_rows[26914084]  # "ger"; "eng spa"

    def record(row: dict, *languages: str) -> str:
        lines = ["TY  - JOUR", f"AN  - {row['pubmedID']}", f"TI  - {row['title']}", f"PY  - {row['year']}",
                 *(f"LA  - {la}" for la in languages), "ER  - "]  # fmt: skip
        return "\n".join(lines) + "\n"

    path = tmp_path / "endnote.ris"
    path.write_text(record(german, "German") + record(both, "eng", "spa"), encoding="utf-8")
    summary = import_file(store, path, Config())
    assert (summary.inserted, summary.problems) == (2, [])
    assert store.paper(2411490).language == ["ger"]
    assert store.paper(26914084).language == ["eng", "spa"]  # two LA lines: both kept
