"""Screening features: ra's embedding vectors, TF-IDF of title and abstract, study-design / PICO rule flags, and the
citation links between records (shared references, one citing another)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from ra_agent.config import Config, ScreenConfig
from ra_agent.evidence.pico.design import NON_TRIAL_CLASSES, design_class
from ra_agent.evidence.pico.rules import RULES_NAME
from ra_agent.fileio import atomic_write, atomic_writer
from ra_agent.models import Paper, Reference

log = logging.getLogger(__name__)

FLAGS_RULES = RULES_NAME  # the rule flags are cached by the rules that made them
PICO_FIELDS = ("P", "I", "C", "O", "StudyDesign")
_WORDS = re.compile(r"[a-z][a-z0-9-]+")
TRIAL = frozenset({"RCT", "controlled trial", "clinical trial"})
OBSERVATIONAL = frozenset({"cohort", "case-control", "cross-sectional", "case series"})
# one column per rule over real fields (design from publication type / text cues; sample size from the abstract)
FLAG_NAMES = ("design: RCT", "design: other trial", "design: observational", "design: review or non-trial",
              "design: other study", "design: none found", "sample size reported")  # fmt: skip


@dataclass(frozen=True)
class ScreenRecord:
    """One record to screen: what the reviewer sees and the features read."""

    pmid: int
    title: str
    abstract: str = ""
    year: int | None = None
    pub_types: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()  # the record's own identifiers, normalised by `work_id` ("pmid:123", "doi:10.1/x")
    refs: tuple[str, ...] = ()  # identifiers of the works it cites, normalised the same way

    @property
    def text(self) -> str:
        return f"{self.title} · {self.abstract}" if self.abstract else self.title

    @classmethod
    def of(cls, paper: Paper, references: Sequence[Reference] = ()) -> ScreenRecord:
        """A stored paper with the references the store holds for it (PMID edges and unmapped DOIs)."""
        ids = work_ids(str(paper.pmid), paper.doi or "")
        refs = tuple(sorted({i for r in references for i in (work_id(str(r.pmid or "")), work_id(r.doi or "")) if i}))
        return cls(paper.pmid, paper.title, paper.abstract, paper.year, tuple(paper.pub_types), ids, refs)


_URL_PREFIX = re.compile(r"^https?://(dx\.)?(doi\.org|openalex\.org|pubmed\.ncbi\.nlm\.nih\.gov)/", re.I)


def work_id(raw: str) -> str:
    """One normal form per identifier, so a record's own id and another record's reference to it match:
    "pmid:<digits>" (a bare number of up to 9 digits or a PubMed URL), "doi:<lower-case doi>" (with or without
    https://doi.org/), "openalex:<id>" (W-numbers, with or without https://openalex.org/); "" for nothing."""
    value = raw.strip().rstrip("/")
    host = _URL_PREFIX.match(value)
    rest = value[host.end() :] if host else value
    if not rest:
        return ""
    if (host and "pubmed" in host.group(2).lower()) or (rest.isdigit() and len(rest) <= 9):
        return f"pmid:{int(rest)}" if rest.isdigit() and int(rest) > 0 else ""
    if rest.lower().startswith("10.") and "/" in rest:
        return f"doi:{rest.lower()}"
    if re.fullmatch(r"[Ww]\d+", rest):
        return f"openalex:{rest.upper()}"
    return "" if rest.isdigit() else f"id:{rest.lower()}"


def work_ids(*raw: str) -> tuple[str, ...]:
    """A record's own identifiers (PMID, DOI, OpenAlex id, ... as given) in normal form, empty ones dropped, each once."""
    return tuple(dict.fromkeys(i for i in map(work_id, raw) if i))


def split_ids(cell: str) -> tuple[str, ...]:
    """A cell listing identifiers (separated by spaces, ";" or ",") as normalised ids."""
    return tuple(i for i in (work_id(part) for part in re.split(r"[\s;,]+", cell)) if i)


@dataclass
class Features:
    """Row-aligned feature blocks of a record set (row i = records[i])."""

    tfidf: sp.csr_matrix
    terms: np.ndarray  # TF-IDF vocabulary, column order
    dense: np.ndarray  # unit vectors from ra's embedder (zeros for a record without text)
    flags: np.ndarray  # 0/1 per FLAG_NAMES
    pico: sp.csr_matrix  # TF-IDF of the PICO tokens (rules)
    embedding: str = ""  # the embedder slug of `dense`
    links: sp.csr_matrix | None = None  # citation links (`citation_matrix`); None when no record lists references

    def __len__(self) -> int:
        return len(self.dense)

    @property
    def linked_records(self) -> int:
        """Records with a citation link to at least one other record."""
        return 0 if self.links is None else int((self.links.getnnz(axis=1) > 0).sum())


def rule_features(record: ScreenRecord) -> tuple[np.ndarray, str]:
    """(FLAG_NAMES as 0/1, PICO tokens) from ra's PICO rules: the design class (publication type, title kind, text
    cues), whether a sample size is reported, and the words of P, I, C and O prefixed by their field
    ("I_omeprazole C_ranitidine"), so the learner sees what was compared, not only which words occur."""
    from ra_agent.evidence.pico.rules import extract

    paper = Paper(pmid=record.pmid, title=record.title, abstract=record.abstract, pub_types=list(record.pub_types))
    found = extract(paper) if (record.title or record.abstract) else {}
    design = found.get("StudyDesign")
    cls = design_class(design.value) if design else ""
    column = (
        0 if cls == "RCT" else 1 if cls in TRIAL else 2 if cls in OBSERVATIONAL else 5 if not cls else
        3 if _non_trial(cls) else 4
    )  # fmt: skip
    flags = np.zeros(len(FLAG_NAMES), dtype=np.float32)
    flags[column] = 1.0
    flags[6] = float("SampleSize" in found)
    tokens = [
        f"{key}_{word}" for key in PICO_FIELDS if key in found for word in _WORDS.findall(found[key].value.lower())
    ]
    return flags, " ".join(tokens)


def _non_trial(cls: str) -> bool:
    return cls in NON_TRIAL_CLASSES or any(w in cls for w in ("review", "meta-analysis", "guideline"))


def tfidf_matrix(texts: Sequence[str], screen: ScreenConfig) -> tuple[sp.csr_matrix, np.ndarray]:
    """Sublinear TF-IDF of word uni- to `tfidf_ngram_max`-grams (fitted on the whole record set, labels unused)."""
    vectorizer = TfidfVectorizer(
        ngram_range=(1, screen.tfidf_ngram_max),
        sublinear_tf=True,
        min_df=screen.tfidf_min_df,
        max_df=screen.tfidf_max_df if len(texts) > 1 else 1.0,
    )
    try:
        matrix = vectorizer.fit_transform(texts).tocsr()
    except ValueError:  # no words at all (every record PMID-only)
        return sp.csr_matrix((len(texts), 1), dtype=np.float64), np.array(["<none>"])
    return matrix, vectorizer.get_feature_names_out()


def build_features(
    records: Sequence[ScreenRecord],
    dense: np.ndarray,
    screen: ScreenConfig,
    *,
    embedding: str = "",
    cache_dir: Path | None = None,
) -> Features:
    """The feature blocks of `records` (`dense` row-aligned, from `dense_vectors`); the rule features (the slow
    part: ra's PICO rules over every abstract) cached by content in `cache_dir`."""
    texts = [f"{r.title} {r.abstract}".strip() for r in records]
    tfidf, terms = tfidf_matrix(texts, screen)
    flags, pico_texts = rule_matrix(records, cache_dir)
    pico = TfidfVectorizer(sublinear_tf=True, token_pattern=r"\S+")
    try:
        pico_m = pico.fit_transform(pico_texts).tocsr()
    except ValueError:  # no PICO token anywhere
        pico_m = sp.csr_matrix((len(records), 1), dtype=np.float64)
    links = citation_matrix(records)
    return Features(tfidf, terms, np.asarray(dense, dtype=np.float32), flags, pico_m, embedding, links)


def linked(links: sp.csr_matrix | None, row: int, among: Sequence[int]) -> list[int]:
    """The rows of `among` that share a citation link with `row` (a common cited work, or one citing the other)."""
    if links is None or not len(among):
        return []
    shared = (links[list(among)] @ links[row].T).toarray().ravel()
    return [int(r) for r, s in zip(among, shared, strict=True) if s > 0 and r != row]


def citation_matrix(records: Sequence[ScreenRecord]) -> sp.csr_matrix | None:
    """Sublinear TF-IDF over each record's cited works plus its own ids, keeping the ids that at least two records
    share: two records citing the same work (bibliographic coupling) share a column, and so do a record and one
    that cites it. None when no record lists references (a plain title/abstract export)."""
    if not any(r.refs for r in records):
        return None
    docs = [" ".join((*r.refs, *r.ids)) for r in records]
    vectorizer = TfidfVectorizer(token_pattern=r"\S+", lowercase=False, sublinear_tf=True, min_df=2)
    try:
        return vectorizer.fit_transform(docs).tocsr()
    except ValueError:  # no id shared by two records: the links say nothing
        return None


def rule_matrix(records: Sequence[ScreenRecord], cache_dir: Path | None = None) -> tuple[np.ndarray, list[str]]:
    """(FLAG_NAMES per record, PICO tokens per record), rows aligned; cached by the records' content and the rules."""
    if not records:
        return np.zeros((0, len(FLAG_NAMES)), np.float32), []
    blob = "\n".join(
        [FLAGS_RULES, *FLAG_NAMES, *PICO_FIELDS, *(f"{r.title}\t{r.abstract}\t{r.pub_types}" for r in records)]
    )
    path = cache_dir / f"screen-rules-{hashlib.sha1(blob.encode()).hexdigest()[:20]}.json" if cache_dir else None
    if path is not None and path.exists():
        cached = json.loads(path.read_text())
        return np.asarray(cached["flags"], dtype=np.float32), cached["pico"]
    pairs = [rule_features(r) for r in records]
    flags, pico = np.vstack([f for f, _ in pairs]), [t for _, t in pairs]
    if path is not None:
        atomic_write(path, json.dumps({"rules": FLAGS_RULES, "flags": flags.tolist(), "pico": pico}))
    return flags, pico


Lookup = Callable[[list[int]], tuple[np.ndarray, np.ndarray]]  # pmids -> (found mask, vectors of the found)


def index_lookup(cfg: Config) -> Lookup:
    """Vectors the workspace's active index already holds (what `ra embed` and the demo computed), by PMID; none when
    there is no index yet or it is of another model than [embedding]'s (its vectors live in another space)."""
    from ra_agent.store.vectors import configured_slug, open_active

    def lookup(pmids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        try:
            index = open_active(cfg)
            found = index.has(pmids) if index.slug == configured_slug(cfg) else np.zeros(len(pmids), dtype=bool)
        except FileNotFoundError:  # no index yet: everything is embedded here
            return np.zeros(len(pmids), dtype=bool), np.zeros((0, 1), dtype=np.float32)
        return found, index.get([p for p, hit in zip(pmids, found, strict=True) if hit]).astype(np.float32)

    return lookup


def dense_vectors(
    cfg: Config,
    records: Sequence[ScreenRecord],
    *,
    lookup: Lookup | None = None,
    embedder=None,
    cache_dir: Path | None = None,
) -> tuple[np.ndarray, str]:
    """(vectors row-aligned with `records`, embedder slug): from the index (`lookup(pmids)` -> (found mask,
    vectors of the found)) when it holds them, the rest embedded with ra's embedder (cached by content in
    `cache_dir`). A record without text gets a zero vector."""
    from ra_agent.embed.embedder import SentenceTransformerEmbedder

    embedder = embedder or SentenceTransformerEmbedder(cfg)
    slug = embedder.slug
    out: np.ndarray | None = None
    todo = [i for i, r in enumerate(records) if r.text.strip()]
    if lookup is not None and todo:
        found, vectors = lookup([records[i].pmid for i in todo])
        if found.any():
            out = np.zeros((len(records), vectors.shape[1]), dtype=np.float32)
            rows = [i for i, hit in zip(todo, found, strict=True) if hit]
            out[rows] = vectors
            todo = [i for i, hit in zip(todo, found, strict=True) if not hit]
            log.info("screening: %d records' vectors from the index, %d to embed", len(rows), len(todo))
    if todo:
        texts = [records[i].text for i in todo]
        fresh = _cached_encode(embedder, texts, cache_dir)
        if out is None:
            out = np.zeros((len(records), fresh.shape[1]), dtype=np.float32)
        out[todo] = fresh
        log.info("screening: embedded %d records not in the index with %s", len(todo), slug)
    if out is None:  # nothing has text
        out = np.zeros((len(records), 1), dtype=np.float32)
    return out, slug


ENCODE_CHUNK = 64  # records per encode call while a progress bar runs


def _encode_with_progress(embedder, texts: list[str]) -> np.ndarray:
    """`embedder.encode(texts)` in chunks, with a bar on a terminal's stderr (count, rate, ETA)."""
    import sys

    from tqdm import tqdm

    log.info("screening: embedding %d records not in the index", len(texts))
    parts = []
    with tqdm(total=len(texts), desc="screening: embed", unit="rec", file=sys.stderr, disable=None,
              dynamic_ncols=True) as bar:  # fmt: skip
        for start in range(0, len(texts), ENCODE_CHUNK):
            parts.append(embedder.encode(texts[start : start + ENCODE_CHUNK]))
            bar.update(len(parts[-1]))
    return np.concatenate(parts) if parts else embedder.encode(texts)


def _cached_encode(embedder, texts: list[str], cache_dir: Path | None) -> np.ndarray:
    if cache_dir is None:
        return _encode_with_progress(embedder, texts)
    key = hashlib.sha1("\n".join([embedder.slug, *texts]).encode("utf-8")).hexdigest()[:20]
    path = cache_dir / f"screen-E-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = _encode_with_progress(embedder, texts)
    with atomic_writer(path) as fh:
        np.save(fh, vectors)
    return vectors
