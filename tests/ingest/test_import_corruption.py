"""Nothing stored wrong: a row or record bent out of shape is reported (file:line) and never stored, and never
changes a record already stored. The issue's CSV bytes, then seeded corruption of real records in every import
format: records stored + records reported = records in the file, and every stored field equals its source."""

from __future__ import annotations

import csv
import functools
import gzip
import io
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from ra_agent.cli import main
from ra_agent.config import Config
from ra_agent.ingest.importers import import_file
from ra_agent.models import Paper
from ra_agent.store.db import Store

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
BASELINE_XML = ROOT / "tests" / "fixtures" / "medline" / "pmparser_baseline_pubmed26n1334.xml.gz"
HEADER = "record_id,pubmedID,title,authors,abstract,year"
# the issue's file: the title's quote closes early, so the row reads as 5 cells under a header of 6
ISSUE_ROW = b'2,48880002,"Broken title,"Jones B",An abstract.,2021\n'
GOOD_ROW = b"1,48880002,Good title,Smith A,A good abstract.,2020\n"
FIELDS = ("title", "abstract", "authors", "year", "journal", "doi", "mesh", "pub_types")


def fields(paper: Paper) -> tuple:
    return tuple(getattr(paper, name) for name in FIELDS)


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "ra.sqlite") as s:
        yield s


def test_the_issues_shifted_row_is_reported_and_never_overwrites_the_stored_record(tmp_path, capsys):
    config = tmp_path / "config.toml"
    config.write_text('[workspace]\ndata_dir = "ws"\ndemo_corpus = ""\n')
    good, broken = tmp_path / "good.csv", tmp_path / "broken.csv"
    good.write_bytes(HEADER.encode() + b"\n" + GOOD_ROW)
    broken.write_bytes(HEADER.encode() + b"\n" + ISSUE_ROW)
    assert main(["--config", str(config), "import", str(good)]) == 0
    capsys.readouterr()
    assert main(["--config", str(config), "import", str(broken)]) == 2  # bad input: some rows were not stored
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == f"{broken}: 0 new, 0 updated, 0 unchanged, 1 problems"
    assert "broken.csv:2: 5 cells where the header has 6 (a quote or delimiter out of place); row skipped" in err
    with Store(tmp_path / "ws" / "ra.sqlite") as store:
        paper = store.paper(48880002)
        assert paper is not None
        stored = (paper.title, paper.authors, paper.abstract, paper.year)
        assert stored == ("Good title", ["Smith A"], "A good abstract.", 2020)


def test_a_row_with_fewer_cells_than_the_header_is_reported(tmp_path, store):
    path = tmp_path / "short.csv"
    path.write_bytes(HEADER.encode() + b"\n" + GOOD_ROW + b"3,48880003,A title only\n")
    summary = import_file(store, path, Config())
    assert [p.reason for p in summary.problems] == [
        "short.csv:3: 3 cells where the header has 6 (a quote or delimiter out of place); row skipped"
    ]
    assert (summary.inserted, store.paper(48880003)) == (1, None)


def test_a_record_with_a_defect_loads_when_new_but_never_changes_a_stored_one(tmp_path, store):
    """A row whose year is unreadable loads without its year as a new record (with a warning); the same row
    does not erase the year of a record stored before: it is a problem, and the stored record stays."""
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    second.write_bytes(HEADER.encode() + b"\n1,48880002,Good title,Smith A,A good abstract.,n.d.\n")
    new = import_file(store, second, Config())
    assert (new.inserted, len(new.warnings), new.problems) == (1, 1, [])
    assert store.paper(48880002).year is None
    with Store(tmp_path / "other.sqlite") as other:
        first.write_bytes(HEADER.encode() + b"\n" + GOOD_ROW)
        import_file(other, first, Config())
        again = import_file(other, second, Config())
        assert (again.updated, again.warnings) == (0, [])
        assert [p.reason for p in again.problems] == [
            "second.csv:2: field 'year' 'n.d.' is not a year; loaded without it; PMID 48880002 is stored with other "
            "content: kept as it is, not updated from this record"
        ]
        assert other.paper(48880002).year == 2020


