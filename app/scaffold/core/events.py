"""Events fed to the lifecycle machine, and the routing of agent signals to them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from scaffold.core.states import EventName
from scaffold.quest.model import Feedback, TaskRecord
from scaffold.roles import BUILDING_ROLES, Role
from scaffold.signals import (
    AnySignal,
    Complete,
    NeedsRoleFollowup,
    NeedsUserInput,
    PartiallyComplete,
)


@dataclass(frozen=True)
class Event:
    """One input to :func:`scaffold.core.lifecycle.decide`.

    Only the fields an event name needs are set; the rest keep their defaults.
    """

    name: EventName
    at: datetime | None = None
    signal: AnySignal | None = None
    role: Role | None = None  # the role whose agent produced the signal or failure
    session_id: str | None = None
    detail: str = ""  # error reason, Ward report, conflict list, abort reason
    missing: tuple[str, ...] = ()  # diagrams that lag the code
    question_id: str | None = None
    answer: str | None = None
    safety_ok: bool = True
    extra: dict[str, str] = field(default_factory=dict)
    feedback: tuple[Feedback, ...] = ()  # a reviewer's or CI's, for a round of work


def route_signal(task: TaskRecord, signal: AnySignal) -> EventName:
    """Seed 002's routing table: which lifecycle event an accepted signal is."""
    if isinstance(signal, PartiallyComplete):
        return EventName.CONTINUE_ROLE
    if isinstance(signal, NeedsUserInput):
        return EventName.QUESTION_ASKED
    if isinstance(signal, NeedsRoleFollowup):
        return EventName.ROLE_FOLLOWUP
    assert isinstance(signal, Complete)
    if task.role_stack:
        return EventName.FOLLOWUP_DONE
    if task.role in BUILDING_ROLES or task.role is None:
        return EventName.CODE_COMPLETE
    if task.role is Role.SIEGEMASTER:
        return EventName.EDGE_CASES_COMPLETE
    return EventName.REVIEW_COMPLETE


def signal_event(
    task: TaskRecord,
    signal: AnySignal,
    *,
    session_id: str | None,
    at: datetime | None = None,
    question_id: str | None = None,
) -> Event:
    return Event(
        name=route_signal(task, signal),
        at=at,
        signal=signal,
        role=task.role,
        session_id=session_id,
        question_id=question_id,
    )
