"""The quest's planning phases: ChaosWhisperer, then PathSeeker, then the task slots."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from scaffold.core.effects import AskQuestion, StartAgent
from scaffold.core.events import Event
from scaffold.core.planning import (
    PLAN_TABLE,
    PlanDecision,
    PlanTransition,
    decide_planning,
    mermaid,
    planning_event_for,
)
from scaffold.core.states import EventName as E
from scaffold.errors import IllegalTransition
from scaffold.quest.model import AgentRun, PlanningState, QuestPhase
from scaffold.roles import Role
from scaffold.signals import AnySignal, parse_signal

P = QuestPhase
CH, PS = Role.CHAOSWHISPERER, Role.PATHSEEKER
NOW = datetime(2025, 1, 2, tzinfo=UTC)

_FIELDS: dict[str, dict[str, Any]] = {
    "complete": {"summary": "3 contexts, 7 observables"},
    "partially-complete": {"progress": "mapped src/", "continuationPoint": "map tests/"},
    "needs-user-input": {"question": "Who may log in?", "context": "The issue does not say."},
    "needs-role-followup": {
        "targetRole": "codeweaver",
        "reason": "r",
        "context": "c",
        "resume": False,
    },
}


def sig(role: Role, kind: str, **fields: Any) -> AnySignal:
    data = {"signal": kind, "stepId": "quest", **_FIELDS[kind], **fields}
    return parse_signal(data, role=role)


def on_signal(
    role: Role, kind: str, session: str = "s-new", question_id: str | None = None, **fields: Any
) -> Event:
    s = sig(role, kind, **fields)
    return Event(
        planning_event_for(P.PLANNING, s),
        at=NOW,
        signal=s,
        role=role,
        session_id=session,
        question_id=question_id,
    )


def state(role: Role, **fields: Any) -> PlanningState:
    return PlanningState(
        role=role,
        pending_run=AgentRun(role=role),
        agent_running=True,
        sessions={role.value: f"s-{role.value}"},
        **fields,
    )


def row_id(row: PlanTransition) -> str:
    return f"{row.source.value}-{row.name}"


ROWS = {row_id(r): r for r in PLAN_TABLE}

Setup = Callable[[], tuple[P, PlanningState, Event]]


def _phase_rows(ph: P, role: Role) -> dict[str, Setup]:
    v = ph.value
    return {
        f"{v}-question_asked": lambda: (
            ph,
            state(role),
            on_signal(role, "needs-user-input", question_id="q-1"),
        ),
        f"{v}-answer_received": lambda: (
            ph,
            PlanningState(role=role, question_id="q-1", sessions={role.value: "s-1"}),
            Event(E.ANSWER_RECEIVED, answer="admins only", question_id="q-1"),
        ),
        f"{v}-retry_on_error": lambda: (
            ph,
            state(role),
            Event(E.AGENT_FAILED, role=role, detail="crash"),
        ),
        f"{v}-retries_exhausted": lambda: (
            ph,
            state(role, attempts=3),
            Event(E.AGENT_FAILED, role=role, detail="crash"),
        ),
        f"{v}-abort_signal": lambda: (ph, state(role), Event(E.ABORT_SIGNAL, detail="abort")),
    }


SETUPS: dict[str, Setup] = {
    "requirements-requirements_locked": lambda: (
        P.REQUIREMENTS,
        state(CH),
        on_signal(CH, "complete"),
    ),
    "planning-tasks_planned": lambda: (P.PLANNING, state(PS), on_signal(PS, "complete")),
    "planning-continue_role": lambda: (
        P.PLANNING,
        state(PS),
        on_signal(PS, "partially-complete"),
    ),
    **_phase_rows(P.REQUIREMENTS, CH),
    **_phase_rows(P.PLANNING, PS),
}

EXPECTED: dict[str, tuple[P, tuple[type, ...]]] = {
    "requirements-requirements_locked": (P.PLANNING, (StartAgent,)),
    "planning-tasks_planned": (P.EXECUTING, ()),
    "planning-continue_role": (P.PLANNING, (StartAgent,)),
    "requirements-question_asked": (P.REQUIREMENTS, (AskQuestion,)),
    "requirements-answer_received": (P.REQUIREMENTS, (StartAgent,)),
    "requirements-retry_on_error": (P.REQUIREMENTS, (StartAgent,)),
    "requirements-retries_exhausted": (P.FAILED, ()),
    "requirements-abort_signal": (P.STOPPED, ()),
    "planning-question_asked": (P.PLANNING, (AskQuestion,)),
    "planning-answer_received": (P.PLANNING, (StartAgent,)),
    "planning-retry_on_error": (P.PLANNING, (StartAgent,)),
    "planning-retries_exhausted": (P.FAILED, ()),
    "planning-abort_signal": (P.STOPPED, ()),
}


def test_every_planning_row_has_a_case() -> None:
    assert len(ROWS) == len(PLAN_TABLE)
    assert set(SETUPS) == set(ROWS) == set(EXPECTED)


@pytest.mark.parametrize("rid", list(ROWS), ids=list(ROWS))
def test_planning_transition(rid: str) -> None:
    row = ROWS[rid]
    phase, planning, event = SETUPS[rid]()
    assert phase is row.source
    assert event.name is row.event
    d = decide_planning(phase, planning, event)
    target, effects = EXPECTED[rid]
    assert d.transition is row
    assert d.phase is target is row.target
    assert [type(e) for e in d.effects] == list(effects)
    for e in d.effects:
        assert getattr(e, "task_id", None) is None  # planning works on the quest
    starts = [e for e in d.effects if isinstance(e, StartAgent)]
    if starts:
        assert d.planning.pending_run == starts[0].run
        assert d.planning.role is starts[0].run.role
        assert d.planning.agent_running is False


def test_chaoswhisperer_complete_starts_pathseeker() -> None:
    d = decide_planning(P.REQUIREMENTS, state(CH), on_signal(CH, "complete", session="s-ch"))
    assert d.phase is P.PLANNING
    assert d.effects == (
        StartAgent(None, AgentRun(role=PS, kind="fresh", context="3 contexts, 7 observables")),
    )
    assert d.planning.role is PS
    assert d.planning.sessions == {"chaoswhisperer": "s-ch"}
    assert d.planning.last_summary == "3 contexts, 7 observables"
    assert d.planning.attempts == 0


def test_pathseeker_complete_moves_to_executing() -> None:
    d = decide_planning(
        P.PLANNING, state(PS, attempts=2), on_signal(PS, "complete", session="s-ps")
    )
    assert (d.phase, d.effects) == (P.EXECUTING, ())
    assert d.planning.last_summary == "3 contexts, 7 observables"
    assert (d.planning.pending_run, d.planning.agent_running, d.planning.attempts) == (
        None,
        False,
        0,
    )
    assert d.planning.sessions["pathseeker"] == "s-ps"


def test_pathseeker_continues_its_session() -> None:
    d = decide_planning(P.PLANNING, state(PS), on_signal(PS, "partially-complete", session="s-2"))
    run = d.effects[0]
    assert isinstance(run, StartAgent)
    assert (run.run.role, run.run.kind, run.run.resume_session) == (PS, "continue", "s-2")
    assert "Continue from: map tests/" in run.run.context


@pytest.mark.parametrize(("phase", "role"), [(P.REQUIREMENTS, CH), (P.PLANNING, PS)])
def test_question_then_answer_resumes_the_asking_session(phase: P, role: Role) -> None:
    d = decide_planning(
        phase, state(role), on_signal(role, "needs-user-input", session="s-q", question_id="q-9")
    )
    assert d.effects == (AskQuestion(None, "q-9"),)
    assert (d.phase, d.planning.question_id, d.planning.pending_run) == (phase, "q-9", None)
    d = decide_planning(phase, d.planning, Event(E.ANSWER_RECEIVED, answer="admins only"))
    assert d.effects == (
        StartAgent(
            None, AgentRun(role=role, resume_session="s-q", kind="answer", context="admins only")
        ),
    )
    assert d.planning.question_id is None


def test_question_needs_an_id() -> None:
    with pytest.raises(IllegalTransition):
        decide_planning(P.REQUIREMENTS, state(CH), on_signal(CH, "needs-user-input"))


@pytest.mark.parametrize("max_attempts", [1, 3])
def test_retries_then_failure(max_attempts: int) -> None:
    planning = state(PS)
    for n in range(1, max_attempts + 1):
        d = decide_planning(
            P.PLANNING, planning, Event(E.AGENT_FAILED, detail=f"crash {n}"), max_attempts
        )
        assert d.transition.name == "retry_on_error"
        assert d.phase is P.PLANNING
        run = d.effects[0]
        assert isinstance(run, StartAgent)
        assert (run.run.kind, run.run.resume_session) == ("retry", "s-pathseeker")
        assert f"crash {n}" in run.run.context
        assert d.planning.attempts == n
        planning = d.planning
    d = decide_planning(P.PLANNING, planning, Event(E.AGENT_FAILED, detail="x"), max_attempts)
    assert d.transition.name == "retries_exhausted"
    assert (d.phase, d.effects) == (P.FAILED, ())
    assert (d.planning.attempts, d.planning.pending_run) == (max_attempts + 1, None)


@pytest.mark.parametrize(("phase", "role"), [(P.REQUIREMENTS, CH), (P.PLANNING, PS)])
def test_abort_stops_planning(phase: P, role: Role) -> None:
    d = decide_planning(phase, state(role), Event(E.ABORT_SIGNAL, detail="aborted"))
    assert (d.phase, d.effects) == (P.STOPPED, ())
    assert (d.planning.pending_run, d.planning.agent_running) == (None, False)


def test_chaoswhisperer_cannot_continue_itself() -> None:
    with pytest.raises(IllegalTransition) as info:
        decide_planning(P.REQUIREMENTS, state(CH), on_signal(PS, "partially-complete"))
    assert (info.value.state, info.value.event) == ("requirements", "continue_role")


@pytest.mark.parametrize("phase", [P.EXECUTING, P.DONE, P.STOPPED, P.FAILED])
@pytest.mark.parametrize("event", [E.CODE_COMPLETE, E.AGENT_FAILED, E.ABORT_SIGNAL])
def test_no_planning_moves_after_planning(phase: P, event: E) -> None:
    with pytest.raises(IllegalTransition):
        decide_planning(phase, state(PS), Event(event))


def test_planning_event_for_each_signal() -> None:
    assert planning_event_for(P.PLANNING, sig(PS, "complete")) is E.CODE_COMPLETE
    assert planning_event_for(P.PLANNING, sig(PS, "partially-complete")) is E.CONTINUE_ROLE
    assert planning_event_for(P.PLANNING, sig(PS, "needs-user-input")) is E.QUESTION_ASKED
    with pytest.raises(IllegalTransition) as info:
        planning_event_for(P.PLANNING, sig(PS, "needs-role-followup"))
    assert info.value.state == "planning"


def test_planning_mermaid_draws_every_row() -> None:
    text = mermaid()
    assert text.startswith("stateDiagram-v2\n    [*] --> requirements\n")
    for row in PLAN_TABLE:
        assert f"{row.source.value} --> {row.target.value}: {row.name}" in text
    assert "planning --> failed: retries_exhausted [attempts used up]" in text


def test_decision_type() -> None:
    d = decide_planning(P.PLANNING, state(PS), on_signal(PS, "complete"))
    assert isinstance(d, PlanDecision)
