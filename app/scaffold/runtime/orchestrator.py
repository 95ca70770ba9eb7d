"""The orchestrator: the imperative shell around the pure core.

One asyncio loop owns the quest writer. Every change to the quest goes through
:meth:`Orchestrator.apply` (one writer, serialised); effects run as tracked asyncio
jobs, one job per task at a time, and report back by putting events on a queue.
Blocking work (git, Ward, Backlog.md writes) runs in threads.

Restart after ``kill -9``: the quest file says what every task was doing. Orphan
agent processes of this quest are killed, a signal an interrupted agent already
delivered is used rather than re-running it, an interrupted run without one is run
again (resuming its session; scaffold's death is not the agent's failure, so it costs
no attempt), and every other in-flight task gets the effects its record implies
(``due_effects``), all of which are idempotent (a merge that already happened is
detected, not repeated).

Safety budgets (cost, hours, consecutive failures) are per run, as ``core/safety.py``
defines them: each run starts with fresh ones, and a task a safety stop or an abort
sent back to To Do is picked up again by the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from scaffold import backlog as bl
from scaffold.agent.planning_tools import QUEST_LABEL_PREFIX, read_plan, read_requirements
from scaffold.agent.process import (
    AgentRunOutcome,
    AgentSpec,
    LiveChildren,
    agent_environment,
    run_agent,
)
from scaffold.agent.signal_server import Binding, SignalRecord, latest_signal
from scaffold.agent.stream import SystemInit
from scaffold.config import ScaffoldConfig
from scaffold.core import quest_flow as qf
from scaffold.core import review, safety
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
    StopAgent,
    SyncBacklog,
    SyncBranch,
)
from scaffold.core.events import Event, signal_event
from scaffold.core.lifecycle import Limits
from scaffold.core.planning import planning_event_for
from scaffold.core.scheduler import SchedTask, fill_estimates, schedule
from scaffold.core.states import HOLDS_SLOT, IN_FLIGHT, EventName, Lifecycle
from scaffold.errors import AgentError, IllegalTransition, ScaffoldError, UnknownQuestion
from scaffold.ids import task_number
from scaffold.quest.model import AgentRun, Quest, QuestPhase, TaskRecord, utcnow
from scaffold.quest.store import QuestWriter, draft
from scaffold.roles import Role
from scaffold.runtime import inbox
from scaffold.runtime.agent_limit import RepoAgents
from scaffold.runtime.agent_runs import (
    build_invocation,
    describe_failure,
    init_problem,
    result_notes,
    resume_lost,
    watch_signal,
)
from scaffold.runtime.background import in_background
from scaffold.runtime.backlog_cache import BacklogCache
from scaffold.runtime.estimates import AGENT_STARTED, LearnedEstimates
from scaffold.runtime.forge import Forge, LocalForge, RemoteAgents
from scaffold.runtime.prompts import PromptData
from scaffold.runtime.recovery import kill_orphan_agents
from scaffold.runtime.repo_ops import RepoOps
from scaffold.runtime.report import RunReport, final_report
from scaffold.runtime.run_channel import RunChannel, private_dir, sweep_stale_channels
from scaffold.runtime.slot_pool import SlotPool
from scaffold.runtime.unsettled import Unsettled
from scaffold.runtime.view import Reporter, slot_rows, transition_detail
from scaffold.sandbox.confinement import Confinement, confine
from scaffold.sandbox.settings import Sandbox, resolve_sandbox
from scaffold.state.publisher import StatePublisher
from scaffold.ward import CommandWrap

PLAN_KEY = "plan"
PLAN_STEP = "PLAN"
MAX_DIAGRAM_AUTOFIX = 2


class _Withdrawn(Exception):
    """A sandbox made ahead of its slot is not let through: the quest stopped."""


# Tasks made ready (worktree, branch, Backlog.md "In Progress") once every slot is at
# work, so that a slot given back goes to an agent at once, not to a task's allocation.
# Its first agent waits for the slot (a lease). Not with a shared SlotPool (the App).
LOOKAHEAD = 1


class Orchestrator:
    def __init__(
        self,
        repo: Path,
        config: ScaffoldConfig,
        writer: QuestWriter,
        reporter: Reporter,
        *,
        python: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        poll_s: float = 0.25,
        forge: Callable[[RepoOps], Forge] | None = None,
        default_branch_lock: threading.Lock | None = None,
        remote: RemoteAgents | None = None,
        sandbox: Sandbox | None = None,
        publisher: StatePublisher | None = None,
        before_publish: Callable[[], Awaitable[None]] | None = None,
        slot_pool: SlotPool | None = None,
        agent_limit: RepoAgents | None = None,
    ) -> None:
        self.repo = repo
        self.cfg = config
        self.writer = writer
        self.out = reporter
        self.clock = clock
        self.poll_s = poll_s
        self.python = python or sys.executable
        self.state_root = repo / ".scaffold"
        # The App and the Action pass theirs (strict); the local CLI warns once without one.
        self.sandbox = sandbox or resolve_sandbox(config.sandbox, strict=False, warn=reporter.warn)
        # Listed again on scaffold's own writes at once, on a person's within poll_s.
        self.backlog = BacklogCache(repo, recheck_s=poll_s)
        self.ops = RepoOps(repo, config, clock, reporter.warn, self.backlog)
        if default_branch_lock is not None:
            self.ops.default_branch_lock = default_branch_lock
        self.workspace = self.ops.workspace
        self.forge: Forge = (
            forge(self.ops)
            if forge
            else LocalForge(
                config,
                self.workspace.default_branch,
                self.ops.merge,
                clock,
                reporter.line,
                head_of=self.workspace.branch_head,
            )
        )
        self.limits = Limits(
            max_attempts=config.agent.max_attempts,
            max_review_rounds=config.review.max_rounds,
            max_ci_fixes=config.ci.max_fixes,
        )
        self.safety_limits = safety.SafetyLimits(
            max_cost_usd=config.safety.max_cost_usd,
            max_hours=config.safety.max_hours,
            max_consecutive_failures=config.safety.max_consecutive_failures,
        )
        # Where task agents run when not here (``executor: actions``); planning stays local.
        self.remote = remote
        # The state branch (scaffold.state): published in the background, never blocking.
        self.publisher = publisher
        self.estimates = (
            LearnedEstimates(repo, branch=publisher.branch if publisher else None, background=True)
            if config.scheduler.learn_estimates
            else None
        )
        self.before_publish = before_publish
        self._publishing: asyncio.Task[None] | None = None
        self._publish_error_said: str | None = None
        # The repository's slots when other quests run beside this one (the App).
        self.slot_pool = slot_pool
        # The server-wide cap on agents at once (the App's), taken right before a run.
        self.agent_limit = agent_limit
        self.children = LiveChildren()
        # At most ``slots`` task agents at work at once: a task's first agent takes a
        # permit (its lease on a slot) and the task keeps it between its agents, until
        # it no longer holds a slot (``_release_leases``). Tasks made ready ahead
        # (LOOKAHEAD) and tasks that went back to their agents from a state that holds
        # no slot (a merge conflict, a diagram fix) wait for one.
        self.agent_permits = asyncio.Semaphore(config.slots)
        self.leases: set[str] = set()
        # Events from jobs; None only wakes the main loop (a job ended).
        self.queue: asyncio.Queue[tuple[str, Event] | None] = asyncio.Queue()
        # The commits of agents' work still running after their end was applied.
        self.unsettled = Unsettled(reporter.warn, lambda: self.queue.put_nowait(None))
        self.jobs: dict[str, asyncio.Task[None]] = {}
        self._live = False  # between recovery and the end of run(): jobs may start
        self.reported_problems: set[str] = set()
        # Steps whose agent run was started again after a restart of scaffold.
        self.restarted: set[str] = set()
        # The safety budgets are per run (core/safety.py): what this run has used.
        self.run_started_at = clock()
        self.run_cost_base = writer.quest.cost_usd

    # ------------------------------------------------------------------ state

    @property
    def quest(self) -> Quest:
        return self.writer.quest

    def _commit(self, quest: Quest, entries: Sequence[Any] = (), *, sync: bool = True) -> None:
        """Journal the new state. ``sync=False`` (the hand-off path: an agent's end, the
        events it leads to, the scheduler's picks, an agent's start) leaves the fsync to
        :meth:`_durable`, which runs before any effect: at the start of every job step
        (``_execute_one``), before an agent is spawned, at the end of the main loop's
        turn that applied the events, before the state is published. One fsync then
        covers the lines of a hand-off, off the event loop."""
        self.writer.commit(quest, entries, sync=sync)

    async def _durable(self) -> None:
        """Every journal line written so far on disk; the fdatasync runs in a worker
        thread, so the event loop goes on with other tasks' events meanwhile."""
        if self.writer.unsynced:
            await asyncio.to_thread(self.writer.sync)

    def _update_task(
        self, task_id: str, note: str | None = None, *, sync: bool = True, **updates: Any
    ) -> None:
        task = self.quest.tasks[task_id]
        quest = self.quest.model_copy(
            update={"tasks": {**self.quest.tasks, task_id: task.model_copy(update=updates)}}
        )
        entries = [draft("note", note, task_id=task_id, at=self.clock())] if note else []
        self._commit(quest, entries, sync=sync)

    def _update_planning(self, **updates: Any) -> None:
        planning = self.quest.planning.model_copy(update=updates)
        self._commit(self.quest.model_copy(update={"planning": planning}))

    # ------------------------------------------------------------------ main loop

    async def run(self) -> RunReport:
        """Until no job runs and no event waits.

        The loop wakes on events, not on a timer: an event a job puts on the queue, or the
        last job (or a planning job) that ends (``_job_done`` puts a wake-up). Every event waiting is applied at
        once, and the jobs that started get the loop (an agent is spawned) before the
        scheduling tick runs. Only the inbox, where messages arrive as files, and the
        backlog, which a person may edit, are looked at on a timer (``poll_s``); that
        timer never delays an event.
        """
        loop = asyncio.get_running_loop()
        self.workspace.ensure_excluded()
        self._begin_run()
        self._recover()
        self._live = True
        next_look = loop.time()
        try:
            while True:
                if loop.time() >= next_look:
                    self._consume_inbox()
                    next_look = loop.time() + self.poll_s
                self._tick()
                self._maybe_publish()
                if self._idle():
                    self._tick()
                    if self._idle():
                        break
                try:
                    item = await asyncio.wait_for(
                        self.queue.get(), timeout=max(0.0, next_look - loop.time())
                    )
                except TimeoutError:
                    # An event may have come in the same instant (a job that ended: it is
                    # no longer in ``jobs``): it is applied before the next tick looks at
                    # the state, or the tick would start that job's run again.
                    item = None
                self._apply_queued(item)
                await self._durable()  # the lines of the events just applied
                await asyncio.sleep(0)  # the jobs just started run first (spawn)
        finally:
            self._live = False
            if self.slot_pool is not None:
                self.slot_pool.leave(self.quest.id)
            await self._stop_all_jobs()
            await self.unsettled.settle_all()
            with contextlib.suppress(ScaffoldError):
                await self.forge.flush(self.quest)
            if self._publishing is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._publishing
            self.out.close()
        return final_report(self.quest)

    # ------------------------------------------------------------------ state branch

    def _maybe_publish(self) -> None:
        if self.publisher is None or (self._publishing and not self._publishing.done()):
            return
        reason = self.publisher.due()
        if reason is not None:
            self._publishing = asyncio.create_task(self.publish_state(reason))

    async def publish_state(self, reason: str | None = None) -> None:
        """Put the quest on the state branch now (in a thread); a failure is said once."""
        pub = self.publisher
        if pub is None:
            return
        await self._durable()  # never publish a state the journal could still lose
        if self.before_publish is not None:
            try:
                await self.before_publish()
            except ScaffoldError as exc:
                self._say_publish_error(str(exc))
                return
        if await in_background(pub.publish, reason):
            self._publish_error_said = None
        elif pub.last_error is not None:
            self._say_publish_error(pub.last_error)

    def _say_publish_error(self, error: str) -> None:
        if error != self._publish_error_said:
            self._publish_error_said = error
            self.out.warn(f"state branch not updated (the journal has everything): {error}")

    def _begin_run(self) -> None:
        """Fresh budgets: a safety stop or abort ends a run, not the quest for good.

        The ``backlog`` quest lives as long as the repository, so measuring its cost
        and hours from its creation would stop every later run; a person running
        scaffold again asks for new work, within new budgets.
        """
        restored = qf.restore_merged(self.quest, self.clock())
        if restored.entries:
            self._commit(restored.quest, restored.entries)
        q = self.quest
        self.run_started_at = self.clock()
        self.run_cost_base = q.cost_usd
        if q.phase is QuestPhase.FAILED or not (q.stop_reason or q.consecutive_failures):
            return
        note = f"new run; the previous one stopped: {q.stop_reason}" if q.stop_reason else None
        entries = [draft("note", note, at=self.run_started_at)] if note else []
        update = {"stop_reason": None, "stop_limit": None, "consecutive_failures": 0}
        self._commit(q.model_copy(update=update), entries)

    def _idle(self) -> bool:
        return not self.jobs and self.queue.empty() and not self.unsettled.busy()

    def _apply_queued(self, item: tuple[str, Event] | None) -> None:
        """Apply ``item`` and every other event already waiting (None is a wake-up)."""
        while True:
            if item is not None:
                self.apply(*item, sync=False)
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                return

    async def _stop_all_jobs(self) -> None:
        for job in self.jobs.values():
            job.cancel()
        for job in list(self.jobs.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
        self.children.kill_all()

    def apply(self, key: str, event: Event, *, sync: bool = True) -> None:
        """Feed one event to the core, persist the result, start the effects.

        With ``sync=False`` the lines wait for the next :meth:`_durable`; the effects
        started here run only after one (each job step begins with it)."""
        now = self.clock()
        try:
            if key == PLAN_KEY:
                step = qf.apply_planning_event(self.quest, event, self.limits.max_attempts, now)
            else:
                step = qf.apply_task_event(self.quest, key, event, self.limits, now)
        except IllegalTransition as exc:
            # A stale event (e.g. an answer for a task that was aborted meanwhile).
            self.out.warn(f"{key}: ignored {event.name.value}: {exc}")
            return
        self._commit(step.quest, step.entries, sync=sync)
        for entry in step.entries:
            if entry.kind == "transition":
                where = entry.task_id or key
                detail = transition_detail(entry)
                self.out.transition(where, entry.source, entry.target, entry.event, detail)
        if step.effects:
            self._start_job(key, step.effects)
        if key != PLAN_KEY:
            self._after_transition(key, event)
        self.forge.progress(self.quest)

    def _merging(self, task_id: str | None) -> bool:
        task = self.quest.tasks.get(task_id or "")
        return task is not None and task.state is Lifecycle.MERGING

    def merges_look_again(self) -> None:
        """The forge changed (a merge, a new head, a finished check, an approval): each
        task waiting to merge with no job at work tries now, not after this run ends.
        A merge moves the base, so the quest's other approved pull requests are behind
        from then on: they are brought up to date at once."""
        if not self._live:
            return  # not started (recovery starts them) or ending (the next run does)
        for task in self.quest.tasks.values():
            if task.state is Lifecycle.MERGING and task.id not in self.jobs:
                self._start_job(task.id, [MergePullRequest(task.id)])

    def _after_transition(self, task_id: str, event: Event) -> None:
        if event.name is EventName.MERGE_COMPLETE:
            self.merges_look_again()
        task = self.quest.tasks[task_id]
        if (
            event.name is EventName.DIAGRAMS_MISSING
            and task.state is Lifecycle.BLOCKED
            and task.diagram_fixes < MAX_DIAGRAM_AUTOFIX
        ):
            self.queue.put_nowait((task_id, Event(EventName.DIAGRAMS_UPDATED)))

    def _start_job(self, key: str, effects: Sequence[Effect]) -> None:
        stop = [e for e in effects if isinstance(e, StopAgent)]
        old = self.jobs.get(key)
        if old is not None and not old.done() and stop:
            old.cancel()
        # A round of the review loop waits for the task's job still at work on the branch
        # (its pull request being pushed and answered) before it takes the branch in.
        after = stop or any(isinstance(e, SyncBranch) for e in effects)
        job = asyncio.create_task(self._execute(key, list(effects), old if after else None))
        self.jobs[key] = job
        job.add_done_callback(functools.partial(self._job_done, key))

    def _job_done(self, key: str, job: asyncio.Task[None]) -> None:
        if self.jobs.get(key) is job:
            del self.jobs[key]
        if not self.jobs or key == PLAN_KEY:
            # The run may be over, or the planning tick may start the next planning run:
            # the main loop looks again now. (A task's job that ends changes no state.)
            self.queue.put_nowait(None)
        if not job.cancelled() and job.exception() is not None:
            exc = job.exception()
            self.out.warn(f"{key}: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ scheduling

    def _show_slots(self) -> None:
        rows = slot_rows(self.quest.tasks.values(), self.clock())
        done = sum(1 for t in self.quest.tasks.values() if t.outcome == "merged")
        self.out.slots(rows, done, len(self.quest.tasks), self.quest.cost_usd)

    def _tick(self) -> None:
        self._release_leases()
        self._show_slots()
        if self.quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING):
            self._tick_planning()
            return
        if self.quest.phase is not QuestPhase.EXECUTING:
            return
        snapshot = self._sync_backlog()
        self._check_safety()
        now = self.clock()
        status_of = {t.id: t.status for t in snapshot.tasks}
        ready_ids = {tid for tid, r in snapshot.readiness.items() if r.ready}
        # A task stopped by an abort or a safety limit is picked up again by a later run;
        # a stopped run readies nothing (it would only send it back to Idle, every tick).
        for task in list(self.quest.tasks.values()):
            if self.quest.stop_reason:
                break
            idle = task.state is Lifecycle.IDLE and task.outcome in (None, "aborted")
            if idle and task.id in ready_ids:
                self.apply(task.id, Event(EventName.DEPS_RESOLVED, at=now), sync=False)
        ready = [t for t in self.quest.tasks.values() if t.state is Lifecycle.READY]
        busy = [t.id for t in self.quest.tasks.values() if self._holds_slot(t)]
        if self.slot_pool is not None:
            wanted = 0 if self.quest.stop_reason else len(ready)
            self.slot_pool.report(self.quest.id, len(busy), len(busy) + wanted)
        if not ready:
            return
        if self.quest.stop_reason:
            for t in ready:
                self.apply(t.id, Event(EventName.SAFETY_LIMIT_HIT, detail=self.quest.stop_reason))
            return
        slots = self.cfg.slots
        if self.slot_pool is not None:
            slots = len(busy) + self.slot_pool.allowance(self.quest.id)
        elif len(busy) >= slots and all(tid in self.leases for tid in busy):
            # Every slot at work: make the next task ready. It is the only one without
            # a slot, so it is the next to get one (in the scheduler's order).
            slots += LOOKAHEAD
        candidates = [
            SchedTask(
                id=t.id,
                dependencies=tuple(t.dependencies),
                priority=t.priority,
                done=snapshot.config.is_done_status(status_of.get(t.id, "")),
                eligible=t.state is Lifecycle.READY,
            )
            for t in self.quest.tasks.values()
        ]
        if self.estimates is not None:
            merged = sum(1 for t in self.quest.tasks.values() if t.outcome == "merged")
            candidates = fill_estimates(candidates, self.estimates.minutes(snapshot, merged))
        started = schedule(candidates, running=busy, slots=slots)
        for task_id in started:
            # Its allocation job makes the line durable before it does anything.
            self.apply(task_id, Event(EventName.TASK_SELECTED, at=now, safety_ok=True), sync=False)
        if self.slot_pool is not None and started:
            held = len(busy) + len(started)
            self.slot_pool.report(self.quest.id, held, held + len(ready) - len(started))

    @staticmethod
    def _holds_slot(task: TaskRecord) -> bool:
        return task.state in HOLDS_SLOT and task.question_id is None

    def _tick_planning(self) -> None:
        plan = self.quest.planning
        if PLAN_KEY in self.jobs or plan.question_id or plan.pending_run is None:
            return
        if self.quest.stop_reason:
            self.apply(PLAN_KEY, Event(EventName.ABORT_SIGNAL, detail=self.quest.stop_reason))
            return
        self._start_job(PLAN_KEY, [StartAgent(None, plan.pending_run)])

    def _sync_backlog(self) -> bl.BacklogSnapshot:
        snapshot = self.backlog.get()
        for problem in snapshot.problems:
            key = f"{problem.path}:{problem.reason}"
            if key not in self.reported_problems:
                self.reported_problems.add(key)
                self.out.warn(f"backlog: {problem.path}: {problem.reason}")
        tasks = dict(self.quest.tasks)
        changed = False
        known_before = set(self.quest.planning.known_before)
        for bt in snapshot.tasks:
            if bt.id in known_before or self._planned_elsewhere(bt.labels):
                continue
            current = tasks.get(bt.id)
            if current is None:
                if snapshot.config.is_done_status(bt.status):
                    continue
                tasks[bt.id] = TaskRecord(
                    id=bt.id,
                    title=bt.title,
                    dependencies=tuple(bt.dependencies),
                    priority=bt.priority,
                )
                changed = True
            elif current.state is Lifecycle.IDLE and (
                current.dependencies != tuple(bt.dependencies)
                or current.title != bt.title
                or current.priority != bt.priority
            ):
                tasks[bt.id] = current.model_copy(
                    update={
                        "title": bt.title,
                        "dependencies": tuple(bt.dependencies),
                        "priority": bt.priority,
                    }
                )
                changed = True
        if changed:
            self._commit(self.quest.model_copy(update={"tasks": tasks}))
        return snapshot

    def _planned_elsewhere(self, labels: Sequence[str]) -> bool:
        """A task another quest's PathSeeker planned (``quest:<id>``) is that quest's."""
        owners = {
            lb[len(QUEST_LABEL_PREFIX) :] for lb in labels if lb.startswith(QUEST_LABEL_PREFIX)
        }
        return bool(owners) and self.quest.id not in owners

    def _check_safety(self) -> None:
        q = self.quest
        ledger = safety.SafetyLedger(
            cost_usd=max(0.0, q.cost_usd - self.run_cost_base),
            started_at=self.run_started_at,
            consecutive_failures=q.consecutive_failures,
            aborted=q.stop_reason is not None,
            abort_reason=q.stop_reason,
        )
        verdict = safety.check(self.safety_limits, ledger, self.clock())
        if not verdict.ok and not q.stop_reason and verdict.reason:
            step = qf.stop_quest(q, verdict.reason, self.clock(), str(verdict.limit))
            self._commit(step.quest, step.entries)
            self.out.warn(f"stopping new work: {verdict.reason}")

    # ------------------------------------------------------------------ inbox

    def _consume_inbox(self) -> None:
        for path, msg, problem in inbox.pending(self.state_root):
            if msg is None:
                self.out.warn(f"inbox: {path.name}: {problem}; moved aside")
                path.rename(path.with_suffix(".bad"))
                continue
            if msg.quest_id != self.quest.id:
                continue
            try:
                self._apply_message(msg)
            except ScaffoldError as exc:
                self.out.warn(f"inbox: {msg.kind}: {exc}")
            inbox.done(path)

    def _apply_message(self, msg: inbox.InboxMessage) -> None:
        now = self.clock()
        if msg.kind == "answer":
            assert msg.question_id is not None
            q = self.quest.questions.get(msg.question_id)
            if q is None or q.answer is not None:
                raise UnknownQuestion(msg.question_id)
            step = qf.answer_question(
                self.quest, msg.question_id, msg.text, msg.by, self.limits, now
            )
            self._commit(step.quest, step.entries)
            key = q.task_id or PLAN_KEY
            self.out.line(f"{key}: answer to {msg.question_id} received; resuming the session")
            if step.effects:
                self._start_job(key, step.effects)
        elif msg.kind == "abort":
            step = qf.stop_quest(self.quest, msg.text or f"aborted by {msg.by}", now)
            self._commit(step.quest, step.entries)
            for task in list(self.quest.tasks.values()):
                if task.state in (Lifecycle.READY, *IN_FLIGHT) and task.state not in (
                    Lifecycle.MERGING,
                    Lifecycle.CLEANUP,
                ):
                    self.apply(task.id, Event(EventName.ABORT_SIGNAL, detail="aborted"))
            if self.quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING):
                job = self.jobs.get(PLAN_KEY)
                if job is not None:
                    job.cancel()
                self.apply(PLAN_KEY, Event(EventName.ABORT_SIGNAL, detail="aborted"))
        elif msg.kind == "feedback":
            self._take_feedback(msg, now)
        elif msg.kind == "approve" and self._merging(msg.task_id):
            # A fresh approval (of a head that moved after the first one): the merge
            # that waits for it looks again now.
            self.merges_look_again()
        else:
            assert msg.task_id is not None
            name = {
                "approve": EventName.PR_APPROVED,
                "reject": EventName.PR_REJECTED,
                "retry": EventName.RETRY_REQUESTED,
            }[msg.kind]
            self.apply(msg.task_id, Event(name, at=now, detail=msg.text or msg.by))

    def _take_feedback(self, msg: inbox.InboxMessage, now: datetime) -> None:
        """A reviewer's or CI's feedback: a round now, or kept for the next one."""
        task = self.quest.tasks.get(msg.task_id or "")
        if task is None or msg.feedback is None:
            raise ScaffoldError(f"feedback for an unknown task {msg.task_id!r}")
        if not review.fresh(task, [msg.feedback]):
            self.out.line(f"{task.id}: feedback {msg.feedback.key} was taken already")
            return
        name = EventName.CI_FAILED if msg.feedback.kind == "ci" else EventName.CHANGES_REQUESTED
        self.apply(task.id, Event(name, at=now, feedback=(msg.feedback,)))

    # ------------------------------------------------------------------ effects

    async def _execute(
        self, key: str, effects: list[Effect], previous: asyncio.Task[None] | None
    ) -> None:
        if previous is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await previous
        cleanup = any(isinstance(e, SyncBacklog) for e in effects)
        for effect in effects:
            event = await self._execute_one(key, effect)
            if event is not None:
                self.queue.put_nowait((key, event))
        if cleanup:
            self.queue.put_nowait((key, Event(EventName.BACKLOG_SYNCED, at=self.clock())))

    async def _execute_one(self, key: str, effect: Effect) -> Event | None:
        if isinstance(effect, StartAgent):
            # Durable and committed before the agent runs, while its sandbox is made.
            return await self._run_agent(key, effect.run)
        await self._durable()  # every line that led here is durable before the effect runs
        if isinstance(effect, RunWard) and not self.cfg.ward:
            return Event(EventName.WARD_PASSED, at=self.clock())  # nothing to run or wait for
        await self.unsettled.settle(key)  # the last agent's work is on the branch first
        if isinstance(effect, SyncBranch):
            await self.forge.sync_branch(self.quest, self.quest.tasks[effect.task_id])
            return None
        if isinstance(effect, CreateWorktree):
            await self.forge.prepare_allocation(self.quest, self.quest.tasks[effect.task_id])
            self.backlog.invalidate()  # the forge may have brought the checkout up to date
            return await asyncio.to_thread(self.ops.create_worktree, effect.task_id)
        if isinstance(effect, RunWard):
            return await asyncio.to_thread(
                self.ops.run_ward, self._worktree(effect.task_id), self._ward_wrap(effect.task_id)
            )
        if isinstance(effect, RunDiagramCheck):
            return await in_background(self.ops.check_diagrams, effect.task_id)
        if isinstance(effect, OpenPullRequest):
            return await self._open_pr(effect.task_id)
        if isinstance(effect, MergePullRequest):
            task = self.quest.tasks[effect.task_id]
            if task.state is not Lifecycle.MERGING:
                return None  # stale (re-issued after a restart, and moved on since)
            try:
                return await self.forge.merge_pull_request(self.quest, task)
            finally:
                self.backlog.invalidate()  # the merge moved the checkout's files
        if isinstance(effect, SyncBacklog):
            await in_background(
                self.ops.write_backlog_status,
                effect.task_id,
                effect.status,
                effect.notes,
                effect.final_summary,
            )
            return None
        if isinstance(effect, RemoveWorktree):
            await in_background(self.workspace.remove_worktree, effect.task_id)
            private = private_dir(self.repo, self.quest.id, effect.task_id)
            await in_background(shutil.rmtree, private, True)
            return None
        if isinstance(effect, DeleteBranch):
            await in_background(self.workspace.delete_branch, effect.task_id)
            await self.forge.branch_deleted(self.quest, effect.task_id)
            return None
        if isinstance(effect, AskQuestion):
            q = self.quest.questions[effect.question_id]
            self.out.question(q.task_id or PLAN_STEP, q.id, q.question, q.context)
            await self.forge.ask(self.quest, q)
            return None
        if isinstance(effect, ReportBlocked):
            self.out.warn(f"{effect.task_id}: Blocked: {effect.reason}")
            await self.forge.report_blocked(self.quest, effect.task_id, effect.reason)
            return None
        return None  # StopAgent: the previous job was cancelled in _start_job

    # -- agents

    def _run_dir(self, key: str, number: int, role: Role) -> Path:
        step = PLAN_STEP if key == PLAN_KEY else key
        return self.state_root / "runs" / self.quest.id / step / f"{number:03d}-{role.value}"

    def _prompt_data(self, key: str) -> PromptData:
        q = self.quest
        diagrams = (
            self.cfg.diagrams.architecture,
            self.cfg.diagrams.data_model,
            self.cfg.diagrams.states,
        )
        if key == PLAN_KEY:
            return PromptData(
                step_id=PLAN_STEP,
                request=q.request,
                requirements=q.requirements,
                previous=q.planning.last_summary or "",
            )
        task = q.tasks[key]
        description, criteria = "", tuple[str, ...]()
        with contextlib.suppress(ScaffoldError, OSError):
            bt = self.backlog.get().get(key)
            if bt is not None:
                description = bt.description or ""
                criteria = tuple(c.text for c in bt.acceptance_criteria)
        return PromptData(
            step_id=key,
            request=q.request,
            requirements=q.requirements,
            task_title=task.title,
            task_description=description,
            acceptance_criteria=criteria,
            file_map=q.planning.file_map,
            diagrams=diagrams,
            previous=task.last_summary or "",
        )

    async def _run_agent(self, key: str, run: AgentRun) -> Event | None:
        if key == PLAN_KEY:
            return await self._run_agent_now(key, run)
        if key not in self.leases and self._sandbox_waits_for_the_slot(run):
            # A task made ready ahead: its sandbox is made now and waits for the slot
            # at its start gate, so the agent runs the moment a slot frees.
            return await self._run_agent_now(key, run, leased=False)
        if not await self._take_slot(key):
            return self._stopped_before_start()
        return await self._run_agent_now(key, run)

    def _sandbox_waits_for_the_slot(self, run: AgentRun) -> bool:
        return self.sandbox.active and self.remote is None and run.kind != "conflict_fix"

    async def _take_slot(self, key: str) -> bool:
        """The task's lease on a slot (kept until it holds none); False when the quest
        was stopped meanwhile: a stopped quest lets an agent run finish but starts no
        new one (quest_flow)."""
        if key not in self.leases:
            await self.agent_permits.acquire()
            self.leases.add(key)
        return not self.quest.stop_reason

    def _stopped_before_start(self) -> Event:
        detail = self.quest.stop_reason or "the quest was stopped"
        return Event(EventName.ABORT_SIGNAL, at=self.clock(), detail=detail)

    def _release_leases(self) -> None:
        """Give back the slot of every task that no longer holds one, its agent done."""
        for key in list(self.leases):
            task = self.quest.tasks.get(key)
            if task is None or not (self._holds_slot(task) or task.agent_running):
                self.leases.discard(key)
                self.agent_permits.release()

    async def _run_agent_now(self, key: str, run: AgentRun, leased: bool = True) -> Event | None:
        """Start ``run`` of ``key`` and wait for its end; ``leased=False``: the task has
        no slot yet, its sandbox is made and waits at its gate for one."""
        is_plan = key == PLAN_KEY
        worktree = None if is_plan else self.quest.tasks[key].worktree
        if not is_plan and (worktree is None or not Path(worktree).is_dir()):
            # Never anywhere but the task's own worktree (not the main checkout).
            detail = f"failed start: {key} has no worktree to run in ({worktree or 'none'})"
            return Event(EventName.AGENT_FAILED, at=self.clock(), role=run.role, detail=detail)
        record: Any = self.quest.planning if is_plan else self.quest.tasks[key]
        number = record.agent_runs + 1
        run_dir = self._run_dir(key, number, run.role)
        signal_dir = run_dir / "signals"
        signal_dir.mkdir(parents=True, exist_ok=True)
        if run.kind == "conflict_fix" and not is_plan:
            await self._ready_to_run(key)
            await asyncio.to_thread(self.ops.start_conflict_merge, self._worktree(key))
        marks = {"agent_running": True, "agent_runs": number, "run_dir": str(run_dir)}
        start = functools.partial(self._mark_started, key, run, marks)
        if leased:
            start()
        if self.remote is not None and not is_plan:
            await self._ready_to_run(key)  # the remote run starts from the pushed branch
            outcome = await self.remote.run_agent(
                self.quest, self.quest.tasks[key], run, run_dir, signal_dir
            )
            if outcome.session_id:
                self._remember_session(key, run.role, outcome.session_id)
            return self._finish_run(key, run, outcome, [], signal_dir)
        return await self._run_here(key, run, signal_dir, None if leased else start)

    def _mark_started(self, key: str, run: AgentRun, marks: dict[str, Any]) -> None:
        """Journal the agent's start (made durable before it runs) and say it."""
        if key == PLAN_KEY:
            self._update_planning(**marks)
        else:
            note = f"{AGENT_STARTED}: {run.role.value} ({run.kind})"
            self._update_task(key, note, sync=False, **marks)
        step_id = PLAN_STEP if key == PLAN_KEY else key
        self.out.agent_started(step_id, run.role.value, run.kind, run.resume_session)

    async def _run_here(
        self,
        key: str,
        run: AgentRun,
        signal_dir: Path,
        start_on_slot: Callable[[], None] | None = None,
    ) -> Event | None:
        """The agent run on this machine: its channel, its sandbox, its end. With
        ``start_on_slot`` the task takes its slot while its sandbox waits at the gate,
        and that marks the agent started."""
        is_plan = key == PLAN_KEY
        step_id = PLAN_STEP if is_plan else key
        binding = Binding(signal_dir, step_id, run.role, self.quest.id, self.repo)
        confinement = self._confinement(key)
        channel = RunChannel(
            self.sandbox,
            binding,
            confinement,
            python=self.python,
            env=agent_environment(os.environ, {}),
            transport=self.cfg.agent.signal_transport,
            # In a sandbox every agent is made at once and waits at its start gate for
            # the journal's fsync and the last agent's commit: its sandbox starts
            # meanwhile. (Without a sandbox there is no gate: spawned once both are done.)
            gated=True,
        )
        async with channel:
            inv = build_invocation(
                self.cfg,
                run,
                self._prompt_data(key),
                quest_id=self.quest.id,
                signal_dir=signal_dir,
                config_path=channel.config_path,
                relay_socket=channel.inside / "signal.sock",
                python=self.python,
                mcp_config=channel.mcp_config,
            )
            # The sandbox's command line (private folders checked, programs' roots
            # found): file system work, done off the event loop.
            argv, env = await asyncio.to_thread(
                channel.wrap, inv.argv, agent_environment(os.environ, inv.env)
            )
            spec = AgentSpec(
                argv=argv,
                cwd=confinement.cwd,
                base_env=env,
                stuck_timeout_s=self.cfg.agent.stuck_timeout_s,
                pass_fds=channel.pass_fds,
            )
            stop = asyncio.Event()
            refused: list[str] = []

            async def on_event(ev: object) -> None:
                if isinstance(ev, SystemInit):
                    if ev.session_id:
                        self._remember_session(key, run.role, ev.session_id)
                    problem = init_problem(ev)
                    if problem:
                        refused.append(problem)
                        stop.set()

            # The journal on disk and the last agent's work committed, then the agent
            # runs: in a sandbox, made meanwhile and let through its start gate; without
            # one, spawned then.
            before = (
                functools.partial(self._ready_to_run, key)
                if start_on_slot is None
                else functools.partial(self._ready_on_slot, key, start_on_slot)
            )
            permitted: list[bool] = []
            ready = asyncio.ensure_future(self._then_permitted(before, permitted))
            released = asyncio.Event()
            if not channel.gated:
                try:
                    await ready
                except BaseException:
                    ready.cancel()
                    raise
            agent = asyncio.create_task(
                run_agent(
                    spec,
                    on_event=on_event,
                    children=self.children,
                    stop_requested=stop,
                    released=released if channel.gated else None,
                )
            )
            opener = asyncio.create_task(self._open_when(ready, channel, stop, released))
            watcher = asyncio.create_task(watch_signal(channel.signalled, stop))
            try:
                outcome = await agent
            except AgentError as exc:  # e.g. the program vanished: a failure, not a loop
                failure = f"could not start the agent: {exc}"
                return self._outcome_event(key, run.role, None, run.resume_session, failure)
            finally:
                watcher.cancel()
                opener.cancel()
                ready.cancel()
                if permitted and self.agent_limit is not None:
                    self.agent_limit.release(self.quest.id)
            if ready.done() and not ready.cancelled() and (problem := ready.exception()):
                if isinstance(problem, _Withdrawn):
                    return self._stopped_before_start()  # the agent never ran
                raise problem  # as when the journal failed before a start: the job fails
            # The agent's group is gone: commit its work. Its end is applied meanwhile;
            # the task's next steps wait for the commit (self.unsettled).
            if not is_plan:
                self.unsettled.add(key, self._start_commit(key, signal_dir, run.role, refused))
        return self._finish_run(key, run, outcome, refused, signal_dir)

    async def _ready_to_run(self, key: str) -> None:
        """What an agent of ``key`` waits for before it runs: its start (and every line
        before it) on disk, and the commit of the task's last agent's work."""
        await self._durable()
        await self.unsettled.settle(key)

    async def _then_permitted(
        self, before: Callable[[], Awaitable[None]], permitted: list[bool]
    ) -> None:
        """``before()``, then a permit of the server-wide agent limit (noted in ``permitted``)."""
        await before()
        if self.agent_limit is not None:
            await self.agent_limit.acquire(self.quest.id)
            permitted.append(True)

    async def _ready_on_slot(self, key: str, start: Callable[[], None]) -> None:
        """``_ready_to_run`` for a sandbox made before its task had a slot."""
        if not await self._take_slot(key):
            raise _Withdrawn
        start()
        await self._ready_to_run(key)

    @staticmethod
    async def _open_when(
        ready: asyncio.Future[None],
        channel: RunChannel,
        stop: asyncio.Event,
        released: asyncio.Event,
    ) -> None:
        try:
            await ready
        except Exception:
            # Withdrawn (the quest stopped), or the journal cannot be synced: the
            # agent never runs.
            channel.withdraw()
            stop.set()
            return
        channel.open_gate()
        released.set()

    def _confinement(self, key: str) -> Confinement:
        """Where the agent (or Ward) of ``key`` runs: its worktree, or the repository."""
        step = PLAN_STEP if key == PLAN_KEY else key
        private = private_dir(self.repo, self.quest.id, step)
        worktree = None if key == PLAN_KEY else self.quest.tasks[key].worktree
        if worktree is None:
            if key != PLAN_KEY:
                raise ScaffoldError(f"{key}: no worktree to run in")
            return Confinement(repo=self.repo, cwd=self.repo, private=private)
        path = Path(worktree)
        return Confinement(repo=self.repo, cwd=path, private=private, worktree=path)

    def _ward_wrap(self, task_id: str) -> CommandWrap | None:
        if not self.sandbox.active:
            return None
        confinement = self._confinement(task_id)

        def wrap(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
            return confine(self.sandbox, confinement, argv, env)

        return wrap

    def _finish_run(
        self,
        key: str,
        run: AgentRun,
        outcome: AgentRunOutcome,
        refused: list[str],
        signal_dir: Path,
    ) -> Event | None:
        """Cost, notes, and the event the run leads to (its signal, or a failure)."""
        is_plan = key == PLAN_KEY
        step_id = PLAN_STEP if is_plan else key
        if is_plan:
            self.backlog.invalidate()  # planning agents write the backlog itself
        cost = outcome.summary.total_cost_usd or 0.0
        if cost:
            self._commit(qf.add_cost(self.quest, None if is_plan else key, cost), sync=False)
        self.out.agent_finished(step_id, run.role.value, outcome.duration_s, cost)
        for note in result_notes(outcome):
            self._note(key, f"{run.role.value}: {note}", sync=False)
        sig = None if refused else latest_signal(signal_dir)
        session = outcome.session_id or run.resume_session
        failure = describe_failure(
            outcome, refused[0] if refused else None, self.cfg.agent.stuck_timeout_s
        )
        fresh = sig is None and resume_lost(outcome, run.resume_session is not None)
        if fresh and key in self.restarted:
            # scaffold died before the agent had saved its session: not the agent's
            # failure either, so start the same run again in a new session, for free.
            self.restarted.discard(key)
            self._rerun(key, run.model_copy(update={"resume_session": None}), run.role)
            return None
        self.restarted.discard(key)
        if fresh:
            failure = f"the session could not be resumed; starting a new one ({failure})"
            session = None
        event = self._outcome_event(key, run.role, sig, session, failure)
        if fresh:
            event = replace(event, extra={**event.extra, "fresh_session": "1"})
        return event

    def _note(self, key: str, text: str, *, sync: bool = True) -> None:
        entry = draft(
            "note",
            "agent_result",
            task_id=None if key == PLAN_KEY else key,
            detail={"note": text},
            at=self.clock(),
        )
        self._commit(self.quest, [entry], sync=sync)
        self.out.warn(f"{key}: {text}")

    def _remember_session(self, key: str, role: Role, session_id: str) -> None:
        if key == PLAN_KEY:
            sessions = {**self.quest.planning.sessions, role.value: session_id}
            self._update_planning(sessions=sessions)
        else:
            task = self.quest.tasks[key]
            sessions = {**task.sessions, role.value: session_id}
            # Written at once (a killed scaffold keeps it); the next sync makes it durable.
            self._update_task(key, None, sync=False, sessions=sessions)

    def _outcome_event(
        self, key: str, role: Role, sig: SignalRecord | None, session: str | None, failure: str
    ) -> Event:
        now = self.clock()
        if key == PLAN_KEY:
            self._update_planning(agent_running=False)
        else:
            self._update_task(key, None, sync=False, agent_running=False)
        if sig is None:
            return Event(
                EventName.AGENT_FAILED, at=now, role=role, session_id=session, detail=failure
            )
        qid = self._question_id(key)
        if key == PLAN_KEY:
            try:
                name = planning_event_for(self.quest.phase, sig.signal)
            except IllegalTransition as exc:
                return Event(
                    EventName.AGENT_FAILED, at=now, role=role, session_id=session, detail=str(exc)
                )
            if name is EventName.CODE_COMPLETE:
                phase = self.quest.phase
                planned = self._take_planning_output(
                    Path(self.quest.planning.run_dir or "") / "signals"
                )
                if phase is QuestPhase.PLANNING and not planned:
                    # Its create-tasks refused (or never called): a failed run, retried
                    # with the reason, never a quest that executes nothing.
                    failure = (
                        "PathSeeker signalled complete but planned no task: create-tasks "
                        "was refused or not called"
                    )
                    return Event(
                        EventName.AGENT_FAILED,
                        at=now,
                        role=role,
                        session_id=session,
                        detail=failure,
                    )
            return Event(
                name, at=now, signal=sig.signal, role=role, session_id=session, question_id=qid
            )
        task = self.quest.tasks[key]
        return signal_event(task, sig.signal, session_id=session, at=now, question_id=qid)

    def _start_commit(
        self, key: str, signal_dir: Path, role: Role, refused: Sequence[str]
    ) -> asyncio.Future[None]:
        """``_commit_work`` in a worker thread, started now (nothing when the run was
        refused)."""
        sig = None if refused else latest_signal(signal_dir)
        return asyncio.ensure_future(asyncio.to_thread(self._commit_work, key, sig, role))

    def _commit_work(self, key: str, sig: SignalRecord | None, role: Role) -> None:
        """Commit what the agent changed in the worktree (runs in a worker thread)."""
        if key == PLAN_KEY or sig is None:
            return
        msg = f"{role.value}: {getattr(sig.signal, 'summary', sig.signal.signal)}"
        with contextlib.suppress(ScaffoldError):
            self.workspace.commit_all(key, f"{key} {msg}"[:200])

    def _question_id(self, key: str) -> str:
        base = "plan" if key == PLAN_KEY else task_number(key).replace(".", "-")
        n = sum(1 for q in self.quest.questions.values() if q.id.startswith(f"q-{base}-"))
        return f"q-{base}-{n + 1}"

    def _take_planning_output(self, signal_dir: Path) -> int:
        """ChaosWhisperer's requirements and PathSeeker's file map go into the quest;
        the number of tasks PathSeeker planned for this quest."""
        try:
            if self.quest.phase is QuestPhase.REQUIREMENTS:
                req = read_requirements(signal_dir)
                if req is not None:
                    locked = req.model_copy(update={"locked": True})
                    self._commit(self.quest.model_copy(update={"requirements": locked}))
                    self.out.line(f"requirements locked: {len(req.contexts)} context(s)")
                return 0
            plan = read_plan(signal_dir)
        except ScaffoldError as exc:
            self.out.warn(f"planning output unreadable: {exc}")
            return 0
        if plan is not None:
            self._update_planning(file_map=tuple(plan.file_map))
        snapshot = self.backlog.get()
        known = set(self.quest.planning.known_before)
        new = [
            t.id
            for t in snapshot.tasks
            if t.id not in known and not self._planned_elsewhere(t.labels)
        ]
        self.out.line(f"PathSeeker planned {len(new)} task(s): {', '.join(new) or '-'}")
        return len(new)

    def _worktree(self, task_id: str) -> Path:
        return Path(self.quest.tasks[task_id].worktree or self.repo)

    # -- pull requests

    async def _open_pr(self, task_id: str) -> Event | None:
        task = self.quest.tasks[task_id]
        if task.state is not Lifecycle.PR_CREATED:
            # A stale effect: e.g. the one a restart re-issues for a task that an inbox
            # message (reject, abort) moved on before this job ran. Reopening would
            # resurrect a closed pull request.
            return None
        answering = review.current_round(task)
        opened = await self.forge.open_pull_request(self.quest, task)
        task = self.quest.tasks[task_id]
        if task.state is not Lifecycle.PR_CREATED:
            # The task moved on while the forge worked (feedback started a round): what
            # was pushed and answered is that of the state it was called in, nothing newer.
            return None
        if opened.pr != task.pr:
            self._update_task(task_id, opened.note, pr=opened.pr)
        # An approval the forge gives at once (``approval: auto``) waits for any feedback
        # that came meanwhile: that feedback's round comes first.
        settled = opened.event is None or (
            opened.event.name is EventName.PR_APPROVED and not opened.merged
        )
        current = review.current_round(self.quest.tasks[task_id])
        if current is not None and current == answering and settled:
            # The round's fix is on the pull request and answered: recorded once.
            task = self.quest.tasks[task_id]
            done = current.model_copy(
                update={"commit": opened.pr.head_sha, "answered_at": self.clock()}
            )
            rounds = (*task.rounds[:-1], done)
            note = f"round {done.number} pushed as {(done.commit or '?')[:12]} and answered"
            self._update_task(task_id, note, rounds=rounds)
        task = self.quest.tasks[task_id]
        if settled and task.feedback:
            # Feedback that came while the round ran: the next round starts now.
            kind = review.round_kind(task.feedback)
            name = EventName.CI_FAILED if kind == "ci" else EventName.CHANGES_REQUESTED
            return Event(name, at=self.clock())
        return opened.event

    # ------------------------------------------------------------------ restart

    def _recover(self) -> None:
        sweep_stale_channels()
        killed = kill_orphan_agents(self.quest.id, self.state_root / "runs" / self.quest.id)
        if killed:
            self.out.warn(f"killed {len(killed)} orphan agent process(es): {killed}")
        if self.quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING):
            plan = self.quest.planning
            if plan.agent_running:
                self._resume_interrupted(PLAN_KEY, plan.role, plan.run_dir)
        for task in list(self.quest.tasks.values()):
            if task.state not in IN_FLIGHT:
                continue
            self._restore_worktree(task)
            if task.agent_running and task.role is not None:
                self._resume_interrupted(task.id, task.role, task.run_dir)
                continue
            self._commit_leftovers(task)
            effects = qf.due_effects(task)
            if effects:
                self.out.line(f"{task.id}: resuming in {task.state.value}")
                self._start_job(task.id, effects)
        self._remove_orphan_worktrees()

    def _commit_leftovers(self, task: TaskRecord) -> None:
        """The commit of an agent's work runs after its end is journaled (``unsettled``):
        scaffold may have stopped in between. Whatever the worktree holds is committed
        before the task's next step (nothing when the commit had been made)."""
        if task.worktree is None or not Path(task.worktree).is_dir():
            return

        def commit() -> None:
            with contextlib.suppress(ScaffoldError):
                self.workspace.commit_all(
                    task.id, f"{task.id} work left uncommitted by a restart", unless_merging=True
                )

        self.unsettled.add(task.id, asyncio.ensure_future(asyncio.to_thread(commit)))

    def _restore_worktree(self, task: TaskRecord) -> None:
        """A quest rebuilt from the state branch (or a deleted folder): the task's
        worktree is made again on its branch, which keeps every commit of its work."""
        if task.worktree is None or task.state is Lifecycle.CLEANUP or Path(task.worktree).is_dir():
            return
        try:
            path = self.workspace.create_worktree(task.id)
        except ScaffoldError as exc:
            self.out.warn(f"{task.id}: cannot make its worktree again: {exc}")
            return
        self.out.line(f"{task.id}: worktree made again from {task.branch or 'its branch'}")
        if str(path) != task.worktree:
            self._update_task(task.id, worktree=str(path))

    def _resume_interrupted(self, key: str, role: Role, run_dir: str | None) -> None:
        sig = latest_signal(Path(run_dir) / "signals") if run_dir else None
        record: Any = self.quest.planning if key == PLAN_KEY else self.quest.tasks[key]
        session = record.sessions.get(role.value)
        if sig is None and record.pending_run is not None and not self.quest.stop_reason:
            # scaffold died, not the agent: run the same agent run again, resuming its
            # session if it had one. Not an agent failure, so it uses up no attempt and
            # does not count towards the consecutive-failure limit.
            run = record.pending_run.model_copy(
                update={"resume_session": session or record.pending_run.resume_session}
            )
            self.out.line(f"{key}: the agent run was interrupted by a restart; running it again")
            self.restarted.add(key)
            self._rerun(key, run, role, "agent run interrupted by a restart of scaffold")
            return
        self._commit_work(key, sig, role)
        event = self._outcome_event(key, role, sig, session, "interrupted by a restart of scaffold")
        self.out.line(f"{key}: the agent run was interrupted; {event.name.value}")
        self.queue.put_nowait((key, event))

    def _rerun(self, key: str, run: AgentRun, role: Role, note: str | None = None) -> None:
        """Start ``run`` again without counting an attempt (scaffold's fault, not the agent's)."""
        if key == PLAN_KEY:
            sessions = {
                k: v
                for k, v in self.quest.planning.sessions.items()
                if run.resume_session or k != role.value
            }
            self._update_planning(agent_running=False, pending_run=run, sessions=sessions)
            return  # the planning tick starts it
        task = self.quest.tasks[key]
        sessions = {k: v for k, v in task.sessions.items() if run.resume_session or k != role.value}
        self._update_task(key, note, agent_running=False, pending_run=run, sessions=sessions)
        self._start_job(key, [StartAgent(key, run)])

    def _remove_orphan_worktrees(self) -> None:
        live = {t.id for t in self.quest.tasks.values() if t.state in IN_FLIGHT}
        for info in self.workspace.list_scaffold_worktrees():
            if info.task_id and info.task_id not in live and info.task_id in self.quest.tasks:
                self.workspace.remove_worktree(info.task_id)
                self.out.line(f"removed orphan worktree of {info.task_id}")

    # ------------------------------------------------------------------ the end