# ---------------------------------------------------------------------------- seeded corruption, every format
@functools.cache
def demo_rows() -> list[dict]:
    """The real demo rows with a title, an abstract and a year (the fields every format carries)."""
    with DEMO.open(encoding="utf-8", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["title"] and r["abstract"] and r["year"]]


def demo_records(n: int, rng: random.Random) -> list[dict]:
    rows = demo_rows()
    start = rng.randrange(len(rows) - n)
    return rows[start : start + n]


def csv_cell(text: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([text])
    return out.getvalue()


def corrupt_csv(rows: list[dict], rng: random.Random, bad: set[int]) -> str:
    """The rows as CSV; each row in `bad` bent one way: the issue's early-closing quote, a delimiter lost or added,
    a quote opened and never closed, or its last cells cut off."""
    lines = [HEADER]
    for i, r in enumerate(rows):
        cells = [csv_cell(v) for v in (r["record_id"], r["pubmedID"], r["title"], r["authors"], r["abstract"],
                                       r["year"])]  # fmt: skip
        if i in bad:
            how = rng.choice(("early_quote", "lose_delimiter", "add_delimiter", "open_quote", "cut_cells"))
            if how == "early_quote":  # `"Broken title,"Jones B"`: the title's quote closes before the authors'
                cells[2:4] = [f'"{r["title"].replace(chr(34), "")},"{r["authors"].replace(chr(34), "")}"']
                line = ",".join(cells)
            elif how == "lose_delimiter":
                at = rng.randrange(2, 5)
                cells[at : at + 2] = [cells[at] + cells[at + 1]]
                line = ",".join(cells)
            elif how == "add_delimiter":
                cells.insert(rng.randrange(2, 6), "")
                line = ",".join(cells)
            elif how == "open_quote":
                cells[2] = '"' + r["title"].replace('"', "")
                line = ",".join(cells)
            else:
                line = ",".join(cells[: rng.randrange(2, 6)])
        else:
            line = ",".join(cells)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _tagged(tags: list[tuple[str, str]], form: str) -> list[str]:
    return [f"{tag}  - {value}" if form == "ris" else f"{tag:<4}- {value}" for tag, value in tags]


def corrupt_ris(rows: list[dict], rng: random.Random, bad: set[int]) -> str:
    """The rows as RIS records; each in `bad` loses its TY or its PMID (AN), has a tag bent ("TI -"), or (the last
    record only) the file is cut inside it."""
    lines: list[str] = []
    for i, r in enumerate(rows):
        tags = [("TY", "JOUR"), ("AN", r["pubmedID"]), ("TI", r["title"]), ("AB", r["abstract"]),
                ("PY", r["year"][:4]), ("ER", "")]  # fmt: skip
        record = _tagged(tags, "ris")
        if i in bad:
            how = rng.choice(("lose_ty", "lose_an", "bend_tag", *(("cut",) if i == len(rows) - 1 else ())))
            if how == "lose_ty":
                record = record[1:]
            elif how == "lose_an":
                record = [record[0], *record[2:]]
            elif how == "bend_tag":
                at = rng.choice((2, 3, 4))
                record[at] = record[at][:2] + " -" + record[at][5:]
            else:
                record = record[:3] + [record[3][: len(record[3]) // 2]]  # the file ends inside the abstract
        lines += [*record, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def corrupt_medline(rows: list[dict], rng: random.Random, bad: set[int]) -> str:
    """The rows as MEDLINE (nbib) records; each in `bad` loses its PMID or TI line, or has a tag bent ("TI -")."""
    lines: list[str] = []
    for i, r in enumerate(rows):
        tags = [("PMID", r["pubmedID"]), ("TI", r["title"]), ("AB", r["abstract"]), ("DP", r["year"][:4])]
        record = _tagged(tags, "medline")
        if i in bad:
            how = rng.choice(("lose_pmid", "lose_ti", "bend_tag"))
            if how == "lose_pmid":
                record = record[1:]
            elif how == "lose_ti":
                record = [record[0], *record[2:]]
            else:
                at = rng.choice((1, 2, 3))
                record[at] = record[at][:2] + " - " + record[at][6:]
        lines += [*record, ""]
    return "\n".join(lines)


def corrupt_xml(articles: list[str], head: str, rng: random.Random, bad: set[int]) -> str:
    """Real PubMed articles; each in `bad` has its PMID emptied or its ArticleTitle removed, or (the last article
    only) the file is cut inside it."""
    out = []
    for i, article in enumerate(articles):
        if i in bad:
            how = rng.choice(("empty_pmid", "lose_title", *(("cut",) if i == len(articles) - 1 else ())))
            if how == "empty_pmid":
                start = article.index('<PMID Version="1">') + len('<PMID Version="1">')
                article = article[:start] + article[article.index("</PMID>", start) :]
            elif how == "lose_title":
                start = article.index("<ArticleTitle>")
                article = article[:start] + article[article.index("</ArticleTitle>") + len("</ArticleTitle>") :]
            else:
                return head + "".join(out) + article[: len(article) // 2]
        out.append(article)
    return head + "".join(out) + "</PubmedArticleSet>\n"


@functools.cache
def xml_articles() -> tuple[str, list[str]]:
    text = gzip.decompress(BASELINE_XML.read_bytes()).decode("utf-8")
    head, _, rest = text.partition("<PubmedArticle>")
    body = rest.rsplit("</PubmedArticleSet>", 1)[0]
    return head, ["<PubmedArticle>" + part for part in body.split("<PubmedArticle>")]


def write(tmp_path: Path, fmt: str, seed: int, make: Callable[[set[int]], str]) -> tuple[Path, Path]:
    """The clean file and the corrupted file (the same records, the same order) for one seed."""
    suffix = {"csv": ".csv", "ris": ".ris", "medline": ".nbib", "xml": ".xml"}[fmt]
    rng = random.Random(seed)
    bad = set(rng.sample(range(12), rng.randint(1, 4)))
    clean, corrupted = tmp_path / f"clean{suffix}", tmp_path / f"corrupt{suffix}"
    clean.write_text(make(set()), encoding="utf-8")
    corrupted.write_text(make(bad), encoding="utf-8")
    return clean, corrupted


def makers(fmt: str, seed: int) -> Callable[[set[int]], str]:
    rng_rows = random.Random(seed)
    if fmt == "xml":
        head, articles = xml_articles()
        start = rng_rows.randrange(len(articles) - 12)
        picked = articles[start : start + 12]
        return lambda bad: corrupt_xml(picked, head, random.Random(seed + 1), bad)
    rows = demo_records(12, rng_rows)
    write_fmt = {"csv": corrupt_csv, "ris": corrupt_ris, "medline": corrupt_medline}[fmt]
    return lambda bad: write_fmt(rows, random.Random(seed + 1), bad)


@pytest.mark.parametrize("fmt", ["csv", "ris", "medline", "xml"])
def test_seeded_corruption_stores_nothing_wrong(tmp_path, fmt):
    """20 files per format, 12 real records each, 1-4 of them bent at random: in a fresh store every record is
    stored or reported (stored + reported = records in the file) and every stored record equals its clean
    source; imported over the clean records, no stored field changes."""
    cfg = Config()
    for seed in range(20):
        clean, corrupted = write(tmp_path, fmt, seed, makers(fmt, seed))
        with Store(tmp_path / f"clean-{seed}.sqlite") as store:
            clean_summary = import_file(store, clean, cfg)
            assert clean_summary.problems == [] and clean_summary.inserted == 12, (seed, clean_summary.problems)
            source = {p: fields(store.paper(p)) for p in store.all_pmids()}
            summary = import_file(store, corrupted, cfg)  # over the clean records: nothing may change
            assert summary.updated == 0, (seed, [p.reason for p in summary.problems])
            assert {p: fields(store.paper(p)) for p in store.all_pmids()} == source, seed
        with Store(tmp_path / f"fresh-{seed}.sqlite") as fresh:
            summary = import_file(fresh, corrupted, cfg)
            stored = fresh.all_pmids()
            reasons = [p.reason for p in summary.problems]
            assert len(stored) + len(reasons) == 12, (seed, reasons)
            assert all(fields(fresh.paper(p)) == source[p] for p in stored), seed
        for path in tmp_path.glob("*.sqlite*"):
            path.unlink()
