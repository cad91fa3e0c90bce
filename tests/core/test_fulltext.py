"""Full-text queries built by rules (store/fulltext.py) on SQLite and PostgreSQL: prefix queries in an index of stems
find every longer word, and a built query finds the records holding its words, on real records (CD006468's)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.store.fulltext import AllOf, AnyOf, Phrase, Stemmer, matching, stem_safe_prefixes

SUBSET = Path(__file__).resolve().parents[1] / "fixtures" / "gaps" / "CD006468_catheter_subset.csv"


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    with SUBSET.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def test_a_prefix_query_finds_every_longer_word_though_the_index_keeps_stems(store_target, rows):
    """Every word of the 420 records and every prefix of it: the stem the index keeps for the word starts with the
    stem of the prefix's stem-safe cut (what a prefix query looks up: both engines stem the query's prefix too)."""
    with Store(store_target) as store:
        stemmer = Stemmer(store)
        words = sorted({w for r in rows for w in words_of(f"{r['title']} {r['abstract']}") if w.isascii()})
        safe = stem_safe_prefixes({w[:n] for w in words for n in range(1, len(w) + 1)}, stemmer)
        stems = stemmer.stems([*words, *safe.values()])
        missed = [(w, w[:n]) for w in words for n in range(1, len(w) + 1)
                  if not stems[w].startswith(stems[safe[w[:n]]] if safe[w[:n]] else "")]  # fmt: skip
        assert len(words) > 5000 and not missed
        # the stem of "schizophrenic" is shorter than "schizophreni": the query's prefix is cut before it
        prefix = stem_safe_prefixes(["schizophreni"], stemmer)["schizophreni"]
        assert stemmer.stem("schizophrenic").startswith(stemmer.stem(prefix)) and "schizophren".startswith(prefix)
        assert stem_safe_prefixes(["cancer", "catheter"], stemmer) == {"cancer": "cancer", "catheter": "cathet"}


def test_a_built_query_finds_the_records_holding_its_words(store_target, rows):
    papers = [Paper(pmid=int(r["pubmedID"]), title=r["title"], abstract=r["abstract"]) for r in rows]
    query = AllOf((AnyOf((Phrase(("central", "venous", "cathet"), prefix=True), Phrase(("cvc",)))),
                   Phrase(("heparin",), prefix=True)))  # fmt: skip
    with Store(store_target) as store:
        store.upsert_papers(papers, source="import:subset.csv")
        found = matching(store, query)
        in_titles = matching(store, query, column="title")
    text = {p.pmid: f"{p.title} {p.abstract}".lower() for p in papers}
    expected = {pmid for pmid, t in text.items()
                if re.search(r"\bcentral venous cathet|\bcvc\b", t) and re.search(r"\bheparin", t)}  # fmt: skip
    assert found is not None and in_titles is not None
    assert expected and expected <= found  # the stems find more ("catheterization"), never fewer
    assert all(re.search(r"\bheparin", text[pmid]) for pmid in found)
    assert in_titles <= found
    assert matching(store, AllOf(())) is None and matching(store, AnyOf(())) == set()
