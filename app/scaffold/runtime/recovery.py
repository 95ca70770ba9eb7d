"""Recovery: a quest taken up again after scaffold stopped (``kill -9``, a restart).

The quest file says what every task was doing. Orphan agent processes of this quest
are killed, a signal an interrupted agent already delivered is used rather than
re-running it, an interrupted run without one is run again (resuming its session;
scaffold's death is not the agent's failure, so it costs no attempt), and every other
in-flight task gets the effects its record implies (``due_effects``), all of which are
idempotent (a merge that already happened is detected, not repeated).
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
from pathlib import Path
from typing import TYPE_CHECKING

from scaffold.core import quest_flow as qf
from scaffold.core.states import IN_FLIGHT, Lifecycle
from scaffold.errors import ScaffoldError
from scaffold.ids import PLAN_KEY
from scaffold.quest.model import QuestPhase, TaskRecord
from scaffold.roles import Role
from scaffold.runtime.run_channel import sweep_stale_channels
from scaffold.signal_back.records import latest_signal

if TYPE_CHECKING:
    from scaffold.runtime.orchestrator import Orchestrator


def kill_orphan_agents(quest_id: str, runs_dir: Path) -> list[int]:
    """Kill agent process groups of this quest that outlived a previous scaffold run.

    A quest id is only unique within one repository (every repository has a quest
    ``backlog``), so a process counts as ours only if its ``SCAFFOLD_SIGNAL_DIR`` is
    under this repository's ``runs_dir`` too: another repository's agents are left alone.
    """
    marker = f"SCAFFOLD_QUEST_ID={quest_id}".encode()
    prefix = b"SCAFFOLD_SIGNAL_DIR="
    root = runs_dir.resolve()
    me = os.getpid()
    killed: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker not in environ:
            continue
        dirs = [v[len(prefix) :] for v in environ if v.startswith(prefix)]
        if not any(Path(os.fsdecode(d)).resolve().is_relative_to(root) for d in dirs):
            continue
        pid = int(entry.name)
        with contextlib.suppress(OSError):
            pgid = os.getpgid(pid)
            if pgid != os.getpgid(me):
                os.killpg(pgid, signals.SIGKILL)
                killed.append(pid)
    return killed


def recover(orch: Orchestrator) -> None:
    """Take the quest up where the last run left it (once, before the main loop)."""
    sweep_stale_channels()
    killed = kill_orphan_agents(orch.quest.id, orch.state_root / "runs" / orch.quest.id)
    if killed:
        orch.out.warn(f"killed {len(killed)} orphan agent process(es): {killed}")
    if orch.quest.phase in (QuestPhase.REQUIREMENTS, QuestPhase.PLANNING):
        plan = orch.quest.planning
        if plan.agent_running:
            _resume_interrupted(orch, PLAN_KEY, plan.role, plan.run_dir)
    for task in list(orch.quest.tasks.values()):
        if task.state not in IN_FLIGHT:
            continue
        _restore_worktree(orch, task)
        if task.agent_running and task.role is not None:
            _resume_interrupted(orch, task.id, task.role, task.run_dir)
            continue
        _commit_leftovers(orch, task)
        effects = qf.due_effects(task)
        if effects:
            orch.out.line(f"{task.id}: resuming in {task.state.value}")
            orch.start_job(task.id, effects)
    _remove_orphan_worktrees(orch)


def _commit_leftovers(orch: Orchestrator, task: TaskRecord) -> None:
    """A commit of an agent's work that failed, or was cut short by a stop: whatever
    the worktree holds is committed before the task's next step."""
    if task.worktree is None or not Path(task.worktree).is_dir():
        return
    with contextlib.suppress(ScaffoldError):
        orch.workspace.commit_all(
            task.id, f"{task.id} work left uncommitted by a restart", unless_merging=True
        )


def _restore_worktree(orch: Orchestrator, task: TaskRecord) -> None:
    """A quest rebuilt from the state branch (or a deleted folder): the task's
    worktree is made again on its branch, which keeps every commit of its work."""
    if task.worktree is None or task.state is Lifecycle.CLEANUP or Path(task.worktree).is_dir():
        return
    try:
        path = orch.workspace.create_worktree(task.id)
    except ScaffoldError as exc:
        orch.out.warn(f"{task.id}: cannot make its worktree again: {exc}")
        return
    orch.out.line(f"{task.id}: worktree made again from {task.branch or 'its branch'}")
    if str(path) != task.worktree:
        orch.update_task(task.id, worktree=str(path))


def _resume_interrupted(orch: Orchestrator, key: str, role: Role, run_dir: str | None) -> None:
    sig = latest_signal(Path(run_dir) / "signals") if run_dir else None
    record = orch.agents.record(key)
    session = record.sessions.get(role.value)
    if sig is None and record.pending_run is not None and not orch.quest.stop_reason:
        # scaffold died, not the agent: run the same agent run again, resuming its
        # session if it had one. Not an agent failure, so it uses up no attempt and
        # does not count towards the consecutive-failure limit.
        run = record.pending_run.model_copy(
            update={"resume_session": session or record.pending_run.resume_session}
        )
        orch.out.line(f"{key}: the agent run was interrupted by a restart; running it again")
        orch.agents.restarted.add(key)
        orch.agents.rerun(key, run, role, "agent run interrupted by a restart of scaffold")
        return
    orch.agents.commit_work(key, sig, role)
    event = orch.agents.outcome_event(
        key, role, sig, session, "interrupted by a restart of scaffold"
    )
    orch.out.line(f"{key}: the agent run was interrupted; {event.name.value}")
    orch.queue.put_nowait((key, event))


def _remove_orphan_worktrees(orch: Orchestrator) -> None:
    live = {t.id for t in orch.quest.tasks.values() if t.state in IN_FLIGHT}
    for info in orch.workspace.list_scaffold_worktrees():
        if info.task_id and info.task_id not in live and info.task_id in orch.quest.tasks:
            orch.workspace.remove_worktree(info.task_id)
            orch.out.line(f"removed orphan worktree of {info.task_id}")
