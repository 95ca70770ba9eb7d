"""The orchestrator: the imperative shell around the pure core.

One asyncio loop owns the quest writer. Every change to the quest goes through
:meth:`Orchestrator.apply` (one writer, serialised); effects run as tracked asyncio
jobs, one job per task at a time, and report back by putting events on a queue.
Blocking work (git, Ward, Backlog.md writes) runs in threads. Safety budgets (cost,
hours, consecutive failures) are per run (``core/safety.py``): a task a safety stop or
an abort sent back to To Do is picked up again by the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from scaffold import backlog as bl
from scaffold.config import ScaffoldConfig
from scaffold.core import quest_flow as qf
from scaffold.core import safety
from scaffold.core.effects import (
    Effect,
    MergePullRequest,
    RemoveWorktree,
    StartAgent,
    StopAgent,
    SyncBacklog,
    SyncBranch,
)
from scaffold.core.events import Event
from scaffold.core.lifecycle import Limits
from scaffold.core.scheduler import SchedTask, schedule
from scaffold.core.states import EventName, Lifecycle
from scaffold.errors import IllegalTransition, ScaffoldError
from scaffold.ids import PLAN_KEY
from scaffold.quest.model import Quest, QuestPhase, TaskRecord, utcnow
from scaffold.quest.store import QuestWriter, draft
from scaffold.runtime import inbox
from scaffold.runtime.agent_jobs import AgentJobs, holds_slot
from scaffold.runtime.agent_limit import RepoAgents
from scaffold.runtime.effect_jobs import execute
from scaffold.runtime.forge import Forge, LocalForge, RemoteAgents
from scaffold.runtime.recovery import recover
from scaffold.runtime.repo_ops import RepoOps
from scaffold.runtime.report import RunReport, final_report
from scaffold.runtime.slot_pool import SlotPool
from scaffold.runtime.view import Reporter, slot_rows, transition_detail
from scaffold.sandbox.settings import Sandbox, resolve_sandbox
from scaffold.signal_back.plan import QUEST_LABEL_PREFIX
from scaffold.state.publisher import StatePublisher

MAX_DIAGRAM_AUTOFIX = 2


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
        self.ops = RepoOps(repo, config, clock, reporter.warn)
        self.workspace = self.ops.workspace
        self.forge: Forge = forge(self.ops) if forge else LocalForge(self.ops, reporter.line)
        self.limits = Limits(
            max_attempts=config.agent.max_attempts,
            max_review_rounds=config.review.max_rounds,
            max_ci_fixes=config.ci.max_fixes,
        )
        # Where task agents run when not here (``executor: actions``); planning stays local.
        self.remote = remote
        # The state branch (scaffold.state): published in the background, never blocking.
        self.publisher = publisher
        self.before_publish = before_publish
        self._publishing: asyncio.Task[None] | None = None
        self._publish_error_said: str | None = None
        # The repository's slots when other quests run beside this one (the App).
        self.slot_pool = slot_pool
        # The server-wide cap on agents at once (the App's), taken right before a run.
        self.agent_limit = agent_limit
        # The agent runs, their slots and their processes.
        self.agents = AgentJobs(self)
        # Events from jobs; None only wakes the main loop (a job ended).
        self.queue: asyncio.Queue[tuple[str, Event] | None] = asyncio.Queue()
        # The latest job of each key, and every job not yet ended (a key's earlier job
        # may still be at work beside its latest).
        self.jobs: dict[str, asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._live = False  # between recovery and the end of run(): jobs may start
        # Tasks whose pull request the forge is pushing, opening or answering: a person's
        # messages about them wait until it is done (``inbox.consume``), so feedback, an
        # approval or a rejection meets the pull request as recorded, never half of it.
        self.publishing: set[str] = set()
        self.next_inbox_look = 0.0  # the event loop's time of the next look at the inbox
        self.reported_problems: set[str] = set()
        # The safety budgets are per run (core/safety.py): what this run has used.
        self.run_started_at = clock()
        self.run_cost_base = writer.quest.cost_usd

    # ------------------------------------------------------------------ state

    @property
    def quest(self) -> Quest:
        return self.writer.quest

    def commit(self, quest: Quest, entries: Sequence[Any] = ()) -> None:
        """Journal the new state (on disk before any effect it allows runs)."""
        self.writer.commit(quest, entries)

    def update_task(self, task_id: str, note: str | None = None, **updates: Any) -> None:
        task = self.quest.tasks[task_id]
        quest = self.quest.model_copy(
            update={"tasks": {**self.quest.tasks, task_id: task.model_copy(update=updates)}}
        )
        entries = [draft("note", note, task_id=task_id, at=self.clock())] if note else []
        self.commit(quest, entries)

    def update_planning(self, **updates: Any) -> None:
        planning = self.quest.planning.model_copy(update=updates)
        self.commit(self.quest.model_copy(update={"planning": planning}))

    # ------------------------------------------------------------------ main loop

    async def run(self) -> RunReport:
        """Until no job runs and no event waits.

        The loop wakes on events (a job's, or the wake-up ``_job_done`` puts), applying
        every event waiting at once. Only the inbox, where messages arrive as files, and
        the backlog, which a person may edit, are looked at on a timer (``poll_s``).
        """
        loop = asyncio.get_running_loop()
        self.workspace.ensure_excluded()
        self._begin_run()
        recover(self)
        self._live = True
        try:
            while True:
                if loop.time() >= self.next_inbox_look:
                    inbox.consume(self)
                    self.next_inbox_look = loop.time() + self.poll_s
                self._tick()
                self._maybe_publish()
                if self._idle():
                    self._tick()
                    if self._idle():
                        break
                try:
                    item = await asyncio.wait_for(
                        self.queue.get(), timeout=max(0.0, self.next_inbox_look - loop.time())
                    )
                except TimeoutError:
                    # An event may have come in the same instant (a job that ended: it is
                    # no longer in ``jobs``): it is applied before the next tick looks at
                    # the state, or the tick would start that job's run again.
                    item = None
                self._apply_queued(item)
                await asyncio.sleep(0)  # the jobs just started run first (spawn)
        finally:
            self._live = False
            if self.slot_pool is not None:
                self.slot_pool.leave(self.quest.id)
            await self._stop_all_jobs()
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
        if self.before_publish is not None:
            try:
                await self.before_publish()
            except ScaffoldError as exc:
                self._say_publish_error(str(exc))
                return
        if await asyncio.to_thread(pub.publish, reason):
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
            self.commit(restored.quest, restored.entries)
        q = self.quest
        self.run_started_at = self.clock()
        self.run_cost_base = q.cost_usd
        if q.phase is QuestPhase.FAILED or not (q.stop_reason or q.consecutive_failures):
            return
        note = f"new run; the previous one stopped: {q.stop_reason}" if q.stop_reason else None
        entries = [draft("note", note, at=self.run_started_at)] if note else []
        update = {"stop_reason": None, "stop_limit": None, "consecutive_failures": 0}
        self.commit(q.model_copy(update=update), entries)

    def _idle(self) -> bool:
        return not self._running and self.queue.empty()

    def _apply_queued(self, item: tuple[str, Event] | None) -> None:
        """Apply ``item`` and every other event already waiting (None is a wake-up)."""
        while True:
            if item is not None:
                self.apply(*item)
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                return

    async def _stop_all_jobs(self) -> None:
        for job in self._running:
            job.cancel()
        for job in list(self._running):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
        self.agents.children.kill_all()

    def apply(self, key: str, event: Event) -> None:
        """Feed one event to the core, persist the result, start the effects."""
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
        self.commit(step.quest, step.entries)
        for entry in step.entries:
            if entry.kind == "transition":
                where = entry.task_id or key
                detail = transition_detail(entry)
                self.out.transition(where, entry.source, entry.target, entry.event, detail)
        if step.effects:
            self.start_job(key, step.effects)
        if key != PLAN_KEY:
            self._after_transition(key, event)
        self.forge.progress(self.quest)

    def merging(self, task_id: str | None) -> bool:
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
                self.start_job(task.id, [MergePullRequest(task.id)])

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

    def start_job(self, key: str, effects: Sequence[Effect]) -> None:
        stop = [e for e in effects if isinstance(e, StopAgent)]
        old = self.jobs.get(key)
        if old is not None and not old.done() and stop:
            old.cancel()
        # A job that takes the task's worktree or branch waits for the task's job still
        # at work there: a round of the review loop or a merge for its pull request being
        # pushed, the clean-up of a stopped task for the worktree being made (a thread
        # that a cancel does not stop) or checked.
        after = stop or any(
            isinstance(e, (SyncBranch, RemoveWorktree, MergePullRequest)) for e in effects
        )
        job = asyncio.create_task(self._execute(key, list(effects), old if after else None))
        self.jobs[key] = job
        self._running.add(job)
        job.add_done_callback(functools.partial(self._job_done, key))

    def _job_done(self, key: str, job: asyncio.Task[None]) -> None:
        self._running.discard(job)
        if self.jobs.get(key) is job:
            del self.jobs[key]
        if not self._running or key == PLAN_KEY:
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
        self.agents.release_leases()
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
                self.apply(task.id, Event(EventName.DEPS_RESOLVED, at=now))
        ready = [t for t in self.quest.tasks.values() if t.state is Lifecycle.READY]
        busy = [t.id for t in self.quest.tasks.values() if holds_slot(t)]
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
        started = schedule(candidates, running=busy, slots=slots)
        for task_id in started:
            self.apply(task_id, Event(EventName.TASK_SELECTED, at=now, safety_ok=True))
        if self.slot_pool is not None and started:
            held = len(busy) + len(started)
            self.slot_pool.report(self.quest.id, held, held + len(ready) - len(started))

    def _tick_planning(self) -> None:
        plan = self.quest.planning
        if PLAN_KEY in self.jobs or plan.question_id or plan.pending_run is None:
            return
        if self.quest.stop_reason:
            self.apply(PLAN_KEY, Event(EventName.ABORT_SIGNAL, detail=self.quest.stop_reason))
            return
        self.start_job(PLAN_KEY, [StartAgent(None, plan.pending_run)])

    def _sync_backlog(self) -> bl.BacklogSnapshot:
        snapshot = bl.load_backlog(self.repo)
        for problem in snapshot.problems:
            key = f"{problem.path}:{problem.reason}"
            if key not in self.reported_problems:
                self.reported_problems.add(key)
                self.out.warn(f"backlog: {problem.path}: {problem.reason}")
        tasks = dict(self.quest.tasks)
        known_before = set(self.quest.planning.known_before)
        for bt in snapshot.tasks:
            if bt.id in known_before or self.planned_elsewhere(bt.labels):
                continue
            fields: dict[str, Any] = {
                "title": bt.title,
                "dependencies": tuple(bt.dependencies),
                "priority": bt.priority,
            }
            current = tasks.get(bt.id)
            if current is None:
                if not snapshot.config.is_done_status(bt.status):
                    tasks[bt.id] = TaskRecord(id=bt.id, **fields)
            elif current.state is Lifecycle.IDLE and any(
                getattr(current, k) != v for k, v in fields.items()
            ):
                tasks[bt.id] = current.model_copy(update=fields)
        if tasks != self.quest.tasks:
            self.commit(self.quest.model_copy(update={"tasks": tasks}))
        return snapshot

    def planned_elsewhere(self, labels: Sequence[str]) -> bool:
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
        verdict = safety.check(self.cfg.safety, ledger, self.clock())
        if not verdict.ok and not q.stop_reason and verdict.reason:
            step = qf.stop_quest(q, verdict.reason, self.clock(), str(verdict.limit))
            self.commit(step.quest, step.entries)
            self.out.warn(f"stopping new work: {verdict.reason}")

    # ------------------------------------------------------------------ effects

    async def _execute(
        self, key: str, effects: list[Effect], previous: asyncio.Task[None] | None
    ) -> None:
        if previous is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await previous
        cleanup = any(isinstance(e, SyncBacklog) for e in effects)
        for effect in effects:
            event = await execute(self, key, effect)
            if event is not None:
                self.queue.put_nowait((key, event))
        if cleanup:
            self.queue.put_nowait((key, Event(EventName.BACKLOG_SYNCED, at=self.clock())))
