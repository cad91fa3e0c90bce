"""Loopback E-utilities (esearch/efetch/elink at the real paths) answering from real recorded PubMed data."""

from __future__ import annotations

import functools
import gzip
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from lxml import etree

from .base import FIXTURES, ReplayServer, Reply

EUTILS_DIR = FIXTURES / "eutils"
MEDLINE_DIR = FIXTURES / "medline"
EUTILS_PATH = "/entrez/eutils"
XML_TYPE = "text/xml; charset=UTF-8"
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)

# (db, lower-cased term) -> recorded esearch answer (see tests/fixtures/eutils/INVENTORY.md)
RECORDED_ESEARCH = {
    ("pubmed", "biopython"): "esearch1.xml",
    ("pubmed", "cancer"): "esearch2.xml",
    ("pubmed", "pnas[ta] and 97[vi]"): "esearch3.xml",
    ("pmc", "stem cells and hasabstract"): "esearch5.xml",
    ("nucleotide", "biomol trna[prop]"): "esearch6.xml",
    ("protein", "200020[molecular weight]"): "esearch7.xml",
    ("protein", "abcxyz"): "esearch8.xml",
    ("nlmcatalog", "obstetrics[mesh terms] or fleegle[mesh terms]"): "klortho_esearch.error.xml",
}
KNOWN_DBS = {"pubmed", "pmc", "nucleotide", "protein", "nlmcatalog"}
RECORDED_ELINK = ("elink1.xml", "elink3.xml", "elink4.xml")


@dataclass
class Record:
    pmid: int
    xml: bytes
    title: str
    abstract: str
    text: str  # lower-cased title + abstract + keywords + MeSH, for term matching
    dois: list[str]
    entrez: date | None
    refs: list[int]
    source: str

    @property
    def has_abstract(self) -> bool:
        return bool(self.abstract.strip())


@dataclass
class RecordIndex:
    records: dict[int, Record] = field(default_factory=dict)
    by_doi: dict[str, list[int]] = field(default_factory=dict)
    cited_by: dict[int, list[int]] = field(default_factory=dict)
    efetch_header: bytes = b""


def _text(node) -> str:
    return " ".join("".join(node.itertext()).split()) if node is not None else ""


def _entrez_date(rec) -> date | None:
    for status in ("entrez", "pubmed"):
        node = rec.find(f"PubmedData/History/PubMedPubDate[@PubStatus='{status}']")
        if node is None:
            node = rec.find(f"PubmedBookData/History/PubMedPubDate[@PubStatus='{status}']")
        if node is not None:
            try:
                return date(int(node.findtext("Year")), int(node.findtext("Month")), int(node.findtext("Day")))
            except (TypeError, ValueError):
                continue
    return None


def _record(rec, source: str) -> Record | None:
    pmid_text = rec.findtext("MedlineCitation/PMID") or rec.findtext("BookDocument/PMID")
    if not pmid_text or not pmid_text.strip().isdigit():
        return None
    title = _text(rec.find(".//ArticleTitle")) or _text(rec.find(".//BookTitle"))
    abstract = " ".join(_text(a) for a in rec.iterfind(".//Abstract/AbstractText"))
    extra = (
        " ".join(_text(n) for n in rec.iterfind(".//Keyword"))
        + " "
        + " ".join(_text(n) for n in rec.iterfind(".//MeshHeading/DescriptorName"))
    )
    # the record's own DOIs (ReferenceList ArticleIds belong to the cited works)
    paths = ("PubmedData/ArticleIdList/ArticleId[@IdType='doi']", "BookDocument/ArticleIdList/ArticleId[@IdType='doi']",
             "MedlineCitation/Article/ELocationID[@EIdType='doi']")  # fmt: skip
    own = {(n.text or "").strip().lower() for path in paths for n in rec.iterfind(path)} - {""}
    refs = [int(n.text) for n in rec.iterfind(".//ReferenceList/Reference/ArticleIdList/ArticleId[@IdType='pubmed']")
            if n.text and n.text.strip().isdigit()]  # fmt: skip
    return Record(
        pmid=int(pmid_text),
        xml=etree.tostring(rec, encoding="utf-8", with_tail=False),
        title=title,
        abstract=abstract,
        text=f"{title} {abstract} {extra}".lower(),
        dois=sorted(own),
        entrez=_entrez_date(rec),
        refs=list(dict.fromkeys(refs)),
        source=source,
    )


def _record_files() -> list[Path]:
    files = []
    for path in sorted(EUTILS_DIR.glob("*.xml")):
        if b"<PubmedArticleSet" in path.read_bytes()[:4096]:
            files.append(path)
    return files + sorted(MEDLINE_DIR.glob("*.xml.gz"))


