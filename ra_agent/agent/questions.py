"""Where the review-question pipeline (`evidence.questions`) meets handbooks: a handbook's questions over the whole
corpus, computed once and stored (`load_question_set`), and read by everything else (`ra questions`, the
review_questions asset, the goal's tools and Success, the dossiers and SR drafts).

`handbook_topic` reads the handbook's seed query (and the synonyms its prose lists) as a `Topic`, `handbook_scope`
the eligibility its prose states, `handbook_question` the topic's question they make (its id before any record is
read: a spawned goal is refused when another goal already asks it). `load_question_set` returns the stored
`QuestionSet` of a handbook when the corpus, the handbook file and the [sr] knobs are as they were when it was
judged, else judges the records that may name the topic's population, read through the store's full-text and MeSH
indexes (`evidence.questions.candidates`; the same questions as over every record, at a cost that follows the
candidates, not the corpus: docs/scaling.md), with `evidence.questions.build.questions_for_topic` (nothing else
calls it), writes the set's folder and returns it. `current_question_set` only reads. A handbook's key (its folder
and its review_questions partition) is registered in <data_dir>/questions/handbooks.json so that the asset finds the
handbook from its partition key. `question_map` is the evidence-gap map of a set's questions
(`evidence.questions.gap_map`), dated by the corpus; it is drawn into the set's folder with the dossiers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

from ra_agent.agent.handbook import Handbook, load_handbook
from ra_agent.agent.success import HandbookError
from ra_agent.config import Config
from ra_agent.evidence.living.keep import CHANGES_FILE, announce, keep_evaluation
from ra_agent.evidence.questions.build import questions_for_topic, topic_question
from ra_agent.evidence.questions.candidates import IndexCounts
from ra_agent.evidence.questions.corpus import references
from ra_agent.evidence.questions.dossier import set_dossiers
from ra_agent.evidence.questions.gap_map import GapMap, build_gap_map
from ra_agent.evidence.questions.gap_map_draw import FILES as MAP_FILES
from ra_agent.evidence.questions.gap_map_draw import MapFiles, write_gap_map
from ra_agent.evidence.questions.judge import QuestionJudge
from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.question_set import (
    CorpusState,
    QuestionSet,
    QuestionSetError,
    corpus_state,
    handbook_identity,
    question_set_key,
    read_question_set,
    rules_version,
    write_question_set,
)
from ra_agent.evidence.questions.reviews import is_review
from ra_agent.evidence.questions.scope import Scope, read_scope
from ra_agent.evidence.questions.topic import Topic, TopicError
from ra_agent.fileio import atomic_write, exclusive_lock
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)

REGISTRY = "handbooks.json"


def handbook_topic(handbook: str | Path | Handbook) -> Topic:
    """The review-question topic of a handbook (its path, or the handbook parsed): its seed query's concepts with the
    synonyms its prose lists; HandbookError (naming the file and Seed_query) when it has none or the rules cannot
    read it."""
    handbook = _loaded(handbook)
    if not handbook.seed_query:
        raise HandbookError(
            str(handbook.path), 1, "Seed_query", "missing; a review question needs the topic's concepts"
        )
    try:
        return Topic.from_seed_query(handbook.seed_query).with_prose(handbook.prose)
    except TopicError as exc:
        raise HandbookError(str(handbook.path), 1, "Seed_query", str(exc)) from None


def handbook_scope(handbook: str | Path | Handbook) -> Scope:
    """The eligibility a handbook's prose states (`evidence.questions.scope`), read against its topic's intervention."""
    handbook = _loaded(handbook)
    return read_scope(handbook.prose, handbook_topic(handbook).intervention)


def handbook_question(handbook: str | Path | Handbook) -> ReviewQuestion:
    """The topic's question a handbook asks, known before any record is read (`build.topic_question`: the same id,
    population, intervention and comparator as the first question of its set); HandbookError as `handbook_topic`."""
    handbook = _loaded(handbook)
    return topic_question(handbook_topic(handbook), handbook_scope(handbook))


def _loaded(handbook: str | Path | Handbook) -> Handbook:
    return handbook if isinstance(handbook, Handbook) else load_handbook(handbook)


# ============================================================================ where a set lives


def questions_root(cfg: Config) -> Path:
    """<data_dir>/questions/: one folder per handbook key, and the registry of keys."""
    return Workspace.of(cfg).root / "questions"


def handbook_key(cfg: Config, handbook_path: str | Path) -> str:
    """A handbook's key: its set's folder name and its review_questions partition (`question_set_key`, by its path
    relative to the project root when inside it)."""
    return question_set_key(handbook_path, cfg.root)


def register_handbook(cfg: Config, handbook_path: str | Path) -> str:
    """The handbook's key (`handbook_key`), noted with its identity (`handbook_identity`) in questions/handbooks.json."""
    key = handbook_key(cfg, handbook_path)
    identity = handbook_identity(handbook_path, cfg.root)
    registry = questions_root(cfg) / REGISTRY
    with exclusive_lock(questions_root(cfg) / f".{REGISTRY}.lock"):
        known = _registry(registry)
        if known.get(key) != identity:
            atomic_write(registry, json.dumps({**known, key: identity}, indent=1, sort_keys=True) + "\n")
    return key


