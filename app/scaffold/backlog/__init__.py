"""Backlog.md adapter: read task files, edit them in place, create new ones.

Scaffold treats the Backlog.md folder in the repository as the source of truth
for tasks. This package reads it the way the real ``backlog`` CLI does (and
reports what the CLI would silently drop), writes the few things scaffold
changes without disturbing anything else, and decides which tasks are ready.
"""

from scaffold.backlog.config import BacklogConfig, find_backlog_dir, load_config
from scaffold.backlog.create import create_task, next_task_id, render_task, sanitize_filename
from scaffold.backlog.format import AcceptanceCriterion, BacklogTask, parse_task, read_task
from scaffold.backlog.graph import (
    Readiness,
    compute_readiness,
    describe_cycle,
    find_cycles,
    strongly_connected,
    topological_order,
)
from scaffold.backlog.repository import (
    CONFIG,
    CYCLE,
    DUPLICATE_ID,
    MALFORMED,
    MISSING_DEPENDENCY,
    PROBLEM_KINDS,
    UNKNOWN_STATUS,
    BacklogProblem,
    BacklogSnapshot,
    load_backlog,
)
from scaffold.backlog.sections import ChecklistItem
from scaffold.backlog.writer import (
    append_implementation_notes,
    check_acceptance_criterion,
    edit_task,
    given,
    set_final_summary,
    set_status,
    update_task,
)

__all__ = [
    "CONFIG",
    "CYCLE",
    "DUPLICATE_ID",
    "MALFORMED",
    "MISSING_DEPENDENCY",
    "PROBLEM_KINDS",
    "UNKNOWN_STATUS",
    "AcceptanceCriterion",
    "BacklogConfig",
    "BacklogProblem",
    "BacklogSnapshot",
    "BacklogTask",
    "ChecklistItem",
    "Readiness",
    "append_implementation_notes",
    "check_acceptance_criterion",
    "compute_readiness",
    "create_task",
    "describe_cycle",
    "edit_task",
    "find_backlog_dir",
    "find_cycles",
    "given",
    "load_backlog",
    "load_config",
    "next_task_id",
    "parse_task",
    "read_task",
    "render_task",
    "sanitize_filename",
    "set_final_summary",
    "set_status",
    "strongly_connected",
    "topological_order",
    "update_task",
]
