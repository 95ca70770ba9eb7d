"""Effects: what the pure core asks the runtime to do, as plain data.

The runtime executes them; the core never does I/O. Every effect names its task
(``None`` for quest-level planning work).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaffold.quest.model import AgentRun


@dataclass(frozen=True)
class CreateWorktree:
    task_id: str


@dataclass(frozen=True)
class StartAgent:
    task_id: str | None
    run: AgentRun


@dataclass(frozen=True)
class StopAgent:
    task_id: str | None
    reason: str


@dataclass(frozen=True)
class SyncBranch:
    """Before a round on an open pull request: take in the commits people pushed to the
    task's branch, so the agent builds on them."""

    task_id: str


@dataclass(frozen=True)
class RunWard:
    task_id: str


@dataclass(frozen=True)
class RunDiagramCheck:
    task_id: str


@dataclass(frozen=True)
class OpenPullRequest:
    task_id: str


@dataclass(frozen=True)
class MergePullRequest:
    task_id: str


@dataclass(frozen=True)
class AskQuestion:
    task_id: str | None
    question_id: str


@dataclass(frozen=True)
class ReportBlocked:
    task_id: str
    reason: str
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoveWorktree:
    task_id: str


@dataclass(frozen=True)
class DeleteBranch:
    task_id: str


@dataclass(frozen=True)
class SyncBacklog:
    """Write the task's Backlog.md status (and notes / final summary) and commit it."""

    task_id: str
    status: str
    notes: str = ""
    final_summary: str | None = None


Effect = (
    CreateWorktree
    | StartAgent
    | StopAgent
    | SyncBranch
    | RunWard
    | RunDiagramCheck
    | OpenPullRequest
    | MergePullRequest
    | AskQuestion
    | ReportBlocked
    | RemoveWorktree
    | DeleteBranch
    | SyncBacklog
)
