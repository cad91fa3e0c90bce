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
# and, from the same run, the first lines of its first dossier (`dossier_excerpt`)
DOSSIER_BEGIN = "<!-- demo-dossier: begin (scripts/readme_demo.py writes it from the same run) -->"
DOSSIER_END = "<!-- demo-dossier: end -->"
EXCERPT_WIDTH = 116
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
    return readme_block(readme, README_BEGIN, README_END)


def dossier_excerpt(dossier: str) -> list[str]:
    """The lines of a dossier a README shows: its title, its answer in plain words, the question's PICO, verdict and
    counts, the first row of its study table and the first review that covers it; each cut to EXCERPT_WIDTH
    characters with " ..." (the same numbers as the dossier, never retyped)."""
    lines = dossier.splitlines()

    def first(prefix: str, after: int = 0) -> int | None:
        return next((i for i in range(after, len(lines)) if lines[i].startswith(prefix)), None)

    groups: list[list[int]] = [[]]
    if (title := first("# ")) is not None:
        groups[0].append(title)
        answer = next((i for i in range(title + 1, len(lines)) if lines[i] and not lines[i].startswith("_")), None)
        groups[0] += [answer] if answer is not None and not lines[answer].startswith(("-", "#")) else []
    groups[0] += [i for prefix in ("- PICO:", "- **Verdict:", "- Counts:") if (i := first(prefix)) is not None]
    if (studies := first("## Studies")) is not None:
        groups.append([i for i in range(studies, min(studies + 5, len(lines))) if lines[i].startswith(("#", "|"))][:4])
    if (covering := first("### Reviews whose own question encompasses it")) is not None:
        groups.append([covering] + ([row] if (row := first("- ", covering)) is not None else []))
    out: list[str] = []
    for group in (g for g in groups if g):
        out += ([""] if out else []) + [lines[i] if len(lines[i]) <= EXCERPT_WIDTH
                                         else lines[i][: EXCERPT_WIDTH - 4].rstrip() + " ..." for i in group]  # fmt: skip
    return out


def readme_block(readme: str, begin: str, end: str) -> list[str]:
    """The lines of the code block README.md holds between two markers."""
    if begin not in readme or end not in readme:
        raise ValueError(f"README.md has no markers {begin!r} ... {end!r}")
    inside = readme.split(begin, 1)[1].split(end, 1)[0]
    return [line for line in inside.strip("\n").splitlines() if not line.startswith("```")]
