"""Benchmark: do ra's gap verdicts agree with what real reviewers did?

Key (default): ../shared/data/gaps/ (Cochrane review CD006468, "Anticoagulation for people with cancer and central
venous catheters": the 3,874 records its search returned, with label_abstract_screening and label_included, and
four earlier versions of the review among them), with the goal bench/handbooks/seek_gap_cd006468.md (a seek_gap
handbook written from the review's title). Any other review is scored the same way with --csv (its search results:
type, authors, year, title, journal, pmid, keywords, abstract, language, label_included and, when known,
label_abstract_screening), --handbook (a seek_gap handbook written from its title) and --review-json (optional:
"earlier_versions_in_candidates", the PMIDs of earlier versions of the review among the records). The records are
imported into a scratch store through ra's own CSV importer (MeSH headings kept) and read back; the goal's scope is
every record the search gave.

Two scenarios:
- as is: the verdict on the handbook's question should be "covered" naming a version of the review ("update
  warranted" when trials came after it); no gap on the question; no gap off the topic;
- reviews removed (every record `questions.is_review` calls a review dropped): a gap should be declared whose
  trial list holds the review's included trials and few others: precision, recall and F1 against
  label_included, and the share of listed trials among label_abstract_screening (targets F1 >= 0.5, >= 70 %).

Off-topic, measured: a gap question is off the topic when fewer than half of its trials passed the reviewers'
title/abstract screening (label_abstract_screening), or, without that label, when fewer than half of them name
every population concept of the seed query in their own words (title, abstract, MeSH; no learned terms).

Baseline printed beside it, in the same run: today's cluster-level rules applied to the seed query's hits as
one cluster (eligible trials = `evidence.pico` rules: randomised with P, I and O found; covering = a review
whose title is at cosine >= [sr] sr_cosine_threshold to the centroid of the trials' title+abstract vectors,
then sr_overlap > sr_overlap_pivot). With --demo the same is printed for the demo corpus and its handbook
(no labels of a question there: the verdicts are listed).

Prints; never asserts. The rules were written looking at CD006468 and the demo: held-out Cochrane reviews (kept
outside this repository) scored with --csv/--handbook are the test.

    python bench/bench_gap_verdicts.py [--csv FILE --handbook FILE [--review-json FILE]] [--demo] [--no-baseline]
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


def labels(path: Path) -> tuple[set[int], set[int] | None]:
    """(label_included PMIDs, label_abstract_screening PMIDs or None when the file has no such column)."""
    with path.open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    key = next((k for k in (rows[0] if rows else {}) if k.lower() in ("pmid", "pubmedid", "pubmed_id")), "pmid")

    def pmids(column: str) -> set[int]:
        return {int(r[key]) for r in rows if str(r.get(column, "")).strip() in ("1", "1.0") and r.get(key)}

    screened = pmids("label_abstract_screening") if rows and "label_abstract_screening" in rows[0] else None
    return pmids("label_included"), screened


def scores(listed: set[int], included: set[int], screened: set[int] | None) -> dict:
    tp = len(listed & included)
    precision = tp / len(listed) if listed else 0.0
    recall = tp / len(included) if included else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    in_screening = (
        (round(len(listed & screened) / len(listed), 3) if listed else 0.0) if screened is not None else "n/a"
    )
    return {"listed": len(listed), "precision": round(precision, 3), "recall": round(recall, 3), "F1": round(f1, 3),
            "in_screening": in_screening}  # fmt: skip


def off_topic(gaps, topic, papers, screened: set[int] | None) -> list:
    """The gap questions off the handbook's topic (see the module text): [(question, why)]."""
    from ra_agent.evidence.questions.topic import Topic

    plain = Topic.from_seed_query(topic.seed_query)  # the seed query's own words only
    by_pmid = {p.pmid: p for p in papers}
    out = []
    for q in gaps:
        trials = list(q.trials)
        if screened is not None:
            share = len(set(trials) & screened) / len(trials)
            why = f"{share:.0%} of its trials passed title/abstract screening"
        else:
            said = [all(c.find(f"{by_pmid[p].title} {by_pmid[p].abstract}", by_pmid[p].mesh) for c in plain.population)
                    for p in trials]  # fmt: skip
            share = sum(said) / len(trials)
            why = f"{share:.0%} of its trials name every population concept of the seed query"
        if share < 0.5:
            out.append((q, why))
    return out


def new_verdicts(cfg, topic, papers, scope=None):
    from ra_agent.evidence.questions.build import questions_for_topic

    return questions_for_topic(topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
                               min_trials=cfg.sr.min_eligible_trials, scope=scope)  # fmt: skip


