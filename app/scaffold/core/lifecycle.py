"""The task lifecycle machine, declared as a table (one concept: kept whole, however long).

``TABLE`` lists every transition of a task as data:
source state, event, target state, an optional named guard, and an action that
returns the field updates and effects. :func:`decide` is pure:
``decide(task, event, limits) -> Decision(task, effects, transition)``.

The table is checked when this module is imported (see :func:`validate_table`):
every state is reachable from Idle, every state has a way out and can get back to
Idle, and transitions sharing a source and event are all guarded. The Mermaid state
diagram in ``docs/diagrams/03-state-machine.md`` is generated from the table by
:func:`mermaid`, and a test fails when the file and the table differ.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scaffold.core import review
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
from scaffold.core.events import Event
from scaffold.core.states import ABORTABLE, Stage
from scaffold.core.states import EventName as E
from scaffold.core.states import Lifecycle as S
from scaffold.errors import IllegalTransition, ScaffoldError
from scaffold.quest.model import (
    AgentRun,
    Feedback,
    PlanningState,
    ReviewRound,
    RoleFrame,
    SignalEntry,
    TaskRecord,
)
from scaffold.roles import BUILDING_ROLES, Role
from scaffold.signals import NeedsRoleFollowup, NeedsUserInput, PartiallyComplete


@dataclass(frozen=True)
class Limits:
    """Per-task limits (retries max 3, Ward fixes by Spiritmender max 3)."""

    max_attempts: int = 3
    max_ward_fixes: int = 3
    max_conflict_fixes: int = 2
    max_review_rounds: int = 5  # review.max_rounds
    max_ci_fixes: int = 2  # ci.max_fixes


Updates = dict[str, Any]
Action = Callable[[TaskRecord, Event, Limits], tuple[Updates, list[Effect]]]
Predicate = Callable[[TaskRecord, Event, Limits], bool]


@dataclass(frozen=True)
class Guard:
    """A named predicate; the name is what the diagram and errors show."""

    name: str
    test: Predicate


@dataclass(frozen=True)
class Transition:
    name: str
    source: S
    event: E
    target: S
    action: Action
    guard: Guard | None = None

    @property
    def label(self) -> str:
        guard = f" [{self.guard.name}]" if self.guard else ""
        return f"{self.name}{guard}"


@dataclass(frozen=True)
class Decision:
    task: TaskRecord
    effects: tuple[Effect, ...]
    transition: Transition


class MachineDefinitionError(ScaffoldError):
    """The transition table itself is wrong (found at import, not at run time)."""


# --------------------------------------------------------------------------- guards


def _followup(event: Event) -> NeedsRoleFollowup:
    if not isinstance(event.signal, NeedsRoleFollowup):
        raise IllegalTransition("-", event.name, "role_followup needs a needs-role-followup signal")
    return event.signal


def _either(yes: str, no: str, test: Predicate) -> tuple[Guard, Guard]:
    """A guard and its negation."""
    return Guard(yes, test), Guard(no, lambda t, e, lim: not test(t, e, lim))


SAFETY_OK = Guard("safety_ok", lambda t, e, lim: e.safety_ok)
# ``attempts`` counts the retries already made: an agent run is retried up to
# ``max_attempts`` times (retried up to 3 times by default), then the task is Blocked.
ATTEMPTS_LEFT, ATTEMPTS_EXHAUSTED = _either(
    "attempts left", "attempts used up", lambda t, e, lim: t.attempts < lim.max_attempts
)
FIXES_LEFT, FIXES_EXHAUSTED = _either(
    "fixes left", "fixes used up", lambda t, e, lim: t.ward_fixes < lim.max_ward_fixes
)
CONFLICT_FIXES_LEFT, CONFLICT_FIXES_EXHAUSTED = _either(
    "conflict fixes left",
    "conflict fixes used up",
    lambda t, e, lim: t.conflict_fixes < lim.max_conflict_fixes,
)
TARGET_BUILDS, TARGET_VALIDATES = _either(
    "target builds", "target validates", lambda t, e, lim: _followup(e).target in BUILDING_ROLES
)
RESUMES_BUILDER = Guard(
    "resumes builder",
    lambda t, e, lim: bool(t.role_stack) and t.role_stack[-1].role in BUILDING_ROLES,
)
RESUMES_VALIDATOR = Guard(
    "resumes validator",
    lambda t, e, lim: bool(t.role_stack) and t.role_stack[-1].role not in BUILDING_ROLES,
)
REVIEWED, NEXT_VALIDATOR = _either(
    "reviewed", "not yet reviewed", lambda t, e, lim: t.stage is Stage.REVIEW
)
DIAGRAM_BLOCK = Guard("blocked by diagrams", lambda t, e, lim: bool(t.missing_diagrams))
# A retry after Blocked resumes the role that was stuck, in the state that role runs in,
# in the task's worktree. A task blocked before it had one (the worktree could not be
# made) allocates it first: an agent never runs anywhere but its task's worktree.
BUILDER_BLOCKED = Guard(
    "builder blocked",
    lambda t, e, lim: t.worktree is not None and (t.role is None or t.role in BUILDING_ROLES),
)
VALIDATOR_BLOCKED = Guard(
    "validator blocked",
    lambda t, e, lim: (
        t.worktree is not None and t.role is not None and t.role not in BUILDING_ROLES
    ),
)
NO_WORKTREE = Guard("no worktree", lambda t, e, lim: t.worktree is None)
# A merged task is Done: there is nothing left to retry.
NOT_MERGED = Guard("not merged", lambda t, e, lim: t.outcome != "merged")
# Only the question the task is parked on resumes it (a stale answer must not start a
# second agent beside a running one).
AWAITING_ANSWER = Guard(
    "awaiting this answer",
    lambda t, e, lim: t.question_id is not None and e.question_id in (None, t.question_id),
)


# A round of the review loop: a reviewer's feedback counts against review.max_rounds, a
# failed check's alone against ci.max_fixes (the waiting feedback and the event's together).
def _round_items(t: TaskRecord, e: Event) -> tuple[Feedback, ...]:
    return review.waiting(t, e.feedback)


def _round_allowed(t: TaskRecord, e: Event, lim: Limits) -> bool:
    if review.round_kind(_round_items(t, e)) == "ci":
        return t.ci_fixes < lim.max_ci_fixes
    return t.review_rounds < lim.max_review_rounds


ROUNDS_LEFT, ROUNDS_USED_UP = _either("rounds left", "rounds used up", _round_allowed)


# --------------------------------------------------------------------------- actions


def start_run(task_id: str | None, run: AgentRun, **updates: Any) -> tuple[Updates, list[Effect]]:
    """Start ``run`` for the task (None: the planning phase), with the record's ``updates``."""
    updates.update(role=run.role, pending_run=run, agent_running=False, question_id=None)
    return updates, [StartAgent(task_id, run)]


