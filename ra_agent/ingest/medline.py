"""Streaming PubMed parser: efetch/baseline/update XML and the MEDLINE text format into Paper records."""

from __future__ import annotations

import gzip
import io
import logging
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import BinaryIO

import lxml.etree as etree

from ra_agent.ingest.languages import language_codes
from ra_agent.models import AbstractSection, Deletion, Paper, ParseProblem, Reference, normalise_doi

log = logging.getLogger(__name__)

Source = str | os.PathLike | bytes | BinaryIO
XmlItem = Paper | Deletion | ParseProblem

GZIP_MAGIC = b"\x1f\x8b"
MATHML = "{http://www.w3.org/1998/Math/MathML}"
MATHML_TEXT = MATHML + "mtext"
RECORD_TAGS = ("PubmedArticle", "PubmedBookArticle", "DeleteCitation")
ARTICLE_SET_TAGS = ("PubmedArticleSet", "PubmedBookArticleSet")
MAX_PMID = 999_999_999  # PMIDs are positive integers of at most nine digits

_YEAR = re.compile(r"\b(1[6-9]\d\d|2\d\d\d)\b")
# A structured-abstract label in running text: "BACKGROUND: ", "MATERIALS AND METHODS: ", at the
# start or after a sentence end (the MEDLINE text format flattens AbstractText labels this way).
_TEXT_LABEL = re.compile(r"(?:^|(?<=[.?!] ))([A-Z][A-Z0-9 ,&/()'-]{1,60}[A-Z)]): ")


# ---------------------------------------------------------------------------- shared field helpers
def as_pmid(value: object) -> int | None:
    """A PMID from text or int: a positive integer of at most nine digits, else None."""
    text = str(value).strip() if value is not None else ""
    if text.endswith(".0"):  # spreadsheets write integer columns as floats
        text = text[:-2]
    if not text.isascii() or not text.isdigit():
        return None
    pmid = int(text)
    return pmid if 0 < pmid <= MAX_PMID else None


def year_of(text: str | None) -> int | None:
    """The first plausible four-digit year in a date string ("2019 Jan-Feb", "1999.0", "2003///")."""
    if not text:
        return None
    match = _YEAR.search(text)
    return int(match.group(1)) if match else None


def clean(text: str | None) -> str:
    """Collapse runs of whitespace (newlines, tabs, indentation) to single spaces."""
    return " ".join(text.split()) if text else ""


def join_sections(sections: Iterable[AbstractSection]) -> str:
    """The abstract as one string, each labelled section as "LABEL: text"."""
    return " ".join(f"{s.label}: {s.text}" if s.label else s.text for s in sections)


def split_labelled_abstract(abstract: str) -> list[AbstractSection]:
    """Sections of an abstract flattened as "BACKGROUND: ... METHODS: ..." (one unlabelled section otherwise)."""
    abstract = clean(abstract)
    if not abstract:
        return []
    matches = list(_TEXT_LABEL.finditer(abstract))
    if not matches or matches[0].start() != 0:
        return [AbstractSection("", abstract)]
    sections = []
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(abstract)
        sections.append(AbstractSection(match.group(1), abstract[match.end() : end].strip()))
    return sections


# ---------------------------------------------------------------------------- opening sources
def _starts_with_gzip(raw: BinaryIO) -> bool:
    if peek := getattr(raw, "peek", None):
        return peek(2)[:2] == GZIP_MAGIC
    if raw.seekable():
        start = raw.tell()
        head = raw.read(2)
        raw.seek(start)
        return head == GZIP_MAGIC
    return False


class GuardedReader(io.RawIOBase):
    """A read-only stream that ends quietly where its source fails (truncated gzip, corrupt data).

    Everything readable before the failure is delivered, so a parser keeps every complete record;
    the failure is kept in `error` for the caller to report.
    """

    def __init__(self, stream: io.IOBase | BinaryIO):
        super().__init__()
        # read1 returns what one underlying read yields, so bytes decoded before a failure are not dropped
        self._read = getattr(stream, "read1", stream.read)
        self.error: Exception | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.error is not None:
            return 0
        try:
            data = self._read(len(buffer))
        except (EOFError, OSError, zlib.error) as exc:
            self.error = exc
            return 0
        buffer[: len(data)] = data
        return len(data)


