"""What the core's effects do here: git, Ward, DiagramCheck, the forge, Backlog.md.

Each runs in a task's job (:meth:`Orchestrator.start_job`), after every journal line that
led to it is on disk; an agent run is
:mod:`~scaffold.runtime.agent_jobs`'s. An effect re-issued after a restart, or one whose
task moved on before it ran, is noticed and does nothing.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import TYPE_CHECKING

from scaffold.core import review
from scaffold.core.effects import (
    AskQuestion,
    CreateWorktree,
    DeleteBranch,
    Effect,
    MergePullRequest,
    OpenPullRequest,
    RemoveWorktree,
    ReportBlocked,
    RunDiagramCheck,
    RunWard,
    StartAgent,
    SyncBacklog,
    SyncBranch,
)
from scaffold.core.events import Event
from scaffold.core.states import EventName, Lifecycle
from scaffold.ids import PLAN_STEP
from scaffold.runtime.run_channel import private_dir

if TYPE_CHECKING:
    from scaffold.runtime.orchestrator import Orchestrator


async def execute(orch: Orchestrator, key: str, effect: Effect) -> Event | None:
    """Carry out one effect of ``key``'s job; the event it leads to, if any."""
    if isinstance(effect, StartAgent):
        return await orch.agents.run_agent(key, effect.run)
    if isinstance(effect, RunWard) and not orch.cfg.ward:
        return Event(EventName.WARD_PASSED, at=orch.clock())  # nothing to run or wait for
    if isinstance(effect, SyncBranch):
        await orch.forge.sync_branch(orch.quest, orch.quest.tasks[effect.task_id])
        return None
    if isinstance(effect, CreateWorktree):
        await orch.forge.prepare_allocation(orch.quest, orch.quest.tasks[effect.task_id])
        return await asyncio.to_thread(orch.ops.create_worktree, effect.task_id)
    if isinstance(effect, RunWard):
        return await asyncio.to_thread(
            orch.ops.run_ward,
            orch.agents.worktree(effect.task_id),
            orch.agents.ward_wrap(effect.task_id),
        )
    if isinstance(effect, RunDiagramCheck):
        return await asyncio.to_thread(orch.ops.check_diagrams, effect.task_id)
    if isinstance(effect, OpenPullRequest):
        return await _open_pull_request(orch, effect.task_id)
    if isinstance(effect, MergePullRequest):
        task = orch.quest.tasks[effect.task_id]
        if task.state is not Lifecycle.MERGING:
            return None  # stale (re-issued after a restart, and moved on since)
        return await orch.forge.merge_pull_request(orch.quest, task)
    if isinstance(effect, SyncBacklog):
        await asyncio.to_thread(
            orch.ops.write_backlog_status,
            effect.task_id,
            effect.status,
            effect.notes,
            effect.final_summary,
        )
        return None
    if isinstance(effect, RemoveWorktree):
        await asyncio.to_thread(orch.workspace.remove_worktree, effect.task_id)
        private = private_dir(orch.repo, orch.quest.id, effect.task_id)
        await asyncio.to_thread(shutil.rmtree, private, True)
        return None
    if isinstance(effect, DeleteBranch):
        await asyncio.to_thread(orch.workspace.delete_branch, effect.task_id)
        await orch.forge.branch_deleted(orch.quest, effect.task_id)
        return None
    if isinstance(effect, AskQuestion):
        q = orch.quest.questions[effect.question_id]
        orch.out.question(q.task_id or PLAN_STEP, q.id, q.question, q.context)
        await orch.forge.ask(orch.quest, q)
        return None
    if isinstance(effect, ReportBlocked):
        orch.out.warn(f"{effect.task_id}: Blocked: {effect.reason}")
        await orch.forge.report_blocked(orch.quest, effect.task_id, effect.reason)
        return None
    return None  # StopAgent: the previous job was cancelled in ``start_job``


async def _open_pull_request(orch: Orchestrator, task_id: str) -> Event | None:
    task = orch.quest.tasks[task_id]
    if task.state is not Lifecycle.PR_CREATED:
        # A stale effect: e.g. the one a restart re-issues for a task that an inbox
        # message (reject, abort) moved on before this job ran. Reopening would
        # resurrect a closed pull request.
        return None
    answering = review.current_round(task)
    orch.publishing.add(task_id)
    try:
        opened = await orch.forge.open_pull_request(orch.quest, task)
    finally:
        orch.publishing.discard(task_id)
        orch.next_inbox_look = 0.0  # the messages that waited are taken at the next turn
    task = orch.quest.tasks[task_id]
    if task.state is not Lifecycle.PR_CREATED:
        # The task moved on while the forge worked (the quest was stopped: a person's
        # messages about the task wait for this job): what was pushed and answered is
        # that of the state it was called in, nothing newer.
        return None
    if opened.pr != task.pr:
        orch.update_task(task_id, opened.note, pr=opened.pr)
    # An approval the forge gives at once (``approval: auto``) waits for any feedback
    # that came meanwhile: that feedback's round comes first.
    settled = opened.event is None or (
        opened.event.name is EventName.PR_APPROVED and not opened.merged
    )
    current = review.current_round(orch.quest.tasks[task_id])
    if current is not None and current == answering and settled:
        # The round's fix is on the pull request and answered: recorded once.
        task = orch.quest.tasks[task_id]
        done = current.model_copy(
            update={"commit": opened.pr.head_sha, "answered_at": orch.clock()}
        )
        rounds = (*task.rounds[:-1], done)
        note = f"round {done.number} pushed as {(done.commit or '?')[:12]} and answered"
        orch.update_task(task_id, note, rounds=rounds)
    task = orch.quest.tasks[task_id]
    if settled and task.feedback:
        # Feedback that came while the round ran: the next round starts now.
        kind = review.round_kind(task.feedback)
        name = EventName.CI_FAILED if kind == "ci" else EventName.CHANGES_REQUESTED
        return Event(name, at=orch.clock())
    return opened.event