def resumed_run(t: TaskRecord | PlanningState, role: Role, **run: Any) -> AgentRun:
    """A run of ``role`` that resumes the session it had on the task, if any."""
    return AgentRun(role=role, resume_session=t.sessions.get(role.value), **run)


def continue_run(record: TaskRecord | PlanningState, role: Role, e: Event) -> AgentRun:
    """The same role again, in the same session, after a partially-complete signal."""
    sig = e.signal
    assert isinstance(sig, PartiallyComplete)
    return AgentRun(
        role=role,
        resume_session=e.session_id or record.sessions.get(role.value),
        kind="continue",
        context=f"Progress so far: {sig.progress}\nContinue from: {sig.continuationPoint}",
    )


def retry_run(
    record: TaskRecord | PlanningState, role: Role, e: Event, earlier: str
) -> tuple[AgentRun, dict[str, str]]:
    """The retry of a failed run and the sessions it leaves. An agent that lost its session
    (e.g. "No conversation found": ``fresh_session``) starts a new one; the context is in
    the prompt anyway."""
    if e.extra.get("fresh_session"):
        session = None
        sessions = {k: v for k, v in record.sessions.items() if k != role.value}
    else:
        session = e.session_id or record.sessions.get(role.value)
        sessions = {**record.sessions, role.value: session} if session else dict(record.sessions)
    context = f"The previous attempt failed: {e.detail}{earlier}"
    return AgentRun(role=role, resume_session=session, kind="retry", context=context), sessions


