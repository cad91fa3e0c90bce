"""The store's schema: numbered migrations for SQLite and PostgreSQL (v1 plus later stages' tables)."""

from __future__ import annotations

import logging

from ra_agent.store.dialect import FTS_CONFIG, FTS_TEXT, postgres_ddl

log = logging.getLogger(__name__)

SQLITE, POSTGRESQL = "sqlite", "postgresql"
# A migration is one script in the portable subset (docs/deploy.md; translated for PostgreSQL by
# dialect.postgres_ddl), or a (sqlite, postgresql) pair where the engines need different DDL.
Migration = str | tuple[str, str]

PROV_PUBMED = 1  # edge from a PubMed ReferenceList / elink "cites"
PROV_CROSSREF = 2  # edge from a Crossref reference list

# 1: schema v1 with the detail columns ra keeps per paper; full-text search differs per engine
_V1_TABLES = """
    CREATE TABLE paper (
        pmid         INTEGER PRIMARY KEY,
        doi          TEXT,
        title        TEXT NOT NULL,
        abstract     TEXT NOT NULL DEFAULT '',
        journal      TEXT NOT NULL DEFAULT '',
        year         INT,
        article_type TEXT NOT NULL DEFAULT '',
        created_ts   INT NOT NULL,
        pub_types    TEXT NOT NULL DEFAULT '[]',
        mesh         TEXT NOT NULL DEFAULT '[]',
        sections     TEXT NOT NULL DEFAULT '[]',
        authors      TEXT NOT NULL DEFAULT '[]',
        other_ids    TEXT NOT NULL DEFAULT '{}',
        source       TEXT NOT NULL DEFAULT '',
        batch_id     TEXT,
        content_sha1 TEXT NOT NULL,
        updated_ts   INT NOT NULL
    );
    CREATE INDEX paper_doi ON paper(doi);
    CREATE INDEX paper_batch ON paper(batch_id);
    CREATE TABLE ref (
        src  INTEGER NOT NULL,
        dst  INTEGER NOT NULL,
        prov INT NOT NULL,
        PRIMARY KEY (src, dst)
    ) WITHOUT ROWID;
    CREATE INDEX ref_dst ON ref(dst);
    -- DOI-level reference list: keeps every cited DOI, mapped (dst>0) or not (dst=0)
    CREATE TABLE ref_doi (
        src  INTEGER NOT NULL,
        doi  TEXT NOT NULL,
        dst  INTEGER NOT NULL DEFAULT 0,
        prov INT NOT NULL,
        PRIMARY KEY (src, doi)
    ) WITHOUT ROWID;
    CREATE TABLE ingest_batch (
        batch_id   TEXT PRIMARY KEY,
        source     TEXT NOT NULL,
        query      TEXT NOT NULL DEFAULT '',
        n_papers   INT NOT NULL,
        created_ts INT NOT NULL
    );
    CREATE TABLE deleted_citation (
        pmid       INTEGER PRIMARY KEY,
        source     TEXT NOT NULL,
        deleted_ts INT NOT NULL
    );
    CREATE TABLE api_state (
        api                TEXT PRIMARY KEY,
        consecutive_errors INT NOT NULL DEFAULT 0,
        offline            INT NOT NULL DEFAULT 0,
        first_error_ts     INT,
        last_error         TEXT,
        updated_ts         INT NOT NULL
    );
"""
_V1_FTS_SQLITE = """
    CREATE VIRTUAL TABLE paper_fts USING fts5(
        title, abstract, content='paper', content_rowid='pmid', tokenize='porter unicode61'
    );
    CREATE TRIGGER paper_ai AFTER INSERT ON paper BEGIN
        INSERT INTO paper_fts(rowid, title, abstract) VALUES (new.pmid, new.title, new.abstract);
    END;
    CREATE TRIGGER paper_ad AFTER DELETE ON paper BEGIN
        INSERT INTO paper_fts(paper_fts, rowid, title, abstract) VALUES ('delete', old.pmid, old.title, old.abstract);
    END;
    CREATE TRIGGER paper_au AFTER UPDATE OF title, abstract ON paper BEGIN
        INSERT INTO paper_fts(paper_fts, rowid, title, abstract) VALUES ('delete', old.pmid, old.title, old.abstract);
        INSERT INTO paper_fts(rowid, title, abstract) VALUES (new.pmid, new.title, new.abstract);
    END;
"""
# as FTS5's external-content table: one tsvector per paper, kept by a trigger, under a GIN index (ranking
# reads the stored vector instead of re-parsing every matching abstract); as migration 1 created it (`english`:
# words as PostgreSQL's parser reads them, stop words dropped), which migration 8 replaces
_V1_FTS_POSTGRESQL = """
    CREATE TABLE paper_fts (
        pmid BIGINT PRIMARY KEY,
        fts  TSVECTOR NOT NULL
    );
    CREATE INDEX paper_fts_gin ON paper_fts USING GIN (fts);
    CREATE FUNCTION paper_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM paper_fts WHERE pmid = OLD.pmid;
            RETURN OLD;
        END IF;
        INSERT INTO paper_fts(pmid, fts) VALUES (NEW.pmid, to_tsvector('english', NEW.title || ' ' || NEW.abstract))
            ON CONFLICT (pmid) DO UPDATE SET fts = excluded.fts;
        RETURN NEW;
    END $$;
    CREATE TRIGGER paper_fts_sync AFTER INSERT OR DELETE OR UPDATE OF title, abstract ON paper
        FOR EACH ROW EXECUTE FUNCTION paper_fts_sync();
"""

