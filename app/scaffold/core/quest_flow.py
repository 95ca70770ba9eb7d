"""Pure quest-level steps: feed an event to a task or to planning, and get back the new
quest, the effects to run and the history entries to journal.

This is where per-task decisions meet quest-wide facts: pending questions, the
consecutive-failure count, cost, and a stopped quest (abort or safety limit) turning
any agent start into an abort at the next agent boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scaffold.core.effects import (
    CreateWorktree,
    Effect,
    MergePullRequest,
    OpenPullRequest,
    RunDiagramCheck,
    RunWard,
    StartAgent,
)
from scaffold.core.events import Event
from scaffold.core.lifecycle import Limits, cleanup_effects, decide
from scaffold.core.planning import decide_planning
from scaffold.core.states import ABORTABLE, EventName, Lifecycle
from scaffold.errors import UnknownQuestion, UnknownTask
from scaffold.quest.model import HistoryEntry, Quest, Question, QuestPhase, TaskRecord
from scaffold.roles import Role
from scaffold.signals import NeedsUserInput


@dataclass(frozen=True)
class Step:
    quest: Quest
    effects: tuple[Effect, ...] = ()
    entries: tuple[HistoryEntry, ...] = ()


def _entry(
    now: datetime,
    kind: str,
    event: str,
    task_id: str | None = None,
    source: str | None = None,
    target: str | None = None,
    **detail: Any,
) -> HistoryEntry:
    return HistoryEntry(
        seq=0,
        at=now,
        kind=kind,
        task_id=task_id,
        event=event,
        source=source,
        target=target,
        detail={k: v for k, v in detail.items() if v not in (None, "", ())},
    )


def _with_question(
    quest: Quest, event: Event, task_id: str | None, role: Role | None, now: datetime
) -> dict[str, Question]:
    """The quest's questions, with the one ``event`` asks (if it asks one)."""
    questions = dict(quest.questions)
    if event.name is EventName.QUESTION_ASKED and isinstance(event.signal, NeedsUserInput):
        assert event.question_id is not None
        questions[event.question_id] = Question(
            id=event.question_id,
            task_id=task_id,
            role=role or Role.CODEWEAVER,
            session_id=event.session_id,
            question=event.signal.question,
            context=event.signal.context,
            asked_at=now,
        )
    return questions


def apply_task_event(
    quest: Quest, task_id: str, event: Event, limits: Limits, now: datetime
) -> Step:
    task = quest.tasks.get(task_id)
    if task is None:
        raise UnknownTask(task_id)
    event = event if event.at is not None else replace(event, at=now)
    decision = decide(task, event, limits)
    new_task, effects = decision.task, decision.effects
    entry = _entry(
        now,
        "transition",
        event.name.value,
        task_id,
        task.state.value,
        new_task.state.value,
        transition=decision.transition.name,
        role=event.role.value if event.role else None,
        session_id=event.session_id,
        reason=event.detail[:2000] if event.detail else None,
        missing=list(event.missing) or None,
        signal=event.signal.model_dump() if event.signal else None,
    )
    questions = _with_question(quest, event, task_id, event.role or task.role, now)
    failures = quest.consecutive_failures
    if event.name is EventName.AGENT_FAILED:
        failures += 1
    elif event.signal is not None:  # an agent's accepted signal is a success
        failures = 0
    quest = quest.model_copy(
        update={
            "tasks": {**quest.tasks, task_id: new_task},
            "questions": questions,
            "consecutive_failures": failures,
        }
    )
    # A stopped quest lets an agent run finish but starts no new one.
    if (
        quest.stop_reason
        and new_task.state in ABORTABLE
        and any(isinstance(e, StartAgent) for e in effects)
    ):
        abort = Event(EventName.ABORT_SIGNAL, at=now, detail=quest.stop_reason)
        without_start = tuple(e for e in effects if not isinstance(e, StartAgent))
        stopped = apply_task_event(quest, task_id, abort, limits, now)
        return Step(stopped.quest, without_start + stopped.effects, (entry, *stopped.entries))
    return Step(quest, effects, (entry,))


def apply_planning_event(quest: Quest, event: Event, max_attempts: int, now: datetime) -> Step:
    decision = decide_planning(quest.phase, quest.planning, event, max_attempts)
    planning = decision.planning
    questions = _with_question(quest, event, None, quest.planning.role, now)
    failures = quest.consecutive_failures + 1 if event.name is EventName.AGENT_FAILED else 0
    updates: dict[str, Any] = {
        "phase": decision.phase,
        "planning": planning,
        "questions": questions,
        "consecutive_failures": failures,
    }
    if decision.phase is QuestPhase.FAILED:
        updates["stop_reason"] = f"{quest.planning.role.display} failed: {event.detail}"
    entry = _entry(
        now,
        "quest",
        event.name.value,
        None,
        quest.phase.value,
        decision.phase.value,
        transition=decision.transition.name,
        role=quest.planning.role.value,
        session_id=event.session_id,
        reason=event.detail or None,
        signal=event.signal.model_dump() if event.signal else None,
    )
    return Step(quest.model_copy(update=updates), decision.effects, (entry,))