def _after_signal(task: TaskRecord, event: Event) -> Updates:
    """Bookkeeping every accepted signal does: history, session, attempts reset."""
    signals = task.signals
    if event.signal is not None and event.at is not None and event.role is not None:
        dump = event.signal.model_dump()
        signals = (
            *signals,
            SignalEntry(at=event.at, role=event.role, session_id=event.session_id, signal=dump),
        )
    sessions = dict(task.sessions)
    if event.session_id and task.role is not None:
        sessions[task.role.value] = event.session_id
    return {
        "signals": signals,
        "sessions": sessions,
        "attempts": 0,
        "agent_running": False,
        "pending_run": None,
        "last_error": None,
    }


def _nothing(task: TaskRecord, event: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {}, []


def a_task_selected(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {"started_at": e.at, "outcome": None}, [CreateWorktree(t.id)]


def a_back_to_idle(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {"last_error": e.detail or None}, []


def a_worktree_created(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    run = AgentRun(role=Role.CODEWEAVER, kind="fresh")
    return start_run(
        t.id,
        run,
        stage=Stage.IMPLEMENT,
        worktree=e.extra.get("worktree", t.worktree),
        branch=e.extra.get("branch", t.branch),
    )


def a_allocation_failed(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    reason = f"could not create the worktree: {e.detail}"
    return {"blocked_reason": reason, "last_error": e.detail}, [ReportBlocked(t.id, reason)]


def a_code_complete(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    ups = _after_signal(t, e)
    summary = e.signal.summary if e.signal is not None and hasattr(e.signal, "summary") else None
    ups.update(role=None, last_summary=summary or t.last_summary)
    return ups, [RunWard(t.id)]


def a_continue_role(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return start_run(t.id, continue_run(t, t.role or Role.CODEWEAVER, e), **_after_signal(t, e))


def a_question_asked(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    sig = e.signal
    assert isinstance(sig, NeedsUserInput)
    if not e.question_id:
        raise IllegalTransition(t.state, e.name, "a question needs an id")
    ups = _after_signal(t, e)
    ups["question_id"] = e.question_id
    return ups, [AskQuestion(t.id, e.question_id)]


def a_answer_received(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    run = resumed_run(t, t.role or Role.CODEWEAVER, kind="answer", context=e.answer or "")
    return start_run(t.id, run)


def a_role_followup(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    sig = _followup(e)
    ups = _after_signal(t, e)
    stack = t.role_stack
    if sig.resume and t.role is not None:
        session = e.session_id or t.sessions.get(t.role.value)
        stack = (*stack, RoleFrame(role=t.role, session_id=session, reason=sig.reason))
    run = AgentRun(
        role=sig.target,
        resume_session=None,
        kind="followup",
        context=f"Requested by {t.role.display if t.role else 'scaffold'}: {sig.reason}\n{sig.context}",
    )
    ups, eff = start_run(t.id, run, **ups, role_stack=stack)
    return ups, [StopAgent(t.id, f"role follow-up to {sig.target.display}"), *eff]


def a_followup_done(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    frame = t.role_stack[-1]
    summary = getattr(e.signal, "summary", "") if e.signal is not None else ""
    who = t.role.display if t.role else "the follow-up role"
    run = AgentRun(
        role=frame.role,
        resume_session=frame.session_id,
        kind="resume_after_followup",
        context=f"{who} finished what you asked for ({frame.reason}): {summary}",
    )
    return start_run(t.id, run, **_after_signal(t, e), role_stack=t.role_stack[:-1])


def a_retry(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    prev = t.pending_run
    earlier = f"\n{prev.context}" if prev is not None and prev.context else ""
    run, sessions = retry_run(t, e.role or t.role or Role.CODEWEAVER, e, earlier)
    return start_run(t.id, run, attempts=t.attempts + 1, last_error=e.detail, sessions=sessions)


def a_retries_exhausted(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    role = (e.role or t.role or Role.CODEWEAVER).display
    # The first run and its retries: agent.max_attempts counts the retries.
    runs = f"{t.attempts + 1} times (the first run and {t.attempts} retries, agent.max_attempts)"
    reason = f"{role} failed {runs}: {e.detail}"
    return (
        {
            "attempts": t.attempts + 1,
            "agent_running": False,
            "pending_run": None,
            "last_error": e.detail,
            "blocked_reason": reason,
        },
        [ReportBlocked(t.id, reason)],
    )


def a_validator_complete(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {**_after_signal(t, e), "role": None}, [RunWard(t.id)]


def a_review_complete(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {**_after_signal(t, e), "role": None}, [RunDiagramCheck(t.id)]


def a_ward_passed_next(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    if t.stage is Stage.IMPLEMENT:
        run = AgentRun(role=Role.SIEGEMASTER, kind="edge_cases", context=t.last_summary or "")
        return start_run(t.id, run, stage=Stage.EDGE_CASES)
    run = AgentRun(role=Role.LAWBRINGER, kind="review", context=t.last_summary or "")
    return start_run(t.id, run, stage=Stage.REVIEW)


def a_ward_passed_review(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {"role": None}, [RunDiagramCheck(t.id)]


def a_ward_failed(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    run = AgentRun(role=Role.SPIRITMENDER, kind="ward_fix", context=e.detail)
    return start_run(t.id, run, ward_fixes=t.ward_fixes + 1, last_error="Ward failed")


def a_ward_exhausted(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    reason = f"Ward still fails after {t.ward_fixes} fixes by Spiritmender"
    return {"blocked_reason": reason, "last_error": e.detail}, [ReportBlocked(t.id, reason)]


def a_diagrams_synced(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {"missing_diagrams": (), "blocked_reason": None}, [OpenPullRequest(t.id)]


def a_diagrams_missing(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    reason = "diagrams lag the code: " + "; ".join(e.missing)
    return (
        {"missing_diagrams": e.missing, "blocked_reason": reason},
        [ReportBlocked(t.id, reason, e.missing)],
    )


def a_diagrams_updated(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    listing = "\n".join(f"- {m}" for m in t.missing_diagrams)
    context = f"DiagramCheck blocked this task. Update these diagrams:\n{listing}\n{e.detail}"
    run = resumed_run(t, Role.CODEWEAVER, kind="diagram_fix", context=context)
    # Diagram-only work goes straight back to DiagramCheck after a Ward run.
    return start_run(
        t.id, run, stage=Stage.REVIEW, blocked_reason=None, diagram_fixes=t.diagram_fixes + 1
    )


def a_review_round(
    t: TaskRecord, e: Event, lim: Limits, **more: Any
) -> tuple[Updates, list[Effect]]:
    """Start a round with every piece of waiting feedback: the builder resumes its session
    (Spiritmender, for a failed check alone) on the branch as people left it."""
    # A round whose fix could not be pushed (its branch needs a merge first) goes on as
    # this one: its feedback is answered when this round's fix is pushed.
    unanswered = review.current_round(t)
    items = (*(unanswered.feedback if unanswered else ()), *_round_items(t, e))
    kind = review.round_kind(items)
    counters = (
        {"ci_fixes": t.ci_fixes + 1} if kind == "ci" else {"review_rounds": t.review_rounds + 1}
    )
    earlier = t.rounds[:-1] if unanswered else t.rounds
    number = unanswered.number if unanswered else (t.rounds[-1].number + 1 if t.rounds else 1)
    entry = ReviewRound(number=number, kind=kind, feedback=items, started_at=e.at)
    role = Role.SPIRITMENDER if kind == "ci" else Role.CODEWEAVER
    run = resumed_run(t, role, kind=f"{kind}_fix", context=review.describe(items))
    pr = t.pr.model_copy(update={"approved_by": None}) if t.pr else None
    updates: Updates = {
        **counters,
        "rounds": (*earlier, entry)[-review.ROUNDS_KEEP :],
        "feedback": (),
        "seen_feedback": review.remember(t, items),
        # A reviewer's round runs the validators again; a CI fix goes to Ward, then
        # DiagramCheck, as a Ward fix does.
        "stage": Stage.REVIEW if kind == "ci" else Stage.IMPLEMENT,
        "pr": pr,
        "attempts": 0,
        "ward_fixes": 0,
        "role_stack": (),
        "blocked_reason": None,
        **more,
    }
    upd, eff = start_run(t.id, run, **updates)
    return upd, [SyncBranch(t.id), *eff]


def a_feedback_queued(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    """Feedback while the task is at work waits for the next round (the agent goes on)."""
    return {"feedback": review.waiting(t, e.feedback)}, []


def a_rounds_exhausted(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    items = _round_items(t, e)
    if review.round_kind(items) == "ci":
        names = ", ".join(
            f"`{f.check.name}`" + (f" ({f.check.url})" if f.check.url else "")
            for f in items
            if f.check is not None
        )
        reason = (
            f"the check {names} still fails after {t.ci_fixes} fix(es) (ci.max_fixes is "
            f"{lim.max_ci_fixes})"
        )
    else:
        who = ", ".join(f"@{r}" for r in review.reviewers(items))
        reason = (
            f"changes requested by {who}, but the task has had {t.review_rounds} round(s) "
            f"of review already (review.max_rounds is {lim.max_review_rounds})"
        )
    # The feedback is kept: a retry starts a round with it.
    return {"feedback": items, "blocked_reason": reason}, [ReportBlocked(t.id, reason)]


# What a person's retry of a Blocked task starts afresh.
_RETRY_RESET: Updates = {
    "attempts": 0,
    "ward_fixes": 0,
    "conflict_fixes": 0,
    "blocked_reason": None,
    "missing_diagrams": (),
    "review_rounds": 0,
    "ci_fixes": 0,
}


def a_retry_requested(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    builder = t.role is None or t.role in BUILDING_ROLES
    if t.feedback and builder and t.pr is not None and t.pr.state == "open":
        # Blocked by the round bound: a person's retry grants new rounds.
        reset = t.model_copy(update={"review_rounds": 0, "ci_fixes": 0})
        return a_review_round(reset, e, lim, conflict_fixes=0, missing_diagrams=())
    context = e.detail or t.blocked_reason or ""
    run = resumed_run(t, t.role or Role.CODEWEAVER, kind="retry", context=context)
    return start_run(t.id, run, **_RETRY_RESET)


def a_retry_allocation(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    updates: Updates = {
        **_RETRY_RESET,
        "last_error": None,
        "role": None,
        "pending_run": None,
        "agent_running": False,
        "outcome": None,
        "started_at": e.at,
    }
    return updates, [CreateWorktree(t.id)]


def a_reset_outcome(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return {"outcome": None, "last_error": None, "blocked_reason": None}, []


def a_pr_approved(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    pr = t.pr.model_copy(update={"approved_by": e.detail or None}) if t.pr else None
    return {"pr": pr}, [MergePullRequest(t.id)]


def cleanup_effects(
    t: TaskRecord, status: str, notes: str, summary: str | None, keep_branch: bool
) -> list[Effect]:
    effects: list[Effect] = [SyncBacklog(t.id, status, notes, summary), RemoveWorktree(t.id)]
    if not keep_branch:
        effects.append(DeleteBranch(t.id))
    return effects


def a_merge_complete(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    pr = (
        t.pr.model_copy(update={"state": "merged", "merge_sha": e.detail or None}) if t.pr else None
    )
    notes = _notes(t, f"Merged {t.branch or ''} as {e.detail[:12] if e.detail else '?'}.")
    effects = cleanup_effects(t, "Done", notes, t.last_summary, keep_branch=False)
    return {"pr": pr, "outcome": "merged", "role": None}, effects


def a_merge_conflict(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    context = f"Merging into the default branch conflicts in: {e.detail}"
    run = resumed_run(t, Role.CODEWEAVER, kind="conflict_fix", context=context)
    return start_run(t.id, run, stage=Stage.REVIEW, conflict_fixes=t.conflict_fixes + 1)


def a_conflict_exhausted(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    reason = f"merge conflicts remain after {t.conflict_fixes} attempts: {e.detail}"
    return {"blocked_reason": reason}, [ReportBlocked(t.id, reason)]


def a_pr_rejected(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    pr = t.pr.model_copy(update={"state": "closed"}) if t.pr else None
    note = _notes(t, f"Pull request closed without merging{': ' + e.detail if e.detail else ''}.")
    effects = cleanup_effects(t, "To Do", note, None, keep_branch=False)
    return {"pr": pr, "outcome": "rejected", "role": None}, effects


def a_abort(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    why = e.detail or e.name.value
    note = _notes(t, f"Stopped by scaffold ({why}); the branch {t.branch or ''} is kept.")
    effects: list[Effect] = []
    if t.agent_running or t.pending_run is not None:
        effects.append(StopAgent(t.id, why))
    effects += cleanup_effects(t, "To Do", note, None, keep_branch=True)
    return (
        {
            "outcome": "aborted",
            "pending_run": None,
            "agent_running": False,
            "role": None,
            "last_error": why,
        },
        effects,
    )


def a_backlog_synced(t: TaskRecord, e: Event, lim: Limits) -> tuple[Updates, list[Effect]]:
    return (
        {
            "finished_at": e.at,
            "worktree": None,
            "role_stack": (),
            "question_id": None,
            "pending_run": None,
        },
        [],
    )


def _notes(t: TaskRecord, tail: str) -> str:
    roles = sorted({s.role.display for s in t.signals})
    parts = [tail]
    if roles:
        parts.append(
            f"Roles: {', '.join(roles)}; agent runs: {t.agent_runs}; cost ${t.cost_usd:.2f}."
        )
    return " ".join(parts)


# --------------------------------------------------------------------------- the table

_WORKING = (S.PROCESSING, S.TEST_VALIDATION)


def _t(
    source: S, event: E, target: S, action: Action, guard: Guard | None = None, name: str = ""
) -> Transition:
    """A row of the table, named after its event unless ``name`` says otherwise."""
    return Transition(name or event.value, source, event, target, action, guard)


def _rows() -> list[Transition]:
    t = _t
    rows = [
        t(S.IDLE, E.DEPS_RESOLVED, S.READY, _nothing),
        t(S.IDLE, E.RETRY_REQUESTED, S.IDLE, a_reset_outcome, NOT_MERGED),
        t(S.READY, E.TASK_SELECTED, S.ALLOCATING, a_task_selected, SAFETY_OK),
        t(S.READY, E.ABORT_SIGNAL, S.IDLE, a_back_to_idle),
        t(S.READY, E.SAFETY_LIMIT_HIT, S.IDLE, a_back_to_idle),
        t(S.ALLOCATING, E.WORKTREE_CREATED, S.PROCESSING, a_worktree_created),
        t(S.ALLOCATING, E.ALLOCATION_FAILED, S.BLOCKED, a_allocation_failed),
        t(S.PROCESSING, E.CODE_COMPLETE, S.TEST_VALIDATION, a_code_complete),
        t(S.PROCESSING, E.QUESTION_ASKED, S.PROCESSING, a_question_asked),
        t(S.PROCESSING, E.ANSWER_RECEIVED, S.PROCESSING, a_answer_received, AWAITING_ANSWER),
        t(S.TEST_VALIDATION, E.EDGE_CASES_COMPLETE, S.TEST_VALIDATION, a_validator_complete),
        t(S.TEST_VALIDATION, E.REVIEW_COMPLETE, S.DIAGRAM_CHECK, a_review_complete),
        t(S.TEST_VALIDATION, E.WARD_PASSED, S.TEST_VALIDATION, a_ward_passed_next, NEXT_VALIDATOR),
        t(
            S.TEST_VALIDATION,
            E.WARD_PASSED,
            S.DIAGRAM_CHECK,
            a_ward_passed_review,
            REVIEWED,
            "tests_passed",
        ),
        t(S.TEST_VALIDATION, E.WARD_FAILED, S.PROCESSING, a_ward_failed, FIXES_LEFT),
        t(
            S.TEST_VALIDATION,
            E.WARD_FAILED,
            S.BLOCKED,
            a_ward_exhausted,
            FIXES_EXHAUSTED,
            "ward_exhausted",
        ),
        t(S.DIAGRAM_CHECK, E.DIAGRAMS_SYNCED, S.PR_CREATED, a_diagrams_synced),
        t(S.DIAGRAM_CHECK, E.DIAGRAMS_MISSING, S.BLOCKED, a_diagrams_missing),
        t(S.BLOCKED, E.DIAGRAMS_UPDATED, S.PROCESSING, a_diagrams_updated, DIAGRAM_BLOCK),
        t(S.BLOCKED, E.RETRY_REQUESTED, S.PROCESSING, a_retry_requested, BUILDER_BLOCKED),
        t(S.BLOCKED, E.RETRY_REQUESTED, S.TEST_VALIDATION, a_retry_requested, VALIDATOR_BLOCKED),
        t(S.BLOCKED, E.RETRY_REQUESTED, S.ALLOCATING, a_retry_allocation, NO_WORKTREE),
        t(S.PR_CREATED, E.PR_APPROVED, S.MERGING, a_pr_approved),
        t(S.PR_CREATED, E.PR_REJECTED, S.CLEANUP, a_pr_rejected),
        t(S.BLOCKED, E.PR_REJECTED, S.CLEANUP, a_pr_rejected),
        t(S.MERGING, E.MERGE_COMPLETE, S.CLEANUP, a_merge_complete),
        t(S.MERGING, E.MERGE_CONFLICT, S.PROCESSING, a_merge_conflict, CONFLICT_FIXES_LEFT),
        t(
            S.MERGING,
            E.MERGE_CONFLICT,
            S.BLOCKED,
            a_conflict_exhausted,
            CONFLICT_FIXES_EXHAUSTED,
            "conflict_exhausted",
        ),
        t(S.CLEANUP, E.BACKLOG_SYNCED, S.IDLE, a_backlog_synced),
    ]
    # The review loop: feedback on an open pull request (a reviewer's, or a failed check)
    # sends the task back to work on the same branch, bounded; while the task is at work
    # the feedback waits for the next round.
    named = ((E.CHANGES_REQUESTED, "changes"), (E.CI_FAILED, "ci_failure"))
    for src in (S.PR_CREATED, S.MERGING):
        for ev, what in named:
            rows += [
                t(src, ev, S.PROCESSING, a_review_round, ROUNDS_LEFT),
                t(src, ev, S.BLOCKED, a_rounds_exhausted, ROUNDS_USED_UP, f"{what}_over_bound"),
            ]
    for src in (S.PROCESSING, S.TEST_VALIDATION, S.DIAGRAM_CHECK, S.BLOCKED):
        for ev, what in named:
            rows.append(t(src, ev, src, a_feedback_queued, name=f"{what}_kept"))
    for src in _WORKING:
        rows += [
            t(src, E.CONTINUE_ROLE, src, a_continue_role),
            t(src, E.ROLE_FOLLOWUP, S.PROCESSING, a_role_followup, TARGET_BUILDS),
            t(src, E.ROLE_FOLLOWUP, S.TEST_VALIDATION, a_role_followup, TARGET_VALIDATES),
            t(src, E.FOLLOWUP_DONE, S.PROCESSING, a_followup_done, RESUMES_BUILDER),
            t(src, E.FOLLOWUP_DONE, S.TEST_VALIDATION, a_followup_done, RESUMES_VALIDATOR),
            t(src, E.AGENT_FAILED, src, a_retry, ATTEMPTS_LEFT, "retry_on_error"),
            t(
                src,
                E.AGENT_FAILED,
                S.BLOCKED,
                a_retries_exhausted,
                ATTEMPTS_EXHAUSTED,
                "retries_exhausted",
            ),
        ]
    for src in ABORTABLE:
        rows.append(t(src, E.ABORT_SIGNAL, S.CLEANUP, a_abort))
    return rows


# --------------------------------------------------------------------------- checks


def validate_table(rows: Sequence[Transition], initial: S = S.IDLE) -> None:
    """Refuse a table with unreachable states, trap states or ambiguous rows."""
    states = set(S)
    out: dict[S, set[S]] = defaultdict(set)
    groups: dict[tuple[S, E], list[Transition]] = defaultdict(list)
    for row in rows:
        out[row.source].add(row.target)
        groups[(row.source, row.event)].append(row)
    for (src, ev), group in groups.items():
        if len(group) > 1 and any(r.guard is None for r in group):
            raise MachineDefinitionError(
                f"{src}/{ev}: {len(group)} transitions share a source and event; all need guards"
            )
        names = [r.guard.name for r in group if r.guard is not None]
        if len(names) != len(set(names)):
            raise MachineDefinitionError(f"{src}/{ev}: two transitions have the same guard")
    reached = _reach(initial, out)
    unreachable = states - reached
    if unreachable:
        raise MachineDefinitionError(f"unreachable states: {sorted(unreachable)}")
    back: dict[S, set[S]] = defaultdict(set)
    for src, targets in out.items():
        for dst in targets:
            back[dst].add(src)
    can_return = _reach(initial, back)
    traps = states - can_return
    if traps:
        raise MachineDefinitionError(f"trap states (no way back to {initial}): {sorted(traps)}")


def _reach(start: S, edges: dict[S, set[S]]) -> set[S]:
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in edges.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


TABLE: tuple[Transition, ...] = tuple(_rows())
validate_table(TABLE)
_INDEX: dict[tuple[S, E], tuple[Transition, ...]] = {}
for _row in TABLE:
    _INDEX[(_row.source, _row.event)] = (*_INDEX.get((_row.source, _row.event), ()), _row)


# --------------------------------------------------------------------------- decide


def select(task: TaskRecord, event: Event, limits: Limits) -> Transition:
    candidates = _INDEX.get((task.state, event.name), ())
    if not candidates:
        raise IllegalTransition(task.state.value, event.name.value)
    passing = [r for r in candidates if r.guard is None or r.guard.test(task, event, limits)]
    if len(passing) != 1:
        guards = ", ".join(r.guard.name for r in candidates if r.guard is not None)
        raise IllegalTransition(
            task.state.value, event.name.value, f"{len(passing)} of the guards hold: {guards}"
        )
    return passing[0]


def decide(task: TaskRecord, event: Event, limits: Limits | None = None) -> Decision:
    """The pure step: the transition the event takes, the new record and the effects."""
    lim = limits or Limits()
    row = select(task, event, lim)
    updates, effects = row.action(task, event, lim)
    updates["state"] = row.target
    return Decision(task.model_copy(update=updates), tuple(effects), row)


# --------------------------------------------------------------------------- diagram


def state_diagram(initial: str, edges: Iterable[tuple[str, str, str]]) -> str:
    """A Mermaid state diagram of ``(source, target, label)`` edges, each once, in order."""
    lines = ["stateDiagram-v2", f"    [*] --> {initial}"]
    lines += dict.fromkeys(f"    {src} --> {dst}: {label}" for src, dst, label in edges)
    return "\n".join(lines) + "\n"


def mermaid(rows: Iterable[Transition] = TABLE) -> str:
    """The state diagram of the table, in a stable order."""
    return state_diagram(S.IDLE.value, ((r.source.value, r.target.value, r.label) for r in rows))
