"""Benchmark: do ra's gap verdicts agree with what real reviewers did?

Key: ../shared/data/gaps/ (Cochrane review CD006468, "Anticoagulation for people with cancer and central
venous catheters": the 3,874 records its search returned, with label_abstract_screening and label_included,
and four earlier versions of the review among them). The goal is bench/handbooks/seek_gap_cd006468.md (a
seek_gap handbook written from the review's title). The records are imported into a scratch store through
ra's own CSV importer (MeSH headings kept) and read back; the goal's scope is every record the search gave.

Two scenarios:
- as is: the verdict on the handbook's question should be "covered" naming a version of the review ("update
  warranted" when trials came after it); no gap on the question; no question outside the topic;
- reviews removed (every record `questions.is_review` calls a review dropped): a gap should be declared whose
  trial list holds the review's included trials and few others: precision, recall and F1 against
  label_included, and the share of listed trials among label_abstract_screening (targets F1 >= 0.5, >= 70 %).

Baseline printed beside it, in the same run: today's cluster-level rules applied to the seed query's hits as
one cluster (eligible trials = `evidence.pico` rules: randomised with P, I and O found; covering = a review
whose title is at cosine >= [sr] sr_cosine_threshold to the centroid of the trials' title+abstract vectors,
then sr_overlap > sr_overlap_pivot). With --demo the same is printed for the demo corpus and its handbook
(no labels of a question there: the verdicts are listed).

Prints; never asserts. The held-out check is other Cochrane reviews scored the same way (not in this repo).

    python bench/bench_gap_verdicts.py [--demo] [--no-baseline]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GAPS = ROOT.parent / "shared" / "data" / "gaps"
CSV_PATH = GAPS / "CD006468_anticoagulation_cancer_cvc.csv"
HANDBOOK = ROOT / "bench" / "handbooks" / "seek_gap_cd006468.md"
DEMO_CSV = ROOT / "data" / "demo" / "Cohen_2006_ProtonPumpInhibitors.csv"
DEMO_HANDBOOK = ROOT / "handbooks" / "seek_gap_ppi_gerd.md"


def config():
    from ra_agent.config import load_config

    return load_config(ROOT / "config.toml", environ={})


def load_papers(path: Path, cfg) -> list:
    """The export imported into a scratch store by ra's importer and read back (what a goal would see)."""
    from ra_agent.ingest.importers import import_file
    from ra_agent.store.db import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.sqlite")
        import_file(store, path, cfg)
        pmids = [r[0] for r in store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
        papers = store.papers(pmids)
        store.close()
    return papers


def labels(path: Path) -> tuple[set[int], set[int]]:
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    included = {int(r["pubmedID"]) for r in rows if r.get("label_included") == "1"}
    screened = {int(r["pubmedID"]) for r in rows if r.get("label_abstract_screening") == "1"}
    return included, screened


def scores(listed: set[int], included: set[int], screened: set[int]) -> dict:
    tp = len(listed & included)
    precision = tp / len(listed) if listed else 0.0
    recall = tp / len(included) if included else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    in_screening = len(listed & screened) / len(listed) if listed else 0.0
    return {"listed": len(listed), "precision": round(precision, 3), "recall": round(recall, 3), "F1": round(f1, 3),
            "in_screening": round(in_screening, 3)}  # fmt: skip


def new_verdicts(cfg, topic, papers):
    from ra_agent.evidence.questions import questions_for_topic

    return questions_for_topic(topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
                               min_trials=cfg.sr.min_eligible_trials)  # fmt: skip


def baseline(cfg, papers, seed_query: str, embedder) -> dict:
    """Today's cluster-level rules on the seed query's hits as one cluster (see the module text)."""
    import numpy as np

    from ra_agent.evidence.pico.extract import RuleExtractor, is_eligible_trial
    from ra_agent.evidence.sr_search import review_reason
    from ra_agent.store.db import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "baseline.sqlite")
        store.upsert_papers(papers, source="bench")
        hits = set(store.search(seed_query, limit=len(papers)))
        store.close()
    cluster = [p for p in papers if p.pmid in hits]
    reviews = [p for p in cluster if review_reason(p)]
    extractor = RuleExtractor()
    trials = [p for p in cluster if not review_reason(p) and is_eligible_trial(p, extractor.extract_one(p))]
    out = {"cluster": len(cluster), "trials": {p.pmid for p in trials}, "covering": [], "best_cosine": None}
    if not trials:
        out["verdict"] = "too few trials"
        return out
    vectors = np.asarray(embedder.encode([p.text for p in trials]), dtype=np.float32)
    centroid = vectors.mean(axis=0)
    centroid /= np.linalg.norm(centroid) or 1.0
    if reviews:
        rv = np.asarray(embedder.encode([p.title for p in reviews]), dtype=np.float32)
        cos = rv @ centroid / np.maximum(np.linalg.norm(rv, axis=1), 1e-9)
        out["best_cosine"] = round(float(cos.max()), 3)
        covering = [r for r, c in zip(reviews, cos, strict=True) if c >= cfg.sr.sr_cosine_threshold]
        covered = {t.pmid for t in trials for r in covering if t.year and r.year and t.year <= r.year}
        out["covering"] = [r.pmid for r in covering]
        overlap = len(covered) / len(trials)
    else:
        overlap = 0.0
    if overlap > cfg.sr.sr_overlap_pivot:
        out["verdict"] = "covered"
    elif len(trials) >= cfg.sr.min_eligible_trials:
        out["verdict"] = "gap"
    else:
        out["verdict"] = "too few trials"
    return out