# 8 (PostgreSQL): the tsvector splits words as FTS5's `porter unicode61` does (at every character that is not a
# letter or digit) and keeps stop words, so a search finds the same papers on both stores (dialect.FTS_CONFIG);
# every paper's tsvector is rebuilt once
_V8_FTS_POSTGRESQL = f"""
    CREATE TEXT SEARCH DICTIONARY ra_english_stem (TEMPLATE = snowball, Language = english);
    CREATE TEXT SEARCH CONFIGURATION {FTS_CONFIG} (COPY = pg_catalog.english);
    ALTER TEXT SEARCH CONFIGURATION {FTS_CONFIG}
        ALTER MAPPING FOR asciiword, word, asciihword, hword, hword_asciipart, hword_part WITH ra_english_stem;
    CREATE FUNCTION {FTS_TEXT}(t TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE STRICT
        AS $$ SELECT regexp_replace(t, '[^[:alnum:]]+', ' ', 'g') $$;
    CREATE OR REPLACE FUNCTION paper_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            DELETE FROM paper_fts WHERE pmid = OLD.pmid;
            RETURN OLD;
        END IF;
        INSERT INTO paper_fts(pmid, fts)
            VALUES (NEW.pmid, to_tsvector('{FTS_CONFIG}', {FTS_TEXT}(NEW.title || ' ' || NEW.abstract)))
            ON CONFLICT (pmid) DO UPDATE SET fts = excluded.fts;
        RETURN NEW;
    END $$;
    UPDATE paper_fts AS f SET fts = to_tsvector('{FTS_CONFIG}', {FTS_TEXT}(p.title || ' ' || p.abstract))
        FROM paper AS p WHERE p.pmid = f.pmid;
"""

_V10_MESH_TABLE = """
    CREATE TABLE paper_mesh (
        descriptor TEXT NOT NULL,
        pmid       INTEGER NOT NULL,
        PRIMARY KEY (descriptor, pmid)
    ) WITHOUT ROWID;
    CREATE INDEX paper_mesh_pmid ON paper_mesh(pmid);
    CREATE INDEX paper_with_mesh ON paper(pmid) WHERE mesh <> '[]';
"""
_V10_MESH_SQLITE = (
    _V10_MESH_TABLE
    + """
    CREATE TRIGGER paper_mesh_ai AFTER INSERT ON paper BEGIN
        INSERT OR IGNORE INTO paper_mesh(descriptor, pmid) SELECT value, new.pmid FROM json_each(new.mesh);
    END;
    CREATE TRIGGER paper_mesh_ad AFTER DELETE ON paper BEGIN
        DELETE FROM paper_mesh WHERE pmid = old.pmid;
    END;
    CREATE TRIGGER paper_mesh_au AFTER UPDATE OF mesh ON paper BEGIN
        DELETE FROM paper_mesh WHERE pmid = old.pmid;
        INSERT OR IGNORE INTO paper_mesh(descriptor, pmid) SELECT value, new.pmid FROM json_each(new.mesh);
    END;
    INSERT OR IGNORE INTO paper_mesh(descriptor, pmid) SELECT j.value, p.pmid FROM paper AS p, json_each(p.mesh) AS j;
"""
)
_V10_MESH_POSTGRESQL = (
    postgres_ddl(_V10_MESH_TABLE)
    + """
    CREATE FUNCTION paper_mesh_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            DELETE FROM paper_mesh WHERE pmid = OLD.pmid;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO paper_mesh(descriptor, pmid)
                SELECT d, NEW.pmid FROM jsonb_array_elements_text(NEW.mesh::jsonb) AS d ON CONFLICT DO NOTHING;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER paper_mesh_sync AFTER INSERT OR DELETE OR UPDATE OF mesh ON paper
        FOR EACH ROW EXECUTE FUNCTION paper_mesh_sync();
    INSERT INTO paper_mesh(descriptor, pmid)
        SELECT d, p.pmid FROM paper AS p, jsonb_array_elements_text(p.mesh::jsonb) AS d ON CONFLICT DO NOTHING;
"""
)

