"""The corpus reads of the review-question pipeline besides its candidates (`candidates.py`): the reference lists the
store holds for reviews, and every review of the local corpus (for find_existing_sr)."""

from __future__ import annotations

from ra_agent.evidence.questions.reviews import is_review
from ra_agent.models import Paper
from ra_agent.store.db import Store


def cited_by(store: Store, review: int) -> set[int]:
    """The PMIDs a paper's reference list cites, as the store holds it (empty when it holds none)."""
    return {r[0] for r in store.conn.execute("SELECT dst FROM ref WHERE src=? AND dst>0", (review,))}


def references(store: Store, reviews: list[Paper]) -> dict[int, set[int]]:
    """PMID -> the PMIDs its reference list cites, for the reviews whose list the store holds."""
    out = {}
    for review in reviews:
        cited = cited_by(store, review.pmid)
        if cited:
            out[review.pmid] = cited
    return out


def topic_reviews(store: Store) -> list[Paper]:
    """Every paper of the local corpus that `reviews.is_review` calls a review (a LIKE pre-filter on publication
    types, journal, title and abstract, then the rule)."""

    rows = store.conn.execute(
        "SELECT pmid FROM paper WHERE LOWER(pub_types) LIKE '%review%' OR LOWER(pub_types) LIKE '%meta-analysis%' "
        "OR LOWER(journal) LIKE '%cochrane%' OR LOWER(title) LIKE '%systematic%' OR LOWER(title) LIKE '%meta%' "
        "OR LOWER(abstract) LIKE '%systematic%review%' OR LOWER(abstract) LIKE '%meta%analy%'"
    )
    pmids = [r[0] for r in rows]
    papers = [p for start in range(0, len(pmids), 500) for p in store.papers(pmids[start : start + 500])]
    return [p for p in papers if is_review(p)]
