"""The store on SQLite and on PostgreSQL: schema, idempotent upserts, prov OR-merge, batches, crash consistency, FTS,
concurrent writers."""

import csv
from pathlib import Path

import demo_corpus
import pytest

from ra_agent.ingest.medline import iter_pubmed_xml
from ra_agent.models import Paper, Reference
from ra_agent.store.db import Store
from ra_agent.store.schema import MIGRATIONS, POSTGRESQL, PROV_CROSSREF, PROV_PUBMED, SQLITE


@pytest.fixture(scope="module")
def demo_papers() -> list[Paper]:
    return demo_corpus.demo_papers()[:300]


def test_fresh_store_is_fully_migrated(store_target):
    store = Store(store_target)
    assert store.schema_version == len(MIGRATIONS)
    if store.dialect == SQLITE:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = store.table_names()
    for wanted in (
        "paper",
        "ref",
        "cluster_manifest",
        "cluster_member",
        "cluster_metrics",
        "goal",
        "tool_call",
        "candidate_papers",
        "search_query",
        "loaded_file",
    ):
        assert wanted in tables
    store.close()
    # reopening runs nothing again
    assert Store(store_target).schema_version == len(MIGRATIONS)


def test_newer_schema_is_refused(store_target):
    store = Store(store_target)
    if store.dialect == SQLITE:
        store.conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    else:
        store.conn.execute("UPDATE ra_schema SET version = ?", (len(MIGRATIONS) + 1,))
    store.close()
    with pytest.raises(RuntimeError, match="newer than this ra"):
        Store(store_target)


def test_reingesting_the_same_records_changes_no_row_counts(store_target, demo_papers):
    store = Store(store_target, commit_every=64)
    first = store.upsert_papers(demo_papers, source="import:demo.csv", batch_size=100)
    before = store.counts()
    second = store.upsert_papers(demo_papers, source="import:demo.csv", batch_size=100)
    assert first.inserted == len(demo_papers) and second.unchanged == len(demo_papers)
    assert second.inserted == second.updated == 0 and second.batches == ()
    assert store.counts() == before


def test_changed_record_is_updated_in_place(store_target, demo_papers):
    store = Store(store_target)
    store.upsert_papers(demo_papers[:10], source="efetch")
    revised = Paper(**{**demo_papers[0].__dict__, "title": demo_papers[0].title + " (revised)"})
    stats = store.upsert_papers([revised], source="efetch")
    assert stats.updated == 1
    assert store.paper(revised.pmid).title.endswith("(revised)")
    assert store.counts()["paper"] == 10


def test_batches_hold_at_most_batch_size_and_match_rows(store_target, demo_papers):
    store = Store(store_target, commit_every=37)
    stats = store.upsert_papers(demo_papers, source="efetch", query="ppi", batch_size=128)
    batches = store.batches()
    assert [b["batch_id"] for b in batches] == list(stats.batches)
    assert [b["n_papers"] for b in batches] == [128, 128, len(demo_papers) - 256]
    for b in batches:
        assert len(store.pmids_for_batch(b["batch_id"])) == b["n_papers"]


def test_ref_dedup_and_prov_or_merge(store_target, demo_papers):
    store = Store(store_target)
    a, b, c = (p.pmid for p in demo_papers[:3])
    store.add_refs([(a, b, PROV_PUBMED), (a, c, PROV_PUBMED)])
    store.add_refs([(a, b, PROV_PUBMED)])
    assert store.counts()["ref"] == 2
    store.add_refs([(a, b, PROV_CROSSREF)])
    assert store.conn.execute("SELECT prov FROM ref WHERE src=? AND dst=?", (a, b)).fetchone()[0] == 3
    assert store.counts()["ref"] == 2


def test_unmapped_dois_are_kept_and_mapped_later(store_target, demo_papers):
    store = Store(store_target)
    src, dst = demo_papers[0].pmid, demo_papers[1].pmid
    store.add_doi_refs(src, {"10.1136/bmj.318.7182.502": None, "10.1000/unmapped": None}, PROV_CROSSREF)
    assert store.counts()["ref_unmapped"] == 2
    store.add_doi_refs(src, {"10.1136/bmj.318.7182.502": dst}, PROV_CROSSREF)
    assert store.counts()["ref_unmapped"] == 1
    assert Reference(pmid=dst) in store.references_of(src)
    assert Reference(doi="10.1000/unmapped") in store.references_of(src)


