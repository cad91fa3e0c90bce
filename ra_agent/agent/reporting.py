"""Reports for goals that met their handbook: a gap dossier (seek_gap) or an SR draft (conduct_SR) per review question
that met Success, read from the handbook's QuestionSet."""

from __future__ import annotations

import logging
from pathlib import Path

from ra_agent.agent.goal import GoalStore
from ra_agent.config import Config
from ra_agent.store.db import Store
from ra_agent.workspace import Workspace

log = logging.getLogger(__name__)


def goal_reports_dir(cfg: Config, goal_id: str) -> Path:
    """reports/<goal_id>/: every report of one goal, never written by another goal."""
    GoalStore(cfg.data_dir).goal_dir(goal_id)  # validates the id (it becomes a folder name)
    return Workspace.of(cfg).reports_dir / goal_id


def relative_posix(path: str | Path, base: str | Path) -> str:
    """`path` relative to `base` when inside it, else absolute; POSIX separators."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(Path(base).resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def workspace_relative(cfg: Config, path: str | Path) -> str:
    """A path as goal histories and status lines keep it: relative to the workspace when inside it."""
    return relative_posix(path, cfg.data_dir)


def synthesis_question(cfg: Config, state, question):
    """The review question as an SR draft's synthesis reads it (`evidence.synthesis.question.from_review_question`),
    its population test from the handbook's topic (`agent.questions.handbook_topic`); without the topic's test, with
    a warning, when the handbook can no longer be read."""
    from ra_agent.agent.handbook import recorded_handbook
    from ra_agent.agent.questions import handbook_topic
    from ra_agent.evidence.synthesis.question import from_review_question

    try:
        topic = handbook_topic(recorded_handbook(cfg, state.handbook_path))
    except (OSError, ValueError) as exc:  # HandbookError is a ValueError naming the file and Seed_query
        log.warning("goal %s: the SR draft tests no population (%s)", state.goal_id, exc)
        topic = None
    return from_review_question(question, topic)


def write_goal_reports(cfg: Config, store: Store, goal_id: str | None = None, brain=None) -> list[Path]:
    """Write the report of each question that met Success for one goal into reports/<goal_id>/; note it in its
    history. The question is read from its handbook's set as it stands (`load_question_set`).

    Without `goal_id` (the Dagster `reports` asset run outside a goal): every goal that has a successful question
    without a report yet. A goal's finished reports are never rewritten for another goal. An SR draft's arm data
    are read by `brain` when it is a language model, else by the rules.
    """
    from ra_agent.agent.handbook import recorded_handbook
    from ra_agent.agent.questions import load_question_set
    from ra_agent.evidence.prisma.store import load_prisma
    from ra_agent.evidence.reports.gap_dossier import gap_dossier
    from ra_agent.evidence.reports.sr_draft import sr_draft

    goals = GoalStore(cfg.data_dir, store)
    written: list[Path] = []
    for state in [goals.load(goal_id)] if goal_id else goals.states():
        recorded = {h.get("question_id") for h in state.events("report_written")}
        todo = state.success_questions if goal_id else [q for q in state.success_questions if q not in recorded]
        if not todo:
            record_goal_playbook(cfg, store, goals, state)
            continue
        qset = load_question_set(cfg, store, recorded_handbook(cfg, state.handbook_path))
        out_dir = goal_reports_dir(cfg, state.goal_id)
        for question_id in todo:
            question, prisma = qset.question(question_id), load_prisma(cfg, question_id)
            if state.primary_goal == "conduct_SR":
                path = sr_draft(cfg, store, qset, question, goal_id=state.goal_id, brain_name=state.brain,
                                prisma=prisma, out_dir=out_dir, synthesis_question=synthesis_question(cfg, state,
                                question), brain=brain)  # fmt: skip
                kind = "sr_draft"
            else:
                path = gap_dossier(cfg, store, qset, question, goal_id=state.goal_id, brain_name=state.brain,
                                   prisma=prisma, out_dir=out_dir)  # fmt: skip
                kind = "gap_dossier"
            path, recorded_now = record_report(cfg, goals, state, kind, question_id, Path(path))
            written.append(path)
            if recorded_now:
                goals.save(state)
        record_goal_playbook(cfg, store, goals, state)
    return written


def record_report(cfg: Config, goals: GoalStore, state, kind: str, question_id: str, path: Path,
                  **extra) -> tuple[Path, bool]:  # fmt: skip
    """Note a written report in the goal's history (once per path): (the report's path, whether it was noted now).

    One report per question: a report reaching the verdict of a report of the same kind already written on the same
    question by this goal or an ancestor goal keeps no copy: its file is removed and the history points at the
    existing report (`same_question`)."""
    same = earlier_report(cfg, goals, state, question_id, kind, path)
    if same:
        path.unlink()
        path = cfg.data_dir / same
    relative = workspace_relative(cfg, path)
    log.info("%s for %s (goal %s): %s%s", kind, question_id, state.goal_id, relative,
             " (the same verdict on the same question as an earlier report: no copy written)" if same else "")  # fmt: skip
    if any(h["path"] == relative and h.get("question_id") == question_id for h in state.events("report_written")):
        return path, False
    state.record("report_written", kind=kind, question_id=question_id, path=relative, **extra,
                 **({"same_question": True} if same else {}))  # fmt: skip
    return path, True


def report_verdict(path: Path) -> str:
    """The verdict line of a dossier or SR draft ("**Verdict: ...**"), or "" when it has none."""
    return _report_line(path, "**Verdict:", lambda x: x.split("**Verdict:", 1)[1].split("**", 1)[0].strip(" ."))


def _report_line(path: Path, marker: str, value) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return next((value(x) for x in lines if marker in x), "")


def earlier_report(cfg: Config, goals: GoalStore, state, question_id: str, kind: str, path: Path) -> str | None:
    """The workspace-relative path of a report of the same kind and verdict as `path`, written before about the same
    question by this goal or an ancestor goal; None when there is none."""
    verdict, own = report_verdict(path), workspace_relative(cfg, path)
    goal, seen = state, set()
    while verdict and goal is not None and goal.goal_id not in seen:
        seen.add(goal.goal_id)
        for h in goal.events("report_written"):
            if (
                h.get("kind") == kind
                and h["path"] != own
                and h.get("question_id") == question_id
                and (report_verdict(cfg.data_dir / h["path"]) == verdict)
            ):
                return h["path"]
        parent = goal.parent_goal
        goal = goals.load(parent) if parent and goals.exists(parent) else None
    return None


def goal_playbook_steps(state) -> list[tuple[dict, object]]:
    """The goal's (plan, result) pairs: every tool call the brain made, with what it returned."""
    return [({"tool": h["tool"], "args": h["args"]}, h.get("result", {})) for h in state.events("tool_call")]


def record_goal_playbook(cfg: Config, store: Store, goals: GoalStore, state) -> str | None:
    """Store a successful goal's tool sequence in Mind-KB (seed 002), once per goal; None when there is
    nothing to record (Mind-KB off, no success yet, or already recorded)."""
    if not cfg.mindkb.enabled or not state.success_questions or state.events("playbook_recorded"):
        return None
    from ra_agent.ask.mindkb import open_playbook_store, record_agent_cycle_playbook
    from ra_agent.embed.embedder import SentenceTransformerEmbedder

    prompt = f"{state.primary_goal}: {state.topic} (handbook {Path(state.handbook_path).name})"
    final = f"Success: {', '.join(state.success_questions)}; reports: " + ", ".join(
        Path(h["path"]).name for h in state.events("report_written")
    )
    playbooks = open_playbook_store(cfg, store, SentenceTransformerEmbedder(cfg))
    playbook_id = record_agent_cycle_playbook(playbooks, prompt, goal_playbook_steps(state), final,
                                              session=state.goal_id, brain=state.brain)  # fmt: skip
    if playbook_id:
        state.record("playbook_recorded", playbook_id=playbook_id)
        goals.save(state)
    return playbook_id