def _registry(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s); handbooks are registered again as they are used", path, exc)
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def registered_handbook(cfg: Config, key: str) -> Path:
    """The handbook a key was registered for; QuestionSetError when none was (or its file is gone)."""
    registry = questions_root(cfg) / REGISTRY
    identity = _registry(registry).get(key)
    if identity is None:
        raise QuestionSetError(f"{registry}: {key}: no handbook registered under this key (ra questions HANDBOOK, "
                               "or a goal of that handbook, registers it)")  # fmt: skip
    path = Path(cfg.root) / identity  # an absolute identity stays as it is
    if not path.is_file():
        raise QuestionSetError(f"{registry}: {key}: the handbook {path} is gone")
    return path


def question_knobs(cfg: Config) -> dict:
    """What a verdict depends on beside the corpus and the handbook: the rules' code, the [sr] knobs and who judges."""
    llm = cfg.llm
    return {"rules": rules_version(), "sr": dataclasses.asdict(cfg.sr),
            "judge": {"brain": llm.brain, "backend": llm.backend, "model": llm.model,
                      "judge_max_calls": llm.judge_max_calls}}  # fmt: skip


def _state(cfg: Config, store: Store, path: Path) -> CorpusState:
    return corpus_state(store, path, question_knobs(cfg))


# ============================================================================ one computation, read by everything


def current_question_set(cfg: Config, store: Store, handbook_path: str | Path) -> QuestionSet | None:
    """The stored set of a handbook when it was judged on the corpus, handbook and knobs as they are now; None
    when there is none or it is stale (nothing is computed)."""
    path = Path(handbook_path).resolve()
    stored = read_question_set(questions_root(cfg), handbook_key(cfg, path))
    return stored if stored is not None and stored.state == _state(cfg, store, path) else None