def study_scores(listed: set[int], included: set[int], papers) -> dict:
    """Precision and recall counted by study: the listed and the included reports grouped into studies together
    (`evidence.studies`), a study counting once however many of its reports are listed or included."""
    from ra_agent.evidence.classes import agents_in
    from ra_agent.evidence.questions.studies import group_studies

    by_pmid = {p.pmid: p for p in papers}
    union = [by_pmid[p] for p in sorted(listed | included) if p in by_pmid]
    agents = {p.pmid: {a.word for a in agents_in(f"{p.title} {p.abstract}")} for p in union}
    groups = group_studies(union, agents)
    with_listed = [g for g in groups if set(g.reports) & listed]
    with_included = [g for g in groups if set(g.reports) & included]
    both = [g for g in with_listed if set(g.reports) & included]
    precision = len(both) / len(with_listed) if with_listed else 0.0
    recall = len(both) / len(with_included) if with_included else 0.0
    f1 = 2 * precision * recall / (precision + recall) if both else 0.0
    return {"studies": len(with_listed), "included studies": len(with_included), "precision": round(precision, 3),
            "recall": round(recall, 3), "F1": round(f1, 3)}  # fmt: skip


def baseline(cfg, papers, seed_query: str, embedder) -> dict:
    """Today's cluster-level rules on the seed query's hits as one cluster (see the module text)."""
    import numpy as np

    from ra_agent.evidence.pico.extract import RuleExtractor, is_eligible_trial
    from ra_agent.evidence.questions.reviews import review_reason
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


# The question lists of the code at another commit ("before"), computed by that commit's own bench functions in a
# subprocess over an archive of its tree: prints {scenario: {"listed": [...], "verdict", "covering"}} as JSON.
BEFORE = r"""
import json, sys
from pathlib import Path
tree, csv_path, handbook = sys.argv[1:4]
sys.path.insert(0, tree + "/bench")
import bench_gap_verdicts as old
from ra_agent.agent.questions import handbook_topic
try:
    from ra_agent.evidence.questions.reviews import is_review
except ImportError:
    from ra_agent.evidence.questions import is_review
try:  # a commit that reads the handbook's stated eligibility (issue 34) is scored with it, as it runs
    from ra_agent.agent.questions import handbook_scope
    scoped = (handbook_scope(Path(handbook)),)
except ImportError:
    scoped = ()
cfg = old.config()
papers = old.load_papers(Path(csv_path), cfg)
topic = handbook_topic(Path(handbook))
out = {}
for scenario, pool in (("as is", papers), ("reviews removed", [p for p in papers if not is_review(p)])):
    questions = old.new_verdicts(cfg, topic, pool, *scoped)[0]
    own = questions[0]
    out[scenario] = {"listed": sorted(own.trials), "verdict": own.verdict,
                     "covering": own.covering.pmid if own.covering else None}
print("BEFORE-JSON " + json.dumps(out))
"""
BEFORE_REF = "c44108e"  # main before review questions judged what a trial studied (issue 34)


def before_lists(ref: str, csv_path: Path, handbook_path: Path) -> dict | None:
    """The topic question's lists and verdicts by the code at `ref` (None when the commit is not in this clone)."""
    from at_commit import run_at_commit  # bench/, beside this script

    return run_at_commit(ref, BEFORE, [str(csv_path), str(handbook_path)], "   BEFORE")