# Each entry is one migration; SQLite's PRAGMA user_version / PostgreSQL's ra_schema table record how many ran.
MIGRATIONS: tuple[Migration, ...] = (
    (_V1_TABLES + _V1_FTS_SQLITE, postgres_ddl(_V1_TABLES) + _V1_FTS_POSTGRESQL),
    # 2: clusters, goals, tool calls and search candidates
    """
    CREATE TABLE cluster_manifest (
        cluster_id      TEXT PRIMARY KEY,
        label           TEXT NOT NULL,
        summary         TEXT NOT NULL DEFAULT '',
        frozen_centroid BLOB NOT NULL,
        centroid_dim    INT NOT NULL,
        feature_space   TEXT NOT NULL,
        tau_assign      REAL NOT NULL,
        parent_id       TEXT,
        status          TEXT NOT NULL DEFAULT 'active',
        merged_into     TEXT,
        unstable        INT NOT NULL DEFAULT 0,
        accepted_new    INT NOT NULL DEFAULT 0,
        expansion_halt  TEXT,
        audit_by        TEXT NOT NULL DEFAULT '',
        created_ts      INT NOT NULL
    );
    CREATE TABLE cluster_member (
        cluster_id  TEXT NOT NULL,
        pmid        INTEGER NOT NULL,
        distance    REAL NOT NULL,
        assigned_ts INT NOT NULL,
        PRIMARY KEY (cluster_id, pmid)
    ) WITHOUT ROWID;
    CREATE INDEX cluster_member_pmid ON cluster_member(pmid);
    CREATE TABLE unassigned_pool (
        pmid     INTEGER PRIMARY KEY,
        reason   TEXT NOT NULL,
        added_ts INT NOT NULL
    );
    CREATE TABLE cluster_metrics (
        cluster_id       TEXT NOT NULL,
        computed_ts      INT NOT NULL,
        size             INT NOT NULL,
        cvgr             REAL,
        ers              REAL,
        het_numeric      REAL,
        dispersion       REAL,
        sr_overlap       REAL,
        eligible_trials  INT,
        prisma_compliant INT,
        mean_year        REAL,
        PRIMARY KEY (cluster_id, computed_ts)
    );
    CREATE TABLE goal (
        goal_id       TEXT PRIMARY KEY,
        handbook_path TEXT NOT NULL,
        primary_goal  TEXT NOT NULL,
        status        TEXT NOT NULL,
        cycle         INT NOT NULL DEFAULT 0,
        created_ts    INT NOT NULL,
        updated_ts    INT NOT NULL
    );
    CREATE TABLE tool_call (
        id              INTEGER PRIMARY KEY,
        goal_id         TEXT NOT NULL,
        cycle           INT NOT NULL,
        tool            TEXT NOT NULL,
        args            TEXT NOT NULL,
        status          TEXT NOT NULL,
        result          TEXT,
        idempotency_key TEXT UNIQUE,
        started_ts      INT NOT NULL,
        finished_ts     INT
    );
    CREATE TABLE candidate_papers (
        query_key TEXT NOT NULL,
        pmid      INTEGER NOT NULL,
        rank      INT NOT NULL,
        goal_id   TEXT,
        added_ts  INT NOT NULL,
        PRIMARY KEY (query_key, pmid)
    ) WITHOUT ROWID;
    CREATE TABLE search_run (
        query_key  TEXT PRIMARY KEY,
        query      TEXT NOT NULL,
        count      INT NOT NULL,
        fetched    INT NOT NULL,
        offline    INT NOT NULL,
        ran_ts     INT NOT NULL
    );
    """,
    # 3: searches asked for (by the CLI, a handbook or the agent) and files loaded (baseline, exports)
    """
    CREATE TABLE search_query (
        query_key  TEXT PRIMARY KEY,
        query      TEXT NOT NULL,
        since      TEXT,
        retmax     INT,
        origin     TEXT NOT NULL DEFAULT 'user',  -- 'user' or the goal_id that asked for it
        created_ts INT NOT NULL
    );
    CREATE TABLE loaded_file (
        sha1      TEXT PRIMARY KEY,
        name      TEXT NOT NULL,
        kind      TEXT NOT NULL,
        papers    INT NOT NULL,
        deleted   INT NOT NULL,
        problems  INT NOT NULL,
        loaded_ts INT NOT NULL
    );
    """,
    # 4: `ra ask` telemetry (seed 001) and the Mind-KB playbook collection (seed 002); IF NOT EXISTS because
    # workspaces made before this migration may already hold them
    """
CREATE TABLE IF NOT EXISTS ask_run (
    id                INTEGER PRIMARY KEY,
    started_ts        INT NOT NULL,
    question          TEXT NOT NULL,
    brain             TEXT NOT NULL,
    stop_reason       TEXT NOT NULL,                -- answered | tool_limit | no_progress | schema_error | brain_error
    success           INT NOT NULL,                 -- Mind-KB success heuristic (seed 002)
    turns             INT NOT NULL,                 -- planner (decide) turns
    steps             INT NOT NULL,                 -- LLM calls + tool runs
    tool_calls        INT NOT NULL,
    repairs           INT NOT NULL,
    tokens_in         INT NOT NULL,
    tokens_out        INT NOT NULL,
    latency_ms        INT NOT NULL,
    citations         TEXT NOT NULL DEFAULT '[]',   -- PMIDs cited and held in the store
    removed_citations TEXT NOT NULL DEFAULT '[]',   -- PMIDs cited but not in the store (removed from the answer)
    retrieved         TEXT NOT NULL DEFAULT '[]',   -- [{"pmid", "score"}] in retrieval order
    step_log          TEXT NOT NULL DEFAULT '[]',   -- [{"kind", "tool", "ms", "tokens_in", "tokens_out", "new_pmids", "ok"}]
    playbooks_used    TEXT NOT NULL DEFAULT '[]',
    playbook_id       TEXT,
    error             TEXT
);
CREATE INDEX IF NOT EXISTS ask_run_started ON ask_run(started_ts);
CREATE TABLE IF NOT EXISTS mind_kb (
    id              TEXT PRIMARY KEY,               -- sha256 of the canonical step sequence
    collection      TEXT NOT NULL DEFAULT 'Mind-KB',
    kind            TEXT NOT NULL DEFAULT 'playbook',
    source          TEXT NOT NULL,                  -- 'ask' | 'agent_cycle'
    source_session  TEXT NOT NULL DEFAULT '',
    original_prompt TEXT NOT NULL,
    steps           TEXT NOT NULL,                  -- canonical JSON [{"content": ..., "role": ...}, ...]
    dense_text      TEXT NOT NULL,
    model           TEXT NOT NULL,                  -- embedder slug of `vector`
    dim             INT NOT NULL,
    vector          BLOB NOT NULL,                  -- float16 unit vector of dense_text
    metadata        TEXT NOT NULL DEFAULT '{}',     -- {"collection", "kind", "source", "source_session", "original_prompt"}
    count           INT NOT NULL DEFAULT 1,
    created_ts      INT NOT NULL,
    last_seen_ts    INT NOT NULL
);
CREATE INDEX IF NOT EXISTS mind_kb_collection ON mind_kb(collection, count);
    """,
    # 5: centroid_PICO beside the frozen (E) centroid, set once PICO vectors exist for the members
    """
    ALTER TABLE cluster_manifest ADD COLUMN pico_centroid BLOB;
    ALTER TABLE cluster_manifest ADD COLUMN pico_dim INT;
    """,
    # 6: the outcome of each search run, so a failed or cut-short search is never read as an empty success;
    # Crossref DOIs that map to no PMID live in ref_doi only (they were also `ref` rows with dst = 0)
    # status: ok | partial (efetch stopped early: count is PubMed's, fetched what arrived) | failed (no answer:
    # count/fetched keep the last good run, 0 when there was none) | offline (answered from the local corpus)
    """
    ALTER TABLE search_run ADD COLUMN status TEXT NOT NULL DEFAULT 'ok';
    ALTER TABLE search_run ADD COLUMN error TEXT NOT NULL DEFAULT '';
    DELETE FROM ref WHERE dst = 0;
    """,
    # 7: screening (issue 17): a project's record set, every decision (append-only, numbered per project) and each
    # retrained model's spec, weight digest and ranking, so a screening run can be replayed; portable SQL
    # (no WITHOUT ROWID, no AUTOINCREMENT: seq is MAX(seq) + 1 inside the deciding transaction)
    """
    CREATE TABLE screen_project (
        project      TEXT PRIMARY KEY,
        source       TEXT NOT NULL,                -- 'search' (a registered query_key) | 'import' (a file)
        ref          TEXT NOT NULL,                -- the query_key or the file name
        created_ts   BIGINT NOT NULL
    );
    CREATE TABLE screen_record (
        project  TEXT NOT NULL,
        pmid     BIGINT NOT NULL,
        position INTEGER NOT NULL,                 -- order in the search or the file
        PRIMARY KEY (project, pmid)
    );
    CREATE TABLE screen_decision (
        project    TEXT NOT NULL,
        seq        INTEGER NOT NULL,               -- 1, 2, ... per project; the latest per pmid counts
        pmid       BIGINT NOT NULL,
        label      INTEGER NOT NULL,               -- 1 include, 0 exclude
        reason     TEXT NOT NULL DEFAULT '',
        origin     TEXT NOT NULL,                  -- 'user' | 'seed:<column>' (labels of an import)
        decided_ts BIGINT NOT NULL,
        PRIMARY KEY (project, seq)
    );
    CREATE INDEX screen_decision_pmid ON screen_decision(project, pmid);
    CREATE TABLE screen_model (
        project     TEXT NOT NULL,
        trained_seq INTEGER NOT NULL,              -- the model learnt from the decisions seq <= trained_seq
        trained_ts  BIGINT NOT NULL,
        spec        TEXT NOT NULL,                 -- JSON: classifier, features, query strategy, knobs, seed
        digest      TEXT NOT NULL,                 -- sha1 of the fitted weights (a retrain must reproduce it)
        top_terms   TEXT NOT NULL DEFAULT '[]',    -- JSON: the heaviest features towards include
        ranking     TEXT NOT NULL DEFAULT '[]',    -- JSON: [[pmid, score], ...] of the undecided records, best first
        PRIMARY KEY (project, trained_seq)
    );
    """,
    ("-- nothing: FTS5 splits and stems as it did", _V8_FTS_POSTGRESQL),
    # 9: MeSH headings with their subheadings and major-topic stars as indexed ("Hypertension/*chemically induced"),
    # so the review-question rules can tell the condition a trial treats from one it reports as an adverse effect
    """
    ALTER TABLE paper ADD COLUMN mesh_terms TEXT NOT NULL DEFAULT '[]';
    """,
    # 10: the MeSH headings each paper carries, one row per (descriptor, paper), kept by triggers and filled from the
    # papers already stored, so the review-question rules read a heading's records and counts through an index
    # instead of loading every record (evidence/questions/candidates.py); `paper_with_mesh` counts the papers that
    # carry any heading
    (_V10_MESH_SQLITE, _V10_MESH_POSTGRESQL),
    # 11: the languages of publication as PubMed codes (JSON ["eng"], ["ger"]; `Paper.language`), so a handbook's
    # "English-language publications" reads the record's language; '[]' (not said) for papers stored before it,
    # filled when their source is read again
    """
    ALTER TABLE paper ADD COLUMN language TEXT NOT NULL DEFAULT '[]';
    """,
)


def migration_sql(migration: Migration, dialect: str) -> str:
    """The script of one migration for `dialect` (SQLITE or POSTGRESQL)."""
    if isinstance(migration, tuple):
        sqlite, postgresql = migration
        return postgresql if dialect == POSTGRESQL else sqlite
    return postgres_ddl(migration) if dialect == POSTGRESQL else migration
