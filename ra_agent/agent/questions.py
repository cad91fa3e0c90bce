"""A handbook's review questions over the local corpus, their dossiers (one per question) and `ra questions`.

`handbook_topic` reads the handbook's seed query (and the synonyms its prose lists) as a `Topic`;
`handbook_questions` builds the questions over every paper of the store (the goal's corpus) with the reference
lists the store holds for the reviews, and assesses their coverage. `write_dossiers` writes
<data_dir>/questions/<handbook>/questions.json and one Markdown dossier per question; a narrower question reaching
its parent's verdict on the same covering review refers to the parent's dossier instead of repeating it.
`goal_topic` finds the topic of the goal working on a cluster (find_existing_sr and the `review_questions` asset
judge by it); `question_file_problems` is the asset's structural check.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ra_agent.agent.handbook import load_handbook
from ra_agent.agent.success import HandbookError
from ra_agent.config import Config
from ra_agent.evidence.judge import QuestionJudge
from ra_agent.evidence.questions import RULES, ReviewQuestion, Topic, TopicError, questions_for_topic
from ra_agent.evidence.scope import Scope, read_scope
from ra_agent.fileio import atomic_write
from ra_agent.models import Paper
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)


def _all_papers(store: Store) -> list[Paper]:
    pmids = [r[0] for r in store.conn.execute("SELECT pmid FROM paper ORDER BY pmid")]
    return [p for start in range(0, len(pmids), 500) for p in store.papers(pmids[start : start + 500])]


def _references(store: Store, reviews: list[Paper]) -> dict[int, set[int]]:
    out = {}
    for review in reviews:
        cited = {r[0] for r in store.conn.execute("SELECT dst FROM ref WHERE src=? AND dst>0", (review.pmid,))}
        if cited:
            out[review.pmid] = cited
    return out


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
    eligibility and coverage (`evidence.judge.QuestionJudge`; None: the rules)."""
    from ra_agent.evidence.questions import is_review

    topic = handbook_topic(handbook_path)
    papers = _all_papers(store)
    references = _references(store, [p for p in papers if is_review(p)])
    questions, judged, _ = questions_for_topic(
        topic, papers, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
        min_trials=cfg.sr.min_eligible_trials, references=references, judge=judge,
        scope=handbook_scope(handbook_path),
    )  # fmt: skip
    return topic, questions, judged, {p.pmid: p for p in papers}


def questions_dir(cfg: Config, handbook_path: str | Path) -> Path:
    """Where `ra questions --write` puts a handbook's dossiers: <data_dir>/questions/<handbook stem>/."""
    return Workspace.of(cfg).root / "questions" / Path(handbook_path).stem


def same_as_parent(question: ReviewQuestion, parent: ReviewQuestion | None) -> bool:
    """A narrower question with its parent's verdict on the same covering review adds no dossier of its own."""
    return (
        parent is not None
        and question.verdict == parent.verdict
        and question.verdict.startswith("covered")
        and (question.covering and question.covering.pmid) == (parent.covering and parent.covering.pmid)
    )


def dossier_markdown(question: ReviewQuestion, papers: dict[int, Paper], topic: Topic) -> str:
    """The question's dossier: PICO, verdict, eligible trials with reasons, covering reviews with why, trials
    since the newest covering review, and what this run could not check."""
    m = question.metrics
    lines = [
        f"# Review question {question.id}: {question.verdict}",
        "",
        f"- PICO: {question.pico}",
        f"- Outcomes the trials report: {', '.join(question.outcomes) or 'none found'}",
        f"- Topic (handbook seed query): {topic.describe()}",
        f"- Verdict: **{question.verdict}**: {question.verdict_reason}",
        f"- Metrics: eligible_trials {m['eligible_trials']}, newest trial {m['newest_trial']}, "
        f"sr_overlap {m['sr_overlap']}, PRISMA_compliant not checked",
        f"- Judged by: {question.judged_by}",
        "",
        f"## Eligible trials ({len(question.trials)})",
        "",
        "| PMID | year | title | why eligible |",
        "|---|---|---|---|",
    ]
    for pmid in question.trial_pmids:
        paper = papers.get(pmid)
        title = (paper.title if paper else "").replace("|", "/")[:120]
        lines.append(f"| {pmid} | {question.years.get(pmid) or ''} | {title} | {question.trials[pmid]} |")
    lines += ["", f"## Reviews whose own question encompasses it ({len(question.reviews)})", ""]
    if not question.reviews:
        lines.append("None found in the local corpus.")
    for review in question.reviews:
        covers = (
            "covers" if question.covering and review.pmid == question.covering.pmid else f"share {review.share:.0%}"
        )
        lines.append(f"- PMID {review.pmid} ({review.year}) {review.title[:120]}: {review.why}; could include "
                     f"{len(review.trials_covered)} of {len(question.trials)} trials ({review.basis}) [{covers}]")  # fmt: skip
    lines += ["", "## Trials since the newest covering review", ""]
    if question.covering is None:
        lines.append("No review covers the question.")
    else:
        since = ", ".join(str(p) for p in question.trials_since) or "none"
        lines.append(f"Since PMID {question.covering.pmid} ({question.covering.year}): {since}")
    lines += ["", "## Not checked by this run", "", *(f"- {item}" for item in question.unchecked), ""]
    return "\n".join(lines)


