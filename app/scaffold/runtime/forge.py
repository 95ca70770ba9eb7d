"""Where pull requests live: the seam between the orchestrator and a forge.

The orchestrator decides (through the pure core) that a task's pull request is to be
opened, merged or abandoned, that a person must be asked something, or that a task is
blocked; a ``Forge`` carries it out. ``LocalForge`` is plain git (the local branch is
the pull request; approval comes from ``scaffold approve`` or ``approval: auto``); the
GitHub App's forge (``scaffold.github.forge``) pushes branches and talks to GitHub.

Every method is idempotent: after a restart the orchestrator re-issues the effects of
a task's current state, and a forge must notice what it already did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from scaffold.agent.process import AgentRunOutcome
from scaffold.core import review
from scaffold.core.events import Event
from scaffold.core.states import EventName
from scaffold.quest.model import AgentRun, PullRequest, Quest, Question, TaskRecord

if TYPE_CHECKING:
    from scaffold.runtime.repo_ops import RepoOps


@dataclass(frozen=True)
class Opened:
    """The pull request as it now stands, and the event that follows (None: wait)."""

    pr: PullRequest
    note: str | None = None
    event: Event | None = None
    merged: bool = False  # merged already (a person merged it on the forge)


class Forge(Protocol):
    """What a forge does; the methods that return None do nothing unless overridden."""

    async def prepare_allocation(self, quest: Quest, task: TaskRecord) -> None:
        """Before a task's worktree is created (e.g. bring the default branch up to date)."""
        return None

    async def sync_branch(self, quest: Quest, task: TaskRecord) -> None:
        """Before a round on the open pull request: the commits people pushed to the task's
        branch are taken into its worktree (never overwritten)."""
        return None

    async def open_pull_request(self, quest: Quest, task: TaskRecord) -> Opened:
        """Push the task's branch and open its pull request, or find it again. After a
        round of the review loop (``review.current_round``), answer the feedback too."""

    async def merge_pull_request(self, quest: Quest, task: TaskRecord) -> Event | None:
        """MERGE_COMPLETE, MERGE_CONFLICT, or None to wait (checks pending, behind base)."""

    async def branch_deleted(self, quest: Quest, task_id: str) -> None:
        """The local branch is gone; remove the forge's copy too."""
        return None

    async def ask(self, quest: Quest, question: Question) -> None:
        return None

    async def report_blocked(self, quest: Quest, task_id: str, reason: str) -> None:
        return None

    def progress(self, quest: Quest) -> None:
        """The quest changed (cheap; a forge may throttle what it does with it)."""
        return None

    async def flush(self, quest: Quest) -> None:
        """The run is ending: publish the last progress now."""
        return None


class LocalForge(Forge):
    """Plain git: the task branch is the pull request, merged into the local default branch.

    What it does not override does nothing (the worktree holds the branch: a person's
    commits there are on it; questions and blocks are said by the orchestrator)."""

    def __init__(self, ops: RepoOps, say: Callable[[str], None]) -> None:
        self.ops = ops
        self._say = say

    async def open_pull_request(self, quest: Quest, task: TaskRecord) -> Opened:
        pr, note = task.pr, None
        if pr is None or pr.state != "open":
            number = 1 + sum(1 for t in quest.tasks.values() if t.pr is not None)
            base = self.ops.workspace.default_branch()
            pr = PullRequest(branch=task.branch or "", base=base, number=number)
            note = f"pull request #{number} opened"
        head = self.ops.workspace.branch_head(task.branch) if task.branch else None
        if head is not None and head != pr.head_sha:
            pr = pr.model_copy(update={"head_sha": head})
        current = review.current_round(task)
        if current is not None:
            who = ", ".join(f"@{r}" for r in review.reviewers(current.feedback)) or "CI"
            self._say(
                f"{task.id}: round {current.number} ({who}) fixed in {(head or '?')[:12]}: "
                f"{task.last_summary or 'no summary'}"
            )
        if self.ops.cfg.approval == "auto":
            approved = Event(EventName.PR_APPROVED, at=self.ops.clock(), detail="auto")
            return Opened(pr, note, approved)
        self._say(
            f"{task.id}: pull request ready; `scaffold approve {task.id}`, "
            f"`scaffold review {task.id} --request-changes TEXT` or `scaffold reject {task.id}`"
        )
        return Opened(pr, note)

    async def merge_pull_request(self, quest: Quest, task: TaskRecord) -> Event | None:
        message = f"Merge {task.branch}: {task.id} {task.title}"
        return await asyncio.to_thread(self.ops.merge, task.id, message)


class RemoteAgents(Protocol):
    """Runs a task's agent somewhere else (e.g. a GitHub Actions runner).

    The run must leave the same traces a local run leaves: the accepted signals in
    ``signal_dir`` (``signal-<seq>.json``), the agent's commits on the task branch (the
    worktree is brought up to date), and an ``AgentRunOutcome`` with the session id and
    cost. A run that failed, was cancelled or timed out is an outcome without a signal:
    the lifecycle treats it as a crash (retried, resuming the session).
    """

    async def run_agent(
        self, quest: Quest, task: TaskRecord, run: AgentRun, run_dir: Path, signal_dir: Path
    ) -> AgentRunOutcome: ...
