"""The quest-level planning phases: ChaosWhisperer, then PathSeeker, then the task slots.

A small declared table like the task lifecycle: (phase, event) -> phase, pure.
ChaosWhisperer may only complete or ask; PathSeeker may also continue itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scaffold.core.effects import AskQuestion, Effect
from scaffold.core.events import Event
from scaffold.core.lifecycle import (
    continue_run,
    resumed_run,
    retry_run,
    start_run,
    state_diagram,
)
from scaffold.core.states import EventName as E
from scaffold.errors import IllegalTransition
from scaffold.quest.model import AgentRun, PlanningState, QuestPhase
from scaffold.roles import Role
from scaffold.signals import Complete, NeedsUserInput, PartiallyComplete

P = QuestPhase
PlanAction = Callable[[PlanningState, Event], tuple[dict[str, Any], list[Effect]]]


@dataclass(frozen=True)
class PlanTransition:
    name: str
    source: QuestPhase
    event: E
    target: QuestPhase
    action: PlanAction
    when_attempts_left: bool | None = None  # guard for agent_failed rows

    @property
    def label(self) -> str:
        if self.when_attempts_left is None:
            return self.name
        return f"{self.name} [attempts {'left' if self.when_attempts_left else 'used up'}]"


@dataclass(frozen=True)
class PlanDecision:
    phase: QuestPhase
    planning: PlanningState
    effects: tuple[Effect, ...]
    transition: PlanTransition


def _signalled(p: PlanningState, e: Event) -> dict[str, Any]:
    sessions = dict(p.sessions)
    if e.session_id:
        sessions[p.role.value] = e.session_id
    return {"sessions": sessions, "attempts": 0, "agent_running": False, "pending_run": None}


def _requirements_done(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    summary = e.signal.summary if isinstance(e.signal, Complete) else ""
    run = AgentRun(role=Role.PATHSEEKER, kind="fresh", context=summary)
    return start_run(None, run, **_signalled(p, e), last_summary=summary)


def _plan_done(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    ups = _signalled(p, e)
    ups["last_summary"] = e.signal.summary if isinstance(e.signal, Complete) else ""
    return ups, []


def _continue(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    return start_run(None, continue_run(p, p.role, e), **_signalled(p, e))


def _ask(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    if not isinstance(e.signal, NeedsUserInput) or not e.question_id:
        raise IllegalTransition(p.role.value, e.name, "a question needs a signal and an id")
    ups = _signalled(p, e)
    ups["question_id"] = e.question_id
    return ups, [AskQuestion(None, e.question_id)]


def _answer(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    return start_run(None, resumed_run(p, p.role, kind="answer", context=e.answer or ""))


def _retry(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    run, sessions = retry_run(p, p.role, e, "")
    return start_run(None, run, attempts=p.attempts + 1, sessions=sessions)


def _give_up(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    return {"attempts": p.attempts + 1, "agent_running": False, "pending_run": None}, []


def _stop(p: PlanningState, e: Event) -> tuple[dict[str, Any], list[Effect]]:
    return {"pending_run": None, "agent_running": False}, []


def _rows() -> tuple[PlanTransition, ...]:
    t = PlanTransition
    rows = [
        t("requirements_locked", P.REQUIREMENTS, E.CODE_COMPLETE, P.PLANNING, _requirements_done),
        t("tasks_planned", P.PLANNING, E.CODE_COMPLETE, P.EXECUTING, _plan_done),
        t("continue_role", P.PLANNING, E.CONTINUE_ROLE, P.PLANNING, _continue),
    ]
    for ph in (P.REQUIREMENTS, P.PLANNING):
        rows += [
            t("question_asked", ph, E.QUESTION_ASKED, ph, _ask),
            t("answer_received", ph, E.ANSWER_RECEIVED, ph, _answer),
            t("retry_on_error", ph, E.AGENT_FAILED, ph, _retry, True),
            t("retries_exhausted", ph, E.AGENT_FAILED, P.FAILED, _give_up, False),
            t("abort_signal", ph, E.ABORT_SIGNAL, P.STOPPED, _stop),
        ]
    return tuple(rows)


PLAN_TABLE = _rows()


def decide_planning(
    phase: QuestPhase, planning: PlanningState, event: Event, max_attempts: int = 3
) -> PlanDecision:
    # Like a task's agent run, a planning run is retried up to ``max_attempts`` times.
    attempts_left = planning.attempts < max_attempts
    for row in PLAN_TABLE:
        if row.source is not phase or row.event is not event.name:
            continue
        if row.when_attempts_left is not None and row.when_attempts_left != attempts_left:
            continue
        updates, effects = row.action(planning, event)
        return PlanDecision(row.target, planning.model_copy(update=updates), tuple(effects), row)
    raise IllegalTransition(phase.value, event.name.value, "no planning transition")


def planning_event_for(phase: QuestPhase, signal: object) -> E:
    """Route a planning agent's signal; a role follow-up is not a planning move."""
    if isinstance(signal, Complete):
        return E.CODE_COMPLETE
    if isinstance(signal, PartiallyComplete):
        return E.CONTINUE_ROLE
    if isinstance(signal, NeedsUserInput):
        return E.QUESTION_ASKED
    raise IllegalTransition(phase.value, "role_followup", "planning roles cannot hand off")


def mermaid(rows: Iterable[PlanTransition] = PLAN_TABLE) -> str:
    """The state diagram of the planning phases, in table order (see ``docs/diagrams``)."""
    edges = ((r.source.value, r.target.value, r.label) for r in rows)
    return state_diagram(P.REQUIREMENTS.value, edges)