@contextmanager
def open_binary(source: Source) -> Iterator[tuple[GuardedReader, str]]:
    """A guarded binary stream over a path, bytes or binary file object, gunzipped when gzip; and a display name."""
    with ExitStack() as stack:
        if isinstance(source, bytes | bytearray):
            raw, name = io.BytesIO(source), "<bytes>"
        elif isinstance(source, str | os.PathLike):
            raw, name = stack.enter_context(open(source, "rb")), os.fspath(source)
        else:
            raw, name = source, str(getattr(source, "name", "<stream>"))
        stream = stack.enter_context(gzip.GzipFile(fileobj=raw)) if _starts_with_gzip(raw) else raw
        yield GuardedReader(stream), name


def _stream_problem(
    stream: GuardedReader, display: str, count: int, source: str, xml_error: etree.XMLSyntaxError | None = None
) -> ParseProblem:
    """The ParseProblem that ends a stream cut short: unreadable (compressed) data, else bad XML."""
    if xml_error is None or stream.error is not None:
        reason = f"{display}: data ends early or is corrupt ({type(stream.error).__name__}: {stream.error})"
    else:
        line, column = xml_error.position
        # libxml2's message may end with the position again (", line 5, column 35"): said once
        detail = re.sub(r",?\s*line \d+, column \d+\s*$", "", xml_error.msg)
        reason = f"{display}: not well-formed XML at line {line}, column {column} ({detail})"
    log.warning("%s after %d records; rest of the input skipped", reason, count)
    return ParseProblem(None, f"{reason}; {count} records read before it, the rest skipped", source)


def _default_source_name(source: Source, fallback: str) -> str:
    if isinstance(source, str | os.PathLike):
        return f"file:{os.path.basename(os.fspath(source))}"
    return fallback


# ---------------------------------------------------------------------------- XML text content
def _text(elem) -> str:
    """All text inside an element with inline markup dropped and MathML flattened; whitespace collapsed."""
    if elem is None:
        return ""
    if len(elem) == 0:
        return clean(elem.text)
    parts: list[str] = []
    _collect_text(elem, parts)
    return clean("".join(parts))


def _collect_text(elem, parts: list[str]) -> None:
    if elem.text:
        parts.append(elem.text)
    for child in elem:
        tag = child.tag
        if isinstance(tag, str):  # skip comments and processing instructions, keep their tails
            if tag.startswith(MATHML):
                parts.append(_math_text(child))
            else:
                _collect_text(child, parts)
        if child.tail:
            parts.append(child.tail)


def _math_text(math) -> str:
    """MathML as its tokens run together ("VO2max", "He3/Xe129 MRI"); indentation between tags is dropped."""
    tokens = []
    for node in math.iter():
        text = node.text
        if text:
            token = text.strip()
            tokens.append(token if token or node.tag != MATHML_TEXT else " ")
    return "".join(tokens)


def _texts(elems: Iterable) -> list[str]:
    return [text for elem in elems if (text := _text(elem))]


def _mesh_terms(headings: Iterable) -> list[str]:
    """MeshHeading elements in MEDLINE's MH form: "Venous Thrombosis/diagnostic imaging/*etiology" ("*" before a
    descriptor or subheading whose MajorTopicYN is Y)."""
    out = []
    for heading in headings:
        descriptor = heading.find("DescriptorName")
        if descriptor is None or not (name := _text(descriptor)):
            continue
        parts = [("*" if descriptor.get("MajorTopicYN") == "Y" else "") + name]
        parts += [("*" if q.get("MajorTopicYN") == "Y" else "") + text
                  for q in heading.iterfind("QualifierName") if (text := _text(q))]  # fmt: skip
        out.append("/".join(parts))
    return out


# ---------------------------------------------------------------------------- XML record parts
def _abstract(abstract) -> tuple[list[AbstractSection], str]:
    """Sections keep NlmCategory (else Label); the joined text shows the Label the article prints."""
    if abstract is None:
        return [], ""
    sections, shown = [], []
    for node in abstract.iterfind("AbstractText"):
        text = _text(node)
        if not text:
            continue
        label = clean(node.get("Label"))
        category = node.get("NlmCategory")
        sections.append(AbstractSection(category if category and category != "UNASSIGNED" else label, text))
        shown.append(AbstractSection(label or sections[-1].label, text))
    return sections, join_sections(shown)


