"""What a demo ends with: each goal's answer in plain words, the reports to read with their subject and verdict, the
UI to open. The tool-call trace stays in the logs."""

from __future__ import annotations

from pathlib import Path

from ra_agent.agent.goal import GoalState
from ra_agent.agent.goal_questions import goal_answer
from ra_agent.agent.reporting import relative_posix, report_verdict
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
    """What the demo ends with: what was found, the dossiers to read (relative to the current folder when inside
    it), and how to see it all in the UI."""
    lines = ["", "demo finished. What it found:", *(f"  {line}" for line in found), "Read:"]
    lines += [f"  {relative_posix(path, Path.cwd())}" + (f"\n    {what}" if (what := report_gist(Path(path))) else "")
              for path in written] or ["  (no report written: see the goal states above)"]  # fmt: skip
    lines += [ui_says, f"  bash scripts/ui.sh     then open http://127.0.0.1:{ui_port}  (Ctrl-C stops it)"]
    return lines


# README.md holds the closing block of a real run of scripts/demo.sh between these markers (scripts/readme_demo.py)
README_BEGIN = "<!-- demo-closing: begin (scripts/readme_demo.py writes it from a real run) -->"
README_END = "<!-- demo-closing: end -->"
CLOSING_HEAD = "demo finished. What it found:"


def closing_excerpt(output: str) -> list[str]:
    """The closing block of a demo's output without its UI lines (they name the path the demo took); ValueError when
    the output has none."""
    lines = output.splitlines()
    if CLOSING_HEAD not in lines:
        raise ValueError(f"no line {CLOSING_HEAD!r} in the demo's output")
    block = lines[lines.index(CLOSING_HEAD) :]
    ui = "See the asset graph"  # UI_AFTER_DAGSTER and UI_AFTER_LOCAL both start so
    return block[: next((i for i, line in enumerate(block) if line.startswith(ui)), len(block))]


def readme_excerpt(readme: str) -> list[str]:
    """The closing block README.md holds between its markers (the lines of its code block)."""
    if README_BEGIN not in readme or README_END not in readme:
        raise ValueError("README.md has no demo-closing markers")
    inside = readme.split(README_BEGIN, 1)[1].split(README_END, 1)[0]
    return [line for line in inside.strip("\n").splitlines() if not line.startswith("```")]
