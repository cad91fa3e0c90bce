"""Import reviewers' search exports (CSV, RIS, MEDLINE text, PubMed XML) into the store, reporting bad records.

The CSV reader is here; RIS is read by `ingest/ris.py`, MEDLINE text and PubMed XML by `ingest/medline.py`."""

from __future__ import annotations

import csv
import functools
import gzip
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ra_agent.config import Config
from ra_agent.fileio import InputError, check_regular_file, check_text_file
from ra_agent.ingest.baseline import LoadSummary, store_records
from ra_agent.ingest.export_fields import (
    FieldWarning,
    Record,
    author_name,
    export_lines,
    mesh_headings,
    qualified_headings,
)
from ra_agent.ingest.languages import language_codes
from ra_agent.ingest.medline import (
    XmlItem,
    as_pmid,
    clean,
    iter_pubmed_xml,
    parse_medline_text,
    split_labelled_abstract,
    year_of,
)
from ra_agent.ingest.ris import iter_ris
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
    "language": ("language", "languages", "lang", "la", "language_of_original_document"),
}
FORMATS = {".csv": "csv", ".ris": "ris", ".txt": "medline", ".nbib": "medline", ".medline": "medline", ".xml": "xml"}


class ImportFormatError(InputError):
    """An export cannot be read at all (unknown format, missing PMID column, not UTF-8); names the file."""


@dataclass
class ImportSummary(LoadSummary):
    """LoadSummary of one export; `warnings` are records loaded with a field missing or dropped."""

    format: str = ""
    warnings: list[ParseProblem] = field(default_factory=list)


# ---------------------------------------------------------------------------- small normalisers
def _header_key(header: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", header.strip().lower()).strip("_")


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
        yield FieldWarning(ParseProblem(pmid, reason, source), defect=False)
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
        language=language_codes([value("language")]),
    )


def iter_csv(path: Path, *, source_name: str) -> Iterator[Record | FieldWarning]:
    """Rows of a CSV export (demo-corpus columns or common variants) as Papers; bad rows as problems.

    Streams the file line by line (memory flat in file size). A quoted field left open swallows the
    rows after it; such a row is reported (file:line, field) and the rows it swallowed are read again.
    """
    lines = export_lines(path)
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
        elif len(cells) != len(headers):  # a quote closed early, a delimiter lost or added: every field is suspect
            yield ParseProblem(None, f"{name}:{line}: {len(cells)} cells where the header has {len(headers)} (a "
                                     "quote or delimiter out of place); row skipped", source)  # fmt: skip
        elif misplaced := _quote_out_of_place(consumed, headers, delimiter):  # cells may be shifted all the same
            yield ParseProblem(None, f"{name}:{line}: {misplaced}; row skipped", source)
        else:
            yield from _csv_record(dict(zip(headers, cells, strict=False)), columns, f"{name}:{line}", source)
        line += len(consumed)


def _quote_out_of_place(consumed: list[str], headers: list[str], delimiter: str) -> str | None:
    """Where a row's quotes break RFC 4180 (a field that holds a quote is quoted whole, its quotes doubled), or None:
    text after a quoted field's closing quote (`"Broken title,"Jones B"`), or a quote inside a field that does not
    start with one. The lenient reader joins the one to the field and keeps the other, and where the text after
    holds delimiters the row can still have the header's number of cells, shifted."""
    text = "".join(consumed)
    if '"' not in text:
        return None
    field = _rfc_field(delimiter)
    at, index = 0, 0
    while True:
        match = field.match(text, at)
        at = match.end() if match else at
        if at < len(text) and text[at] == delimiter:
            at, index = at + 1, index + 1
            continue
        if text[at:].strip("\r\n") == "":
            return None
        column = headers[index] if index < len(headers) else f"cell {index + 1}"
        if text[at] != '"' and match and match.group().startswith('"'):
            return f"field '{column}': its quote closes early (text follows the closing quote)"
        if match and not match.group():
            return f"field '{column}': its quote is never closed"
        return f"field '{column}': a quote inside a field that does not start with one"


@functools.cache
def _rfc_field(delimiter: str) -> re.Pattern[str]:
    """One CSV field as RFC 4180 writes it: quoted whole (quotes doubled, line breaks allowed), or without quotes."""
    d = re.escape(delimiter)
    return re.compile(rf'"(?:[^"]|"")*"|[^"{d}\r\n]*')


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
    the line and the field. A record with such a defect never changes a stored one: it is a problem then,
    and the stored record stays as it is. Unreadable files raise ImportFormatError. `progress(stored, total)` is called as
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
        notes: list[FieldWarning] = []  # the warnings of the record that comes next
        for item in _records(path, fmt, source):
            if isinstance(item, FieldWarning):
                notes.append(item)
                continue
            defects = [n.problem.reason for n in notes if n.defect]
            if isinstance(item, Paper) and defects and store.would_update(item):
                yield ParseProblem(item.pmid, f"{'; '.join(defects)}; PMID {item.pmid} is stored with other content: "
                                              "kept as it is, not updated from this record", source)  # fmt: skip
            else:
                summary.warnings.extend(n.problem for n in notes)
                yield item
            notes = []
        summary.warnings.extend(n.problem for n in notes)

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
        log.info("%s: %d records loaded with a missing or unreadable field", path.name, len(summary.warnings))
    if not (summary.stored or summary.problems or summary.warnings or summary.deleted or summary.skipped_deleted):
        raise ImportFormatError(path, f"no {fmt} records found (is it an empty or a different export?)",
                                field="content")  # fmt: skip
    return summary
