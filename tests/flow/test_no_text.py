"""PMID-only records (44 in the real demo export) are stored but never embedded, and do not block the index."""

import numpy as np
from demo_corpus import demo_rows, write_demo_subset

from ra_agent.embed.embedder import SentenceTransformerEmbedder
from ra_agent.embed.index import build_index, embed_missing, vector_store_for
from ra_agent.ingest.importers import import_file
from ra_agent.workspace import open_store

from .conftest import demo_cfg


def test_pmid_only_rows_are_kept_but_not_embedded(tmp_path):
    rows = demo_rows()
    bare = [r for r in rows if not r["title"].strip() and not r["abstract"].strip()][:3]
    full = [r for r in rows if r["abstract"].strip()][:5]
    subset = write_demo_subset(tmp_path / "subset.csv", full + bare)
    cfg = demo_cfg(tmp_path)
    embedder = SentenceTransformerEmbedder(cfg)
    with open_store(cfg) as store:
        summary = import_file(store, subset, cfg)
        assert summary.inserted == 8 and len(summary.warnings) >= 3  # kept, with a warning naming the field
        vectors = vector_store_for(cfg, embedder)
        result = embed_missing(vectors, embedder, store, store.all_pmids(), cfg)
        index = build_index(cfg, store)
    assert sorted(result.no_text) == sorted(int(r["pubmedID"]) for r in bare)
    assert result.embedded == 5 and len(vectors) == 5
    assert index.missing == 0 and index.active == vectors.slug
    assert np.allclose(np.linalg.norm(vectors.matrix("E").astype(np.float32), axis=1), 1, atol=1e-3)
