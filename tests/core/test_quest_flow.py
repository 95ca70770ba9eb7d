"""Quest-level steps: questions, failure counting, a stopped quest, cost and recovery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scaffold.core.effects import (
    AskQuestion,
    CreateWorktree,
    DeleteBranch,
    Effect,
    MergePullRequest,
    OpenPullRequest,
    RemoveWorktree,
    RunDiagramCheck,
    RunWard,
    StartAgent,
    StopAgent,
    SyncBacklog,
)
from scaffold.core.events import Event, signal_event
from scaffold.core.lifecycle import Limits
from scaffold.core.planning import planning_event_for
from scaffold.core.quest_flow import (
    add_cost,
    answer_question,
    apply_planning_event,
    apply_task_event,
    due_effects,
    stop_quest,
)
from scaffold.core.states import IN_FLIGHT, Stage
from scaffold.core.states import EventName as E
from scaffold.core.states import Lifecycle as S
from scaffold.errors import UnknownQuestion, UnknownTask
from scaffold.quest.model import AgentRun, PlanningState, Quest, QuestPhase, TaskRecord
from scaffold.roles import Role
from scaffold.signals import AnySignal, parse_signal

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)
LIM = Limits()
CW, SM, LB, CH, PS = (
    Role.CODEWEAVER,
    Role.SIEGEMASTER,
    Role.LAWBRINGER,
    Role.CHAOSWHISPERER,
    Role.PATHSEEKER,
)

_FIELDS: dict[str, dict[str, Any]] = {
    "complete": {"summary": "done"},
    "partially-complete": {"progress": "half", "continuationPoint": "the rest"},
    "needs-user-input": {"question": "Which database?", "context": "Both are configured."},
}


def sig(role: Role, kind: str, step: str = "TASK-1") -> AnySignal:
    return parse_signal({"signal": kind, "stepId": step, **_FIELDS[kind]}, role=role)


def running(task_id: str, role: Role = CW, **fields: Any) -> TaskRecord:
    where = S.PROCESSING if role in (CW, PS, Role.SPIRITMENDER) else S.TEST_VALIDATION
    fields.setdefault("state", where)
    return TaskRecord(
        id=task_id,
        role=role,
        pending_run=AgentRun(role=role),
        agent_running=True,
        sessions={role.value: f"s-{task_id}"},
        **fields,
    )


def quest(*tasks: TaskRecord, **fields: Any) -> Quest:
    return Quest(id="login", started_at=NOW, tasks={t.id: t for t in tasks}, **fields)


def task_signal(q: Quest, task_id: str, kind: str, question_id: str | None = None) -> Event:
    t = q.tasks[task_id]
    assert t.role is not None
    return signal_event(
        t, sig(t.role, kind, task_id), session_id=f"s-{task_id}", question_id=question_id
    )


def failed(q: Quest, task_id: str) -> Event:
    return Event(E.AGENT_FAILED, role=q.tasks[task_id].role, detail="crash")


# --------------------------------------------------------------------------- questions


def test_a_question_is_recorded_and_answered() -> None:
    q = quest(running("TASK-1"), running("TASK-2"))
    step = apply_task_event(
        q, "TASK-1", task_signal(q, "TASK-1", "needs-user-input", "q-1"), LIM, NOW
    )
    assert step.effects == (AskQuestion("TASK-1", "q-1"),)
    asked = step.quest.questions["q-1"]
    assert (asked.task_id, asked.role, asked.session_id) == ("TASK-1", CW, "s-TASK-1")
    assert (asked.question, asked.context, asked.asked_at) == (
        "Which database?",
        "Both are configured.",
        NOW,
    )
    assert asked.answer is None
    assert step.quest.pending_questions() == [asked]
    assert step.quest.tasks["TASK-1"].question_id == "q-1"
    # The other slot keeps working.
    assert step.quest.tasks["TASK-2"] == q.tasks["TASK-2"]
    (entry,) = step.entries
    assert (entry.kind, entry.task_id, entry.event, entry.source, entry.target) == (
        "transition",
        "TASK-1",
        "question_asked",
        "Processing",
        "Processing",
    )
    assert entry.detail["transition"] == "question_asked"
    assert entry.detail["signal"]["question"] == "Which database?"

    step = answer_question(step.quest, "q-1", "Postgres", "alice", LIM, LATER)
    answered = step.quest.questions["q-1"]
    assert (answered.answer, answered.answered_by, answered.answered_at) == (
        "Postgres",
        "alice",
        LATER,
    )
    assert step.quest.pending_questions() == []
    assert step.effects == (
        StartAgent(
            "TASK-1",
            AgentRun(role=CW, resume_session="s-TASK-1", kind="answer", context="Postgres"),
        ),
    )
    assert step.quest.tasks["TASK-1"].question_id is None
    assert step.entries[0].event == "answer_received"


def test_unknown_and_answered_questions_are_refused() -> None:
    q = quest(running("TASK-1"))
    with pytest.raises(UnknownQuestion) as info:
        answer_question(q, "q-nope", "x", "alice", LIM, NOW)
    assert info.value.question_id == "q-nope"
    asked = apply_task_event(
        q, "TASK-1", task_signal(q, "TASK-1", "needs-user-input", "q-1"), LIM, NOW
    )
    done = answer_question(asked.quest, "q-1", "Postgres", "alice", LIM, NOW)
    with pytest.raises(UnknownQuestion) as info:
        answer_question(done.quest, "q-1", "MySQL", "bob", LIM, NOW)
    assert info.value.question_id == "q-1"
    assert done.quest.questions["q-1"].answer == "Postgres"


def test_planning_question_goes_back_to_planning() -> None:
    q = quest(
        phase=QuestPhase.REQUIREMENTS,
        planning=PlanningState(role=CH, sessions={"chaoswhisperer": "s-ch"}),
    )
    s = sig(CH, "needs-user-input", "quest")
    event = Event(
        planning_event_for(q.phase, s), signal=s, role=CH, session_id="s-ch", question_id="q-p"
    )
    step = apply_planning_event(q, event, LIM.max_attempts, NOW)
    assert step.effects == (AskQuestion(None, "q-p"),)
    assert step.quest.questions["q-p"].task_id is None
    assert step.quest.questions["q-p"].role is CH
    assert step.entries[0].kind == "quest"
    step = answer_question(step.quest, "q-p", "admins only", "alice", LIM, NOW)
    assert step.effects == (
        StartAgent(
            None, AgentRun(role=CH, resume_session="s-ch", kind="answer", context="admins only")
        ),
    )


def test_unknown_task_is_refused() -> None:
    with pytest.raises(UnknownTask) as info:
        apply_task_event(quest(), "TASK-9", Event(E.DEPS_RESOLVED), LIM, NOW)
    assert info.value.task_id == "TASK-9"


# --------------------------------------------------------------------------- failures


def test_consecutive_failures_count_across_tasks_and_reset_on_success() -> None:
    q = quest(running("TASK-1"), running("TASK-2"), running("TASK-3", SM))
    q = apply_task_event(q, "TASK-1", failed(q, "TASK-1"), LIM, NOW).quest
    assert q.consecutive_failures == 1
    q = apply_task_event(q, "TASK-2", failed(q, "TASK-2"), LIM, NOW).quest
    assert q.consecutive_failures == 2
    # A Ward result is neither an agent success nor an agent failure.
    q = q.model_copy(
        update={"tasks": {**q.tasks, "TASK-4": TaskRecord(id="TASK-4", state=S.TEST_VALIDATION)}}
    )
    q = apply_task_event(q, "TASK-4", Event(E.WARD_FAILED, detail="lint"), LIM, NOW).quest
    assert q.consecutive_failures == 2
    q = apply_task_event(q, "TASK-3", failed(q, "TASK-3"), LIM, NOW).quest
    assert q.consecutive_failures == 3
    q = apply_task_event(
        q, "TASK-1", task_signal(q, "TASK-1", "partially-complete"), LIM, NOW
    ).quest
    assert q.consecutive_failures == 0


@pytest.mark.parametrize("kind", ["complete", "partially-complete", "needs-user-input"])
def test_every_agent_signal_resets_the_failures(kind: str) -> None:
    q = quest(running("TASK-1"), consecutive_failures=2)
    step = apply_task_event(q, "TASK-1", task_signal(q, "TASK-1", kind, "q-1"), LIM, NOW)
    assert step.quest.consecutive_failures == 0


def test_planning_failures_count_and_reset() -> None:
    q = quest(phase=QuestPhase.PLANNING, planning=PlanningState(role=PS))
    q = apply_planning_event(q, Event(E.AGENT_FAILED, detail="x"), 3, NOW).quest
    q = apply_planning_event(q, Event(E.AGENT_FAILED, detail="x"), 3, NOW).quest
    assert q.consecutive_failures == 2
    s = sig(PS, "complete", "quest")
    q = apply_planning_event(q, Event(E.CODE_COMPLETE, signal=s, role=PS), 3, NOW).quest
    assert (q.consecutive_failures, q.phase) == (0, QuestPhase.EXECUTING)


def test_planning_that_fails_for_good_stops_the_quest_with_a_reason() -> None:
    q = quest(phase=QuestPhase.PLANNING, planning=PlanningState(role=PS, attempts=3))
    step = apply_planning_event(q, Event(E.AGENT_FAILED, detail="no output"), 3, NOW)
    assert step.quest.phase is QuestPhase.FAILED
    assert step.quest.stop_reason == "PathSeeker failed: no output"
    assert (step.entries[0].source, step.entries[0].target) == ("planning", "failed")


# --------------------------------------------------------------------------- stopping


def test_stop_quest_is_recorded_once() -> None:
    step = stop_quest(quest(), "cost budget of $5.00 spent", NOW, "cost")
    assert step.quest.stop_reason == "cost budget of $5.00 spent"
    assert step.quest.stop_limit == "cost"
    assert [(e.kind, e.event, e.detail) for e in step.entries] == [
        ("quest", "stopped", {"reason": "cost budget of $5.00 spent", "limit": "cost"})
    ]
    again = stop_quest(step.quest, "time budget spent", NOW)
    assert again.quest.stop_reason == "cost budget of $5.00 spent"
    assert again.entries == ()
    assert again.effects == ()


def test_a_stopped_quest_turns_an_agent_start_into_an_abort() -> None:
    t = TaskRecord(
        id="TASK-1", state=S.TEST_VALIDATION, stage=Stage.EDGE_CASES, branch="scaffold/task-1"
    )
    q = stop_quest(quest(t), "cost budget of $5.00 spent", NOW).quest
    step = apply_task_event(q, "TASK-1", Event(E.WARD_PASSED), LIM, NOW)  # would start Lawbringer
    assert not any(isinstance(e, StartAgent) for e in step.effects)
    # (A StopAgent for the run that was never started may come first; it is harmless.)
    rest = [e for e in step.effects if not isinstance(e, StopAgent)]
    assert [type(e) for e in rest] == [SyncBacklog, RemoveWorktree]
    sync = rest[0]
    assert isinstance(sync, SyncBacklog)
    assert sync.status == "To Do"
    assert "cost budget of $5.00 spent" in sync.notes
    done = step.quest.tasks["TASK-1"]
    assert (done.state, done.outcome, done.pending_run) == (S.CLEANUP, "aborted", None)
    assert [e.event for e in step.entries] == ["ward_passed", "abort_signal"]
    assert step.entries[1].detail["reason"] == "cost budget of $5.00 spent"


def test_a_stopped_quest_lets_non_agent_work_finish() -> None:
    t = TaskRecord(id="TASK-1", state=S.MERGING)
    q = stop_quest(quest(t), "abort", NOW).quest
    step = apply_task_event(q, "TASK-1", Event(E.MERGE_COMPLETE, detail="abc"), LIM, NOW)
    assert step.quest.tasks["TASK-1"].outcome == "merged"
    assert len(step.entries) == 1


def test_events_without_a_time_get_now() -> None:
    q = quest(TaskRecord(id="TASK-1", state=S.READY))
    step = apply_task_event(q, "TASK-1", Event(E.TASK_SELECTED), LIM, NOW)
    assert step.quest.tasks["TASK-1"].started_at == NOW
    assert step.entries[0].at == NOW


# --------------------------------------------------------------------------- cost


def test_add_cost() -> None:
    q = quest(TaskRecord(id="TASK-1"), TaskRecord(id="TASK-2"))
    q = add_cost(q, "TASK-1", 0.25, "codeweaver", "claude")
    q = add_cost(q, "TASK-1", 0.1, "codeweaver", "claude")
    q = add_cost(q, None, 0.5, "codeweaver", "claude")  # planning work
    q = add_cost(
        q, "TASK-9", 0.05, "codeweaver", "claude"
    )  # a task the quest no longer has: the quest still pays
    assert q.cost_usd == pytest.approx(0.9)
    assert q.tasks["TASK-1"].cost_usd == pytest.approx(0.35)
    assert q.tasks["TASK-2"].cost_usd == 0.0
    assert add_cost(q, "TASK-1", 0.0, "codeweaver", "claude") is q
    assert add_cost(q, "TASK-1", -1.0, "codeweaver", "claude") is q


# --------------------------------------------------------------------------- recovery

_RUN = AgentRun(role=CW, kind="continue", resume_session="s-1")

DUE: list[tuple[str, TaskRecord, list[Effect]]] = [
    ("Idle", TaskRecord(id="T-1"), []),
    ("Ready", TaskRecord(id="T-1", state=S.READY), []),
    ("Allocating", TaskRecord(id="T-1", state=S.ALLOCATING), [CreateWorktree("T-1")]),
    (
        "Processing-run-owed",
        TaskRecord(id="T-1", state=S.PROCESSING, pending_run=_RUN, agent_running=True),
        [StartAgent("T-1", _RUN)],
    ),
    ("Processing-question", TaskRecord(id="T-1", state=S.PROCESSING, question_id="q-1"), []),
    ("Processing-nothing-owed", TaskRecord(id="T-1", state=S.PROCESSING), []),
    (
        "TestValidation-run-owed",
        TaskRecord(id="T-1", state=S.TEST_VALIDATION, pending_run=_RUN),
        [StartAgent("T-1", _RUN)],
    ),
    ("TestValidation-ward", TaskRecord(id="T-1", state=S.TEST_VALIDATION), [RunWard("T-1")]),
    (
        "TestValidation-question",
        TaskRecord(id="T-1", state=S.TEST_VALIDATION, question_id="q-1", pending_run=_RUN),
        [],
    ),
    ("DiagramCheck", TaskRecord(id="T-1", state=S.DIAGRAM_CHECK), [RunDiagramCheck("T-1")]),
    ("Blocked", TaskRecord(id="T-1", state=S.BLOCKED), []),
    ("PR_Created", TaskRecord(id="T-1", state=S.PR_CREATED), [OpenPullRequest("T-1")]),
    ("Merging", TaskRecord(id="T-1", state=S.MERGING), [MergePullRequest("T-1")]),
    (
        "Cleanup-merged",
        TaskRecord(id="T-1", state=S.CLEANUP, outcome="merged", last_summary="did it"),
        [SyncBacklog("T-1", "Done", "", "did it"), RemoveWorktree("T-1"), DeleteBranch("T-1")],
    ),
    (
        "Cleanup-rejected",
        TaskRecord(id="T-1", state=S.CLEANUP, outcome="rejected"),
        [SyncBacklog("T-1", "To Do", ""), RemoveWorktree("T-1"), DeleteBranch("T-1")],
    ),
    (
        "Cleanup-aborted",
        TaskRecord(id="T-1", state=S.CLEANUP, outcome="aborted"),
        [SyncBacklog("T-1", "To Do", ""), RemoveWorktree("T-1")],
    ),
]


def test_due_effects_cover_every_in_flight_state() -> None:
    assert {t.state for _, t, _ in DUE} >= IN_FLIGHT


@pytest.mark.parametrize(("name", "task", "expected"), DUE, ids=[d[0] for d in DUE])
def test_due_effects(name: str, task: TaskRecord, expected: list[Effect]) -> None:
    assert due_effects(task) == expected


def test_due_effects_redo_what_the_last_decision_asked() -> None:
    q = quest(TaskRecord(id="TASK-1", state=S.ALLOCATING))
    step = apply_task_event(q, "TASK-1", Event(E.WORKTREE_CREATED), LIM, NOW)
    assert list(step.effects) == due_effects(step.quest.tasks["TASK-1"])
    step = apply_task_event(
        step.quest, "TASK-1", task_signal(step.quest, "TASK-1", "complete"), LIM, NOW
    )
    assert list(step.effects) == due_effects(step.quest.tasks["TASK-1"]) == [RunWard("TASK-1")]
