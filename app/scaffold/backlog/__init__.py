"""Backlog.md adapter: read task files, edit them in place, create new ones.

Scaffold treats the Backlog.md folder in the repository as the source of truth
for tasks. This package reads it the way the real ``backlog`` CLI does (and
reports what the CLI would silently drop), writes the few things scaffold
changes without disturbing anything else, and decides which tasks are ready.
"""

from scaffold.backlog.config import BacklogConfig, find_backlog_dir
from scaffold.backlog.create import create_task, next_task_id, render_task, sanitize_filename
from scaffold.backlog.format import BacklogTask, parse_task, read_task
from scaffold.backlog.graph import compute_readiness, describe_cycle, find_cycles
from scaffold.backlog.repository import (
    CONFIG,
    CYCLE,
    DUPLICATE_ID,
    MALFORMED,
    MISSING_DEPENDENCY,
    UNKNOWN_STATUS,
    BacklogProblem,
    BacklogSnapshot,
    load_backlog,
)
from scaffold.backlog.sections import ChecklistItem
from scaffold.backlog.writer import given, update_task

__all__ = [
    "CONFIG",
    "CYCLE",
    "DUPLICATE_ID",
    "MALFORMED",
    "MISSING_DEPENDENCY",
    "UNKNOWN_STATUS",
    "BacklogConfig",
    "BacklogProblem",
    "BacklogSnapshot",
    "BacklogTask",
    "ChecklistItem",
    "compute_readiness",
    "create_task",
    "describe_cycle",
    "find_backlog_dir",
    "find_cycles",
    "given",
    "load_backlog",
    "next_task_id",
    "parse_task",
    "read_task",
    "render_task",
    "sanitize_filename",
    "update_task",
]