def run_review(cfg, embedder) -> dict:
    from ra_agent.agent.handbook import load_handbook
    from ra_agent.evidence.questions import Topic, is_review

    review = json.loads((GAPS / "CD006468_review.json").read_text(encoding="utf-8"))
    versions = {int(v["pmid"]) for v in review["earlier_versions_in_candidates"]}
    handbook = load_handbook(HANDBOOK)
    topic = Topic.from_seed_query(handbook.seed_query or "")
    started = time.perf_counter()
    papers = load_papers(CSV_PATH, cfg)
    included, screened = labels(CSV_PATH)
    print(f"CD006468: {len(papers)} records imported in {time.perf_counter() - started:.1f} s; "
          f"{len(included)} included, {len(screened)} passed title/abstract screening; topic {topic.describe()}")  # fmt: skip
    result = {}
    for scenario, pool in (("as is", papers), ("reviews removed", [p for p in papers if not is_review(p)])):
        started = time.perf_counter()
        questions, _, reviews = new_verdicts(cfg, topic, pool)
        seconds = time.perf_counter() - started
        own = questions[0]  # the topic's own question
        gaps = [q for q in questions if q.verdict == "gap"]
        named = [r.pmid for r in own.reviews if r.share >= cfg.sr.sr_overlap_pivot]
        print(f"\n== {scenario}: {len(pool)} records, {len(reviews)} reviews; {len(questions)} questions in "
              f"{seconds:.1f} s")  # fmt: skip
        for q in questions[:6]:
            print(f"   {q.id} {q.pico}: {len(q.trials)} trials -> {q.verdict} ({q.verdict_reason})")
        new = scores(set(own.trials), included, screened)
        print(f"   NEW  question {own.id}: verdict {own.verdict!r}; covering reviews named: {named[:8]}; "
              f"a version of the review among them: {bool(versions & set(named))} "
              f"({sorted(versions & set(named))}); trials since the newest: {len(own.trials_since)}")  # fmt: skip
        print(f"        gaps declared: {len(gaps)} (on its own question: {own.verdict == 'gap'}); questions off the "
              f"topic: 0 by construction (every trial passes the topic's concepts)")  # fmt: skip
        print(f"        trial list vs reviewers: {new}")
        row = {"new": {"verdict": own.verdict, "version_named": bool(versions & set(named)), "gaps": len(gaps), **new}}
        if embedder is not None:
            old = baseline(cfg, pool, handbook.seed_query or "", embedder)
            old_scores = scores(old["trials"], included, screened)
            print(f"   OLD  one cluster of {old['cluster']} seed-query hits: verdict {old['verdict']!r}; covering "
                  f"(cosine >= {cfg.sr.sr_cosine_threshold}): {old['covering'][:8]} (best cosine {old['best_cosine']}); "
                  f"a version among them: {bool(versions & set(old['covering']))}")  # fmt: skip
            print(f"        trial list vs reviewers: {old_scores}")
            row["old"] = {
                "verdict": old["verdict"],
                "version_named": bool(versions & set(old["covering"])),
                **old_scores,
            }
        result[scenario] = row
    return result


def run_demo(cfg, embedder) -> None:
    from ra_agent.agent.handbook import load_handbook
    from ra_agent.evidence.questions import Topic

    handbook = load_handbook(DEMO_HANDBOOK)
    topic = Topic.from_seed_query(handbook.seed_query or "")
    papers = load_papers(DEMO_CSV, cfg)
    questions, judged, reviews = new_verdicts(cfg, topic, papers)
    eligible = sum(e.eligible for e in judged.values())
    print(f"\n== demo ({DEMO_CSV.name}): {len(papers)} records, {len(reviews)} reviews, {eligible} eligible trials; "
          f"topic {topic.describe()}")  # fmt: skip
    for q in questions:
        print(f"   {q.id} {q.pico}: {len(q.trials)} trials -> {q.verdict} ({q.verdict_reason})")
    if embedder is not None:
        old = baseline(cfg, papers, handbook.seed_query or "", embedder)
        print(f"   OLD  one cluster of {old['cluster']} seed-query hits: {len(old['trials'])} trials, verdict "
              f"{old['verdict']!r}, covering {old['covering'][:5]} (best cosine {old['best_cosine']})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true", help="also the demo corpus and its handbook")
    parser.add_argument("--no-baseline", action="store_true", help="skip today's rules (no embedding model)")
    args = parser.parse_args()
    if not CSV_PATH.exists():
        print(f"missing {CSV_PATH}", file=sys.stderr)
        return 2
    cfg = config()
    embedder = None
    if not args.no_baseline:
        from ra_agent.embed.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(cfg)
    run_review(cfg, embedder)
    if args.demo:
        run_demo(cfg, embedder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
