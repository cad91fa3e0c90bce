"""What a demo ends with: each goal's answer in plain words, the reports to read with their subject and verdict, the
UI to open. The tool-call trace stays in the logs."""

from __future__ import annotations

from pathlib import Path

from ra_agent.agent.goal import GoalState
from ra_agent.agent.goal_questions import goal_answer
from ra_agent.agent.reporting import report_verdict
from ra_agent.config import Config

FINISHED = ("stopped",)  # a goal that ended on its own: its answer is all the line says


def goal_outcome(cfg: Config, state: GoalState) -> str:
    """One goal in one line: its id, primary goal and its answer in plain words (`goal_answer`: "gap found: ...",
    "covered by ...", "no question with enough trials"); a goal that did not end on its own says its status too."""
    status = "" if state.status in FINISHED else f" [{state.status}: {state.stop_reason() or 'no reason recorded'}]"
    return f"goal {state.goal_id} ({state.primary_goal}): {goal_answer(cfg, state)}{status}"


def report_gist(path: Path) -> str:
    """A report's subject and verdict in one line ("ph monitoring · reflux: evidence gap (provisional)"), read from
    its title and its **Verdict: ...** line; "" when the file says neither."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    title = next((x.split(":", 1)[-1].strip() for x in lines if x.startswith("# ")), "")
    verdict = report_verdict(path)
    return ": ".join(part for part in (title, verdict) if part)


UI_AFTER_DAGSTER = "See the asset graph, the runs and the reports' previews in the Dagster UI:"
UI_AFTER_LOCAL = (
    "See the asset graph of this workspace in the Dagster UI (`ra demo` ran without Dagster: no runs there):"
)


def closing_block(
    written: list[str], found: list[str], ui_port: int = 3000, ui_says: str = UI_AFTER_DAGSTER
) -> list[str]:
    """What the demo ends with: what was found, the dossiers to read, and how to see it all in the UI."""
    lines = ["", "demo finished. What it found:", *(f"  {line}" for line in found), "Read:"]
    lines += [f"  {path}" + (f"\n    {what}" if (what := report_gist(Path(path))) else "") for path in written] or [
        "  (no report written: see the goal states above)"
    ]
    lines += [ui_says, f"  bash scripts/ui.sh     then open http://127.0.0.1:{ui_port}  (Ctrl-C stops it)"]
    return lines
