"""Baseline/update files into the store: upserts, DeleteCitation, idempotent reloads, bad files, offline search."""

import gzip
import re
import shutil
from pathlib import Path

import pytest

from ra_agent.config import Config
from ra_agent.ingest.baseline import baseline_files, load_baseline
from ra_agent.store.db import Store

MEDLINE = Path(__file__).resolve().parents[1] / "fixtures" / "medline"
BASELINE = MEDLINE / "pmparser_baseline_pubmed26n1334.xml.gz"
UPDATE = MEDLINE / "pmparser_updatefiles_pubmed26n1335.xml.gz"

DELETED_BY_REAL_UPDATE = [41456105, 41557076, 41616784, 41618748, 41618749, 41618779]
# Baseline records the edited update below deletes, and the one it re-sends revised.
GONE = [41583336, 41584348]  # 7 and 70 PubMed-linked references
REVISED = 41578406


@pytest.fixture
def cfg() -> Config:
    return Config().with_overrides(embedding={"refresh_threshold": 10})


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "ra.sqlite") as s:
        yield s


@pytest.fixture
def snapshot_dir(tmp_path) -> Path:
    """A baseline file and an update file named like NLM's, the update built from real records:

    the real update file, plus one baseline record re-sent with a corrected title (what NLM's
    update files do) and its DeleteCitation extended by two baseline PMIDs.
    """
    folder = tmp_path / "baseline"
    folder.mkdir()
    shutil.copy(BASELINE, folder / "pubmed26n1334.xml.gz")
    base_xml = gzip.decompress(BASELINE.read_bytes())
    start = base_xml.rindex(b"<PubmedArticle>", 0, base_xml.index(f'<PMID Version="1">{REVISED}</PMID>'.encode()))
    record = base_xml[start : base_xml.index(b"</PubmedArticle>", start) + len(b"</PubmedArticle>")]
    revised = re.sub(rb"(<ArticleTitle>)", rb"\1[Corrected] ", record, count=1)
    update_xml = gzip.decompress(UPDATE.read_bytes())
    update_xml = update_xml.replace(b"<PubmedArticleSet>", b"<PubmedArticleSet>" + revised, 1)
    extra = b"".join(f'<PMID Version="1">{p}</PMID>'.encode() for p in GONE)
    update_xml = update_xml.replace(b"<DeleteCitation>", b"<DeleteCitation>" + extra, 1)
    (folder / "pubmed26n1335.xml.gz").write_bytes(gzip.compress(update_xml))
    return folder


def row_counts(store: Store) -> dict[str, int]:
    return {
        k: v for k, v in store.counts().items() if k in ("paper", "ref", "ref_doi", "ingest_batch", "deleted_citation")
    }


def test_baseline_then_update_changes_the_store_and_reloading_changes_nothing(store, cfg, snapshot_dir):
    first = load_baseline(store, snapshot_dir / "pubmed26n1334.xml.gz", cfg)
    assert (first.inserted, first.updated, first.deleted, first.problems) == (30, 0, 0, [])
    assert len(first.batches) == 3  # 30 new papers in ingest batches of refresh_threshold = 10
    assert store.paper(REVISED).source == "baseline:pubmed26n1334.xml.gz"
    assert len(store.references_of(41583864)) == 100  # its ReferenceList: 100 PubMed-linked entries
    assert [len(store.references_of(p)) for p in GONE] == [7, 70]

    update = load_baseline(store, [snapshot_dir / "pubmed26n1335.xml.gz"], cfg)
    assert (update.inserted, update.updated, update.unchanged) == (30, 1, 0)
    assert update.deleted == 2 and update.delete_listed == 8
    counts = store.counts()
    assert counts["paper"] == 30 + 30 - 2
    assert counts["deleted_citation"] == 8
    assert store.existing_pmids(GONE) == set()
    assert [store.references_of(p) for p in GONE] == [[], []]
    revised = store.paper(REVISED)
    assert revised.title.startswith("[Corrected] Fine-tuning xylan side chains")
    assert revised.source == "baseline:pubmed26n1335.xml.gz"

    before = row_counts(store)
    again = load_baseline(store, snapshot_dir, cfg)  # the whole folder, in file-name order
    assert again.files == ["pubmed26n1334.xml.gz", "pubmed26n1335.xml.gz"]
    assert row_counts(store) == before
    assert again.inserted == 0 and again.deleted == 0 and again.skipped_deleted == 2
    # the baseline brings the old title back, then the update corrects it again
    assert again.updated == 2 and store.paper(REVISED).title.startswith("[Corrected]")


def test_real_update_file_records_its_deletions(store, cfg):
    summary = load_baseline(store, UPDATE, cfg)
    assert (summary.inserted, summary.deleted, summary.delete_listed) == (30, 0, 6)
    rows = store.conn.execute("SELECT pmid, source FROM deleted_citation ORDER BY pmid").fetchall()
    assert [tuple(r) for r in rows] == [(p, f"baseline:{UPDATE.name}") for p in DELETED_BY_REAL_UPDATE]
    assert store.counts()["ref"] > 0


def test_a_truncated_file_keeps_its_complete_records_and_the_next_file_still_loads(store, cfg, tmp_path):
    folder = tmp_path / "snap"
    folder.mkdir()
    data = BASELINE.read_bytes()
    (folder / "pubmed26n1334.xml.gz").write_bytes(data[: len(data) // 2])
    shutil.copy(UPDATE, folder / "pubmed26n1335.xml.gz")
    summary = load_baseline(store, folder, cfg)
    (problem,) = summary.problems
    assert "pubmed26n1334.xml.gz" in problem.reason and "data ends early" in problem.reason
    assert problem.source == "baseline:pubmed26n1334.xml.gz"
    assert 0 < summary.inserted - 30 < 30
    assert store.counts()["paper"] == summary.inserted


def test_progress_reports_growing_counts_up_to_the_total(store, cfg, snapshot_dir):
    seen: list[int] = []
    summary = load_baseline(store, snapshot_dir, cfg, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == summary.stored == 61


def test_missing_files_are_an_error_naming_them(tmp_path, store, cfg):
    with pytest.raises(FileNotFoundError, match="nope.xml.gz"):
        load_baseline(store, [tmp_path / "nope.xml.gz"], cfg)
    assert baseline_files(tmp_path) == []


def test_offline_search_finds_loaded_papers(store, cfg):
    load_baseline(store, [BASELINE, UPDATE], cfg)
    hits = store.search("serum uric acid AND neurocognitive", 5)  # the offline fallback of search_pubmed
    assert hits[0] == 41576520
    assert store.search("obesity[tiab] AND migrants", 3) == [26228458]
    assert store.search("", 3) == []