def _authors(author_list) -> list[str]:
    if author_list is None:
        return []
    names = []
    for author in author_list.iterfind("Author"):
        if author.get("ValidYN") == "N":
            continue
        last = clean(author.findtext("LastName"))
        if last:
            initials = clean(author.findtext("Initials"))
            names.append(f"{last} {initials}" if initials else last)
        elif collective := _text(author.find("CollectiveName")):
            names.append(collective)
    return names


def _article_ids(id_list) -> dict[str, str]:
    """IdType → id for one ArticleIdList (first of each type), without the PMID itself."""
    ids: dict[str, str] = {}
    if id_list is not None:
        for node in id_list.iterfind("ArticleId"):
            kind, value = node.get("IdType"), clean(node.text)
            if kind and value and kind != "pubmed":
                ids.setdefault(kind, value)
    return ids


def _elocation_doi(parent) -> str | None:
    for node in parent.iterfind("ELocationID"):
        if node.get("EIdType") == "doi" and node.get("ValidYN", "Y") == "Y":
            return node.text
    return None


def _pubdate_year(pubdate) -> int | None:
    if pubdate is None:
        return None
    return year_of(pubdate.findtext("Year")) or year_of(pubdate.findtext("MedlineDate"))


def _references(container) -> list[Reference]:
    """The ReferenceList entries of a PubmedData or BookDocument element (hot path: plain child loops)."""
    if container is None:
        return []
    refs = []
    for ref in container.iter("Reference"):
        pmid = doi = None
        citation = ""
        for part in ref:
            if part.tag == "Citation":
                citation = _text(part)
            elif part.tag == "ArticleIdList":
                for node in part:
                    kind = node.get("IdType")
                    if kind == "pubmed" and pmid is None:
                        pmid = as_pmid(node.text)
                    elif kind == "doi" and doi is None:
                        doi = normalise_doi(node.text)
        if pmid or doi or citation:
            refs.append(Reference(pmid=pmid, doi=doi, citation=citation))
    return refs


def _journal_article(rec, citation, pmid: int, source: str) -> Paper:
    article = citation.find("Article")
    journal = article.find("Journal")
    data = rec.find("PubmedData")
    ids = _article_ids(data.find("ArticleIdList") if data is not None else None)
    registered = [_text(n) for n in article.iterfind("DataBankList/DataBank/AccessionNumberList/AccessionNumber")]
    if registered := [r for r in registered if r]:
        ids["registration"] = ";".join(dict.fromkeys(registered))  # trial registries' numbers (NCT..., ISRCTN...)
    sections, abstract = _abstract(article.find("Abstract"))
    return Paper(
        pmid=pmid,
        title=_text(article.find("ArticleTitle")) or _text(article.find("VernacularTitle")),
        abstract=abstract,
        doi=normalise_doi(ids.pop("doi", None) or _elocation_doi(article)),
        journal=clean(
            journal.findtext("ISOAbbreviation")
            or citation.findtext("MedlineJournalInfo/MedlineTA")
            or journal.findtext("Title")
        ),
        year=_pubdate_year(journal.find("JournalIssue/PubDate")) or year_of(article.findtext("ArticleDate/Year")),
        pub_types=_texts(article.iterfind("PublicationTypeList/PublicationType")),
        mesh=_texts(citation.iterfind("MeshHeadingList/MeshHeading/DescriptorName")),
        mesh_terms=_mesh_terms(citation.iterfind("MeshHeadingList/MeshHeading")),
        sections=sections,
        authors=_authors(article.find("AuthorList")),
        other_ids=ids,
        references=_references(data),
        source=source,
        language=language_codes(_texts(article.iterfind("Language"))),
    )


def _book_article(rec, document, pmid: int, source: str) -> Paper:
    """A PubmedBookArticle: a book chapter (journal = book title) or a whole book."""
    book = document.find("Book")
    chapter = _text(document.find("ArticleTitle"))
    book_title = _text(book.find("BookTitle"))
    ids = _article_ids(document.find("ArticleIdList"))
    sections, abstract = _abstract(document.find("Abstract"))
    book_authors = book.find("AuthorList")
    if book_authors is not None and book_authors.get("Type") == "editors":
        book_authors = None
    return Paper(
        pmid=pmid,
        title=chapter or book_title or _text(document.find("VernacularTitle")),
        abstract=abstract,
        doi=normalise_doi(ids.pop("doi", None) or _elocation_doi(document)),
        journal=book_title if chapter else "",
        year=_pubdate_year(book.find("PubDate")) or _pubdate_year(document.find("ContributionDate")),
        pub_types=_texts(document.iterfind("PublicationType")),
        mesh=_texts(document.iterfind("MeshHeadingList/MeshHeading/DescriptorName")),
        mesh_terms=_mesh_terms(document.iterfind("MeshHeadingList/MeshHeading")),
        sections=sections,
        authors=_authors(document.find("AuthorList")) or _authors(book_authors),
        other_ids=ids,
        references=_references(document),
        source=source,
        language=language_codes(_texts(document.iterfind("Language"))),
    )