def test_crash_mid_batch_leaves_whole_committed_chunks(store_target, demo_papers):
    store = Store(store_target, commit_every=50)

    def crashing():
        for i, paper in enumerate(demo_papers):
            if i == 120:
                raise ConnectionError("efetch connection dropped")
            yield paper

    with pytest.raises(ConnectionError):
        store.upsert_papers(crashing(), source="efetch", query="ppi", batch_size=1000)
    store.close()
    store = Store(store_target, commit_every=50)
    assert store.counts()["paper"] == 100  # two whole chunks of 50, the third rolled back
    (batch,) = store.batches()
    assert batch["n_papers"] == len(store.pmids_for_batch(batch["batch_id"])) == 100
    again = store.upsert_papers(demo_papers, source="efetch", query="ppi", batch_size=1000)
    assert again.inserted == len(demo_papers) - 100 and again.unchanged == 100
    assert store.counts()["paper"] == len(demo_papers)


def test_fts_search_finds_real_records(store_target, demo_papers):
    store = Store(store_target)
    store.upsert_papers(demo_papers, source="import:demo.csv")
    hits = store.search("omeprazole AND reflux[tiab]", limit=50)
    assert hits
    for pmid in hits:
        text = (store.paper(pmid).title + " " + store.paper(pmid).abstract).lower()
        assert "omeprazol" in text and "reflux" in text
    assert store.search("NOT") == []


def test_delete_citations_removes_rows_and_remembers(store_target, demo_papers):
    store = Store(store_target)
    store.upsert_papers(demo_papers[:5], source="baseline:x")
    a, b = demo_papers[0].pmid, demo_papers[1].pmid
    store.add_refs([(a, b, PROV_PUBMED)])
    assert store.delete_citations([a, 999999999], source="update:y") == 1
    assert store.paper(a) is None and store.counts()["ref"] == 0
    assert store.counts()["deleted_citation"] == 2
    assert a not in store.search(demo_papers[0].title)


def test_offline_counter_switches_after_threshold(store_target):
    store = Store(store_target)
    for i in range(4):
        assert store.record_api_result("eutils", False, f"502 #{i}", offline_after=5)["offline"] == 0
    assert store.record_api_result("eutils", False, "502 #5", offline_after=5)["offline"] == 1
    assert store.record_api_result("eutils", True, offline_after=5)["offline"] == 0


WRITERS = 4


def _write(target, window: tuple[int, int], bit: int, start) -> tuple[int, int]:
    """One writer process: upsert a window of the demo records (small commits), then OR its bit into shared edges."""
    every = demo_corpus.demo_papers()
    start.wait()
    with Store(target, commit_every=20) as store:
        stats = store.upsert_papers(every[window[0] : window[1]], source="efetch", query="ppi", batch_size=64)
        store.add_refs([(every[0].pmid, p.pmid, bit) for p in every[1:40]])
        return stats.inserted, stats.unchanged


