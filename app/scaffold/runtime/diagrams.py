"""DiagramCheck for a task: its branch against the default branch, as Codeweaver reads it."""

from __future__ import annotations

from pathlib import Path

from scaffold.config import ScaffoldConfig
from scaffold.diagramcheck.analyzer import analyze
from scaffold.diagramcheck.findings import Report
from scaffold.git.workspace import Workspace
from scaffold.ids import branch_for_task

# Drafts longer than this are left out of the lines (the message still says what to add).
MAX_DRAFT_LINES = 12


def task_report(repo: Path, config: ScaffoldConfig, workspace: Workspace, task_id: str) -> Report:
    """DiagramCheck of ``scaffold/task-<id>`` against the merge base with the default branch."""
    default = workspace.default_branch()
    branch = branch_for_task(task_id)
    return analyze(repo, f"refs/heads/{default}", f"refs/heads/{branch}", config.diagrams)


def missing_lines(report: Report) -> tuple[str, ...]:
    """One line per blocking finding: what to change where, and a short draft when it has one."""
    lines: list[str] = []
    for f in report.failures:
        line = f"{f.message} ({f.source}:{f.line})"
        if 1 < len(f.draft) <= MAX_DRAFT_LINES:
            line += "\n  draft:\n" + "\n".join(f"  {d}" for d in f.draft)
        lines.append(line)
    return tuple(lines)
