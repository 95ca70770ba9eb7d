"""The orchestrator's agent-run jobs: an agent run started, waited for, and its end.

A task's first agent takes a lease on a slot (kept between its agents until the task
holds no slot); the run gets its channel and sandbox, starts once the journal is on
disk, and runs here or remotely (``executor: actions``). What it changed is committed,
then its end becomes the event its signal implies (or a failure), with its cost and
notes. What the agent is given and what its outcome says are
:mod:`~scaffold.runtime.agent_runs`' pure helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaffold import backlog as bl
from scaffold.agent.choice import agent_for
from scaffold.agent.process import AgentRunOutcome, AgentSpec, agent_environment, run_agent
from scaffold.agent.process_group import LiveChildren
from scaffold.agent.stream import SystemInit
from scaffold.core import quest_flow as qf
from scaffold.core.effects import StartAgent
from scaffold.core.events import Event, signal_event
from scaffold.core.planning import planning_event_for
from scaffold.core.states import HOLDS_SLOT, EventName
from scaffold.errors import AgentError, IllegalTransition, ScaffoldError
from scaffold.ids import PLAN_KEY, PLAN_STEP, task_number
from scaffold.quest.model import AgentRun, QuestPhase, TaskRecord
from scaffold.quest.store import draft
from scaffold.roles import Role
from scaffold.runtime.agent_runs import (
    PreparedRun,
    agent_env,
    describe_failure,
    prepare_run,
    result_notes,
    resume_lost,
    run_cost,
    start_problem,
    watch_signal,
    write_run_files,
)
from scaffold.runtime.prompts import PromptData
from scaffold.runtime.run_channel import RunChannel, private_dir
from scaffold.sandbox.confinement import Confinement, confine
from scaffold.signal_back.plan import read_plan
from scaffold.signal_back.records import Binding, SignalRecord, latest_signal
from scaffold.signal_back.requirements import read_requirements
from scaffold.ward import CommandWrap

if TYPE_CHECKING:
    from scaffold.runtime.orchestrator import Orchestrator


def holds_slot(task: TaskRecord) -> bool:
    return task.state in HOLDS_SLOT and task.question_id is None


def step_of(key: str) -> str:
    return PLAN_STEP if key == PLAN_KEY else key


class AgentJobs:
    """The agent runs of one orchestrator, and the slots they hold."""

    def __init__(self, orch: Orchestrator) -> None:
        self.orch = orch
        self.children = LiveChildren()
        # At most ``slots`` task agents at work at once: a task's first agent takes a
        # permit (its lease on a slot) and the task keeps it between its agents, until
        # it no longer holds a slot (``release_leases``). Tasks that went back to their
        # agents from a state that holds no slot (a merge conflict, a diagram fix) wait
        # for one.
        self.permits = asyncio.Semaphore(orch.cfg.slots)
        self.leases: set[str] = set()
        # Steps whose agent run was started again after a restart of scaffold.
        self.restarted: set[str] = set()

    def record(self, key: str) -> Any:
        """The planning state or the task's record: both have runs, sessions, a role."""
        return self.orch.quest.planning if key == PLAN_KEY else self.orch.quest.tasks[key]

    def _update(self, key: str, note: str | None = None, **updates: Any) -> None:
        """Update the planning state or the task's record."""
        if key == PLAN_KEY:
            self.orch.update_planning(**updates)
        else:
            self.orch.update_task(key, note, **updates)

    def _prompt_data(self, key: str) -> PromptData:
        q, d = self.orch.quest, self.orch.cfg.diagrams
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
            bt = bl.load_backlog(self.orch.repo).get(key)
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
            diagrams=(d.architecture, d.data_model, d.states),
            previous=task.last_summary or "",
        )

    async def run_agent(self, key: str, run: AgentRun) -> Event | None:
        if key != PLAN_KEY and not await self._take_slot(key):
            detail = self.orch.quest.stop_reason or "the quest was stopped"
            return Event(EventName.ABORT_SIGNAL, at=self.orch.clock(), detail=detail)
        return await self._run_agent_now(key, run)

    async def _take_slot(self, key: str) -> bool:
        """The task's lease on a slot (kept until it holds none); False when the quest
        was stopped meanwhile: a stopped quest lets an agent run finish but starts no
        new one (quest_flow)."""
        if key not in self.leases:
            await self.permits.acquire()
            self.leases.add(key)
        return not self.orch.quest.stop_reason

    def release_leases(self) -> None:
        """Give back the slot of every task that no longer holds one, its agent done."""
        for key in list(self.leases):
            task = self.orch.quest.tasks.get(key)
            if task is None or not (holds_slot(task) or task.agent_running):
                self.leases.discard(key)
                self.permits.release()

    async def _run_agent_now(self, key: str, run: AgentRun) -> Event | None:
        """Start ``run`` of ``key`` and wait for its end."""
        is_plan = key == PLAN_KEY
        worktree = None if is_plan else self.orch.quest.tasks[key].worktree
        if not is_plan and (worktree is None or not Path(worktree).is_dir()):
            # Never anywhere but the task's own worktree (not the main checkout).
            detail = f"failed start: {key} has no worktree to run in ({worktree or 'none'})"
            return Event(EventName.AGENT_FAILED, at=self.orch.clock(), role=run.role, detail=detail)
        number = self.record(key).agent_runs + 1
        run_dir = (
            self.orch.state_root
            / "runs"
            / self.orch.quest.id
            / step_of(key)
            / f"{number:03d}-{run.role.value}"
        )
        signal_dir = run_dir / "signals"
        signal_dir.mkdir(parents=True, exist_ok=True)
        if run.kind == "conflict_fix" and not is_plan:
            await asyncio.to_thread(self.orch.ops.start_conflict_merge, self.worktree(key))
        self._mark_started(key, run, number, run_dir)
        if self.orch.remote is not None and not is_plan:
            outcome = await self.orch.remote.run_agent(
                self.orch.quest, self.orch.quest.tasks[key], run, run_dir, signal_dir
            )
            if outcome.session_id:
                self._remember_session(key, run.role, outcome.session_id)
            return self._finish_run(key, run, outcome, [], latest_signal(signal_dir))
        return await self._run_here(key, run, signal_dir)

    def _mark_started(self, key: str, run: AgentRun, number: int, run_dir: Path) -> None:
        """Journal the agent's start (on disk before it runs) and say it."""
        note = f"agent started: {run.role.value} ({run.kind})"
        self._update(key, note, agent_running=True, agent_runs=number, run_dir=str(run_dir))
        self.orch.out.agent_started(step_of(key), run.role.value, run.kind, run.resume_session)

    async def _run_here(self, key: str, run: AgentRun, signal_dir: Path) -> Event | None:
        """The agent run on this machine: its channel, its sandbox, its end, the commit
        of what it changed (before its end is applied: the task's next steps see it)."""
        binding = Binding(signal_dir, step_of(key), run.role, self.orch.quest.id, self.orch.repo)
        confinement = self.confinement(key)
        base_env = agent_environment(os.environ, {})
        channel = RunChannel(
            self.orch.sandbox,
            binding,
            confinement,
            python=self.orch.python,
            env=base_env,
            model_host=agent_for(self.orch.cfg.agent, run.role).backend.model_host(base_env),
        )
        async with channel:
            prepared = prepare_run(
                self.orch.cfg,
                run,
                self._prompt_data(key),
                quest_id=self.orch.quest.id,
                signal_dir=signal_dir,
                signal=channel.signal,
                home=confinement.private / "home",
                env=base_env,
                sandboxed=channel.sandbox.active,
            )
            # The CLI's settings files, and the sandbox's command line (private folders
            # checked, programs' roots found): file system work, off the event loop.
            spec = await asyncio.to_thread(self._spec, prepared, channel, confinement.cwd, base_env)
            stop = asyncio.Event()
            refused: list[str] = []

            async def on_event(ev: object) -> None:
                if isinstance(ev, SystemInit):
                    if ev.session_id:
                        self._remember_session(key, run.role, ev.session_id)
                    problem = start_problem(prepared, run.resume_session, ev)
                    if problem:
                        refused.append(problem)
                        stop.set()

            limit = self.orch.agent_limit
            if limit is not None:
                await limit.acquire(self.orch.quest.id)
            watcher = asyncio.create_task(watch_signal(channel.signalled, stop))
            try:
                outcome = await run_agent(
                    spec, on_event=on_event, children=self.children, stop_requested=stop
                )
            except AgentError as exc:  # e.g. the program vanished: a failure, not a loop
                failure = f"could not start the agent: {exc}"
                return self.outcome_event(key, run.role, None, run.resume_session, failure)
            finally:
                watcher.cancel()
                if limit is not None:
                    limit.release(self.orch.quest.id)
        sig = None if refused else latest_signal(signal_dir)
        try:
            await asyncio.to_thread(self.commit_work, key, sig, run.role)
        except Exception as exc:  # reported: the task's next commit takes what this one left
            self.orch.out.warn(f"{key}: committing the agent's work failed: {exc}")
        return self._finish_run(key, run, outcome, refused, sig)

    def confinement(self, key: str) -> Confinement:
        """Where the agent (or Ward) of ``key`` runs: its worktree, or the repository."""
        private = private_dir(self.orch.repo, self.orch.quest.id, step_of(key))
        worktree = None if key == PLAN_KEY else self.orch.quest.tasks[key].worktree
        if worktree is None:
            if key != PLAN_KEY:
                raise ScaffoldError(f"{key}: no worktree to run in")
            return Confinement(repo=self.orch.repo, cwd=self.orch.repo, private=private)
        path = Path(worktree)
        return Confinement(repo=self.orch.repo, cwd=path, private=private, worktree=path)

    def ward_wrap(self, task_id: str) -> CommandWrap | None:
        if not self.orch.sandbox.active:
            return None
        confinement = self.confinement(task_id)

        def wrap(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
            return confine(self.orch.sandbox, confinement, argv, env)

        return wrap

    def _spec(
        self, prepared: PreparedRun, channel: RunChannel, cwd: Path, env: Mapping[str, str]
    ) -> AgentSpec:
        write_run_files(prepared.invocation.files)
        argv, wrapped = channel.wrap(prepared.invocation.argv, agent_env(env, prepared))
        return AgentSpec(
            argv=argv,
            cwd=cwd,
            base_env=wrapped,
            stuck_timeout_s=self.orch.cfg.agent.stuck_timeout_s,
            parse=prepared.parse,
        )

    def _finish_run(
        self,
        key: str,
        run: AgentRun,
        outcome: AgentRunOutcome,
        refused: list[str],
        sig: SignalRecord | None,
    ) -> Event | None:
        """Cost, notes, and the event the run leads to (its signal, or a failure)."""
        agent = agent_for(self.orch.cfg.agent, run.role)
        cost = run_cost(self.orch.cfg, agent, outcome)
        if cost:
            task_id = None if key == PLAN_KEY else key
            spent = qf.add_cost(self.orch.quest, task_id, cost, run.role.value, agent.backend.name)
            self.orch.commit(spent)
        self.orch.out.agent_finished(step_of(key), run.role.value, outcome.duration_s, cost)
        for note in result_notes(outcome):
            self._note(key, f"{run.role.value}: {note}")
        session = outcome.session_id or run.resume_session
        failure = describe_failure(
            outcome, refused[0] if refused else None, self.orch.cfg.agent.stuck_timeout_s
        )
        fresh = sig is None and resume_lost(agent.backend, outcome, run.resume_session is not None)
        if fresh and key in self.restarted:
            # scaffold died before the agent had saved its session: not the agent's
            # failure either, so start the same run again in a new session, for free.
            self.restarted.discard(key)
            self.rerun(key, run.model_copy(update={"resume_session": None}), run.role)
            return None
        self.restarted.discard(key)
        if fresh:
            failure = f"the session could not be resumed; starting a new one ({failure})"
            session = None
        event = self.outcome_event(key, run.role, sig, session, failure)
        if fresh:
            event = replace(event, extra={**event.extra, "fresh_session": "1"})
        return event

    def _note(self, key: str, text: str) -> None:
        entry = draft(
            "note",
            "agent_result",
            task_id=None if key == PLAN_KEY else key,
            detail={"note": text},
            at=self.orch.clock(),
        )
        self.orch.commit(self.orch.quest, [entry])
        self.orch.out.warn(f"{key}: {text}")

    def _remember_session(self, key: str, role: Role, session_id: str) -> None:
        sessions = {**self.record(key).sessions, role.value: session_id}
        self._update(key, sessions=sessions)

    def outcome_event(
        self, key: str, role: Role, sig: SignalRecord | None, session: str | None, failure: str
    ) -> Event:
        now = self.orch.clock()
        self._update(key, agent_running=False)
        failed = functools.partial(
            Event, EventName.AGENT_FAILED, at=now, role=role, session_id=session
        )
        if sig is None:
            return failed(detail=failure)
        qid = self._question_id(key)
        if key == PLAN_KEY:
            try:
                name = planning_event_for(self.orch.quest.phase, sig.signal)
            except IllegalTransition as exc:
                return failed(detail=str(exc))
            if name is EventName.CODE_COMPLETE:
                phase = self.orch.quest.phase
                planned = self._take_planning_output(
                    Path(self.orch.quest.planning.run_dir or "") / "signals"
                )
                if phase is QuestPhase.PLANNING and not planned:
                    # Its create-tasks refused (or never called): a failed run, retried
                    # with the reason, never a quest that executes nothing.
                    return failed(
                        detail="PathSeeker signalled complete but planned no task: "
                        "create-tasks was refused or not called"
                    )
            return Event(
                name, at=now, signal=sig.signal, role=role, session_id=session, question_id=qid
            )
        task = self.orch.quest.tasks[key]
        return signal_event(task, sig.signal, session_id=session, at=now, question_id=qid)

    def commit_work(self, key: str, sig: SignalRecord | None, role: Role) -> None:
        """Commit what the agent changed in the worktree (runs in a worker thread)."""
        if key == PLAN_KEY or sig is None:
            return
        msg = f"{role.value}: {getattr(sig.signal, 'summary', sig.signal.signal)}"
        with contextlib.suppress(ScaffoldError):
            self.orch.workspace.commit_all(key, f"{key} {msg}"[:200])

    def _question_id(self, key: str) -> str:
        base = "plan" if key == PLAN_KEY else task_number(key).replace(".", "-")
        n = sum(1 for q in self.orch.quest.questions.values() if q.id.startswith(f"q-{base}-"))
        return f"q-{base}-{n + 1}"

    def _take_planning_output(self, signal_dir: Path) -> int:
        """ChaosWhisperer's requirements and PathSeeker's file map go into the quest;
        the number of tasks PathSeeker planned for this quest."""
        try:
            if self.orch.quest.phase is QuestPhase.REQUIREMENTS:
                req = read_requirements(signal_dir)
                if req is not None:
                    locked = req.model_copy(update={"locked": True})
                    self.orch.commit(self.orch.quest.model_copy(update={"requirements": locked}))
                    self.orch.out.line(f"requirements locked: {len(req.contexts)} context(s)")
                return 0
            plan = read_plan(signal_dir)
        except ScaffoldError as exc:
            self.orch.out.warn(f"planning output unreadable: {exc}")
            return 0
        if plan is not None:
            self.orch.update_planning(file_map=tuple(plan.file_map))
        snapshot = bl.load_backlog(self.orch.repo)
        known = set(self.orch.quest.planning.known_before)
        new = [
            t.id
            for t in snapshot.tasks
            if t.id not in known and not self.orch.planned_elsewhere(t.labels)
        ]
        self.orch.out.line(f"PathSeeker planned {len(new)} task(s): {', '.join(new) or '-'}")
        return len(new)

    def worktree(self, task_id: str) -> Path:
        return Path(self.orch.quest.tasks[task_id].worktree or self.orch.repo)

    def rerun(self, key: str, run: AgentRun, role: Role, note: str | None = None) -> None:
        """Start ``run`` again without counting an attempt (scaffold's fault, not the agent's)."""
        sessions = {
            k: v
            for k, v in self.record(key).sessions.items()
            if run.resume_session or k != role.value
        }
        self._update(key, note, agent_running=False, pending_run=run, sessions=sessions)
        if key != PLAN_KEY:  # the planning tick starts the planning's
            self.orch.start_job(key, [StartAgent(key, run)])
