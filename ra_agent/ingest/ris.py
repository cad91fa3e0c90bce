"""RIS exports (EndNote, Zotero, Rayyan...): records parsed with rispy, each loaded as a Paper or reported by its
line, never stored shifted or cut short."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import rispy

from ra_agent.ingest.export_fields import (
    FieldWarning,
    Record,
    author_name,
    export_lines,
    mesh_headings,
    qualified_headings,
)
from ra_agent.ingest.languages import language_codes
from ra_agent.ingest.medline import as_pmid, clean, split_labelled_abstract, year_of
from ra_agent.models import Paper, ParseProblem, doi_id, normalise_doi

RIS_TYPES = {
    "JOUR": "Journal Article",
    "BOOK": "Book",
    "CHAP": "Book Chapter",
    "CONF": "Conference Proceeding",
    "CPAPER": "Conference Paper",
    "RPRT": "Report",
    "THES": "Thesis",
}
# rispy's repeatable tags, and LA: a record in two languages has two LA lines
RIS_LIST_TAGS = [*rispy.LIST_TYPE_TAGS, "LA"]
_PMID_MENTION = re.compile(r"\bPMID:?\s*(\d{1,9})\b|pubmed(?:\.ncbi\.nlm\.nih\.gov)?/(\d{1,9})\b", re.IGNORECASE)
_RIS_TAG_LIKE = re.compile(r"^[A-Z][A-Z0-9]\s{0,4}-(\s|$)")  # "TI -  x", "TI- x": a tag line bent out of shape


@dataclass(frozen=True)
class _RisChunk:
    """One RIS record's lines from its TY line (`start`), and what ended it: "ER", the next "TY", or "EOF"; or,
    with `orphan`, tag lines no TY line opened (its TY line lost), lines `start`-`end`."""

    start: int
    end: int
    lines: list[str]
    ended_by: str
    orphan: bool = False


def _ris_chunks(lines: Iterable[str]) -> Iterator[_RisChunk]:
    """The file's records in order, and the runs of tag lines outside any record (a TY line lost)."""
    start, buf, stray, stray_start = 0, [], 0, 0
    number = 0
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        tag = line[:2] if line[2:5] == "  -" else ""
        if tag == "TY":
            if buf:
                yield _RisChunk(start, number - 1, buf, "TY")
            if stray:
                yield _RisChunk(stray_start, stray, [], "", orphan=True)
                stray = 0
            start, buf = number, [line]
        elif buf:
            buf.append(line)
            if tag == "ER":
                yield _RisChunk(start, number, buf, "ER")
                buf = []
        elif tag and tag != "ER" or (not tag and _RIS_TAG_LIKE.match(line)):
            stray_start, stray = stray_start if stray else number, number
    if buf:
        yield _RisChunk(start, number, buf, "EOF")
    if stray:
        yield _RisChunk(stray_start, stray, [], "", orphan=True)


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


def _values(entry: dict, key: str) -> list[str]:
    """Every value of a field (rispy gives a list for the tags in `RIS_LIST_TAGS`, else a string)."""
    value = entry.get(key)
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _ris_record(entry: dict, where: str, source: str) -> Iterator[Record | FieldWarning]:
    pmid = _ris_pmid(entry)
    doi = normalise_doi(_first(entry, "doi"))
    if pmid is None and doi:  # the DOI-hash id (models.doi_id)
        pmid = doi_id(doi)
        reason = f"{where}: no PMID (fields AN, ID or a 'PMID:' note); loaded under DOI id {pmid} ({doi})"
        yield FieldWarning(ParseProblem(pmid, reason, source), defect=False)
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
        language=language_codes(_values(entry, "language")),
    )


def iter_ris(path: Path, *, source_name: str) -> Iterator[Record | FieldWarning]:
    """Records of a RIS export (parsed with rispy) as Papers; records without a PMID as problems.

    A record is skipped and reported (file:line) when the file ends inside it (no closing ER: cut short?), when one
    of its lines looks like a tag bent out of shape (rispy would append it to the field before), and the tag lines
    of a record whose TY line was lost are reported as one; a record closed by the next TY instead of ER loads with a
    warning."""
    for chunk in _ris_chunks(export_lines(path)):
        where = f"{path.name}:{chunk.start}"
        if chunk.orphan:
            yield ParseProblem(None, f"{where}: lines {chunk.start}-{chunk.end} hold RIS fields outside any record (no "
                                     "'TY  -' line opens them); skipped", source_name)  # fmt: skip
            continue
        if chunk.ended_by == "EOF":
            yield ParseProblem(None, f"{where}: the file ends inside this record (no closing 'ER  -': cut short?); "
                                     "record skipped", source_name)  # fmt: skip
            continue
        bent = next((n for n, line in enumerate(chunk.lines[1:], chunk.start + 1)
                     if line[2:5] != "  -" and _RIS_TAG_LIKE.match(line)), None)  # fmt: skip
        if bent is not None:
            shown = chunk.lines[bent - chunk.start][:40]
            yield ParseProblem(None, f"{path.name}:{bent}: {shown!r} is not a RIS tag line (tags read 'XX  - value'); "
                                     f"record of line {chunk.start} skipped", source_name)  # fmt: skip
            continue
        text = "\n".join(chunk.lines)
        try:
            entries = rispy.loads(text if chunk.ended_by == "ER" else text + "\nER  - \n", list_tags=RIS_LIST_TAGS)
        except Exception as exc:  # one unreadable record must not stop the file
            yield ParseProblem(
                None, f"{where}: unreadable RIS record ({type(exc).__name__}: {exc}); skipped", source_name
            )
            continue
        if chunk.ended_by == "TY":
            yield FieldWarning(
                ParseProblem(None, f"{where}: record not closed by 'ER  -'; read up to the next TY", source_name)
            )
        for entry in entries:
            yield from _ris_record(entry, where, source_name)


__all__ = ["RIS_TYPES", "iter_ris"]