@functools.lru_cache(maxsize=1)
def load_index() -> RecordIndex:
    """Every recorded PubMed record by PMID (a later file's version of a PMID replaces an earlier one)."""
    index = RecordIndex()
    for path in _record_files():
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        root = etree.fromstring(data, _PARSER)
        for rec in root:
            if rec.tag in ("PubmedArticle", "PubmedBookArticle"):
                record = _record(rec, path.name)
                if record is not None:
                    index.records[record.pmid] = record
    for record in index.records.values():
        for doi in record.dois:
            index.by_doi.setdefault(doi, []).append(record.pmid)
        for dst in record.refs:
            index.cited_by.setdefault(dst, []).append(record.pmid)
    # the XML declaration and DOCTYPE of a current (2025 DTD) efetch answer, verbatim
    head = (EUTILS_DIR / "pubmed2.xml").read_bytes()
    index.efetch_header = head[: head.index(b"<PubmedArticleSet>")]
    return index


def _header(name: str, root_tag: bytes) -> bytes:
    """The XML declaration + DOCTYPE lines of a recorded answer (so built answers look like NCBI's)."""
    data = (EUTILS_DIR / name).read_bytes()
    return data[: data.index(b"<" + root_tag)]


# ---------------------------------------------------------------------------- term evaluation
_CLAUSE = re.compile(r'"([^"]+)"\s*(\[[^\]]+\])?|([^\s()"\[]+)(\[[^\]]+\])?')


def _atoms(text: str) -> list[tuple[str, str]]:
    """(value, field tag) pairs of one AND-clause; bare words have tag ''."""
    out = []
    for phrase, ptag, word, wtag in _CLAUSE.findall(text):
        value, tag = (phrase, ptag) if phrase else (word, wtag)
        if value.upper() in ("AND", "NOT"):
            continue
        out.append((value.strip().lower(), tag.strip("[]").lower()))
    return out


def _matches(record: Record, value: str, tag: str) -> bool:
    if tag in ("doi", "aid", "lid"):
        return value in record.dois
    if tag in ("pmid", "uid"):
        return value == str(record.pmid)
    words = re.findall(r"[\w-]+", value)
    return bool(words) and all(re.search(r"\b" + re.escape(w), record.text) for w in words)


def evaluate_term(term: str, index: RecordIndex) -> list[int]:
    """PMIDs (newest first) matching a PubMed-style term: OR of AND-clauses of words/phrases/[doi] atoms."""
    hits: set[int] = set()
    for clause in re.split(r"\s+OR\s+", term.replace("(", " ").replace(")", " ")):
        atoms = _atoms(clause)
        if not atoms:
            continue
        doi_atoms = [v for v, t in atoms if t == "doi"]
        if doi_atoms and len(doi_atoms) == len(atoms):
            for doi in doi_atoms:
                hits.update(index.by_doi.get(doi, []))
            continue
        hits.update(p for p, r in index.records.items() if all(_matches(r, v, t) for v, t in atoms))
    return sorted(hits, reverse=True)


def _parse_date(text: str | None) -> date | None:
    if not text:
        return None
    parts = [int(p) for p in re.split(r"[/-]", text.strip()) if p.isdigit()]
    if not parts:
        return None
    year, month, day = (parts + [1, 1])[:3]
    return date(year, max(1, min(12, month)), max(1, min(28, day)))