def load_question_set(
    cfg: Config, store: Store, handbook_path: str | Path, judge: QuestionJudge | None = None
) -> QuestionSet:
    """The handbook's `QuestionSet`: the stored one when current (`current_question_set`), else computed over the
    store's records that may name the topic's population (`candidates.IndexCounts.candidates`: the same questions as
    over every record; `eligibility` holds the candidates' answers), written to <data_dir>/questions/<key>/
    (questions.json and one dossier per question) and returned. `judge` decides eligibility and coverage (default `question_judge_for(cfg)`: an LLM checks the rules'
    answers when one answers, else the rules). HandbookError for a handbook without a readable seed query,
    QuestionSetError for a handbook file name that is no safe folder name."""
    path = Path(handbook_path).resolve()
    topic = handbook_topic(path)  # a handbook without a seed query is refused before anything is read
    key = register_handbook(cfg, path)
    state = _state(cfg, store, path)
    stored = read_question_set(questions_root(cfg), key)
    if stored is not None and stored.state == state:
        return stored
    if judge is None:
        from ra_agent.evidence.questions.llm_judge import question_judge_for

        judge = question_judge_for(cfg)
    started = time.monotonic()
    corpus = IndexCounts(store)
    papers = corpus.candidates(topic.with_statistics(corpus))
    log.info("questions of %s: judging %d of the %d records, those that may name the topic's population (%s)",
             path.name, len(papers), state.records, judge.name)  # fmt: skip
    scope = handbook_scope(path)
    cited = references(store, [p for p in papers if is_review(p)])
    questions, judged, reviews = questions_for_topic(
        topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
        min_trials=cfg.sr.min_eligible_trials, references=cited, judge=judge, scope=scope, corpus=corpus,
    )  # fmt: skip
    eligible = sum(a.eligible for a in judged.values())
    reason = "" if eligible else f"no record of the {state.records} in the store is an eligible trial for the topic " \
                                 f"({topic.describe()}); see the handbook's Seed_query"  # fmt: skip
    qset = QuestionSet(
        handbook=handbook_identity(path, cfg.root), key=key, topic=topic.describe(), seed_query=topic.seed_query,
        scope=[s.line() for s in scope.statements if s.rule],
        scope_not_applied=[s.words for s in scope.statements if not s.rule],
        judged_by="; ".join(sorted({q.judged_by for q in questions})) or judge.name, questions=questions,
        eligibility={p: {"eligible": a.eligible, "reason": a.reason} for p, a in judged.items()}, state=state,
        computed_ts=datetime.now(UTC).isoformat(timespec="seconds"), reason=reason, topic_terms=topic.terms(),
        reviews_checked=len(reviews),
    )  # fmt: skip
    by_pmid = {p.pmid: p for p in papers}
    gap_map = question_map(store, questions, by_pmid)
    changes = keep_evaluation(questions_root(cfg), qset)  # in its history before the set is written (living evidence)
    dossiers = {**set_dossiers(qset, by_pmid, gap_map), CHANGES_FILE: changes.markdown()}
    cache = Workspace.of(cfg).cache_dir
    folder = write_question_set(
        questions_root(cfg), qset, dossiers, also=lambda tmp: write_gap_map(gap_map, tmp, cache)
    )
    announce(cfg.living, changes)
    log.info("questions of %s: %d questions, %d eligible reports, written to %s in %.1f s", path.name, len(questions),
             eligible, folder, time.monotonic() - started)  # fmt: skip
    return qset


def corpus_date(store: Store) -> str:
    """The date of the corpus: the day (UTC) its newest import, search or baseline batch was stored."""
    newest = max((int(b["created_ts"]) for b in store.batches()), default=0)
    return time.strftime("%Y-%m-%d", time.gmtime(newest)) if newest else "an undated corpus"


def question_map(store: Store, questions: list[ReviewQuestion], papers: dict[int, Paper]) -> GapMap:
    """The evidence-gap map of `questions` (`papers`: the corpus by PMID, for the studies' titles), dated by the
    store's newest batch."""
    titles = {pmid: papers[pmid].title for q in questions for pmid in q.trials if pmid in papers}
    return build_gap_map(questions, titles, corpus_date(store), records=len(papers))


def map_files(cfg: Config, store: Store, qset: QuestionSet) -> MapFiles:
    """The evidence-gap map drawn into the set's folder with its dossiers (drawn again when its files are missing),
    or the empty map's one-line statement."""
    folder = questions_root(cfg) / qset.key
    png, html = (folder / name for name in MAP_FILES)
    if png.is_file() and html.is_file():
        return MapFiles(png, html)
    papers = {p.pmid: p for p in store.papers(sorted({pmid for q in qset.questions for pmid in q.trials}))}
    return write_gap_map(question_map(store, qset.questions, papers), folder, Workspace.of(cfg).cache_dir)