def answer_question(
    quest: Quest, question_id: str, answer: str, by: str, limits: Limits, now: datetime
) -> Step:
    """Record a person's answer and resume the session that asked."""
    q = quest.questions.get(question_id)
    if q is None or q.answer is not None:
        raise UnknownQuestion(question_id)
    answered = q.model_copy(update={"answer": answer, "answered_at": now, "answered_by": by})
    quest = quest.model_copy(update={"questions": {**quest.questions, question_id: answered}})
    event = Event(EventName.ANSWER_RECEIVED, at=now, answer=answer, question_id=question_id)
    if q.task_id is None:
        return apply_planning_event(quest, event, limits.max_attempts, now)
    return apply_task_event(quest, q.task_id, event, limits, now)


def stop_quest(quest: Quest, reason: str, now: datetime, limit: str = "abort") -> Step:
    """Record why no new work starts: ``limit`` is ``abort`` or the safety limit hit."""
    if quest.stop_reason:
        return Step(quest)
    entry = _entry(now, "quest", "stopped", reason=reason, limit=limit)
    update = {"stop_reason": reason, "stop_limit": limit}
    return Step(quest.model_copy(update=update), (), (entry,))


def restore_merged(quest: Quest, now: datetime) -> Step:
    """Undo what a ``retry`` of a Done task did before retry refused one.

    Such a retry cleared the outcome of a merged task, so every later run saw a task
    that was neither done nor able to start. A task at rest whose pull request merged
    is done: its outcome is ``merged`` again.
    """
    tasks = dict(quest.tasks)
    entries: list[HistoryEntry] = []
    for task in quest.tasks.values():
        merged = task.pr is not None and task.pr.state == "merged"
        if task.state is Lifecycle.IDLE and task.outcome is None and merged:
            tasks[task.id] = task.model_copy(update={"outcome": "merged"})
            note = "the task was merged; a retry of it is undone"
            entries.append(_entry(now, "note", note, task_id=task.id))
    if not entries:
        return Step(quest)
    return Step(quest.model_copy(update={"tasks": tasks}), (), tuple(entries))


def shown_phase(quest: Quest) -> str:
    """The phase a person is shown: a quest whose every task is merged (or rejected,
    with at least one merged) is done, even before the run that merged it has ended."""
    tasks = quest.tasks.values()
    finished = bool(quest.tasks) and all(t.outcome in ("merged", "rejected") for t in tasks)
    if (
        quest.phase is QuestPhase.EXECUTING
        and finished
        and any(t.outcome == "merged" for t in tasks)
    ):
        return QuestPhase.DONE.value
    return quest.phase.value


def add_cost(quest: Quest, task_id: str | None, usd: float, role: str, backend: str) -> Quest:
    if usd <= 0:
        return quest
    updates: dict[str, Any] = {
        "cost_usd": round(quest.cost_usd + usd, 6),
        "cost_by_role": _plus(quest.cost_by_role, role, usd),
        "cost_by_backend": _plus(quest.cost_by_backend, backend, usd),
    }
    if task_id is not None and task_id in quest.tasks:
        t = quest.tasks[task_id]
        updates["tasks"] = {
            **quest.tasks,
            task_id: t.model_copy(update={"cost_usd": round(t.cost_usd + usd, 6)}),
        }
    return quest.model_copy(update=updates)


def _plus(totals: dict[str, float], key: str, usd: float) -> dict[str, float]:
    return {**totals, key: round(totals.get(key, 0.0) + usd, 6)}


def due_effects(task: TaskRecord) -> list[Effect]:
    """What an in-flight task still needs, read from its record alone.

    After a crash of the orchestrator the effects of the last decision are gone; the
    record says what they were. Every effect listed is idempotent in the runtime.
    """
    s = task.state
    if s is Lifecycle.ALLOCATING:
        return [CreateWorktree(task.id)]
    if s in (Lifecycle.PROCESSING, Lifecycle.TEST_VALIDATION):
        if task.question_id:
            return []
        if task.pending_run is not None:
            return [StartAgent(task.id, task.pending_run)]
        if s is Lifecycle.TEST_VALIDATION:
            return [RunWard(task.id)]
        return []
    if s is Lifecycle.DIAGRAM_CHECK:
        return [RunDiagramCheck(task.id)]
    if s is Lifecycle.PR_CREATED:
        return [OpenPullRequest(task.id)]
    if s is Lifecycle.MERGING:
        return [MergePullRequest(task.id)]
    if s is Lifecycle.CLEANUP:
        if task.outcome == "merged":
            return cleanup_effects(task, "Done", "", task.last_summary, keep_branch=False)
        keep = task.outcome != "rejected"
        return cleanup_effects(task, "To Do", "", None, keep_branch=keep)
    return []