def test_concurrent_writers_lose_nothing(store_target, demo_papers):
    """4 processes upsert overlapping windows of one source at once: every record once, batches whole, edges merged."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    Store(store_target).close()  # migrated before the writers start
    windows = [(i * 50, i * 50 + 150) for i in range(WRITERS)]  # each overlaps the next by 100 records
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(WRITERS, mp_context=ctx) as pool:
        start = manager.Barrier(WRITERS)
        futures = [pool.submit(_write, store_target, w, 1 << i, start) for i, w in enumerate(windows)]
        results = [f.result(timeout=300) for f in futures]
    union = {p.pmid for p in demo_papers[: windows[-1][1]]}
    store = Store(store_target)
    assert store.existing_pmids(union) == union and store.counts()["paper"] == len(union)
    assert sum(inserted for inserted, _ in results) == len(union)  # each record inserted by exactly one writer
    assert sum(inserted + unchanged for inserted, unchanged in results) == WRITERS * 150
    batches = store.batches()
    assert sum(b["n_papers"] for b in batches) == len(union)
    assert all(len(store.pmids_for_batch(b["batch_id"])) == b["n_papers"] <= 64 for b in batches)
    edges = dict(store.conn.execute("SELECT dst, prov FROM ref WHERE src=?", (demo_papers[0].pmid,)).fetchall())
    assert edges == {p.pmid: (1 << WRITERS) - 1 for p in demo_papers[1:40]}  # every writer's bit, none lost
    store.close()


def test_fts_query_with_a_group_beside_a_phrase_finds_its_record(store_target):
    """A title such as "Continued (5-year) followup ..." is a valid query on both engines (FTS5 needs the AND)."""
    (paper,) = [p for p in demo_corpus.demo_papers() if p.title.startswith("Continued (5-year) followup")]
    store = Store(store_target)
    store.upsert_papers([paper], source="import:demo.csv")
    assert store.search("Continued (5-year) followup") == [paper.pmid]
    assert store.search("followup NOT (5-year)") == []
    assert store.search("followup NOT (tenfold)") == [paper.pmid]


def test_the_sqlite_idioms_ra_modules_use_give_the_same_rows_on_both_engines(store_target):
    """INSERT OR IGNORE / OR REPLACE (also from a SELECT), `?` and `%` inside literals, a bool parameter."""
    store = Store(store_target)
    row = "INSERT OR {} INTO loaded_file(sha1, name, kind, papers, deleted, problems, loaded_ts) VALUES (?,?,?,?,?,?,?)"
    store.conn.execute(row.format("IGNORE"), ("s1", "first.csv", "csv", 1, 0, 0, 1))
    store.conn.execute(row.format("IGNORE"), ("s1", "ignored.csv", "csv", 2, 0, 0, 2))
    store.conn.execute(row.format("REPLACE"), ("s2", "old.ris", "ris", 3, 0, 0, 3))
    store.conn.execute(row.format("REPLACE"), ("s2", "new.ris", "ris", 4, 0, 0, 4))
    store.conn.execute(row.format("REPLACE"), ("s3", "100%?.csv", "csv", 5, True, False, 5))
    rows = store.conn.execute("SELECT sha1, name, papers, deleted FROM loaded_file ORDER BY sha1").fetchall()
    assert [tuple(r) for r in rows] == [("s1", "first.csv", 1, 0), ("s2", "new.ris", 4, 0), ("s3", "100%?.csv", 5, 1)]
    like = store.conn.execute(
        "SELECT name FROM loaded_file WHERE name LIKE '%\\%?%' ESCAPE '\\' AND kind = ?", ("csv",)
    )
    assert [r["name"] for r in like] == ["100%?.csv"]
    pool = "INSERT OR REPLACE INTO unassigned_pool(pmid, reason, added_ts) SELECT ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM paper WHERE pmid = ?)"
    store.conn.executemany(pool, [(7, "noise", 1, 7), (7, "dropped:c1", 2, 7), (8, "noise", 1, 8)])
    assert dict(store.conn.execute("SELECT pmid, reason FROM unassigned_pool").fetchall()) == {
        7: "dropped:c1",
        8: "noise",
    }


# label queries of the demo's clusters as find_existing_sr sends them offline (the first is the one whose review
# set differed between the stores under CI: PostgreSQL's parser read "mg/day" as a file path, so no "mg"), and
# terms with the punctuation, numbers and stop words abstracts carry
SAME_ON_BOTH = [
    "(ii iii AND reflux oesophagitis) OR (ii iii AND pantoprazole mg) OR (ii iii AND savary-miller) OR "
    "(reflux oesophagitis AND pantoprazole mg) OR (reflux oesophagitis AND savary-miller) OR "
    "(pantoprazole mg AND savary-miller)",
    "(duodenal ulcer AND triple therapy) OR (duodenal ulcer AND clarithromycin) OR (triple therapy AND eradication)",
    "(zollinger-ellison AND syndrome) OR (zollinger-ellison AND acid-related) OR (syndrome AND histamine)",
    '"gastro-oesophageal reflux" AND placebo',
    '"40 mg" AND omeprazole',
    '"H2 receptor" OR "h2-receptor antagonists"',
    '"quality of life" AND heartburn',
    "mg/day AND (lansoprazole OR esomeprazole)",
]


def test_a_search_finds_the_same_papers_on_sqlite_and_postgresql(pg_server, tmp_path):
    """The whole demo corpus on both stores: each query finds the same PMIDs (PostgreSQL splits words at every
    character that is not a letter or digit and keeps stop words, as FTS5's porter unicode61 does)."""
    papers = demo_corpus.demo_papers()
    with Store(tmp_path / "ra.sqlite") as sqlite, Store(pg_server.new_database()) as postgresql:
        for store in (sqlite, postgresql):
            store.upsert_papers(papers, source="import:demo.csv", batch_size=1000)
        for query in SAME_ON_BOTH:
            found = sqlite.search(query, limit=len(papers))
            assert found, query
            assert sorted(postgresql.search(query, limit=len(papers))) == sorted(found), query
        assert 9777317 in sqlite.search(SAME_ON_BOTH[0], limit=len(papers))  # its "mg" is only in "mg/day"


def test_migration_8_rebuilds_the_tsvectors_of_an_existing_postgresql_store(pg_server):
    """A store made before migration 8 (english tsvectors: "mg/day" one token) is searched as FTS5 would search it
    once it opens with this ra: the migration rebuilds every paper's tsvector."""
    papers = [p for p in demo_corpus.demo_papers() if p.pmid in (9777317, 12743434)]
    url = pg_server.new_database()
    with Store(url) as store:
        store.upsert_papers(papers, source="import:demo.csv")
        with store.transaction():  # back to schema 7, as such a store was left
            for sql in (
                "UPDATE paper_fts AS f SET fts = to_tsvector('english', p.title || ' ' || p.abstract) FROM paper AS p "
                "WHERE p.pmid = f.pmid",
                "DROP TEXT SEARCH CONFIGURATION ra_fts",
                "DROP TEXT SEARCH DICTIONARY ra_english_stem",
                "DROP FUNCTION ra_fts_text(TEXT)",
                UNDO_MIGRATION_11,
                *UNDO_MIGRATION_10[POSTGRESQL],
                "ALTER TABLE paper DROP COLUMN mesh_terms",  # migration 9's column
                "UPDATE ra_schema SET version = 7",
            ):
                store.conn.execute(sql)
        old = "SELECT pmid FROM paper_fts WHERE fts @@ to_tsquery('english', 'mg') ORDER BY pmid"
        assert [r[0] for r in store.conn.execute(old)] == [12743434]  # 9777317 has "mg" only in "mg/day"
    with Store(url) as store:
        assert store.schema_version == len(MIGRATIONS) == 11
        assert sorted(store.search("pantoprazole AND mg")) == [9777317, 12743434]


UNDO_MIGRATION_11 = "ALTER TABLE paper DROP COLUMN language"  # back to schema 10, on either engine


# ---------------------------------------------------------------------------- the MeSH index (migration 10)
STUDY_REPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "gaps" / "CD006468_study_reports.csv"
BASELINE = Path(__file__).resolve().parents[1] / "fixtures" / "medline" / "pmparser_baseline_pubmed26n1334.xml.gz"
# back to schema 9: what migration 10 added, per engine
UNDO_MIGRATION_10 = {
    SQLITE: ("DROP TRIGGER paper_mesh_ai", "DROP TRIGGER paper_mesh_ad", "DROP TRIGGER paper_mesh_au",
             "DROP TABLE paper_mesh", "DROP INDEX paper_with_mesh"),
    POSTGRESQL: ("DROP TRIGGER paper_mesh_sync ON paper", "DROP FUNCTION paper_mesh_sync()", "DROP TABLE paper_mesh",
                 "DROP INDEX paper_with_mesh"),
}  # fmt: skip


def mesh_papers() -> list[Paper]:
    """Five real records of the shared key with their MeSH descriptors (read from the CSV's keywords, the
    subheadings and major-topic stars cut off), independent of ra's importers."""
    with STUDY_REPORTS.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [Paper(pmid=int(r["pubmedID"]), title=r["title"], abstract=r["abstract"],
                  mesh=[k.split("/")[0].strip().lstrip("*") for k in r["keywords"].split(";") if k.strip()])
            for r in rows]  # fmt: skip


def indexed_headings(store: Store) -> set[tuple[str, int]]:
    return {(r[0], r[1]) for r in store.conn.execute("SELECT descriptor, pmid FROM paper_mesh")}


def test_the_mesh_index_follows_inserts_updates_and_deletes(store_target):
    papers = mesh_papers()
    assert all(p.mesh for p in papers)
    store = Store(store_target)
    store.upsert_papers([*papers, *demo_corpus.demo_papers()[:3]], source="import:gaps.csv")  # the demo's: no MeSH
    assert indexed_headings(store) == {(h, p.pmid) for p in papers for h in p.mesh}
    assert store.conn.execute("SELECT COUNT(*) FROM paper WHERE mesh <> '[]'").fetchone()[0] == len(papers)
    first, second = papers[0], papers[1]
    first.mesh = ["Neoplasms", "Heparin, Low-Molecular-Weight"]
    store.upsert_papers([first], source="import:gaps.csv")
    store.delete_citations([second.pmid], source="update:x")
    assert indexed_headings(store) == {(h, p.pmid) for p in [first, *papers[2:]] for h in p.mesh}


def test_migration_10_indexes_the_headings_of_papers_stored_before_it(store_target):
    papers = mesh_papers()
    with Store(store_target) as store:
        store.upsert_papers(papers, source="import:gaps.csv")
        with store.transaction():  # back to schema 9, as such a store was left
            for sql in (UNDO_MIGRATION_11, *UNDO_MIGRATION_10[store.dialect]):
                store.conn.execute(sql)
            store._set_schema_version(9)
        assert "paper_mesh" not in store.table_names()
    with Store(store_target) as store:
        assert store.schema_version == len(MIGRATIONS) == 11
        assert indexed_headings(store) == {(h, p.pmid) for p in papers for h in p.mesh}
        store.delete_citations([papers[0].pmid], source="update:x")  # the triggers work after the migration
        assert {pmid for _, pmid in indexed_headings(store)} == {p.pmid for p in papers[1:]}


# ---------------------------------------------------------------------------- languages (migration 11)
def baseline_papers() -> list[Paper]:
    """The 30 real records of a PubMed baseline excerpt: 29 in English, PMID 41605226 in German."""
    return [p for p in iter_pubmed_xml(BASELINE) if isinstance(p, Paper)]


def test_the_language_of_a_record_is_stored_and_read_back(store_target):
    papers = baseline_papers()
    with Store(store_target) as store:
        store.upsert_papers(papers, source="baseline:pubmed26n1334.xml.gz")
        assert store.paper(41605226).language == ["ger"]
        assert {p.pmid: p.language for p in store.papers([p.pmid for p in papers])} == {
            p.pmid: p.language for p in papers
        }
        assert store.upsert_papers(papers, source="baseline:pubmed26n1334.xml.gz").unchanged == len(papers)
        german = store.paper(41605226)
        german.language = ["ger", "eng"]  # a language is content: a record saying another one is an update
        assert store.upsert_papers([german], source="efetch").updated == 1
        assert store.paper(41605226).language == ["ger", "eng"]


def test_migration_11_keeps_the_papers_stored_before_it_with_their_language_unknown(store_target):
    """A store made before migration 11 opens with the column, its papers of unknown language ([]); reading their
    source again fills it in."""
    papers = baseline_papers()
    without = [Paper(**{**p.__dict__, "language": []}) for p in papers]  # as ra stored them before
    with Store(store_target) as store:
        store.upsert_papers(without, source="baseline:pubmed26n1334.xml.gz")
        with store.transaction():  # back to schema 10, as such a store was left
            store.conn.execute(UNDO_MIGRATION_11)
            store._set_schema_version(10)
    with Store(store_target) as store:
        assert store.schema_version == len(MIGRATIONS) == 11
        assert all(p.language == [] for p in store.papers([p.pmid for p in papers]))
        again = store.upsert_papers(papers, source="baseline:pubmed26n1334.xml.gz")
        assert again.updated == len(papers)  # each record now says its language
        assert store.paper(41605226).language == ["ger"] and store.paper(papers[0].pmid).language == ["eng"]
