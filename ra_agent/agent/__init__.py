"""The agent: handbooks, goals, actions and tools, the prompt, guards, one cycle, stage requests and the local runner."""

from ra_agent.agent.closing import closing_block, goal_outcome, report_gist
from ra_agent.agent.cycle import run_cycle
from ra_agent.agent.extraction import SheetError, export_sheet, import_sheet, reviewer_summary
from ra_agent.agent.goal import GoalStore
from ra_agent.agent.guards import pause_requested
from ra_agent.agent.handbook import HandbookError
from ra_agent.agent.living import set_changes
from ra_agent.agent.loopguard import GoalLock, GoalLocked, goal_activity, live_holder
from ra_agent.agent.questions import (
    current_question_set,
    load_question_set,
    map_files,
    questions_root,
    register_handbook,
    registered_handbook,
)
from ra_agent.agent.reporting import record_goal_playbook, report_verdict, workspace_relative
from ra_agent.agent.runner import mark_crashed, spawned_goals, start_goal, written_reports
from ra_agent.agent.stages import (
    StageRequest,
    run_expand,
    run_pico_stage,
    run_reports,
    run_sr_overlap,
    switch_index,
)
from ra_agent.evidence.questions.gap_map_draw import map_preview

__all__ = [
    "GoalLock",
    "GoalLocked",
    "GoalStore",
    "HandbookError",
    "SheetError",
    "StageRequest",
    "closing_block",
    "current_question_set",
    "goal_activity",
    "goal_outcome",
    "live_holder",
    "load_question_set",
    "map_files",
    "map_preview",
    "export_sheet",
    "import_sheet",
    "mark_crashed",
    "pause_requested",
    "questions_root",
    "record_goal_playbook",
    "register_handbook",
    "registered_handbook",
    "report_gist",
    "report_verdict",
    "reviewer_summary",
    "run_cycle",
    "run_expand",
    "run_pico_stage",
    "run_reports",
    "run_sr_overlap",
    "set_changes",
    "spawned_goals",
    "start_goal",
    "switch_index",
    "workspace_relative",
    "written_reports",
]
