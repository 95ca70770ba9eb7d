"""The repository-side effects of the lifecycle, each returning the event it leads to.

Worktrees, Ward, DiagramCheck, the local forge's merge and Backlog.md writes: blocking
work the orchestrator runs in threads. Anything that moves the default branch (merges,
Backlog.md status commits) also updates the person's checkout, so it runs one at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from scaffold import backlog as bl
from scaffold.agent.process import agent_environment
from scaffold.config import ScaffoldConfig
from scaffold.core.events import Event
from scaffold.core.states import EventName
from scaffold.diagramcheck.analyzer import analyze
from scaffold.errors import ScaffoldError
from scaffold.git.locks import repo_lock
from scaffold.git.runner import IDENTITY_CONFIG, IDENTITY_ENV, SAFE_LOCAL, run_git
from scaffold.git.workspace import Workspace
from scaffold.ids import branch_for_task
from scaffold.ward import CommandWrap, format_ward_report, run_ward

# Drafts longer than this are left out of the lines (the message still says what to add).
MAX_DRAFT_LINES = 12


class RepoOps:
    def __init__(
        self,
        repo: Path,
        config: ScaffoldConfig,
        clock: Callable[[], datetime],
        warn: Callable[[str], None],
    ) -> None:
        self.repo = repo
        self.cfg = config
        self.clock = clock
        self.warn = warn
        self.workspace = Workspace(repo, default_branch=config.default_branch)
        self.default_branch_lock = repo_lock(repo, "default-branch")

    def create_worktree(self, task_id: str) -> Event:
        try:
            self.write_backlog_status(task_id, "In Progress", "", None)
            path = self.workspace.create_worktree(task_id)
        except (ScaffoldError, OSError) as exc:
            return Event(EventName.ALLOCATION_FAILED, at=self.clock(), detail=str(exc))
        return Event(
            EventName.WORKTREE_CREATED,
            at=self.clock(),
            extra={"worktree": str(path), "branch": branch_for_task(task_id)},
        )

    def start_conflict_merge(self, worktree: Path) -> None:
        """Merge the default branch into the task's worktree, leaving conflict markers
        for the agent to resolve (its changes are committed after it completes)."""
        run_git(
            [*IDENTITY_CONFIG, *SAFE_LOCAL, "merge", "--no-edit", self.workspace.default_branch()],
            cwd=worktree,
            check=False,
            env=IDENTITY_ENV,
        )

    def run_ward(self, worktree: Path, wrap: CommandWrap | None = None) -> Event:
        # Ward runs code the agents wrote: no credential, and the agents' sandbox (``wrap``).
        env = agent_environment(os.environ, {})
        result = run_ward(self.cfg.ward, worktree, self.cfg.ward_timeout_s, env, wrap)
        if result.passed:
            return Event(EventName.WARD_PASSED, at=self.clock())
        return Event(EventName.WARD_FAILED, at=self.clock(), detail=format_ward_report(result))

    def check_diagrams(self, task_id: str) -> Event:
        """DiagramCheck on the task branch against the default branch (their merge base)."""
        default, branch = self.workspace.default_branch(), branch_for_task(task_id)
        report = analyze(
            self.repo, f"refs/heads/{default}", f"refs/heads/{branch}", self.cfg.diagrams
        )
        for warning in report.warnings:
            self.warn(f"{task_id}: DiagramCheck: {warning.message}")
        if not report.blocking:
            return Event(EventName.DIAGRAMS_SYNCED, at=self.clock())
        missing = []  # what to change where, and a short draft when it has one
        for f in report.failures:
            line = f"{f.message} ({f.source}:{f.line})"
            if 1 < len(f.draft) <= MAX_DRAFT_LINES:
                line += "\n  draft:\n" + "\n".join(f"  {d}" for d in f.draft)
            missing.append(line)
        return Event(EventName.DIAGRAMS_MISSING, at=self.clock(), missing=tuple(missing))

    def merge(self, task_id: str, message: str) -> Event | None:
        with self.default_branch_lock:
            result = self.workspace.merge(task_id, message)
        if result.merged:
            return Event(EventName.MERGE_COMPLETE, at=self.clock(), detail=result.sha or "")
        if result.conflict_files:
            return Event(
                EventName.MERGE_CONFLICT, at=self.clock(), detail=", ".join(result.conflict_files)
            )
        self.warn(
            f"{task_id}: cannot merge: uncommitted changes in {', '.join(result.blocked_paths)};"
            " commit or stash them and run again"
        )
        return None

    def write_backlog_status(
        self, task_id: str, status: str, notes: str, summary: str | None
    ) -> None:
        bt = bl.load_backlog(self.repo).get(task_id)
        if bt is None:
            self.warn(f"{task_id}: no Backlog.md file to update")
            return
        notes_text, summary_text = bl.given(notes), bl.given(summary)
        if bt.status != status or notes_text or summary_text:
            bl.update_task(
                bt.path,
                status=status if bt.status != status else None,
                notes=notes_text,
                summary=summary_text,
            )
        with self.default_branch_lock:
            self.workspace.commit_on_default([bt.path], f"scaffold: {task_id} {status}")
