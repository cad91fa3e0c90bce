"""Import reviewers' search exports (CSV, RIS, MEDLINE text, PubMed XML) into the store, reporting bad records."""

from __future__ import annotations

import csv
import gzip
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import rispy

from ra_agent.config import Config
from ra_agent.fileio import InputError, check_regular_file, check_text_file
from ra_agent.ingest.baseline import LoadSummary, store_records
from ra_agent.ingest.medline import (
    XmlItem,
    as_pmid,
    clean,
    iter_pubmed_xml,
    parse_medline_text,
    split_labelled_abstract,
    year_of,
)
from ra_agent.models import Paper, ParseProblem, doi_id, normalise_doi
from ra_agent.store.db import Store

log = logging.getLogger(__name__)

# Canonical field → accepted CSV header spellings (compared lower-case, non-alphanumerics as "_").
CSV_COLUMNS: dict[str, tuple[str, ...]] = {
    "pmid": ("pubmedid", "pmid", "pubmed_id", "pubmed"),
    "title": ("title", "article_title", "primary_title", "ti"),
    "abstract": ("abstract", "ab"),
    "authors": ("authors", "author", "au"),
    "year": ("year", "publication_year", "pubyear", "py"),
    "doi": ("doi",),
    "journal": ("journal", "journal_name", "source_title", "ta"),
    "mesh": ("mesh", "mesh_terms", "mesh_headings", "keywords", "mh"),
    "pub_types": ("publication_types", "publication_type", "pub_types", "pt"),
}
FORMATS = {".csv": "csv", ".ris": "ris", ".txt": "medline", ".nbib": "medline", ".medline": "medline", ".xml": "xml"}
RIS_TYPES = {
    "JOUR": "Journal Article",
    "BOOK": "Book",
    "CHAP": "Book Chapter",
    "CONF": "Conference Proceeding",
    "CPAPER": "Conference Paper",
    "RPRT": "Report",
    "THES": "Thesis",
}
_PMID_MENTION = re.compile(r"\bPMID:?\s*(\d{1,9})\b|pubmed(?:\.ncbi\.nlm\.nih\.gov)?/(\d{1,9})\b", re.IGNORECASE)
_INITIALS_FIRST = re.compile(r"^((?:[A-Z]\.?\s+)+)(\S.*)$")  # "K D Bardhan", "S. Müller-Lissner"


class ImportFormatError(InputError):
    """An export cannot be read at all (unknown format, missing PMID column, not UTF-8); names the file."""


@dataclass
class ImportSummary(LoadSummary):
    """LoadSummary of one export; `warnings` are records loaded with a field missing or dropped."""

    format: str = ""
    warnings: list[ParseProblem] = field(default_factory=list)


Record = Paper | ParseProblem


@dataclass(frozen=True)
class FieldWarning:
    """A record that loads despite a defect (no title, unreadable year, no closing ER); kept apart from skipped ones."""

    problem: ParseProblem


# ---------------------------------------------------------------------------- small normalisers
def author_name(raw: str) -> str:
    """'K D Bardhan' / 'Bardhan, K. D.' → 'Bardhan KD' (PubMed's "Last Initials"); other shapes unchanged."""
    name = clean(raw)
    last, comma, given = name.partition(",")
    if comma and given.strip():
        initials = "".join(part[0] for part in re.split(r"[\s.\-]+", given) if part)
        return f"{last.strip()} {initials.upper()}"
    if match := _INITIALS_FIRST.match(name):
        return f"{match.group(2)} {re.sub(r'[^A-Z]', '', match.group(1))}"
    return name