def _paper_or_problem(rec, source: str) -> Paper | ParseProblem:
    is_book = rec.tag == "PubmedBookArticle"
    head = rec.find("BookDocument" if is_book else "MedlineCitation")
    where = f"{rec.tag} at line {rec.sourceline}"
    raw_pmid = head.findtext("PMID") if head is not None else None
    pmid = as_pmid(raw_pmid)
    if pmid is None:
        why = f"PMID {clean(raw_pmid)!r} is not a positive integer" if clean(raw_pmid) else "no PMID"
        return ParseProblem(None, f"{where}: {why}; record skipped", source)
    try:
        paper = (_book_article if is_book else _journal_article)(rec, head, pmid, source)
    except Exception as exc:  # one malformed record must not stop the file
        return ParseProblem(pmid, f"{where}: unreadable record ({type(exc).__name__}: {exc}); skipped", source)
    if not paper.title:
        return ParseProblem(pmid, f"{where}: PMID {pmid} has no title; record skipped", source)
    return paper


def _deletions(rec, source: str) -> Iterator[Deletion | ParseProblem]:
    pmids = []
    for node in rec.iterfind("PMID"):
        pmid = as_pmid(node.text)
        if pmid is None:
            yield ParseProblem(None, f"DeleteCitation at line {node.sourceline}: bad PMID {node.text!r}", source)
        else:
            pmids.append(pmid)
    if pmids:
        yield Deletion(tuple(pmids), source)


def _release(rec) -> None:
    """Free a handled record and the empty siblings before it, so memory stays flat."""
    rec.clear(keep_tail=False)
    parent = rec.getparent()
    if parent is not None:
        while rec.getprevious() is not None:
            del parent[0]


def _unexpected_root(root, display: str, source: str) -> ParseProblem | None:
    if root is None or root.tag in ARTICLE_SET_TAGS:
        return None
    detail = clean(root.findtext(".//ERROR")) or "no PubMed records"
    return ParseProblem(None, f"{display}: not a PubmedArticleSet (root <{root.tag}>): {detail}", source)


# ---------------------------------------------------------------------------- public parsers
def iter_pubmed_xml(source: Source, *, source_name: str | None = None) -> Iterator[XmlItem]:
    """Stream PubMed XML (efetch, baseline or update file; plain or gzip) record by record.

    Yields a Paper per PubmedArticle / PubmedBookArticle, a Deletion per DeleteCitation and a
    ParseProblem per record it has to skip. Not-well-formed or truncated input ends the stream with
    a ParseProblem naming the file and position; nothing is raised for bad data. `source_name`
    becomes Paper.source (default "file:<name>" for paths, "efetch" for bytes and streams).
    """
    with open_binary(source) as (stream, display):
        label = source_name or _default_source_name(source, "efetch")
        parser = etree.iterparse(stream, events=("end",), tag=RECORD_TAGS, no_network=True, resolve_entities=False)
        count = 0
        try:
            for _, rec in parser:
                count += 1
                yield from _record_items(rec, label)
                _release(rec)
        except etree.XMLSyntaxError as exc:
            yield _stream_problem(stream, display, count, label, exc)
            return
        if stream.error is not None:
            yield _stream_problem(stream, display, count, label)
        if problem := _unexpected_root(parser.root, display, label):
            yield problem


def iter_pubmed_tree(root: etree._Element, *, source_name: str = "efetch") -> Iterator[XmlItem]:
    """The records of an already parsed PubMed XML document (an efetch answer), as iter_pubmed_xml yields them."""
    for rec in root.iter(*RECORD_TAGS):
        yield from _record_items(rec, source_name)


