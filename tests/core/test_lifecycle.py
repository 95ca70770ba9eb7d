"""The task lifecycle table, row by row, and whole paths through it.

Every row of ``lifecycle.TABLE`` is exercised with a record that satisfies its guard;
every (state, event) pair the table does not list must be refused; the table checker
must refuse broken tables; and the scenarios walk the paths of a task from selection to cleanup,
routing real signal models through ``route_signal`` / ``signal_event``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from scaffold.core.effects import (
    AskQuestion,
    CreateWorktree,
    DeleteBranch,
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
from scaffold.core.events import Event, route_signal, signal_event
from scaffold.core.lifecycle import (
    TABLE,
    Decision,
    Limits,
    MachineDefinitionError,
    Transition,
    decide,
    mermaid,
    validate_table,
)
from scaffold.core.planning import planning_event_for
from scaffold.core.states import EventName as E
from scaffold.core.states import Lifecycle as S
from scaffold.core.states import Stage
from scaffold.errors import IllegalTransition, SignalError
from scaffold.quest.model import (
    AgentRun,
    CheckFailure,
    Feedback,
    PullRequest,
    QuestPhase,
    ReviewComment,
    RoleFrame,
    TaskRecord,
)
from scaffold.roles import ALLOWED_SIGNALS, BUILDING_ROLES, Role
from scaffold.signals import SIGNAL_TYPES, AnySignal, parse_signal

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
TID = "TASK-1"
PR = PullRequest(branch="scaffold/task-1", base="main", number=7)

CW, PS, SM, LB, SP, CH = (
    Role.CODEWEAVER,
    Role.PATHSEEKER,
    Role.SIEGEMASTER,
    Role.LAWBRINGER,
    Role.SPIRITMENDER,
    Role.CHAOSWHISPERER,
)

_PAYLOAD_DEFAULTS: dict[str, dict[str, Any]] = {
    "complete": {"summary": "implemented the login form"},
    "partially-complete": {
        "progress": "wrote the model",
        "continuationPoint": "wire the view in app/views.py",
    },
    "needs-user-input": {"question": "Which database?", "context": "Both are configured."},
    "needs-role-followup": {
        "targetRole": "codeweaver",
        "reason": "an implementation gap",
        "context": "login accepts an empty password",
        "resume": True,
    },
}


# --------------------------------------------------------------------------- builders


def payload(kind: str, **fields: Any) -> dict[str, Any]:
    return {"signal": kind, "stepId": TID, **_PAYLOAD_DEFAULTS[kind], **fields}


def sig(role: Role, kind: str, **fields: Any) -> AnySignal:
    """A real signal model, validated for ``role`` exactly as the signal server does."""
    return parse_signal(payload(kind, **fields), role=role)


def task(state: S, **fields: Any) -> TaskRecord:
    return TaskRecord(id=TID, title="Add login", state=state, **fields)


def session_of(role: Role) -> str:
    return f"s-{role.value}"


def running(role: Role, state: S | None = None, **fields: Any) -> TaskRecord:
    """A task whose ``role`` agent is running, in the state that role runs in."""
    where = state or (S.PROCESSING if role in BUILDING_ROLES else S.TEST_VALIDATION)
    sessions = {role.value: session_of(role), **fields.pop("sessions", {})}
    fields.setdefault("worktree", f"/wt/{TID.lower()}")  # an agent runs only in one
    return task(
        where,
        role=role,
        pending_run=AgentRun(role=role),
        agent_running=True,
        sessions=sessions,
        **fields,
    )


def on_signal(
    t: TaskRecord, kind: str, question_id: str | None = None, **fields: Any
) -> tuple[TaskRecord, Event]:
    assert t.role is not None
    s = sig(t.role, kind, **fields)
    ev = signal_event(t, s, session_id=session_of(t.role), at=NOW, question_id=question_id)
    return t, ev


def ev(name: E, **fields: Any) -> Event:
    return Event(name, at=NOW, **fields)


def transitions_from(state: S) -> list[Transition]:
    return [r for r in TABLE if r.source is state]


def allowed_events(state: S) -> list[E]:
    return sorted({r.event for r in TABLE if r.source is state})


def kinds(effects: tuple[object, ...] | list[object]) -> list[type]:
    return [type(e) for e in effects]


def row_id(row: Transition) -> str:
    same = [r for r in TABLE if r.source is row.source and r.name == row.name]
    tail = f"-{row.target.value}" if len(same) > 1 else ""
    return f"{row.source.value}-{row.name}{tail}"


ROWS = {row_id(r): r for r in TABLE}


def changes(key: str = "review:1", by: str = "ann") -> Feedback:
    comment = ReviewComment(id=11, path="app.py", line=3, side="RIGHT", body="name it clearly")
    return Feedback(key=key, kind="review", by=by, at=NOW, body="Rename x", comments=(comment,))


def failed_check(key: str = "check:test@abc") -> Feedback:
    check = CheckFailure(name="test", conclusion="failure", head_sha="abc", summary="1 failed")
    return Feedback(key=key, kind="ci", by="github-actions", at=NOW, check=check)


def at_pr(state: S = S.PR_CREATED, **fields: Any) -> TaskRecord:
    fields.setdefault("sessions", {"codeweaver": "s-cw"})
    return task(state, pr=PR, worktree="/wt/task-1", **fields)


# --------------------------------------------------------------------------- one row each

Setup = Callable[[], tuple[TaskRecord, Event]]

SETUPS: dict[str, Setup] = {
    "Idle-deps_resolved": lambda: (task(S.IDLE), ev(E.DEPS_RESOLVED)),
    "Idle-retry_requested": lambda: (task(S.IDLE, outcome="aborted"), ev(E.RETRY_REQUESTED)),
    "Ready-task_selected": lambda: (task(S.READY), ev(E.TASK_SELECTED)),
    "Ready-abort_signal": lambda: (task(S.READY), ev(E.ABORT_SIGNAL, detail="aborted by alice")),
    "Ready-safety_limit_hit": lambda: (
        task(S.READY),
        ev(E.SAFETY_LIMIT_HIT, detail="cost budget of $5.00 spent"),
    ),
    "Allocating-worktree_created": lambda: (
        task(S.ALLOCATING),
        ev(E.WORKTREE_CREATED, extra={"worktree": "/wt/task-1", "branch": "scaffold/task-1"}),
    ),
    "Allocating-allocation_failed": lambda: (
        task(S.ALLOCATING),
        ev(E.ALLOCATION_FAILED, detail="disk full"),
    ),
    "Processing-code_complete": lambda: on_signal(running(CW), "complete"),
    "Processing-question_asked": lambda: on_signal(
        running(CW), "needs-user-input", question_id="q-1"
    ),
    "Processing-answer_received": lambda: (
        task(S.PROCESSING, role=CW, question_id="q-1", sessions={"codeweaver": "s-cw"}),
        ev(E.ANSWER_RECEIVED, answer="PostgreSQL", question_id="q-1"),
    ),
    "TestValidation-edge_cases_complete": lambda: on_signal(
        running(SM, stage=Stage.EDGE_CASES), "complete"
    ),
    "TestValidation-review_complete": lambda: on_signal(
        running(LB, stage=Stage.REVIEW), "complete"
    ),
    "TestValidation-ward_passed": lambda: (
        task(S.TEST_VALIDATION, stage=Stage.IMPLEMENT),
        ev(E.WARD_PASSED),
    ),
    "TestValidation-tests_passed": lambda: (
        task(S.TEST_VALIDATION, stage=Stage.REVIEW),
        ev(E.WARD_PASSED),
    ),
    "TestValidation-ward_failed": lambda: (
        task(S.TEST_VALIDATION),
        ev(E.WARD_FAILED, detail="ruff: E501 line too long"),
    ),
    "TestValidation-ward_exhausted": lambda: (
        task(S.TEST_VALIDATION, ward_fixes=3),
        ev(E.WARD_FAILED, detail="pytest: 1 failed"),
    ),
    "DiagramCheck-diagrams_synced": lambda: (task(S.DIAGRAM_CHECK), ev(E.DIAGRAMS_SYNCED)),
    "DiagramCheck-diagrams_missing": lambda: (
        task(S.DIAGRAM_CHECK),
        ev(E.DIAGRAMS_MISSING, missing=("docs/diagrams/02-architecture.md",)),
    ),
    "Blocked-diagrams_updated": lambda: (
        task(S.BLOCKED, missing_diagrams=("docs/diagrams/02-architecture.md",)),
        ev(E.DIAGRAMS_UPDATED),
    ),
    "Blocked-retry_requested-Processing": lambda: (
        task(S.BLOCKED, role=CW, blocked_reason="Codeweaver failed 4 times", worktree="/wt/t"),
        ev(E.RETRY_REQUESTED),
    ),
    "Blocked-retry_requested-TestValidation": lambda: (
        task(S.BLOCKED, role=SM, blocked_reason="Siegemaster failed 4 times", worktree="/wt/t"),
        ev(E.RETRY_REQUESTED),
    ),
    "Blocked-retry_requested-Allocating": lambda: (
        task(S.BLOCKED, blocked_reason="could not create the worktree: no commits"),
        ev(E.RETRY_REQUESTED),
    ),
    "PR_Created-pr_approved": lambda: (
        task(S.PR_CREATED, pr=PR),
        ev(E.PR_APPROVED, detail="alice"),
    ),
    "PR_Created-pr_rejected": lambda: (task(S.PR_CREATED, pr=PR), ev(E.PR_REJECTED)),
    "Blocked-pr_rejected": lambda: (task(S.BLOCKED, pr=PR), ev(E.PR_REJECTED)),
    "Merging-merge_complete": lambda: (
        task(S.MERGING, pr=PR),
        ev(E.MERGE_COMPLETE, detail="0123456789abcdef"),
    ),
    "Merging-merge_conflict": lambda: (task(S.MERGING), ev(E.MERGE_CONFLICT, detail="app.py")),
    "Merging-conflict_exhausted": lambda: (
        task(S.MERGING, conflict_fixes=2),
        ev(E.MERGE_CONFLICT, detail="app.py"),
    ),
    "Cleanup-backlog_synced": lambda: (task(S.CLEANUP, outcome="merged"), ev(E.BACKLOG_SYNCED)),
    # Processing runs a building role; TestValidation a validating one.
    "Processing-continue_role": lambda: on_signal(running(CW), "partially-complete"),
    "TestValidation-continue_role": lambda: on_signal(running(SM), "partially-complete"),
    "Processing-role_followup-Processing": lambda: on_signal(
        running(CW), "needs-role-followup", targetRole="pathseeker"
    ),
    "Processing-role_followup-TestValidation": lambda: on_signal(
        running(CW), "needs-role-followup", targetRole="siegemaster"
    ),
    "TestValidation-role_followup-Processing": lambda: on_signal(
        running(SM), "needs-role-followup", targetRole="codeweaver"
    ),
    "TestValidation-role_followup-TestValidation": lambda: on_signal(
        running(SM), "needs-role-followup", targetRole="lawbringer"
    ),
    "Processing-followup_done-Processing": lambda: on_signal(
        running(SP, role_stack=(RoleFrame(role=CW, session_id="s-cw", reason="lint"),)),
        "complete",
    ),
    "Processing-followup_done-TestValidation": lambda: on_signal(
        running(CW, role_stack=(RoleFrame(role=SM, session_id="s-sm", reason="gap"),)),
        "complete",
    ),
    "TestValidation-followup_done-Processing": lambda: on_signal(
        running(LB, role_stack=(RoleFrame(role=CW, session_id="s-cw", reason="review"),)),
        "complete",
    ),
    "TestValidation-followup_done-TestValidation": lambda: on_signal(
        running(LB, role_stack=(RoleFrame(role=SM, session_id="s-sm", reason="review"),)),
        "complete",
    ),
    "Processing-retry_on_error": lambda: (
        running(CW),
        ev(E.AGENT_FAILED, role=CW, session_id="s-cw-2", detail="exited without a signal"),
    ),
    "TestValidation-retry_on_error": lambda: (
        running(SM),
        ev(E.AGENT_FAILED, role=SM, session_id="s-sm-2", detail="stuck for 600 s"),
    ),
    "Processing-retries_exhausted": lambda: (
        running(CW, attempts=3),
        ev(E.AGENT_FAILED, role=CW, detail="exited without a signal"),
    ),
    "TestValidation-retries_exhausted": lambda: (
        running(LB, attempts=3),
        ev(E.AGENT_FAILED, role=LB, detail="stuck for 600 s"),
    ),
    "Allocating-abort_signal": lambda: (task(S.ALLOCATING), ev(E.ABORT_SIGNAL)),
    "Processing-abort_signal": lambda: (running(CW), ev(E.ABORT_SIGNAL, detail="aborted")),
    "TestValidation-abort_signal": lambda: (running(SM), ev(E.ABORT_SIGNAL, detail="aborted")),
    "DiagramCheck-abort_signal": lambda: (task(S.DIAGRAM_CHECK), ev(E.ABORT_SIGNAL)),
    "Blocked-abort_signal": lambda: (task(S.BLOCKED), ev(E.ABORT_SIGNAL)),
    "PR_Created-abort_signal": lambda: (task(S.PR_CREATED, pr=PR), ev(E.ABORT_SIGNAL)),
    "PR_Created-changes_requested": lambda: (
        at_pr(),
        ev(E.CHANGES_REQUESTED, feedback=(changes(),)),
    ),
    "PR_Created-ci_failed": lambda: (at_pr(), ev(E.CI_FAILED, feedback=(failed_check(),))),
    "Merging-changes_requested": lambda: (
        at_pr(S.MERGING),
        ev(E.CHANGES_REQUESTED, feedback=(changes(),)),
    ),
    "Merging-ci_failed": lambda: (at_pr(S.MERGING), ev(E.CI_FAILED, feedback=(failed_check(),))),
    "PR_Created-changes_over_bound": lambda: (
        at_pr(review_rounds=5),
        ev(E.CHANGES_REQUESTED, feedback=(changes(),)),
    ),
    "PR_Created-ci_failure_over_bound": lambda: (
        at_pr(ci_fixes=2),
        ev(E.CI_FAILED, feedback=(failed_check(),)),
    ),
    "Merging-changes_over_bound": lambda: (
        at_pr(S.MERGING, review_rounds=5),
        ev(E.CHANGES_REQUESTED, feedback=(changes(),)),
    ),
    "Merging-ci_failure_over_bound": lambda: (
        at_pr(S.MERGING, ci_fixes=2),
        ev(E.CI_FAILED, feedback=(failed_check(),)),
    ),
    **{
        f"{state.value}-{what}_kept": (
            lambda state=state, name=name, item=item: (
                at_pr(state),
                ev(name, feedback=(item(),)),
            )
        )
        for state in (S.PROCESSING, S.TEST_VALIDATION, S.DIAGRAM_CHECK, S.BLOCKED)
        for name, what, item in (
            (E.CHANGES_REQUESTED, "changes", changes),
            (E.CI_FAILED, "ci_failure", failed_check),
        )
    },
}

_CLEANUP = (SyncBacklog, RemoveWorktree, DeleteBranch)
_ABORT_IDLE_AGENT = (SyncBacklog, RemoveWorktree)  # the branch is kept after an abort
_ABORT_RUNNING_AGENT = (StopAgent, SyncBacklog, RemoveWorktree)

EXPECTED_EFFECTS: dict[str, tuple[type, ...]] = {
    "Idle-deps_resolved": (),
    "Idle-retry_requested": (),
    "Ready-task_selected": (CreateWorktree,),
    "Ready-abort_signal": (),
    "Ready-safety_limit_hit": (),
    "Allocating-worktree_created": (StartAgent,),
    "Allocating-allocation_failed": (ReportBlocked,),
    "Processing-code_complete": (RunWard,),
    "Processing-question_asked": (AskQuestion,),
    "Processing-answer_received": (StartAgent,),
    "TestValidation-edge_cases_complete": (RunWard,),
    "TestValidation-review_complete": (RunDiagramCheck,),
    "TestValidation-ward_passed": (StartAgent,),
    "TestValidation-tests_passed": (RunDiagramCheck,),
    "TestValidation-ward_failed": (StartAgent,),
    "TestValidation-ward_exhausted": (ReportBlocked,),
    "DiagramCheck-diagrams_synced": (OpenPullRequest,),
    "DiagramCheck-diagrams_missing": (ReportBlocked,),
    "Blocked-diagrams_updated": (StartAgent,),
    "Blocked-retry_requested-Processing": (StartAgent,),
    "Blocked-retry_requested-TestValidation": (StartAgent,),
    "Blocked-retry_requested-Allocating": (CreateWorktree,),
    "PR_Created-pr_approved": (MergePullRequest,),
    "PR_Created-pr_rejected": _CLEANUP,
    "Blocked-pr_rejected": _CLEANUP,
    "Merging-merge_complete": _CLEANUP,
    "Merging-merge_conflict": (StartAgent,),
    "Merging-conflict_exhausted": (ReportBlocked,),
    "Cleanup-backlog_synced": (),
    "Processing-continue_role": (StartAgent,),
    "TestValidation-continue_role": (StartAgent,),
    "Processing-role_followup-Processing": (StopAgent, StartAgent),
    "Processing-role_followup-TestValidation": (StopAgent, StartAgent),
    "TestValidation-role_followup-Processing": (StopAgent, StartAgent),
    "TestValidation-role_followup-TestValidation": (StopAgent, StartAgent),
    "Processing-followup_done-Processing": (StartAgent,),
    "Processing-followup_done-TestValidation": (StartAgent,),
    "TestValidation-followup_done-Processing": (StartAgent,),
    "TestValidation-followup_done-TestValidation": (StartAgent,),
    "Processing-retry_on_error": (StartAgent,),
    "TestValidation-retry_on_error": (StartAgent,),
    "Processing-retries_exhausted": (ReportBlocked,),
    "TestValidation-retries_exhausted": (ReportBlocked,),
    "Allocating-abort_signal": _ABORT_IDLE_AGENT,
    "Processing-abort_signal": _ABORT_RUNNING_AGENT,
    "TestValidation-abort_signal": _ABORT_RUNNING_AGENT,
    "DiagramCheck-abort_signal": _ABORT_IDLE_AGENT,
    "Blocked-abort_signal": _ABORT_IDLE_AGENT,
    "PR_Created-abort_signal": _ABORT_IDLE_AGENT,
    "PR_Created-changes_requested": (SyncBranch, StartAgent),
    "PR_Created-ci_failed": (SyncBranch, StartAgent),
    "Merging-changes_requested": (SyncBranch, StartAgent),
    "Merging-ci_failed": (SyncBranch, StartAgent),
    "PR_Created-changes_over_bound": (ReportBlocked,),
    "PR_Created-ci_failure_over_bound": (ReportBlocked,),
    "Merging-changes_over_bound": (ReportBlocked,),
    "Merging-ci_failure_over_bound": (ReportBlocked,),
    **{
        f"{state.value}-{what}_kept": ()
        for state in (S.PROCESSING, S.TEST_VALIDATION, S.DIAGRAM_CHECK, S.BLOCKED)
        for what in ("changes", "ci_failure")
    },
}

# The role each StartAgent of a row must start (rows that start one).
EXPECTED_START: dict[str, tuple[Role, str]] = {
    "Allocating-worktree_created": (CW, "fresh"),
    "Processing-answer_received": (CW, "answer"),
    "TestValidation-ward_passed": (SM, "edge_cases"),
    "TestValidation-ward_failed": (SP, "ward_fix"),
    "Blocked-diagrams_updated": (CW, "diagram_fix"),
    "Blocked-retry_requested-Processing": (CW, "retry"),
    "Blocked-retry_requested-TestValidation": (SM, "retry"),
    "Merging-merge_conflict": (CW, "conflict_fix"),
    "Processing-continue_role": (CW, "continue"),
    "TestValidation-continue_role": (SM, "continue"),
    "Processing-role_followup-Processing": (PS, "followup"),
    "Processing-role_followup-TestValidation": (SM, "followup"),
    "TestValidation-role_followup-Processing": (CW, "followup"),
    "TestValidation-role_followup-TestValidation": (LB, "followup"),
    "Processing-followup_done-Processing": (CW, "resume_after_followup"),
    "Processing-followup_done-TestValidation": (SM, "resume_after_followup"),
    "TestValidation-followup_done-Processing": (CW, "resume_after_followup"),
    "TestValidation-followup_done-TestValidation": (SM, "resume_after_followup"),
    "Processing-retry_on_error": (CW, "retry"),
    "TestValidation-retry_on_error": (SM, "retry"),
    "PR_Created-changes_requested": (CW, "review_fix"),
    "PR_Created-ci_failed": (SP, "ci_fix"),
    "Merging-changes_requested": (CW, "review_fix"),
    "Merging-ci_failed": (SP, "ci_fix"),
}


def test_every_row_has_a_setup_and_expected_effects() -> None:
    assert len(ROWS) == len(TABLE), "row ids must be unique"
    assert set(SETUPS) == set(ROWS)
    assert set(EXPECTED_EFFECTS) == set(ROWS)
    assert set(EXPECTED_START) == {k for k, v in EXPECTED_EFFECTS.items() if StartAgent in v}


@pytest.mark.parametrize("rid", list(ROWS), ids=list(ROWS))
def test_transition(rid: str) -> None:
    row = ROWS[rid]
    before, event = SETUPS[rid]()
    assert before.state is row.source
    assert event.name is row.event
    if row.guard is not None:
        assert row.guard.test(before, event, Limits())

    decision = decide(before, event)

    assert decision.transition is row
    assert decision.task.state is row.target
    assert kinds(decision.effects) == list(EXPECTED_EFFECTS[rid])
    assert all(getattr(e, "task_id", TID) == TID for e in decision.effects)
    starts = [e for e in decision.effects if isinstance(e, StartAgent)]
    if starts:
        role, kind = EXPECTED_START[rid]
        assert (starts[0].run.role, starts[0].run.kind) == (role, kind)
        # The record says what the runtime owes it, so a restart can redo it.
        assert decision.task.pending_run == starts[0].run
        assert decision.task.role is role
        assert decision.task.agent_running is False
    assert before.state is row.source, "decide must not change its input"


def test_every_row_is_exercised() -> None:
    chosen = {id(decide(*SETUPS[rid]()).transition) for rid in ROWS}
    missing = [row_id(r) for r in TABLE if id(r) not in chosen]
    assert not missing, f"rows no setup reaches: {missing}"


# --------------------------------------------------------------------------- refusals

_LISTED = {(r.source, r.event) for r in TABLE}
ILLEGAL = [(s, e) for s in S for e in E if (s, e) not in _LISTED]


@pytest.mark.parametrize(
    ("state", "event"), ILLEGAL, ids=[f"{s.value}-{e.value}" for s, e in ILLEGAL]
)
def test_unlisted_pair_is_illegal(state: S, event: E) -> None:
    with pytest.raises(IllegalTransition) as info:
        decide(task(state, role=CW), ev(event))
    assert info.value.state == state.value
    assert info.value.event == event.value
    assert state.value in str(info.value)
    assert event.value in str(info.value)


def test_illegal_pairs_are_most_of_the_grid() -> None:
    assert len(ILLEGAL) + len(_LISTED) == len(S) * len(E)
    assert len(ILLEGAL) > 150


def test_no_guard_holding_is_illegal_too() -> None:
    with pytest.raises(IllegalTransition) as info:
        decide(task(S.READY), ev(E.TASK_SELECTED, safety_ok=False))
    assert (info.value.state, info.value.event) == ("Ready", "task_selected")
    assert "safety_ok" in info.value.detail


def test_stale_answer_does_not_start_a_second_agent() -> None:
    busy = running(CW)
    with pytest.raises(IllegalTransition):
        decide(busy, ev(E.ANSWER_RECEIVED, answer="x", question_id="q-old"))
    parked = task(S.PROCESSING, role=CW, question_id="q-2")
    with pytest.raises(IllegalTransition):
        decide(parked, ev(E.ANSWER_RECEIVED, answer="x", question_id="q-1"))


def test_question_without_id_is_refused() -> None:
    t, e = on_signal(running(CW), "needs-user-input")
    with pytest.raises(IllegalTransition):
        decide(t, e)


def test_followup_event_without_followup_signal_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        decide(running(CW), ev(E.ROLE_FOLLOWUP))


# --------------------------------------------------------------------------- table checks


def _noop(t: TaskRecord, e: Event, lim: Limits) -> tuple[dict[str, Any], list[Any]]:
    return {}, []


def test_real_table_is_valid() -> None:
    validate_table(TABLE)


def test_unreachable_state_is_refused() -> None:
    rows = [r for r in TABLE if r.target is not S.MERGING]
    with pytest.raises(MachineDefinitionError, match=r"unreachable states.*Merging"):
        validate_table(rows)


def test_trap_state_is_refused() -> None:
    rows = [r for r in TABLE if r.source is not S.CLEANUP]
    with pytest.raises(MachineDefinitionError, match=r"trap states.*Cleanup"):
        validate_table(rows)


def test_two_unguarded_rows_sharing_source_and_event_are_refused() -> None:
    twin = Transition("deps_twice", S.IDLE, E.DEPS_RESOLVED, S.IDLE, _noop)
    with pytest.raises(MachineDefinitionError, match="all need guards"):
        validate_table([*TABLE, twin])


def test_guarded_and_unguarded_rows_sharing_source_and_event_are_refused() -> None:
    guarded = next(r for r in TABLE if r.name == "task_selected")
    unguarded = replace(guarded, name="task_selected_anyway", guard=None)
    with pytest.raises(MachineDefinitionError, match="all need guards"):
        validate_table([*TABLE, unguarded])


def test_two_rows_with_the_same_guard_are_refused() -> None:
    row = next(r for r in TABLE if r.name == "ward_failed")
    with pytest.raises(MachineDefinitionError, match="same guard"):
        validate_table([*TABLE, replace(row, target=S.BLOCKED)])


def test_table_queries() -> None:
    assert {r.name for r in transitions_from(S.CLEANUP)} == {"backlog_synced"}
    assert allowed_events(S.PR_CREATED) == sorted(
        [E.PR_APPROVED, E.PR_REJECTED, E.ABORT_SIGNAL, E.CHANGES_REQUESTED, E.CI_FAILED]
    )
    assert allowed_events(S.IDLE) == sorted([E.DEPS_RESOLVED, E.RETRY_REQUESTED])


def test_mermaid_draws_every_row() -> None:
    text = mermaid()
    assert text.startswith("stateDiagram-v2\n    [*] --> Idle\n")
    for row in TABLE:
        assert f"{row.source.value} --> {row.target.value}: {row.label}" in text
    assert text.endswith("\n")


# --------------------------------------------------------------------------- routing

# (role, signal) -> lifecycle event for a task role, None where the role may not send it.
ROUTE: dict[tuple[Role, str], E | None] = {
    (PS, "complete"): E.CODE_COMPLETE,
    (PS, "partially-complete"): E.CONTINUE_ROLE,
    (PS, "needs-user-input"): E.QUESTION_ASKED,
    (PS, "needs-role-followup"): E.ROLE_FOLLOWUP,
    (CW, "complete"): E.CODE_COMPLETE,
    (CW, "partially-complete"): E.CONTINUE_ROLE,
    (CW, "needs-user-input"): E.QUESTION_ASKED,
    (CW, "needs-role-followup"): E.ROLE_FOLLOWUP,
    (SM, "complete"): E.EDGE_CASES_COMPLETE,
    (SM, "partially-complete"): E.CONTINUE_ROLE,
    (SM, "needs-user-input"): None,
    (SM, "needs-role-followup"): E.ROLE_FOLLOWUP,
    (LB, "complete"): E.REVIEW_COMPLETE,
    (LB, "partially-complete"): None,
    (LB, "needs-user-input"): None,
    (LB, "needs-role-followup"): E.ROLE_FOLLOWUP,
    (SP, "complete"): E.CODE_COMPLETE,
    (SP, "partially-complete"): E.CONTINUE_ROLE,
    (SP, "needs-user-input"): E.QUESTION_ASKED,
    (SP, "needs-role-followup"): E.ROLE_FOLLOWUP,
    # ChaosWhisperer works on the quest, not a task: planning routes its signals.
    (CH, "complete"): E.CODE_COMPLETE,
    (CH, "partially-complete"): None,
    (CH, "needs-user-input"): E.QUESTION_ASKED,
    (CH, "needs-role-followup"): None,
}
ROUTE_CASES = [(r, k) for r in Role for k in SIGNAL_TYPES]


def test_route_table_covers_every_role_and_signal() -> None:
    assert set(ROUTE) == set(ROUTE_CASES)
    for (role, kind), event in ROUTE.items():
        assert (event is not None) == (kind in ALLOWED_SIGNALS[role])


@pytest.mark.parametrize(
    ("role", "kind"), ROUTE_CASES, ids=[f"{r.value}-{k}" for r, k in ROUTE_CASES]
)
def test_signal_routing(role: Role, kind: str) -> None:
    expected = ROUTE[(role, kind)]
    if expected is None:
        with pytest.raises(SignalError) as info:
            sig(role, kind)
        assert info.value.field == "signal"
        assert role.display in info.value.reason
        return
    signal = sig(role, kind)
    if role is CH:
        assert planning_event_for(QuestPhase.REQUIREMENTS, signal) is expected
        return
    t = running(role)
    assert route_signal(t, signal) is expected
    event = signal_event(t, signal, session_id="s-new", at=NOW, question_id="q-7")
    assert (event.name, event.role, event.session_id, event.signal) == (
        expected,
        role,
        "s-new",
        signal,
    )
    # The routed event is one the table accepts in the state the role runs in.
    decision = decide(t, event)
    assert decision.transition.event is expected
    assert decision.task.signals[-1].signal == signal.model_dump()
    assert decision.task.sessions[role.value] == "s-new"


@pytest.mark.parametrize("role", [PS, CW, SM, LB, SP], ids=lambda r: r.value)
def test_complete_under_a_pending_frame_is_followup_done(role: Role) -> None:
    frame = RoleFrame(role=CW if role is not CW else SM, session_id="s-x", reason="r")
    t = running(role, role_stack=(frame,))
    assert route_signal(t, sig(role, "complete")) is E.FOLLOWUP_DONE


# --------------------------------------------------------------------------- scenarios


class Walk:
    """Feeds events to one task and keeps the decisions, as the runtime would."""

    def __init__(self, start: TaskRecord, limits: Limits | None = None) -> None:
        self.task = start
        self.limits = limits or Limits()
        self.log: list[Decision] = []

    def send(self, event: Event) -> Decision:
        decision = decide(self.task, event, self.limits)
        self.task = decision.task
        self.log.append(decision)
        return decision

    def event(self, name: E, **fields: Any) -> Decision:
        return self.send(ev(name, **fields))

    def agent_started(self) -> None:
        """The runtime started the owed run (what it records before waiting on it)."""
        self.task = self.task.model_copy(update={"agent_running": True})

    def signal(
        self, kind: str, session: str, question_id: str | None = None, **fields: Any
    ) -> Decision:
        assert self.task.role is not None, "no role is running"
        s = sig(self.task.role, kind, **fields)
        return self.send(
            signal_event(self.task, s, session_id=session, at=NOW, question_id=question_id)
        )

    def fail(self, detail: str = "exited without a signal") -> Decision:
        return self.event(E.AGENT_FAILED, role=self.task.role, detail=detail)


def started(decision: Decision) -> AgentRun:
    runs = [e.run for e in decision.effects if isinstance(e, StartAgent)]
    assert len(runs) == 1, decision.effects
    return runs[0]


def to_processing(limits: Limits | None = None) -> Walk:
    w = Walk(task(S.IDLE), limits)
    w.event(E.DEPS_RESOLVED)
    w.event(E.TASK_SELECTED)
    w.event(E.WORKTREE_CREATED, extra={"worktree": "/wt/task-1", "branch": "scaffold/task-1"})
    w.agent_started()
    return w


def test_happy_path() -> None:
    w = Walk(task(S.IDLE))
    d = w.event(E.DEPS_RESOLVED)
    assert (d.task.state, d.effects) == (S.READY, ())

    d = w.event(E.TASK_SELECTED)
    assert d.task.state is S.ALLOCATING
    assert d.effects == (CreateWorktree(TID),)
    assert d.task.started_at == NOW

    d = w.event(E.WORKTREE_CREATED, extra={"worktree": "/wt/task-1", "branch": "scaffold/task-1"})
    assert d.task.state is S.PROCESSING
    assert d.effects == (StartAgent(TID, AgentRun(role=CW, kind="fresh")),)
    assert (d.task.worktree, d.task.branch, d.task.stage) == (
        "/wt/task-1",
        "scaffold/task-1",
        Stage.IMPLEMENT,
    )
    w.agent_started()

    d = w.signal("complete", "s-cw", summary="login form and its tests")
    assert d.transition.name == "code_complete"
    assert (d.task.state, d.effects) == (S.TEST_VALIDATION, (RunWard(TID),))
    assert d.task.sessions == {"codeweaver": "s-cw"}
    assert d.task.last_summary == "login form and its tests"
    assert (d.task.role, d.task.pending_run, d.task.agent_running) == (None, None, False)

    d = w.event(E.WARD_PASSED)
    assert d.transition.name == "ward_passed"
    assert d.task.state is S.TEST_VALIDATION
    run = started(d)
    assert (run.role, run.kind, run.context) == (SM, "edge_cases", "login form and its tests")
    assert d.task.stage is Stage.EDGE_CASES
    w.agent_started()

    d = w.signal("complete", "s-sm", summary="added 4 edge cases")
    assert d.transition.name == "edge_cases_complete"
    assert (d.task.state, d.effects) == (S.TEST_VALIDATION, (RunWard(TID),))

    d = w.event(E.WARD_PASSED)
    run = started(d)
    assert (d.task.state, run.role, run.kind, d.task.stage) == (
        S.TEST_VALIDATION,
        LB,
        "review",
        Stage.REVIEW,
    )
    w.agent_started()

    d = w.signal("complete", "s-lb", summary="looks good")
    assert d.transition.name == "review_complete"
    assert (d.task.state, d.effects) == (S.DIAGRAM_CHECK, (RunDiagramCheck(TID),))

    d = w.event(E.DIAGRAMS_SYNCED)
    assert (d.task.state, d.effects) == (S.PR_CREATED, (OpenPullRequest(TID),))
    w.task = w.task.model_copy(update={"pr": PR})  # the runtime records the PR it opened

    d = w.event(E.PR_APPROVED, detail="alice")
    assert (d.task.state, d.effects) == (S.MERGING, (MergePullRequest(TID),))
    assert d.task.pr is not None
    assert d.task.pr.approved_by == "alice"

    d = w.event(E.MERGE_COMPLETE, detail="0123456789abcdef")
    assert d.task.state is S.CLEANUP
    assert kinds(d.effects) == [SyncBacklog, RemoveWorktree, DeleteBranch]
    sync = d.effects[0]
    assert isinstance(sync, SyncBacklog)
    assert sync.status == "Done"
    assert sync.final_summary == "login form and its tests"
    assert "Merged scaffold/task-1 as 0123456789ab" in sync.notes
    assert "Codeweaver, Lawbringer, Siegemaster" in sync.notes
    assert d.task.outcome == "merged"
    assert d.task.pr is not None
    assert (d.task.pr.state, d.task.pr.merge_sha) == ("merged", "0123456789abcdef")

    d = w.event(E.BACKLOG_SYNCED)
    assert (d.task.state, d.effects) == (S.IDLE, ())
    assert (d.task.worktree, d.task.finished_at) == (None, NOW)

    assert [x.transition.name for x in w.log] == [
        "deps_resolved",
        "task_selected",
        "worktree_created",
        "code_complete",
        "ward_passed",
        "edge_cases_complete",
        "ward_passed",
        "review_complete",
        "diagrams_synced",
        "pr_approved",
        "merge_complete",
        "backlog_synced",
    ]
    assert [s.role for s in w.task.signals] == [CW, SM, LB]
    assert w.task.sessions == {"codeweaver": "s-cw", "siegemaster": "s-sm", "lawbringer": "s-lb"}


def test_ward_fails_into_spiritmender_three_times_then_blocked() -> None:
    w = to_processing()
    w.signal("complete", "s-cw")
    for n in range(1, 4):
        d = w.event(E.WARD_FAILED, detail=f"pytest: {n} failed")
        assert d.transition.name == "ward_failed"
        assert d.task.state is S.PROCESSING
        run = started(d)
        assert (run.role, run.kind, run.context) == (SP, "ward_fix", f"pytest: {n} failed")
        assert d.task.ward_fixes == n
        w.agent_started()
        d = w.signal("complete", f"s-sp-{n}", summary="fixed")
        assert d.transition.name == "code_complete"
        assert (d.task.state, d.effects) == (S.TEST_VALIDATION, (RunWard(TID),))
    d = w.event(E.WARD_FAILED, detail="pytest: still failing")
    assert d.transition.name == "ward_exhausted"
    assert d.task.state is S.BLOCKED
    assert d.effects == (ReportBlocked(TID, "Ward still fails after 3 fixes by Spiritmender"),)
    # A person asks for another go: the counters start again.
    d = w.event(E.RETRY_REQUESTED, detail="fixed the flaky fixture")
    run = started(d)
    assert (d.task.state, run.role, run.kind, d.task.ward_fixes) == (S.PROCESSING, CW, "retry", 0)


def test_siegemaster_followup_codeweaver_then_resumes_its_own_session() -> None:
    w = to_processing()
    w.signal("complete", "s-cw")
    w.event(E.WARD_PASSED)
    w.agent_started()
    d = w.signal(
        "needs-role-followup",
        "s-sm",
        targetRole="codeweaver",
        resume=True,
        reason="empty password accepted",
    )
    assert d.transition.name == "role_followup"
    assert d.task.state is S.PROCESSING
    assert d.effects[0] == StopAgent(TID, "role follow-up to Codeweaver")
    run = started(d)
    assert (run.role, run.kind, run.resume_session) == (CW, "followup", None)
    assert "Requested by Siegemaster: empty password accepted" in run.context
    assert d.task.role_stack == (
        RoleFrame(role=SM, session_id="s-sm", reason="empty password accepted"),
    )
    w.agent_started()

    d = w.signal("complete", "s-cw-2", summary="rejects empty passwords")
    assert d.transition.name == "followup_done"
    assert d.task.state is S.TEST_VALIDATION
    run = started(d)
    assert (run.role, run.kind, run.resume_session) == (SM, "resume_after_followup", "s-sm")
    assert "rejects empty passwords" in run.context
    assert d.task.role_stack == ()
    assert d.task.sessions["codeweaver"] == "s-cw-2"
    w.agent_started()

    d = w.signal("complete", "s-sm", summary="edge cases pass")
    assert d.transition.name == "edge_cases_complete"
    assert d.effects == (RunWard(TID),)


def test_lawbringer_hands_off_to_spiritmender_without_resuming() -> None:
    w = to_processing()
    w.signal("complete", "s-cw")
    w.event(E.WARD_PASSED)
    w.agent_started()
    w.signal("complete", "s-sm")
    d = w.event(E.WARD_PASSED)
    assert started(d).role is LB
    w.agent_started()

    d = w.signal(
        "needs-role-followup",
        "s-lb",
        targetRole="spiritmender",
        resume=False,
        reason="naming and a missing type hint",
    )
    assert d.task.state is S.PROCESSING
    assert kinds(d.effects) == [StopAgent, StartAgent]
    assert (started(d).role, d.task.role_stack) == (SP, ())
    w.agent_started()

    d = w.signal("complete", "s-sp", summary="renamed and typed")
    assert d.transition.name == "code_complete"
    assert (d.task.state, d.effects) == (S.TEST_VALIDATION, (RunWard(TID),))

    d = w.event(E.WARD_PASSED)
    assert d.transition.name == "tests_passed"
    assert (d.task.state, d.effects) == (S.DIAGRAM_CHECK, (RunDiagramCheck(TID),))


@pytest.mark.parametrize("role", [CW, SM], ids=lambda r: r.value)
def test_partially_complete_continues_the_same_session(role: Role) -> None:
    t = running(role)
    w = Walk(t)
    state = t.state
    d = w.signal(
        "partially-complete",
        session_of(role),
        progress="half the views",
        continuationPoint="views/profile.py",
    )
    assert d.transition.name == "continue_role"
    assert d.task.state is state
    run = started(d)
    assert (run.role, run.kind, run.resume_session) == (role, "continue", session_of(role))
    assert "Continue from: views/profile.py" in run.context
    assert "half the views" in run.context
    assert d.task.role is role


def test_needs_user_input_parks_then_the_answer_resumes_the_session() -> None:
    w = to_processing()
    d = w.signal("needs-user-input", "s-cw", question_id="q-1", question="SQLite or Postgres?")
    assert d.transition.name == "question_asked"
    assert d.task.state is S.PROCESSING
    assert d.effects == (AskQuestion(TID, "q-1"),)
    assert d.task.question_id == "q-1"
    assert (d.task.pending_run, d.task.agent_running, d.task.role) == (None, False, CW)

    d = w.event(E.ANSWER_RECEIVED, answer="Postgres, please", question_id="q-1")
    assert d.transition.name == "answer_received"
    run = started(d)
    assert (run.role, run.kind, run.resume_session, run.context) == (
        CW,
        "answer",
        "s-cw",
        "Postgres, please",
    )
    assert d.task.question_id is None
    # The same answer delivered twice does not start the agent twice.
    with pytest.raises(IllegalTransition):
        w.event(E.ANSWER_RECEIVED, answer="Postgres, please", question_id="q-1")


@pytest.mark.parametrize("max_attempts", [1, 3], ids=lambda n: f"max{n}")
def test_retry_on_error_up_to_max_attempts_then_blocked(max_attempts: int) -> None:
    w = to_processing(Limits(max_attempts=max_attempts))
    w.signal("partially-complete", "s-cw")  # a session exists to resume
    for n in range(1, max_attempts + 1):
        d = w.event(E.AGENT_FAILED, role=CW, detail=f"crash {n}")
        assert d.transition.name == "retry_on_error"
        assert d.task.state is S.PROCESSING
        run = started(d)
        assert (run.role, run.kind, run.resume_session) == (CW, "retry", "s-cw")
        assert f"The previous attempt failed: crash {n}" in run.context
        assert "Continue from:" in run.context  # what the failed run was asked keeps
        assert (d.task.attempts, d.task.last_error) == (n, f"crash {n}")
        w.agent_started()
    d = w.fail("crash again")
    assert d.transition.name == "retries_exhausted"
    assert d.task.state is S.BLOCKED
    assert d.effects == (
        ReportBlocked(
            TID,
            f"Codeweaver failed {max_attempts + 1} times (the first run and {max_attempts} "
            "retries, agent.max_attempts): crash again",
        ),
    )
    assert (d.task.pending_run, d.task.agent_running) == (None, False)


def test_a_signal_resets_the_attempts() -> None:
    w = to_processing()
    w.fail()
    w.fail()
    assert w.task.attempts == 2
    d = w.signal("partially-complete", "s-cw")
    assert d.task.attempts == 0
    assert d.task.last_error is None


def test_validator_blocked_by_retries_is_resumed_as_a_validator() -> None:
    w = Walk(running(LB, stage=Stage.REVIEW, attempts=3))
    d = w.fail("stuck")
    assert d.task.state is S.BLOCKED
    d = w.event(E.RETRY_REQUESTED)
    assert d.task.state is S.TEST_VALIDATION
    run = started(d)
    assert (run.role, run.kind, run.resume_session) == (LB, "retry", session_of(LB))
    w.agent_started()
    d = w.signal("complete", "s-lb")
    assert d.transition.name == "review_complete"


def test_diagrams_missing_blocks_until_updated() -> None:
    missing = ("docs/diagrams/02-architecture.md: new module app/auth.py",)
    w = Walk(task(S.DIAGRAM_CHECK, stage=Stage.REVIEW))
    d = w.event(E.DIAGRAMS_MISSING, missing=missing)
    assert d.task.state is S.BLOCKED
    assert d.effects == (
        ReportBlocked(
            TID,
            "diagrams lag the code: docs/diagrams/02-architecture.md: new module app/auth.py",
            missing,
        ),
    )
    assert d.task.missing_diagrams == missing

    d = w.event(E.DIAGRAMS_UPDATED)
    assert d.transition.name == "diagrams_updated"
    assert d.task.state is S.PROCESSING
    run = started(d)
    assert (run.role, run.kind) == (CW, "diagram_fix")
    assert f"- {missing[0]}" in run.context
    assert d.task.blocked_reason is None
    w.agent_started()

    w.signal("complete", "s-cw")
    d = w.event(E.WARD_PASSED)
    assert d.transition.name == "tests_passed"  # diagram work goes straight back to the check
    d = w.event(E.DIAGRAMS_SYNCED)
    assert d.task.state is S.PR_CREATED
    assert d.task.missing_diagrams == ()


def test_diagrams_updated_needs_a_diagram_block() -> None:
    with pytest.raises(IllegalTransition):
        decide(task(S.BLOCKED, blocked_reason="Ward"), ev(E.DIAGRAMS_UPDATED))


def test_merge_conflict_goes_back_to_processing_then_blocks() -> None:
    w = Walk(task(S.PR_CREATED, pr=PR, stage=Stage.REVIEW))
    fixes = Limits().max_conflict_fixes
    for n in range(1, fixes + 1):
        w.event(E.PR_APPROVED, detail="alice")
        d = w.event(E.MERGE_CONFLICT, detail="app/models.py")
        assert d.transition.name == "merge_conflict"
        assert d.task.state is S.PROCESSING
        run = started(d)
        assert (run.role, run.kind) == (CW, "conflict_fix")
        assert "app/models.py" in run.context
        assert d.task.conflict_fixes == n
        w.agent_started()
        w.signal("complete", f"s-cw-{n}")
        assert w.event(E.WARD_PASSED).task.state is S.DIAGRAM_CHECK
        assert w.event(E.DIAGRAMS_SYNCED).task.state is S.PR_CREATED
    w.event(E.PR_APPROVED, detail="alice")
    d = w.event(E.MERGE_CONFLICT, detail="app/models.py")
    assert d.transition.name == "conflict_exhausted"
    assert d.task.state is S.BLOCKED
    assert kinds(d.effects) == [ReportBlocked]


def test_pr_rejected_cleans_up_and_puts_the_task_back_to_do() -> None:
    w = Walk(task(S.PR_CREATED, pr=PR, branch="scaffold/task-1"))
    d = w.event(E.PR_REJECTED, detail="not needed")
    assert d.task.state is S.CLEANUP
    assert d.effects == (
        SyncBacklog(TID, "To Do", "Pull request closed without merging: not needed.", None),
        RemoveWorktree(TID),
        DeleteBranch(TID),
    )
    assert d.task.outcome == "rejected"
    assert d.task.pr is not None
    assert d.task.pr.state == "closed"
    d = w.event(E.BACKLOG_SYNCED)
    assert (d.task.state, d.effects) == (S.IDLE, ())
    # It can be picked up again later.
    d = w.event(E.RETRY_REQUESTED)
    assert (d.task.state, d.task.outcome) == (S.IDLE, None)


ABORTABLE = sorted({r.source for r in TABLE if r.event is E.ABORT_SIGNAL}, key=list(S).index)


def test_abortable_states() -> None:
    assert ABORTABLE == [
        S.READY,
        S.ALLOCATING,
        S.PROCESSING,
        S.TEST_VALIDATION,
        S.DIAGRAM_CHECK,
        S.BLOCKED,
        S.PR_CREATED,
    ]


@pytest.mark.parametrize("state", ABORTABLE, ids=lambda s: s.value)
def test_abort_from_every_abortable_state(state: S) -> None:
    agent = state in (S.PROCESSING, S.TEST_VALIDATION)
    start = running(CW if state is S.PROCESSING else SM) if agent else task(state)
    start = start.model_copy(update={"branch": "scaffold/task-1"})
    w = Walk(start)
    d = w.event(E.ABORT_SIGNAL, detail="aborted by alice")
    if state is S.READY:
        assert (d.task.state, d.effects) == (S.IDLE, ())
        assert d.task.last_error == "aborted by alice"
        return
    assert d.task.state is S.CLEANUP
    expected = [StopAgent] if agent else []
    assert kinds(d.effects) == [*expected, SyncBacklog, RemoveWorktree]
    sync = next(e for e in d.effects if isinstance(e, SyncBacklog))
    assert sync.status == "To Do"
    assert "aborted by alice" in sync.notes
    assert "scaffold/task-1 is kept" in sync.notes
    assert (d.task.outcome, d.task.pending_run, d.task.role) == ("aborted", None, None)
    d = w.event(E.BACKLOG_SYNCED)
    assert d.task.state is S.IDLE


@pytest.mark.parametrize("state", [S.IDLE, S.MERGING, S.CLEANUP], ids=lambda s: s.value)
def test_abort_is_refused_where_it_would_lose_work(state: S) -> None:
    with pytest.raises(IllegalTransition):
        decide(task(state), ev(E.ABORT_SIGNAL))


def test_safety_limit_sends_a_ready_task_back_to_idle() -> None:
    d = decide(task(S.READY), ev(E.SAFETY_LIMIT_HIT, detail="time budget of 4 h spent"))
    assert (d.task.state, d.effects) == (S.IDLE, ())
    assert d.task.last_error == "time budget of 4 h spent"


def test_allocation_failure_blocks() -> None:
    d = decide(task(S.ALLOCATING), ev(E.ALLOCATION_FAILED, detail="branch exists"))
    assert d.task.state is S.BLOCKED
    assert d.effects == (ReportBlocked(TID, "could not create the worktree: branch exists"),)


# ---------------------------------------------------------------------------- retries


def test_retry_of_a_task_blocked_before_its_worktree_allocates_one_first() -> None:
    """A retry after a failed worktree creation never starts an agent without one."""
    blocked = decide(task(S.ALLOCATING), ev(E.ALLOCATION_FAILED, detail="no commits")).task
    assert blocked.worktree is None
    d = decide(blocked, ev(E.RETRY_REQUESTED))
    assert d.task.state is S.ALLOCATING
    assert kinds(d.effects) == [CreateWorktree]
    assert (d.task.blocked_reason, d.task.pending_run) == (None, None)
    made = decide(d.task, ev(E.WORKTREE_CREATED, extra={"worktree": "/wt/t", "branch": "b"}))
    assert (made.task.state, made.task.worktree) == (S.PROCESSING, "/wt/t")


def test_retry_of_a_merged_task_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        decide(task(S.IDLE, outcome="merged"), ev(E.RETRY_REQUESTED))
