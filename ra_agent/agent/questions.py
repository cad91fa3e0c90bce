"""Where the review-question pipeline (`evidence.questions`) meets handbooks and goals: a handbook's questions over
the local corpus (`ra questions`) and the questions of the goal working on a cluster (the `review_questions` asset).

`handbook_topic` reads the handbook's seed query (and the synonyms its prose lists) as a `Topic`;
`handbook_questions` builds the questions over every paper of the store (the goal's corpus) with the reference
lists the store holds for the reviews, and assesses their coverage (`evidence.questions.dossier.write_dossiers`
writes them). `goal_topic` finds the topic of the goal working on a cluster (find_existing_sr and the
`review_questions` asset judge by it); `cluster_questions` writes that cluster's dossiers. `question_map` draws the
evidence-gap map of a set of questions (`evidence.questions.gap_map`) with the corpus's date.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from ra_agent.agent.handbook import load_handbook, recorded_handbook
from ra_agent.agent.success import HandbookError
from ra_agent.config import Config
from ra_agent.evidence.questions.build import questions_for_topic
from ra_agent.evidence.questions.corpus import all_papers, references, topic_reviews
from ra_agent.evidence.questions.dossier import write_dossiers
from ra_agent.evidence.questions.gap_map import GapMap, build_gap_map
from ra_agent.evidence.questions.gap_map_draw import MapFiles, write_gap_map
from ra_agent.evidence.questions.judge import QuestionJudge
from ra_agent.evidence.questions.model import ReviewQuestion
from ra_agent.evidence.questions.reviews import is_review
from ra_agent.evidence.questions.scope import Scope, read_scope
from ra_agent.evidence.questions.topic import Topic, TopicError
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)


def handbook_topic(handbook_path: str | Path) -> Topic:
    """The review-question topic of a handbook: its seed query's concepts with the synonyms its prose lists;
    HandbookError (naming the file and Seed_query) when it has none or the rules cannot read it."""
    handbook = load_handbook(handbook_path)
    if not handbook.seed_query:
        raise HandbookError(
            str(handbook_path), 1, "Seed_query", "missing; a review question needs the topic's concepts"
        )
    try:
        return Topic.from_seed_query(handbook.seed_query).with_prose(handbook.prose)
    except TopicError as exc:
        raise HandbookError(str(handbook_path), 1, "Seed_query", str(exc)) from None


def handbook_scope(handbook_path: str | Path) -> Scope:
    """The eligibility a handbook's prose states (`evidence.scope`), read against its topic's intervention."""
    return read_scope(load_handbook(handbook_path).prose, handbook_topic(handbook_path).intervention)


def handbook_questions(cfg: Config, store: Store, handbook_path: str | Path, judge: QuestionJudge | None = None):
    """(topic, questions, eligibility answers, papers by PMID) of a handbook over the store's corpus; `judge`: who judges
    eligibility and coverage (`evidence.questions.judge.QuestionJudge`; None: the rules)."""
    topic = handbook_topic(handbook_path)
    papers = all_papers(store)
    cited = references(store, [p for p in papers if is_review(p)])
    questions, judged, _ = questions_for_topic(
        topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
        min_trials=cfg.sr.min_eligible_trials, references=cited, judge=judge,
        scope=handbook_scope(handbook_path),
    )  # fmt: skip
    return topic, questions, judged, {p.pmid: p for p in papers}


def corpus_date(store: Store) -> str:
    """The date of the corpus: the day (UTC) its newest import, search or baseline batch was stored."""
    newest = max((int(b["created_ts"]) for b in store.batches()), default=0)
    return time.strftime("%Y-%m-%d", time.gmtime(newest)) if newest else "an undated corpus"


def question_map(store: Store, questions: list[ReviewQuestion], papers: dict[int, Paper]) -> GapMap:
    """The evidence-gap map of `questions` (`papers`: the corpus by PMID, for the studies' titles), dated by the
    store's newest batch."""
    titles = {pmid: papers[pmid].title for q in questions for pmid in q.trials if pmid in papers}
    return build_gap_map(questions, titles, corpus_date(store), records=len(papers))


def draw_map(cfg: Config, gap_map: GapMap, folder: Path) -> MapFiles:
    """gap_map.png and gap_map.html in `folder` (the map's script kept in the workspace's cache), or the empty map's
    statement."""
    return write_gap_map(gap_map, folder, Workspace.of(cfg).cache_dir)


def goal_topic(cfg: Config, store: Store, cluster_id: str):
    """The review-question topic (`evidence.questions.topic.Topic`) of the goal working on `cluster_id` (its focus, or
    the newest goal that called a tool on it), from that goal's handbook seed query; None when no goal with a
    seed query works on it (find_existing_sr then decides by title cosine)."""
    from ra_agent.agent.goal import GoalStore

    def acted_on(state) -> str:
        calls = [h for h in state.events("tool_call") if (h.get("args") or {}).get("cluster_id") == cluster_id]
        return calls[-1]["ts"] if calls else ("0" if state.cluster_id == cluster_id else "")

    states = [s for s in GoalStore(cfg.data_dir, store).states() if acted_on(s)]
    for state in sorted(states, key=acted_on, reverse=True):
        try:
            return handbook_topic(recorded_handbook(cfg, state.handbook_path))
        except (OSError, ValueError) as exc:  # HandbookError is a ValueError naming the file and Seed_query
            log.warning("goal %s: no review question (%s)", state.goal_id, exc)
    return None


@dataclass
class ClusterQuestions:
    """The review questions of one cluster under the goal working on it (the `review_questions` asset)."""

    cluster_id: str
    topic: Topic | None
    questions: list[ReviewQuestion]
    reason: str  # why there are none, else ""
    path: Path | None = None
    map_files: MapFiles | None = None  # the evidence-gap map drawn beside the dossiers

    def table(self) -> str:
        """A Markdown table of the questions (asset metadata)."""
        if not self.questions:
            return f"No review question: {self.reason}"
        rows = ["| id | PICO | trials | verdict |", "|---|---|---|---|"]
        rows += [f"| {q.id} | {q.pico} | {len(q.trials)} | {q.verdict}: {q.verdict_reason[:120]} |"
                 for q in self.questions]  # fmt: skip
        return "\n".join(rows)


def cluster_questions(cfg: Config, store: Store, cluster_id: str) -> ClusterQuestions:
    """The questions of a cluster's members under the topic of the goal working on it (`goal_topic`),
    their coverage by every review of the local corpus, written to <data_dir>/questions/clusters/<id>/ (one
    dossier per question and questions.json). No goal with a seed query: no questions, and the reason."""
    from ra_agent.topics.view import member_pmids

    topic = goal_topic(cfg, store, cluster_id)
    if topic is None:
        return ClusterQuestions(cluster_id, None, [], "no goal with a Seed_query works on this cluster")
    members = store.papers(member_pmids(store, cluster_id))
    reviews = topic_reviews(store)
    pool = list({p.pmid: p for p in [*members, *reviews]}.values())
    questions, judged, _ = questions_for_topic(
        topic, pool, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
        min_trials=cfg.sr.min_eligible_trials, references=references(store, reviews),
    )  # fmt: skip
    if not any(j.eligible for j in judged.values()):
        reason = f"no member is an eligible trial for the goal's topic ({topic.describe()})"
        return ClusterQuestions(cluster_id, topic, [], reason)
    folder = Workspace.of(cfg).root / "questions" / "clusters" / cluster_id
    by_pmid = {p.pmid: p for p in pool}
    gap_map = question_map(store, questions, by_pmid)
    write_dossiers(cfg, folder, topic, questions, by_pmid, gap_map=gap_map)
    return ClusterQuestions(cluster_id, topic, questions, "", folder, draw_map(cfg, gap_map, folder))