def _record_items(rec: etree._Element, label: str) -> Iterator[XmlItem]:
    """A Paper (or the ParseProblem that skips it) for an article; a Deletion per PMID of a DeleteCitation."""
    if rec.tag == "DeleteCitation":
        yield from _deletions(rec, label)
    else:
        yield _paper_or_problem(rec, label)


def _medline_fields(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, list[str]], int | None]]:
    """(first line number, tag → values, the first line that is not a field) per record of MEDLINE text;
    continuation lines joined."""
    fields: dict[str, list[str]] = {}
    start, last_tag, bad = 0, None, None
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            if fields:
                yield start, fields, bad
            fields, last_tag, bad = {}, None, None
            continue
        if line[:1].isspace() and last_tag:
            fields[last_tag][-1] += " " + line.strip()
            continue
        tag, value = line[:4].rstrip(), line[5:].strip()  # "TI  - value": tag padded to 4, then "-"
        if line[4:5] != "-" or not tag.isalnum():
            log.debug("MEDLINE line %d is not a field: %r", number, line[:60])
            bad = bad or number
            continue
        if tag == "PMID" and "PMID" in fields:
            yield start, fields, bad
            fields, bad = {}, None
        if not fields:
            start = number
        fields.setdefault(tag, []).append(value)
        last_tag = tag
    if fields:
        yield start, fields, bad


def _medline_paper(fields: dict[str, list[str]], where: str, source: str) -> Paper | ParseProblem:
    first = {tag: clean(values[0]) for tag, values in fields.items()}
    raw_pmid = first.get("PMID", "")
    pmid = as_pmid(raw_pmid)
    if pmid is None:
        why = f"PMID {raw_pmid!r} is not a positive integer" if raw_pmid else "no PMID"
        return ParseProblem(None, f"{where}: {why}; record skipped", source)
    title = first.get("TI", "")
    if not title:
        return ParseProblem(pmid, f"{where}: PMID {pmid} has no TI (title); record skipped", source)
    tagged_ids = {}
    for value in fields.get("LID", []) + fields.get("AID", []):
        ident, _, kind = clean(value).rpartition(" [")
        if ident and kind.endswith("]"):
            tagged_ids.setdefault(kind[:-1], ident)
    doi = tagged_ids.pop("doi", None)
    if "PMC" in first:
        tagged_ids.setdefault("pmc", first["PMC"])
    abstract = first.get("AB", "")
    return Paper(
        pmid=pmid,
        title=title,
        abstract=abstract,
        doi=normalise_doi(doi),
        journal=first.get("TA") or first.get("JT", ""),
        year=year_of(first.get("DP")),
        pub_types=[clean(v) for v in fields.get("PT", [])],
        mesh=[clean(v).lstrip("*").split("/")[0] for v in fields.get("MH", [])],
        mesh_terms=[clean(v) for v in fields.get("MH", [])],
        sections=split_labelled_abstract(abstract),
        authors=[clean(v) for v in fields.get("AU", [])],
        other_ids=tagged_ids,
        source=source,
        language=language_codes(fields.get("LA", [])),
    )


def parse_medline_text(source: Source, *, source_name: str | None = None) -> Iterator[Paper | ParseProblem]:
    """Stream the MEDLINE text format (efetch rettype=medline, PubMed .nbib exports) as Papers.

    A record without a PMID or a title, or with a line that is not a field, becomes a ParseProblem naming its
    line; parsing goes on.
    """
    with open_binary(source) as (stream, display):
        label = source_name or _default_source_name(source, "medline")
        text = io.TextIOWrapper(io.BufferedReader(stream), encoding="utf-8-sig", errors="replace", newline=None)
        count = 0
        for start, fields, bad in _medline_fields(text):
            count += 1
            if bad is not None:  # its value is lost, or was read into the field before it: nothing of it is stored
                pmid = as_pmid(clean(fields.get("PMID", [""])[0]))
                yield ParseProblem(pmid, f"{display}: line {bad} of the record at line {start} is not a MEDLINE "
                                         "field ('TAG - value'); record skipped", label)  # fmt: skip
                continue
            yield _medline_paper(fields, f"{display}: record at line {start}", label)
        if stream.error is not None:
            yield _stream_problem(stream, display, count, label)


__all__ = [
    "Source",
    "XmlItem",
    "as_pmid",
    "clean",
    "iter_pubmed_xml",
    "join_sections",
    "open_binary",
    "parse_medline_text",
    "split_labelled_abstract",
    "year_of",
]