# ---------------------------------------------------------------------------- the server
class EutilsReplayServer(ReplayServer):
    """E-utilities on loopback; `base_url` is what [ingest] eutils_base_url should be.

    - efetch returns a PubmedArticleSet assembled from the recorded PubmedArticle/PubmedBookArticle
      elements (tests/fixtures/eutils efetch files + the medline .xml.gz files), indexed by PMID.
      Unknown ids are simply absent, as at NCBI.
    - esearch replays the recorded answers for the recorded (db, term) pairs; any other PubMed term
      is evaluated over the indexed records (words against title/abstract/keywords/MeSH, `x[doi]`
      against DOIs, OR/AND, mindate/maxdate on the entrez date) and answered in NCBI's eSearchResult
      layout, with WebEnv/QueryKey on the history server so efetch by history works.
    - elink replays the recorded LinkSets for the recorded ids; for other ids it derives
      pubmed_pubmed_refs from the records' ReferenceList and pubmed_pubmed_citedin by reversing it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.index = load_index()
        self.history: dict[str, list[list[int]]] = {}  # WebEnv -> ids per query_key (1-based)
        self._history_lock = threading.Lock()
        self._recorded_links = self._load_recorded_links()

    @property
    def base_url(self) -> str:
        return self.root_url + EUTILS_PATH

    def respond(self, method: str, path: str, params: dict[str, list[str]]) -> Reply:
        one = {k: v[0] for k, v in params.items() if v}
        endpoint = path.rsplit("/", 1)[-1]
        if not path.startswith(EUTILS_PATH):
            return Reply(404, b"Not Found", "text/plain")
        if endpoint == "esearch.fcgi":
            return self._esearch(one)
        if endpoint == "efetch.fcgi":
            return self._efetch(one, params)
        if endpoint == "elink.fcgi":
            return self._elink(one, params)
        return Reply(404, b"Not Found", "text/plain")

    # ------------------------------------------------------------------ history server
    def _remember(self, ids: list[int], webenv: str | None = None) -> tuple[str, int]:
        with self._history_lock:
            if not webenv or webenv not in self.history:
                webenv = webenv or "MCID_" + secrets.token_hex(12)
                self.history[webenv] = []
            self.history[webenv].append(ids)
            return webenv, len(self.history[webenv])

    def _recall(self, webenv: str, query_key: str) -> list[int] | None:
        with self._history_lock:
            queries = self.history.get(webenv)
            if not queries or not query_key.isdigit() or not 1 <= int(query_key) <= len(queries):
                return None
            return queries[int(query_key) - 1]

    # ------------------------------------------------------------------ esearch
    def _esearch(self, p: dict[str, str]) -> Reply:
        db, term = p.get("db", "pubmed").lower(), p.get("term", "")
        recorded = RECORDED_ESEARCH.get((db, " ".join(term.lower().split())))
        if recorded:
            body = (EUTILS_DIR / recorded).read_bytes()
            self._register_recorded(body)
            return Reply(200, body, XML_TYPE)
        if db not in KNOWN_DBS:
            body = (EUTILS_DIR / "klortho_esearch.baderror.xml").read_bytes()
            return Reply(200, body.replace(b"fleegle", db.encode("utf-8")), XML_TYPE)
        if db != "pubmed":
            return Reply(200, (EUTILS_DIR / "esearch8.xml").read_bytes(), XML_TYPE)
        ids = evaluate_term(term, self.index)
        ids = self._date_filter(ids, p)
        retstart, retmax = int(p.get("retstart", 0)), int(p.get("retmax", 20))
        webenv = query_key = None
        if p.get("usehistory", "").lower() == "y":
            webenv, query_key = self._remember(ids, p.get("WebEnv"))
        return Reply(200, self._esearch_xml(term, ids, retstart, retmax, webenv, query_key), XML_TYPE)

    def _register_recorded(self, body: bytes) -> None:
        root = etree.fromstring(body, _PARSER)
        webenv, key = root.findtext("WebEnv"), root.findtext("QueryKey")
        if webenv and key:
            with self._history_lock:
                queries = self.history.setdefault(webenv, [])
                while len(queries) < int(key):
                    queries.append([])
                queries[int(key) - 1] = [int(n.text) for n in root.iterfind("IdList/Id")]

    def _date_filter(self, ids: list[int], p: dict[str, str]) -> list[int]:
        lo, hi = _parse_date(p.get("mindate")), _parse_date(p.get("maxdate"))
        if p.get("reldate", "").isdigit():
            lo = date.today() - timedelta(days=int(p["reldate"]))
        if lo is None and hi is None:
            return ids
        out = []
        for pmid in ids:
            when = self.index.records[pmid].entrez
            if when is not None and (lo is None or when >= lo) and (hi is None or when <= hi):
                out.append(pmid)
        return out

    @staticmethod
    def _esearch_xml(term: str, ids: list[int], retstart: int, retmax: int, webenv, query_key) -> bytes:
        """An eSearchResult laid out exactly like the recorded esearch2.xml (or esearch8.xml for no hits)."""
        page = ids[retstart : retstart + retmax]
        esc = term.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts = [_header("esearch2.xml", b"eSearchResult").decode("utf-8"), "<eSearchResult>",
                 f"<Count>{len(ids)}</Count><RetMax>{len(page)}</RetMax><RetStart>{retstart}</RetStart>"]  # fmt: skip
        if webenv:
            parts.append(f"<QueryKey>{query_key}</QueryKey><WebEnv>{webenv}</WebEnv>")
        if page:
            parts.append("<IdList>\n" + "".join(f"<Id>{i}</Id>\n" for i in page) + "</IdList>")
        else:
            parts.append("<IdList/>")
        parts.append(f"<TranslationSet/><QueryTranslation>{esc}</QueryTranslation>")
        if not ids:
            parts.append(f"<ErrorList><PhraseNotFound>{esc}</PhraseNotFound></ErrorList>"
                         "<WarningList><OutputMessage>No items found.</OutputMessage></WarningList>")  # fmt: skip
        parts.append("</eSearchResult>\n")
        return "".join(parts).encode("utf-8")

    # ------------------------------------------------------------------ efetch
    def _efetch(self, p: dict[str, str], params: dict[str, list[str]]) -> Reply:
        if p.get("db", "pubmed").lower() != "pubmed":
            return Reply(200, (EUTILS_DIR / "efetch_pmc.xml").read_bytes(), XML_TYPE)
        if "id" in params:
            ids = [int(x) for value in params["id"] for x in value.split(",") if x.strip().isdigit()]
        elif p.get("WebEnv"):
            found = self._recall(p["WebEnv"], p.get("query_key", "1"))
            if found is None:
                # modelled on NCBI's answer for a history session it no longer has (not a recorded file)
                body = (b'<?xml version="1.0" encoding="UTF-8" ?>\n<eFetchResult>\n\t<ERROR>Unable to obtain query #'
                        + p.get("query_key", "1").encode() + b"</ERROR>\n</eFetchResult>\n")  # fmt: skip
                return Reply(200, body, XML_TYPE)
            start, count = int(p.get("retstart", 0)), int(p.get("retmax", 20))
            ids = found[start : start + count]
        else:
            ids = []
        return Reply(200, self.efetch_xml(ids), XML_TYPE)

    def efetch_xml(self, ids: list[int]) -> bytes:
        """A PubmedArticleSet of the recorded records for `ids`, in the requested order (unknown ids absent)."""
        body = [self.index.efetch_header, b"<PubmedArticleSet>\n"]
        for pmid in dict.fromkeys(ids):
            record = self.index.records.get(pmid)
            if record is not None:
                body += [record.xml, b"\n"]
        body.append(b"</PubmedArticleSet>\n")
        return b"".join(body)

    # ------------------------------------------------------------------ elink
    def _load_recorded_links(self) -> dict[frozenset[int], etree._Element]:
        out = {}
        for name in RECORDED_ELINK:
            root = etree.fromstring((EUTILS_DIR / name).read_bytes(), _PARSER)
            for linkset in root.iterfind("LinkSet"):
                ids = frozenset(int(n.text) for n in linkset.iterfind("IdList/Id"))
                out[ids] = linkset
        return out

    def _elink(self, p: dict[str, str], params: dict[str, list[str]]) -> Reply:
        linkname = p.get("linkname")
        groups = [[int(x) for x in value.split(",") if x.strip().isdigit()] for value in params.get("id", [])]
        out = [_header("elink1.xml", b"eLinkResult"), b"<eLinkResult>\n"]
        for group in groups:
            recorded = self._recorded_links.get(frozenset(group))
            if recorded is not None:
                out.append(self._filtered_linkset(recorded, linkname))
            else:
                out.append(self._derived_linkset(group, linkname))
        out.append(b"</eLinkResult>\n")
        return Reply(200, b"".join(out), XML_TYPE)

    @staticmethod
    def _filtered_linkset(linkset, linkname: str | None) -> bytes:
        copy = etree.fromstring(etree.tostring(linkset), _PARSER)
        if linkname:
            for db in copy.findall("LinkSetDb"):
                if db.findtext("LinkName") != linkname:
                    copy.remove(db)
        return etree.tostring(copy, encoding="utf-8", with_tail=False) + b"\n"

    def _derived_linkset(self, group: list[int], linkname: str | None) -> bytes:
        links: dict[str, list[int]] = {}
        if linkname in (None, "pubmed_pubmed_refs"):
            refs = [d for pmid in group if pmid in self.index.records for d in self.index.records[pmid].refs]
            links["pubmed_pubmed_refs"] = list(dict.fromkeys(refs))
        if linkname in (None, "pubmed_pubmed_citedin"):
            citing = [s for pmid in group for s in self.index.cited_by.get(pmid, [])]
            links["pubmed_pubmed_citedin"] = sorted(set(citing), reverse=True)
        parts = ["<LinkSet>\n\t<DbFrom>pubmed</DbFrom>\n\t<IdList>\n"]
        parts += [f"\t\t<Id>{pmid}</Id>\n" for pmid in group]
        parts.append("\t</IdList>\n")
        for name, ids in links.items():
            if not ids:
                continue
            parts.append(f"\t<LinkSetDb>\n\t\t<DbTo>pubmed</DbTo>\n\t\t<LinkName>{name}</LinkName>\n")
            parts += [f"\t\t<Link>\n\t\t\t<Id>{i}</Id>\n\t\t</Link>\n" for i in ids]
            parts.append("\t</LinkSetDb>\n")
        parts.append("</LinkSet>\n")
        return "".join(parts).encode("utf-8")