def write_dossiers(cfg: Config, folder: Path, topic: Topic, questions, papers) -> list[Path]:
    """questions.json and one dossier per question in `folder` (a narrower question like its parent refers to it)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {q.id: q for q in questions}
    written = []
    for question in questions:
        parent = by_id.get(question.parent or "")
        path = folder / f"{question.id}.md"
        if same_as_parent(question, parent):
            assert parent is not None
            text = (f"# Review question {question.id}: {question.verdict}\n\n- PICO: {question.pico}\n"
                    f"- Same verdict on the same review as its parent question: see [{parent.id}]({parent.id}.md)\n")  # fmt: skip
        else:
            text = dossier_markdown(question, papers, topic)
        atomic_write(path, text)
        written.append(path)
    judged_by = "; ".join(sorted({q.judged_by for q in questions})) or RULES  # the rules, or an LLM judge by name
    payload = {"topic": topic.describe(), "judged_by": judged_by, "questions": [q.as_dict() for q in questions]}
    atomic_write(folder / "questions.json", json.dumps(payload, indent=2) + "\n")
    return written


def goal_topic(cfg: Config, store: Store, cluster_id: str):
    """The review-question topic (`evidence.questions.Topic`) of the goal working on `cluster_id` (its focus, or
    the newest goal that called a tool on it), from that goal's handbook seed query; None when no goal with a
    seed query works on it (find_existing_sr then decides by title cosine)."""
    from ra_agent.agent.goal import GoalStore

    def acted_on(state) -> str:
        calls = [h for h in state.events("tool_call") if (h.get("args") or {}).get("cluster_id") == cluster_id]
        return calls[-1]["ts"] if calls else ("0" if state.cluster_id == cluster_id else "")

    states = [s for s in GoalStore(cfg.data_dir, store).states() if acted_on(s)]
    for state in sorted(states, key=acted_on, reverse=True):
        path = Path(state.handbook_path)  # as goals record it: relative to the project root when inside it
        try:
            return handbook_topic(path if path.is_absolute() else Path(cfg.root) / path)
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
    from ra_agent.evidence.sr_search import topic_reviews
    from ra_agent.topics.view import member_pmids

    topic = goal_topic(cfg, store, cluster_id)
    if topic is None:
        return ClusterQuestions(cluster_id, None, [], "no goal with a Seed_query works on this cluster")
    members = store.papers(member_pmids(store, cluster_id))
    reviews = topic_reviews(store)
    pool = list({p.pmid: p for p in [*members, *reviews]}.values())
    questions, judged, _ = questions_for_topic(
        topic, pool, pivot=cfg.sr.sr_overlap_pivot, update_after=cfg.sr.update_after_trials,
        min_trials=cfg.sr.min_eligible_trials, references=_references(store, reviews),
    )  # fmt: skip
    if not any(j.eligible for j in judged.values()):
        reason = f"no member is an eligible trial for the goal's topic ({topic.describe()})"
        return ClusterQuestions(cluster_id, topic, [], reason)
    folder = Workspace.of(cfg).root / "questions" / "clusters" / cluster_id
    write_dossiers(cfg, folder, topic, questions, {p.pmid: p for p in pool})
    return ClusterQuestions(cluster_id, topic, questions, "", folder)


VERDICTS = ("gap", "covered", "covered, update warranted", "too few trials")


def question_file_problems(cfg: Config, store: Store) -> tuple[int, list[str]]:
    """Structural check of every cluster's written questions (questions/clusters/*/questions.json): (questions
    read, problems). Each question has a well-formed id, a known verdict, a dossier file, a reason for each of its
    trials, and trials and covering reviews that are papers of the store."""
    import re

    root = Workspace.of(cfg).root / "questions" / "clusters"
    problems: list[str] = []
    seen = 0
    for path in sorted(root.glob("*/questions.json")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: unreadable ({exc})")
            continue
        for q in payload.get("questions", []):
            seen += 1
            where = f"{path.parent.name}/{q.get('id')}"
            if not re.fullmatch(r"q-[0-9a-f]{10}", str(q.get("id", ""))):
                problems.append(f"{where}: malformed id")
            if q.get("verdict") not in VERDICTS:
                problems.append(f"{where}: unknown verdict {q.get('verdict')!r}")
            if not (path.parent / f"{q.get('id')}.md").exists():
                problems.append(f"{where}: no dossier file")
            if any(not str(why).strip() for why in q.get("trials", {}).values()):
                problems.append(f"{where}: a trial without its reason")
            pmids = {int(p) for p in q.get("trials", {})} | {int(r["pmid"]) for r in q.get("reviews", [])}
            missing = sorted(pmids - store.existing_pmids(pmids))
            if missing:
                problems.append(f"{where}: PMIDs not in the store {missing[:5]}")
    return seen, problems
