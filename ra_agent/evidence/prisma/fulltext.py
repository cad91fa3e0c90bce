"""Full text of a prior review from PubMed Central (JATS XML, E-utilities efetch db=pmc), cached in the workspace."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree  # pyright: ignore[reportAttributeAccessIssue]

from ra_agent.config import Config
from ra_agent.fileio import atomic_write
from ra_agent.ingest.http import ApiError
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True, recover=False)
PMCID_RE = re.compile(r"^(?:PMC)?(\d+)$", re.I)


class FullTextError(ValueError):
    """A JATS document cannot be read (not XML, or no <article>)."""


@dataclass(frozen=True)
class FullText:
    """The readable text of one JATS article: title, abstract and body, one section heading or paragraph a line."""

    pmcid: str
    pmid: int | None
    text: str
    references: list[int] = field(default_factory=list)  # PMIDs its reference list names
    sections: list[str] = field(default_factory=list)  # top-level section titles of the body


def _flat(node: Any) -> str:
    return " ".join("".join(node.itertext()).split())


def parse_jats(xml: bytes, source: str = "JATS") -> FullText:
    """Read one article (a bare <article> or the first one of an efetch db=pmc <pmc-articleset>)."""
    try:
        root = etree.fromstring(xml, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise FullTextError(f"{source}: not well-formed XML: {exc}") from exc
    article = root if root.tag == "article" else root.find(".//article")
    if article is None:
        raise FullTextError(f"{source}: no <article> element (root <{root.tag}>)")
    meta = article.find("front/article-meta")
    ids = {n.get("pub-id-type"): (n.text or "").strip() for n in meta.findall("article-id")} if meta is not None else {}
    lines = []
    title = article.find("front/article-meta/title-group/article-title")
    if title is not None:
        lines.append(_flat(title))
    for abstract in article.findall("front/article-meta/abstract"):
        lines += [_flat(p) for p in abstract.iter("p", "title") if _flat(p)]
    top: list[str] = []
    body = article.find("body")
    if body is not None:
        for sec in body.findall("sec"):
            heading = sec.find("title")
            if heading is not None:
                top.append(_flat(heading))
        for node in body.iter("title", "p"):
            if node.getparent() is not None and node.getparent().tag in ("caption", "table-wrap"):
                continue
            text = _flat(node)
            if text:
                lines.append(f"## {text}" if node.tag == "title" else text)
    refs = [int(n.text) for n in article.iterfind("back/ref-list//pub-id[@pub-id-type='pmid']")
            if (n.text or "").strip().isdigit()]  # fmt: skip
    pmid = ids.get("pmid", "")
    return FullText(ids.get("pmc", ""), int(pmid) if pmid.isdigit() else None, "\n".join(lines), refs, top)


def pmcid_of(paper: Paper) -> str | None:
    """The PMC id a record names (MEDLINE OtherIDs / ArticleIdList "pmc"), digits only, or None."""
    for key, value in paper.other_ids.items():
        if key.lower() == "pmc":
            match = PMCID_RE.match(str(value).strip())
            if match:
                return match.group(1)
    return None


def cache_path(cfg: Config, pmcid: str) -> Path:
    return Workspace.of(cfg).root / "pmc" / f"PMC{pmcid}.xml"


def _fetch(eutils: Any, pmcid: str) -> bytes:
    """efetch db=pmc for one article; the raw JATS bytes."""
    return eutils._call("efetch.fcgi", {"db": "pmc", "id": pmcid, "retmode": "xml"}, lambda resp: resp.content)


def full_text(cfg: Config, store: Store, paper: Paper, eutils: Any = None) -> tuple[FullText | None, str]:
    """The PMC full text of a record and where it came from, or (None, why not).

    Read from the workspace cache <data_dir>/pmc/PMC<id>.xml, else fetched with E-utilities efetch
    db=pmc when a client is given and the API is not marked offline (then cached). No full text when
    the record names no PMC id, when offline, or when the fetch fails.
    """
    pmcid = pmcid_of(paper)
    if pmcid is None:
        return None, "no PMC id in the record"
    path = cache_path(cfg, pmcid)
    if not path.exists():
        if eutils is None or cfg.ingest.offline or store.api_state("eutils")["offline"]:
            return None, f"PMC{pmcid} not fetched (offline)"
        try:
            raw = _fetch(eutils, pmcid)
        except ApiError as exc:
            log.warning("PMC%s: efetch db=pmc failed (%s)", pmcid, exc)
            return None, f"PMC{pmcid} fetch failed: {str(exc)[:120]}"
        atomic_write(path, raw.decode("utf-8", errors="replace"))
    try:
        parsed = parse_jats(path.read_bytes(), str(path))
    except FullTextError as exc:
        log.warning("%s", exc)
        return None, str(exc)
    if not parsed.text.strip():
        return None, f"PMC{pmcid}: the article has no readable text"
    return parsed, f"PMC{pmcid} full text"
