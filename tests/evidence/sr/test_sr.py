"""find_existing_sr (live, offline, failing API), pivot semantics, prisma_check, propose_alternative_pico, spawned handbooks."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from replay import EutilsReplayServer, Fault

from evidence.conftest import HANDBOOK, ScriptedBrain
from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.spawn import spawn_handbook
from ra_agent.config import Config
from ra_agent.evidence.pico.extract import is_eligible_trial, read_pico
from ra_agent.evidence.prisma.check import (
    PRISMA_ITEMS,
    RULES_PRISMA,
    check_draft,
    review_statuses,
    review_text,
    rule_evidence,
)
from ra_agent.evidence.questions.reviews import review_reason
from ra_agent.evidence.sr.alternative import RULES_ALT_PICO, propose_alternative_pico
from ra_agent.evidence.sr.overlap import SrOverlap, load_sr_overlap, sr_result_path
from ra_agent.evidence.sr.search import find_existing_sr, label_terms, pubmed_sr_query
from ra_agent.ingest.eutils import EutilsClient
from ra_agent.llm.base import BrainError
from ra_agent.llm.rules_brain import RulesBrain
from ra_agent.topics.features import centroid, decode_centroid
from ra_agent.topics.view import cluster_row, e_query_vector, latest_metrics, pico_path, set_cluster_metrics

ESEARCH = "/entrez/eutils/esearch.fcgi"
FAST = {"retry_attempts": 1, "backoff_factor": 0.01, "request_timeout_s": 2.0, "max_qps": 100.0}


def metric(world, cluster_id: str, name: str):
    row = latest_metrics(world.store, cluster_id)
    assert row is not None
    return row[name]


def eutils_cfg(cfg: Config, server: EutilsReplayServer) -> Config:
    return cfg.with_overrides(ingest={**FAST, "eutils_base_url": server.base_url})


# ---------------------------------------------------------------------------- query building and the review rule


def test_label_terms_and_query_need_two_label_terms_per_clause():
    terms = label_terms("Proton Pump Inhibitors · omeprazole · Gastroesophageal Reflux · omeprazole · reflux", 4)
    assert terms == ["Proton Pump Inhibitors", "omeprazole", "Gastroesophageal Reflux", "reflux"]
    query = pubmed_sr_query(terms[:3])
    clauses = query.split(" OR ")
    assert len(clauses) == 3 and all(c.endswith("AND systematic[sb])") for c in clauses)
    assert "(Proton Pump Inhibitors AND omeprazole AND systematic[sb])" in clauses
    assert pubmed_sr_query(["heartburn"]) == "(heartburn AND systematic[sb])"
    # a free-text (LLM) label contributes its content words
    assert label_terms("PPI versus H2RA for healing of erosive oesophagitis in adults", 4) == [
        "PPI", "H2RA", "healing", "erosive",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        pubmed_sr_query(label_terms("· of the ·", 4))


def test_review_rule_on_real_demo_records(demo):
    meta = demo.store.paper(11421865)  # "Proton pump inhibitors versus H2-antagonists: a meta-analysis of ..."
    assert "meta-analysis" in str(review_reason(meta))
    sysrev = demo.store.paper(11683686)  # "Systematic review of proton pump inhibitors for the acute treatment ..."
    assert "systematic review" in str(review_reason(sysrev)).lower()
    trial = demo.store.paper(10024259)  # a randomised double-blind controlled study
    assert review_reason(trial) is None


# ---------------------------------------------------------------------------- cluster vectors and metrics rows


def test_query_vector_of_a_pico_space_cluster_is_the_members_e_centroid(demo):
    cid = demo.trials_cluster
    frozen = e_query_vector(demo.store, cid, demo.vectors)
    assert frozen.source.startswith("frozen centroid")
    demo.store.conn.execute("UPDATE cluster_manifest SET feature_space='i|c|o|m' WHERE cluster_id=?", (cid,))
    recomputed = e_query_vector(demo.store, cid, demo.vectors)
    assert "recomputed" in recomputed.source and "i|c|o|m" in recomputed.source
    assert np.allclose(recomputed.vector, centroid(demo.vectors.get(demo.members(cid))), atol=1e-6)
    assert float(recomputed.vector @ frozen.vector) > 0.99  # same members, fp16 rounding apart


def test_set_cluster_metrics_updates_the_latest_row_or_creates_one(demo):
    cid = demo.trials_cluster
    rows = demo.store.conn.execute("SELECT COUNT(*) FROM cluster_metrics WHERE cluster_id=?", (cid,)).fetchone()[0]
    row = set_cluster_metrics(demo.store, cid, sr_overlap=0.25, prisma_compliant=True)
    assert row["sr_overlap"] == 0.25 and row["prisma_compliant"] == 1 and row["eligible_trials"] is not None
    assert (
        demo.store.conn.execute("SELECT COUNT(*) FROM cluster_metrics WHERE cluster_id=?", (cid,)).fetchone()[0] == rows
    )
    demo.store.conn.execute("DELETE FROM cluster_metrics WHERE cluster_id=?", (cid,))
    fresh = set_cluster_metrics(demo.store, cid, eligible_trials=7)
    assert fresh["eligible_trials"] == 7 and fresh["size"] == len(demo.members(cid)) and fresh["sr_overlap"] is None
    with pytest.raises(ValueError, match="unknown cluster_metrics column"):
        set_cluster_metrics(demo.store, cid, computed_ts=0)


# ---------------------------------------------------------------------------- find_existing_sr


def test_offline_find_existing_sr_finds_real_reviews_and_writes_overlap(demo, embedder):
    cid = demo.trials_cluster
    result = find_existing_sr(demo.cfg, demo.store, cid, embedder=embedder)
    assert result.offline and result.searched == "local corpus" and result.n_reviews >= 1
    assert set(result.reviews) <= demo.store.existing_pmids(result.reviews)
    for pmid in result.reviews:  # every review passes the documented offline rule
        assert review_reason(demo.store.paper(pmid)) == result.reasons[pmid]
    # cosines are title embeddings against the frozen centroid
    row = cluster_row(demo.store, cid)
    centroid = decode_centroid(row["frozen_centroid"], row["centroid_dim"])
    first = result.reviews[0]
    expected = float(embedder.encode([demo.store.paper(first).title])[0] @ centroid)
    assert result.cosines[first] == pytest.approx(expected, abs=1e-3)
    above = [p for p in result.reviews if result.cosines[p] >= demo.cfg.sr.sr_cosine_threshold]
    assert result.sr_pmids == above == [c.pmid for c in result.covering]
    assert result.overlap == pytest.approx(expected_overlap(demo, cid, result), abs=1e-4)
    assert metric(demo, cid, "sr_overlap") == pytest.approx(result.overlap)
    stored = load_sr_overlap(demo.cfg, cid)
    assert stored is not None and stored.as_dict() == result.as_dict()
    assert json.loads(sr_result_path(demo.cfg, cid).read_text())["sr_pmids"] == result.sr_pmids


def expected_overlap(world, cluster_id: str, result: SrOverlap) -> float:
    """The memo-70 overlap recomputed from the store: share of the cluster's eligible trials published no later
    than the newest covering review (the demo records carry no reference lists)."""
    records = {r.pmid: r for r in read_pico(pico_path(world.cfg, cluster_id))}
    trials = [p for p in world.store.papers(world.members(cluster_id))
              if p.pmid not in result.reviews and is_eligible_trial(p, records.get(p.pmid))]  # fmt: skip
    assert result.trials_total == len(trials) and result.trial_basis.startswith("eligible trials")
    years = [p.year for p in world.store.papers(result.sr_pmids) if p.year]
    if not years or not trials:
        return 0.0
    return sum(1 for t in trials if t.year and t.year <= max(years)) / len(trials)


def test_overlap_counts_the_trials_a_covering_review_could_include(demo, embedder):
    """Issue 11: one review at cosine >= threshold used to give overlap 1/9 = 0.11 ("gap"); now it covers
    every eligible trial published no later than itself."""
    cid = demo.trials_cluster
    probe = find_existing_sr(demo.cfg, demo.store, cid, embedder=embedder)
    top = probe.reviews[0]
    one = demo.cfg.with_overrides(sr={"sr_cosine_threshold": probe.cosines[top]})
    result = find_existing_sr(one, demo.store, cid, embedder=embedder)
    assert result.sr_pmids == [top] and result.n_reviews == probe.n_reviews > 1
    (review,) = result.covering
    year = demo.store.paper(top).year
    assert review.basis == "publication year" and review.year == year
    trials = {p.pmid: p for p in demo.store.papers(review.trials_covered)}
    assert all(p.year is not None and p.year <= year for p in trials.values())
    assert result.trials_covered == len(review.trials_covered)
    assert result.overlap == pytest.approx(result.trials_covered / result.trials_total, abs=1e-4)
    assert result.overlap > 1 / result.n_reviews  # no longer the share of reviews found
    assert "could have included" in result.definition


def test_a_review_reference_list_decides_what_it_covers(demo, embedder):
    cid = demo.trials_cluster
    probe = find_existing_sr(demo.cfg, demo.store, cid, embedder=embedder)
    top = probe.reviews[0]
    one = demo.cfg.with_overrides(sr={"sr_cosine_threshold": probe.cosines[top]})
    trials = find_existing_sr(one, demo.store, cid, embedder=embedder).covering[0].trials_covered
    cited = sorted(trials)[:2]
    demo.store.conn.executemany("INSERT INTO ref (src, dst, prov) VALUES (?, ?, 1)", [(top, t) for t in cited])
    result = find_existing_sr(one, demo.store, cid, embedder=embedder)
    (review,) = result.covering
    assert review.basis == "reference list" and review.trials_covered == cited
    assert result.overlap == pytest.approx(len(cited) / result.trials_total, abs=1e-4)


def test_pivot_semantics_follow_the_thresholds(demo, embedder):
    cid = demo.trials_cluster
    loose = demo.cfg.with_overrides(sr={"sr_cosine_threshold": -1.0})
    everything = find_existing_sr(loose, demo.store, cid, embedder=embedder)
    assert everything.sr_pmids == everything.reviews
    assert everything.overlap == pytest.approx(expected_overlap(demo, cid, everything), abs=1e-4)
    assert everything.covered == (everything.overlap > demo.cfg.sr.sr_overlap_pivot)
    strict = demo.cfg.with_overrides(sr={"sr_cosine_threshold": 1.0})
    nothing = find_existing_sr(strict, demo.store, cid, embedder=embedder)
    assert nothing.overlap == 0.0 and not nothing.covered and nothing.sr_pmids == []
    assert metric(demo, cid, "sr_overlap") == 0.0
    at_pivot = dataclasses.replace(nothing, overlap=demo.cfg.sr.sr_overlap_pivot)
    assert not at_pivot.covered  # the pivot needs overlap strictly above sr_overlap_pivot
    assert dataclasses.replace(nothing, overlap=demo.cfg.sr.sr_overlap_pivot + 0.01).covered


def test_live_find_existing_sr_fetches_and_stores_reviews(medline, embedder, eutils_server):
    cfg = eutils_cfg(medline.cfg, eutils_server)
    cid = medline.trials_cluster
    medline.store.conn.execute("DELETE FROM paper WHERE pmid = 31207565")  # make the live fetch bring it back
    result = find_existing_sr(cfg, medline.store, cid, embedder=embedder, eutils=EutilsClient(cfg))
    assert not result.offline and result.searched == "pubmed" and "systematic[sb]" in result.query
    sent = [r for r in eutils_server.requests if r.path == ESEARCH]
    assert sent and sent[0].params["term"] == [result.query]
    assert result.reviews == [31207565]  # the recorded PubMed systematic review matching two label terms
    paper = medline.store.paper(31207565)
    assert paper is not None and paper.source == "efetch" and "systematic review" in paper.title.lower()
    if result.cosines[31207565] >= cfg.sr.sr_cosine_threshold:
        assert result.overlap == pytest.approx(result.trials_covered / max(result.trials_total, 1), abs=1e-4)
    else:
        assert result.overlap == 0.0 and result.covering == []
    assert metric(medline, cid, "sr_overlap") == result.overlap


def test_live_search_without_hits_gives_zero_overlap(demo, embedder, eutils_server):
    cfg = eutils_cfg(demo.cfg, eutils_server)
    result = find_existing_sr(cfg, demo.store, demo.trials_cluster, embedder=embedder, eutils=EutilsClient(cfg))
    assert not result.offline and result.n_reviews == 0 and result.overlap == 0.0 and result.sr_pmids == []
    assert metric(demo, demo.trials_cluster, "sr_overlap") == 0.0


def test_failing_eutils_falls_back_to_the_local_corpus(demo, embedder, eutils_server):
    eutils_server.inject_always(ESEARCH, Fault.http(502))
    cfg = eutils_cfg(demo.cfg, eutils_server)
    result = find_existing_sr(cfg, demo.store, demo.trials_cluster, embedder=embedder, eutils=EutilsClient(cfg))
    assert result.offline and result.error and result.n_reviews >= 1
    assert demo.store.api_state("eutils")["consecutive_errors"] >= 1


# ---------------------------------------------------------------------------- prisma_check


def test_rule_evidence_on_a_real_review_abstract(demo):
    paper = demo.store.paper(
        11034468
    )  # "Medical or surgical treatment for chronic gastrooesophageal reflux? A systematic review ..."
    text = review_text(paper)
    check = rule_evidence(text, [4, 5, 6, 7, 8], "PMID 11034468", 11034468)
    assert check.found and set(check.found) | set(check.missing) == {4, 5, 6, 7, 8}
    for evidence in check.found.values():  # each piece of evidence quotes the abstract
        quoted = evidence.split(" in: ", 1)[1]
        assert quoted[:60] in text.replace("\n", " ") or quoted[:60] in text


def test_prisma_check_rules_brain_on_prior_reviews(demo):
    reviews = [11034468, 11683686, 9178669]
    result = review_statuses(demo.cfg, demo.store, reviews, RulesBrain())
    assert result.source == "prior_sr" and len(result.documents) == 3
    assert result.judged_by.startswith(RULES_PRISMA) and "rule evidence only" in result.judged_by
    best = min(result.documents, key=lambda d: len(d.missing))
    assert result.missing_items == best.missing and result.compliant == (not best.missing)
    # abstracts only (no PMC full text offline): a review is compliant or undetermined, never "false"
    assert [r.pmid for r in result.reviews] == [d.pmid for d in result.documents]
    for review, doc in zip(result.reviews, result.documents, strict=True):
        assert review.text.startswith("abstract only") and review.missing == doc.missing
        assert review.status == ("true" if not doc.missing else "undetermined")
    assert result.undetermined == [r.pmid for r in result.reviews if r.status == "undetermined"]
    assert result.as_dict() == {"compliant": result.compliant, "missing_items": result.missing_items}
    # as Success reads it: compliant when one review is, unknown while one is undetermined (abstract only)
    assert result.compliance == (True if result.compliant else None if result.undetermined else False)
    assert result.compliance_words in ("compliant", "undetermined")


def test_prisma_check_without_a_covering_review(demo):
    result = review_statuses(demo.cfg, demo.store, [], RulesBrain())
    assert result.as_dict() == {"compliant": False, "missing_items": [4, 5, 6, 7, 8]}
    assert result.source == "none" and "no review covers the question" in result.notes[0]
    assert result.compliance is False  # nothing compliant covers it


def test_prisma_check_with_an_llm_verdict(demo):
    brain = ScriptedBrain('Items 4-8 are reported.\n{"compliant": true, "missing_items": []}')
    result = check_draft(demo.cfg, brain, "A draft without headings.")
    assert result.compliant and result.judged_by == brain.name and len(brain.calls) == 1
    prompt = brain.calls[0][-1]["content"]
    assert all(PRISMA_ITEMS[i][0] in prompt for i in (4, 5, 6, 7, 8)) and "A draft without headings." in prompt
    assert any("rule cues disagree" in n for n in result.notes)  # the rules found nothing in that text
    assert result.source == "draft" and result.compliance is True


def test_prisma_check_llm_garbage_falls_back_to_labelled_rule_evidence(demo):
    brain = ScriptedBrain("I think it is fine overall.", "still no json, sorry")
    result = review_statuses(demo.cfg, demo.store, [11034468], brain)
    assert len(brain.calls) == 2 and "FIX JSON ONLY" in brain.calls[1][-1]["content"]
    assert result.judged_by.startswith(f"{RULES_PRISMA} (fallback:")
    rules = review_statuses(demo.cfg, demo.store, [11034468], RulesBrain())
    assert result.as_dict() == rules.as_dict()
    down = review_statuses(demo.cfg, demo.store, [11034468], ScriptedBrain(BrainError("connection refused")))
    assert "unavailable" in down.judged_by and down.as_dict() == rules.as_dict()


def test_prisma_check_reads_an_action_shaped_verdict(demo):
    brain = ScriptedBrain('Action: {"tool": "prisma_check", "args": {"compliant": true, "missing_items": [7, 12]}}')
    result = review_statuses(demo.cfg, demo.store, [11034468], brain)
    # item 12 is not checked; a "compliant" verdict that names a missing item counts as not compliant
    assert result.as_dict() == {"compliant": False, "missing_items": [7]} and result.judged_by == brain.name


# ---------------------------------------------------------------------------- propose_alternative_pico


def _field_text(records, pmids, key):
    return [getattr(records[p], key).lower() for p in pmids if p in records]


def _mentions(values, term):
    return sum(re.search(rf"\b{re.escape(term)}\b", v) is not None for v in values)


def test_propose_alternative_pico_rules_uses_leftover_terms(demo):
    cid = demo.trials_cluster
    records = {r.pmid: r for r in read_pico(pico_path(demo.cfg, cid))}
    members = demo.members(cid)
    # the reviews cover the trials of the cluster's most common intervention word: exclude those
    covered_word = "clarithromycin" if "eradication" in cluster_row(demo.store, cid)["label"] else "omeprazole"
    exclude = [p for p in members if covered_word in records[p].I.lower()]
    assert 0 < len(exclude) < len(members)
    alt = propose_alternative_pico(demo.cfg, demo.store, RulesBrain(), exclude, cluster_id=cid)
    assert alt.judged_by == RULES_ALT_PICO and alt.new_PICO.startswith("P: ") and "; I: " in alt.new_PICO
    leftover = [p for p in members if p not in set(exclude)]
    assert alt.leftover == len(leftover) and alt.excluded == len(exclude)
    assert set(alt.basis_pmids) <= set(leftover) and alt.basis_pmids
    chosen = [(k, t) for k, terms in alt.terms.items() for t in terms]
    assert chosen
    for key, term in chosen:  # each term is shared by leftover papers and more frequent there than among excluded
        mine, theirs = _field_text(records, leftover, key), _field_text(records, exclude, key)
        share_mine, share_theirs = _mentions(mine, term) / len(mine), _mentions(theirs, term) / len(theirs)
        assert _mentions(mine, term) >= 2 and share_mine > share_theirs, (key, term)
        assert term in alt.new_PICO
    assert all(t in alt.seed_query for t in alt.terms["I"])


def test_propose_alternative_pico_llm_path_and_grounding(demo):
    cid = demo.trials_cluster
    members = demo.members(cid)
    leftover = demo.store.papers(members[1:])
    words = [w for w in leftover[0].title.split() if len(w) > 4][:3]
    theme = f"P: {words[0]}; I: {words[1]}; C: placebo; O: {words[2]}"
    brain = ScriptedBrain(json.dumps({"new_PICO": theme, "seed_query": f"{words[1]} AND {words[0]}"}))
    alt = propose_alternative_pico(demo.cfg, demo.store, brain, members[:1], cluster_id=cid)
    assert alt.judged_by == brain.name and alt.new_PICO == theme and alt.seed_query == f"{words[1]} AND {words[0]}"
    prompt = brain.calls[0][-1]["content"]
    assert set(alt.basis_pmids) <= set(members[1:]) and all(f"[PMID {p}]" in prompt for p in alt.basis_pmids)
    made_up = ScriptedBrain('{"new_PICO": "P: martians; I: teleportation; C: levitation; O: happiness"}')
    fallback = propose_alternative_pico(demo.cfg, demo.store, made_up, members[:1], cluster_id=cid)
    assert fallback.judged_by.startswith(f"{RULES_ALT_PICO} (fallback:") and "martians" not in fallback.new_PICO


def test_propose_alternative_pico_needs_leftover_papers(demo):
    cid = demo.trials_cluster
    with pytest.raises(ValueError, match="no leftover"):
        propose_alternative_pico(demo.cfg, demo.store, RulesBrain(), demo.members(cid), cluster_id=cid)


# ---------------------------------------------------------------------------- spawned handbooks


def test_spawned_handbook_loads_with_the_new_seed_query(tmp_path):
    parent = load_handbook(HANDBOOK)
    seed = "(esomeprazole OR pantoprazole) AND (oesophagitis OR healed)"
    path = spawn_handbook(Config(), HANDBOOK, seed, tmp_path / "handbooks", new_pico="P: healed; I: esomeprazole")
    child = load_handbook(path)
    assert child.seed_query == seed and child.seed_query != parent.seed_query
    for attr in ("primary_goal", "tools_allowed", "exploration", "success_text", "stop_after"):
        assert getattr(child, attr) == getattr(parent, attr), attr
    assert HANDBOOK.name in child.prose and "P: healed; I: esomeprazole" in child.prose and parent.prose in child.prose
    assert spawn_handbook(Config(), HANDBOOK, seed, tmp_path / "handbooks") == path  # same theme, same file
    with pytest.raises(ValueError):
        spawn_handbook(Config(), HANDBOOK, "../../etc/passwd", tmp_path)


def test_overlap_round_trips_through_its_dict():
    result = SrOverlap("c1", "q", 0.5, [2], 2, True, {1: 0.1, 2: 0.8}, [2, 1], reasons={1: "x"})
    again = SrOverlap.from_dict(json.loads(json.dumps(result.as_dict())))
    assert again == result and np.isclose(again.cosines[2], 0.8)