def _header_key(header: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", header.strip().lower()).strip("_")


def _lines(path: Path) -> Iterator[str]:
    """The file's lines, streamed (line endings kept; a BOM dropped). check_text_file has vetted the encoding."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        yield from fh


# ---------------------------------------------------------------------------- CSV
def _csv_columns(path: Path, headers: list[str]) -> dict[str, str]:
    """Canonical field → the header this file uses for it; the PMID column is required."""
    by_key = {_header_key(h): h for h in headers if h}
    columns = {}
    for canonical, spellings in CSV_COLUMNS.items():
        header = next((by_key[s] for s in spellings if s in by_key), None)
        if header:
            columns[canonical] = header
    if "pmid" not in columns:
        wanted = ", ".join(CSV_COLUMNS["pmid"])
        raise ImportFormatError(path, f"no PMID column (looked for {wanted}; found {', '.join(headers)})", line=1,
                                field="header")  # fmt: skip
    return columns


def _csv_delimiter(first_line: str) -> str:
    return max(",;\t", key=first_line.count)


def _csv_record(row: dict, columns: dict[str, str], where: str, source: str) -> Iterator[Record | FieldWarning]:
    def value(name: str) -> str:
        header = columns.get(name)
        return clean(row.get(header) or "") if header else ""

    raw_pmid = value("pmid")
    pmid = as_pmid(raw_pmid)
    doi = normalise_doi(value("doi"))
    if pmid is None and not raw_pmid and doi:  # no PMID at all: the DOI-hash id (models.doi_id)
        pmid = doi_id(doi)
        reason = f"{where}: field '{columns['pmid']}' is empty; loaded under DOI id {pmid} ({doi})"
        yield FieldWarning(ParseProblem(pmid, reason, source))
    if pmid is None:
        why = f"{raw_pmid!r} is not a PMID" if raw_pmid else "is empty (and no DOI)"
        yield ParseProblem(None, f"{where}: field '{columns['pmid']}' {why}; row skipped", source)
        return
    title, raw_year = value("title"), value("year")
    year = year_of(raw_year)
    if not title:
        reason = f"{where}: field '{columns.get('title', 'title')}' is empty; loaded as a PMID-only record"
        yield FieldWarning(ParseProblem(pmid, reason, source))
    if raw_year and year is None:
        reason = f"{where}: field '{columns['year']}' {raw_year!r} is not a year; loaded without it"
        yield FieldWarning(ParseProblem(pmid, reason, source))
    abstract = value("abstract")
    yield Paper(
        pmid=pmid,
        title=title,
        abstract=abstract,
        doi=doi,
        journal=value("journal"),
        year=year,
        sections=split_labelled_abstract(abstract),
        authors=[author_name(a) for a in value("authors").split(";") if a.strip()],
        pub_types=[t.strip() for t in value("pub_types").split(";") if t.strip()],
        mesh=mesh_headings(value("mesh").split(";")),
        mesh_terms=qualified_headings(value("mesh").split(";")),
        source=source,
    )


def mesh_headings(values: Iterable[str]) -> list[str]:
    """MeSH descriptors of an export's keyword/MH field: "Anticoagulants/*therapeutic use" → "Anticoagulants"
    (qualifiers and the major-topic star dropped, duplicates once, order kept)."""
    return list(dict.fromkeys(d for d in (v.strip().lstrip("*").split("/")[0].strip() for v in values) if d))


def qualified_headings(values: Iterable[str]) -> list[str]:
    """The keyword/MH entries that carry subheadings or a major-topic star, as written ("Anticoagulants/*therapeutic
    use", "*Fibrin"): what `Paper.mesh_terms` keeps; empty when the export gave bare descriptors only."""
    kept = [" ".join(v.split()) for v in values]
    return kept if any("/" in v or v.startswith("*") for v in kept) else []


def iter_csv(path: Path, *, source_name: str) -> Iterator[Record | FieldWarning]:
    """Rows of a CSV export (demo-corpus columns or common variants) as Papers; bad rows as problems.

    Streams the file line by line (memory flat in file size). A quoted field left open swallows the
    rows after it; such a row is reported (file:line, field) and the rows it swallowed are read again.
    """
    lines = _lines(path)
    first = next((line for line in lines if line.strip()), "")
    if not first.strip():
        raise ImportFormatError(path, "empty file (no header row)", line=1, field="header")
    delimiter = _csv_delimiter(first)
    headers = next(csv.reader([first], delimiter=delimiter), [])
    columns = _csv_columns(path, headers)
    yield from _csv_rows(lines, 2, headers, columns, delimiter, path.name, source_name)


class _PushbackLines:
    """The lines a csv.reader reads: lines given back (of a row found malformed) first, then the file's.

    Records which lines the current row consumed; unlike a generator it can be read again after running
    dry, so lines given back at the end of the file are still read.
    """

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self._given_back: deque[str] = deque()
        self.consumed: list[str] = []

    def __iter__(self) -> _PushbackLines:
        return self

    def __next__(self) -> str:
        text = self._given_back.popleft() if self._given_back else next(self._lines)
        self.consumed.append(text)
        return text

    def give_back(self, lines: list[str]) -> None:
        self._given_back.extendleft(reversed(lines))


def _csv_rows(
    lines: Iterable[str], line: int, headers: list[str], columns: dict[str, str], delimiter: str, name: str,
    source: str,
) -> Iterator[Record | FieldWarning]:  # fmt: skip
    """Parse CSV rows from `lines` (the first is file line `line`); every row is loaded or reported.

    A row whose cells hold a line break is checked: a quote left open (the row runs to the end of the file,
    a stray quote inside the quoted field, or whole rows swallowed) makes it a reported row, and the lines
    after its first are read again as rows of their own. So rows loaded + rows reported = rows in the file.
    """
    feed = _PushbackLines(lines)
    reader = csv.reader(feed, delimiter=delimiter)
    while True:
        feed.consumed.clear()
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. an open quote running past the field size limit
            yield ParseProblem(None, f"{name}:{line}: unreadable CSV row ({exc}); row skipped", source)
            feed.give_back(feed.consumed[1:])
            line += 1
            continue
        consumed = list(feed.consumed)
        if any("\n" in c or "\r" in c for c in cells) and (
            problem := _open_quote(consumed, headers, columns, delimiter)
        ):
            at = next(i for i, c in enumerate(cells) if "\n" in c or "\r" in c)
            column = headers[at] if at < len(headers) else f"cell {at + 1} (past the header's {len(headers)})"
            yield ParseProblem(None, f"{name}:{line}: field '{column}': quote opened and never closed{problem}; "
                                     "row skipped", source)  # fmt: skip
            feed.give_back(consumed[1:])
            line += 1
            continue
        if not any(c.strip() for c in cells):
            pass  # a blank line
        elif len(cells) > len(headers):  # more cells than headers: the row is shifted, its fields are unreliable
            yield ParseProblem(None, f"{name}:{line}: {len(cells) - len(headers)} cells too many; row skipped", source)
        else:
            yield from _csv_record(dict(zip(headers, cells, strict=False)), columns, f"{name}:{line}", source)
        line += len(consumed)


def _open_quote(consumed: list[str], headers: list[str], columns: dict[str, str], delimiter: str) -> str | None:
    """Why a row holding a line break is a quote left open, or None when it is a well-formed multi-line field.

    A well-formed quoted field ends with its closing quote before a delimiter or the row's end, and no line
    after its first reads as a row of its own; a stray quote inside it (the next row's opening quote) or the
    end of the file inside it means the quote was never closed.
    """
    if swallowed := _swallowed_rows(consumed[1:], headers, columns, delimiter):
        return f" (swallowed {swallowed} following row{'s' if swallowed > 1 else ''})"
    try:
        list(csv.reader(consumed, delimiter=delimiter, strict=True))
    except csv.Error as exc:
        ends = "end of data" in str(exc)
        return " (the file ends inside it)" if ends else " (it runs into the next line's quote)"
    return None


def _swallowed_rows(rest: list[str], headers: list[str], columns: dict[str, str], delimiter: str) -> int:
    """How many of the physical lines a multi-line row spans read as rows on their own: more than zero means
    a quote was left open, not a line break inside a field.

    A line reads as a row when, read as CSV or split at every delimiter (its own quotes ignored), it has a
    PMID in the PMID column and at least the header's number of cells. Both readings, because the quote that
    closed the runaway field sits in that line: read as CSV alone, it opens a field running to the line's
    end (fewer cells) or leaves a quoted field unquoted (more cells).
    """
    pmid_at, wanted = headers.index(columns["pmid"]), len(headers)
    whole = 0
    for line in rest:
        quoted = next(csv.reader([line], delimiter=delimiter), [])
        split = line.rstrip("\r\n").split(delimiter)
        if any(len(cells) >= wanted and as_pmid(cells[pmid_at]) is not None for cells in (quoted, split)):
            whole += 1
    return whole


# ---------------------------------------------------------------------------- RIS
def _ris_chunks(lines: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    """(first line, record text, closed by ER) per RIS record; a TY line also ends an open record."""
    start, buf = 0, []
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        tag = line[:2] if line[2:5] == "  -" else ""
        if tag == "TY":
            if buf:
                yield start, "\n".join(buf), False
            start, buf = number, [line]
        elif buf:
            buf.append(line)
            if tag == "ER":
                yield start, "\n".join(buf), True
                buf = []
    if buf:
        yield start, "\n".join(buf), False


def _strings(entry: dict) -> Iterator[str]:
    for value in entry.values():
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, str))
        elif isinstance(value, dict):  # rispy's unknown_tag: {tag: [values]}
            yield from (v for values in value.values() for v in values)


def _ris_pmid(entry: dict) -> int | None:
    """A 'PMID: n' note or PubMed URL anywhere, else a numeric accession number (AN) or ID."""
    for text in _strings(entry):
        if match := _PMID_MENTION.search(text):
            return as_pmid(match.group(1) or match.group(2))
    return as_pmid(entry.get("accession_number")) or as_pmid(entry.get("id"))


def _first(entry: dict, *keys: str) -> str:
    for key in keys:
        value = entry.get(key)
        if isinstance(value, list):
            value = value[0] if value else ""
        if value and (text := clean(value)):
            return text
    return ""


def _ris_record(entry: dict, where: str, source: str) -> Iterator[Record | FieldWarning]:
    pmid = _ris_pmid(entry)
    doi = normalise_doi(_first(entry, "doi"))
    if pmid is None and doi:  # the DOI-hash id (models.doi_id)
        pmid = doi_id(doi)
        reason = f"{where}: no PMID (fields AN, ID or a 'PMID:' note); loaded under DOI id {pmid} ({doi})"
        yield FieldWarning(ParseProblem(pmid, reason, source))
    if pmid is None:
        yield ParseProblem(None, f"{where}: no PMID (fields AN, ID or a 'PMID:' note) and no DOI (DO); record skipped",
                           source)  # fmt: skip
        return
    title = _first(entry, "title", "primary_title")
    if not title:
        yield FieldWarning(
            ParseProblem(pmid, f"{where}: field TI/T1 (title) is empty; loaded as a PMID-only record", source)
        )
    raw_year = _first(entry, "year", "publication_year", "date")
    year = year_of(raw_year)
    if raw_year and year is None:
        yield FieldWarning(
            ParseProblem(pmid, f"{where}: field PY/Y1 {raw_year!r} is not a year; loaded without it", source)
        )
    abstract = _first(entry, "abstract", "notes_abstract")
    kind = _first(entry, "type_of_reference")
    authors = entry.get("authors") or entry.get("first_authors") or []
    yield Paper(
        pmid=pmid,
        title=title,
        abstract=abstract,
        doi=doi,
        journal=_first(entry, "journal_name", "secondary_title", "alternate_title3", "alternate_title1"),
        year=year,
        pub_types=[RIS_TYPES.get(kind, kind)] if kind else [],
        mesh=mesh_headings(entry.get("keywords") or []),
        mesh_terms=qualified_headings(entry.get("keywords") or []),
        sections=split_labelled_abstract(abstract),
        authors=[author_name(a) for a in authors if clean(a)],
        source=source,
    )


def iter_ris(path: Path, *, source_name: str) -> Iterator[Record | FieldWarning]:
    """Records of a RIS export (parsed with rispy) as Papers; records without a PMID as problems."""
    for start, chunk, closed in _ris_chunks(_lines(path)):
        where = f"{path.name}:{start}"
        try:
            entries = rispy.loads(chunk if closed else chunk + "\nER  - \n")
        except Exception as exc:  # one unreadable record must not stop the file
            yield ParseProblem(
                None, f"{where}: unreadable RIS record ({type(exc).__name__}: {exc}); skipped", source_name
            )
            continue
        if not closed:
            yield FieldWarning(
                ParseProblem(None, f"{where}: record not closed by 'ER  -'; read up to the next TY", source_name)
            )
        for entry in entries:
            yield from _ris_record(entry, where, source_name)


# ---------------------------------------------------------------------------- dispatch
def detect_format(path: Path) -> str:
    """'csv', 'ris', 'medline' or 'xml' from the file name (.xml.gz counts as xml); a file without an
    extension is recognised by its first line."""
    name = path.name.lower()
    suffix = ".xml" if name.endswith(".xml.gz") else path.suffix.lower()
    if not suffix and (sniffed := _sniff_format(path)):
        return sniffed
    if suffix not in FORMATS:
        known = ", ".join([*FORMATS, ".xml.gz"])
        what = f"unknown export format '{suffix}'" if suffix else "no file extension and not recognisable"
        raise ImportFormatError(path, f"{what} (known: {known})", field="format")
    return FORMATS[suffix]


def _sniff_format(path: Path) -> str | None:
    """The format a file's first non-blank line announces (RIS TY tag, MEDLINE PMID tag, XML, a CSV header)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).decode("utf-8-sig", errors="replace")
    except OSError:
        return None
    first = next((line.strip() for line in head.splitlines() if line.strip()), "")
    if re.match(r"TY  -", first):
        return "ris"
    if re.match(r"PMID- ?\d", first):
        return "medline"
    if first.startswith("<"):
        return "xml"
    headers = next(csv.reader([first], delimiter=_csv_delimiter(first)), [])
    if any(_header_key(h) in CSV_COLUMNS["pmid"] for h in headers):
        return "csv"
    return None


def _records(path: Path, fmt: str, source: str) -> Iterator[XmlItem | FieldWarning]:
    if fmt == "csv":
        return iter_csv(path, source_name=source)
    if fmt == "ris":
        return iter_ris(path, source_name=source)
    if fmt == "medline":
        return parse_medline_text(path, source_name=source)
    return iter_pubmed_xml(path, source_name=source)


_RIS_END = re.compile(rb"^ER\s+-")
_MEDLINE_PMID = re.compile(rb"^PMID-")
_XML_ARTICLES = (b"<PubmedArticle>", b"<PubmedBookArticle>")


def estimated_records(path: Path, fmt: str) -> int:
    """How many records an export holds, by one quick pass over its bytes: non-blank CSV lines past the header
    (a multi-line field counts each line), RIS `ER  -` lines, MEDLINE `PMID-` lines, PubMed XML article
    elements. The total an import's progress shows, so that it can say how long is left."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:
        if fmt == "xml":  # one line may hold the whole file: count in chunks, keeping a tag cut at a chunk's end
            count, tail = 0, b""
            while chunk := fh.read(1 << 20):
                block = tail + chunk
                count += sum(block.count(tag) for tag in _XML_ARTICLES)
                tail = block[-24:]
                count -= sum(tail.count(tag) for tag in _XML_ARTICLES)  # counted again with the next chunk
            return count + sum(tail.count(tag) for tag in _XML_ARTICLES)
        if fmt == "csv":
            return max(sum(1 for line in fh if line.strip()) - 1, 0)
        start = _RIS_END if fmt == "ris" else _MEDLINE_PMID
        return sum(1 for line in fh if start.match(line))


def import_file(
    store: Store, path: str | Path, cfg: Config, *, progress: Callable[[int, int], None] | None = None
) -> ImportSummary:
    """Import one search export into the store, dispatching on its extension.

    Valid records load even when others are bad: skipped records go to `problems`, records loaded
    with a missing or dropped field (e.g. a PMID-only CSV row) to `warnings`, each naming the file,
    the line and the field. Unreadable files raise ImportFormatError. `progress(stored, total)` is called as
    records are stored, `total` the file's estimated_records (ending at `stored`: problems are not stored).
    """
    path = Path(path)
    if path.name.lower().endswith(".gz"):
        check_regular_file(path, "search export")
    else:
        check_text_file(path, "search export")
    fmt = detect_format(path)
    source = f"import:{path.name}"
    summary = ImportSummary(files=[path.name], format=fmt)

    def records_and_problems() -> Iterator[XmlItem]:
        for item in _records(path, fmt, source):
            if isinstance(item, FieldWarning):
                summary.warnings.append(item.problem)
            else:
                yield item

    total = estimated_records(path, fmt) if progress else 0

    def stored(done: int) -> None:
        if progress:
            progress(done, max(total, done))

    store_records(
        store,
        records_and_problems(),
        source=source,
        batch_size=cfg.embedding.refresh_threshold,
        summary=summary,
        progress=stored,
    )
    if progress:
        progress(summary.stored, summary.stored)
    if summary.warnings:
        log.warning("%s: %d records loaded with a missing or unreadable field", path.name, len(summary.warnings))
    if not (summary.stored or summary.problems or summary.warnings or summary.deleted or summary.skipped_deleted):
        raise ImportFormatError(path, f"no {fmt} records found (is it an empty or a different export?)",
                                field="content")  # fmt: skip
    return summary