def run_review(cfg, embedder, csv_path: Path, handbook_path: Path, review_json: Path | None,
               before_ref: str | None = BEFORE_REF) -> dict:  # fmt: skip
    from ra_agent.agent.handbook import load_handbook
    from ra_agent.agent.questions import handbook_scope, handbook_topic
    from ra_agent.evidence.questions.reviews import is_review

    review = json.loads(review_json.read_text(encoding="utf-8")) if review_json and review_json.exists() else {}
    versions = {int(v["pmid"]) for v in review.get("earlier_versions_in_candidates", [])}
    handbook = load_handbook(handbook_path)
    topic = handbook_topic(handbook_path)
    scope = handbook_scope(handbook_path)
    started = time.perf_counter()
    papers = load_papers(csv_path, cfg)
    included, screened = labels(csv_path)
    print(f"{csv_path.name}: {len(papers)} records imported in {time.perf_counter() - started:.1f} s; "
          f"{len(included)} included, {len(screened) if screened is not None else 'n/a'} passed title/abstract "
          f"screening; earlier versions named in {review_json.name if review_json else '-'}: {sorted(versions) or 'none'}"
          f"\n   topic {topic.describe()}")  # fmt: skip
    print("   scope: comparisons " + scope.comparators_label() + "".join(f"\n     {line}" for line in scope.lines()))
    result = {}
    before = before_lists(before_ref, csv_path, handbook_path) if before_ref else None
    for scenario, pool in (("as is", papers), ("reviews removed", [p for p in papers if not is_review(p)])):
        started = time.perf_counter()
        questions, _, reviews = new_verdicts(cfg, topic, pool, scope)
        seconds = time.perf_counter() - started
        own = questions[0]  # the topic's own question
        gaps = [q for q in questions if q.verdict == "gap" and q.in_scope]  # the handbook's own comparisons
        named = [r.pmid for r in own.reviews if r.share >= cfg.sr.sr_overlap_pivot]
        first = own.covering.pmid if own.covering else None
        print(f"\n== {scenario}: {len(pool)} records, {len(reviews)} reviews; {len(questions)} questions in "
              f"{seconds:.1f} s")  # fmt: skip
        for q in questions[:6]:
            print(f"   {q.id} {q.pico}: {len(q.trials)} trials -> {q.verdict} ({q.verdict_reason[:160]})")
        new = scores(set(own.trials), included, screened)
        away = off_topic(gaps, topic, pool, screened)
        version = (first in versions) if versions and first else "n/a" if not versions else False
        print(f"   NEW  question {own.id}: verdict {own.verdict!r}; first covering review: {first} "
              f"({own.covering.title[:70] if own.covering else '-'}); a version of the review: {version}; "
              f"versions among all {len(named)} covering: {sorted(versions & set(named))}; trials since the newest: "
              f"{len(own.trials_since)}")  # fmt: skip
        print(f"        gaps declared: {len(gaps)} (on its own question: {own.verdict == 'gap'}); gaps off the topic: "
              f"{len(away)}" + "".join(f"\n          off: {q.pico} ({why})" for q, why in away))  # fmt: skip
        print(f"        trial list vs reviewers: {new}")
        by_study = study_scores(set(own.trials), included, pool)
        print(f"        by study ({len(own.studies)} studies of {len(own.trials)} reports): {by_study}")
        if before and scenario in before:
            was = before[scenario]
            listed = set(was["listed"])
            print(f"   BEFORE ({before_ref}) verdict {was['verdict']!r}, first covering review {was['covering']}; "
                  f"trial list vs reviewers: {scores(listed, included, screened)}; by study: "
                  f"{study_scores(listed, included, pool)}")  # fmt: skip
        row = {"new": {"verdict": own.verdict, "first_covering": first, "version_named": version, "gaps": len(gaps),
                       "off_topic_gaps": len(away), **new, "by_study": by_study}}  # fmt: skip
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
    from ra_agent.agent.questions import handbook_topic

    handbook = load_handbook(DEMO_HANDBOOK)
    topic = handbook_topic(DEMO_HANDBOOK)
    papers = load_papers(DEMO_CSV, cfg)
    questions, judged, reviews = new_verdicts(cfg, topic, papers)
    eligible = sum(e.eligible for e in judged.values())
    print(f"\n== demo ({DEMO_CSV.name}): {len(papers)} records, {len(reviews)} reviews, {eligible} eligible trials; "
          f"topic {topic.describe()}")  # fmt: skip
    for q in questions:
        print(f"   {q.id} {q.pico}: {len(q.trials)} trials -> {q.verdict} ({q.verdict_reason[:160]})")
    own = questions[0]
    print(f"   first covering review of the topic's question: {own.covering.pmid if own.covering else None} "
          f"({own.covering.title if own.covering else '-'})")  # fmt: skip
    if embedder is not None:
        old = baseline(cfg, papers, handbook.seed_query or "", embedder)
        print(f"   OLD  one cluster of {old['cluster']} seed-query hits: {len(old['trials'])} trials, verdict "
              f"{old['verdict']!r}, covering {old['covering'][:5]} (best cosine {old['best_cosine']})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--csv", type=Path, default=CSV_PATH, help="a review's search results with its labels")
    parser.add_argument("--handbook", type=Path, default=HANDBOOK, help="the seek_gap handbook of its question")
    parser.add_argument("--review-json", type=Path, default=None,
                        help="its earlier versions among the records (default: the shared review's JSON with the "
                             "default CSV, none otherwise)")  # fmt: skip
    parser.add_argument("--demo", action="store_true", help="also the demo corpus and its handbook")
    parser.add_argument("--no-baseline", action="store_true", help="skip the cluster-level rule (no embedding model)")
    parser.add_argument("--before", default=BEFORE_REF, help=f"the commit whose question lists are printed beside "
                        f"(default {BEFORE_REF}; '' for none)")  # fmt: skip
    args = parser.parse_args()
    for path in (args.csv, args.handbook):
        if not path.exists():
            print(f"missing {path}", file=sys.stderr)
            return 2
    review_json = args.review_json or (GAPS / "CD006468_review.json" if args.csv == CSV_PATH else None)
    cfg = config()
    embedder = None
    if not args.no_baseline:
        from ra_agent.embed.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(cfg)
    run_review(cfg, embedder, args.csv, args.handbook, review_json, args.before or None)
    if args.demo:
        run_demo(cfg, embedder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
