"""The quest file: the durable source of truth for one quest.

A quest owns its requirements (BDD contexts and observables), its tasks with their
lifecycle state, agent sessions, signals, pending questions and cost. History is
not kept in this object: it lives in the append-only journal beside it (see
``scaffold.quest.store``), so the snapshot stays the same size however long the
quest runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scaffold.core.states import Lifecycle, Stage
from scaffold.roles import Role


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Observable(_Model):
    """Something a person can see when the context holds (the 'then')."""

    id: Annotated[str, Field(min_length=1, max_length=40)]
    description: Annotated[str, Field(min_length=1, max_length=2000)]


class Context(_Model):
    """A BDD context: a situation (given/when) and what must be observable in it."""

    id: Annotated[str, Field(min_length=1, max_length=40)]
    description: Annotated[str, Field(min_length=1, max_length=2000)]
    observables: Annotated[tuple[Observable, ...], Field(min_length=1)]


class Requirements(_Model):
    contexts: tuple[Context, ...] = ()
    locked: bool = False


class QuestPhase(StrEnum):
    REQUIREMENTS = "requirements"  # ChaosWhisperer
    PLANNING = "planning"  # PathSeeker
    EXECUTING = "executing"  # tasks in slots
    DONE = "done"
    STOPPED = "stopped"  # abort or safety limit
    FAILED = "failed"


class RoleFrame(_Model):
    """A role waiting to be resumed after a ``needs-role-followup`` with ``resume: true``."""

    role: Role
    session_id: str | None
    reason: str


class AgentRun(_Model):
    """What the runtime should (re)start for a task or the planning phase."""

    role: Role
    resume_session: str | None = None
    kind: Literal[
        "fresh",
        "continue",
        "answer",
        "resume_after_followup",
        "followup",
        "retry",
        "ward_fix",
        "diagram_fix",
        "conflict_fix",
        "review_fix",
        "ci_fix",
        "edge_cases",
        "review",
    ] = "fresh"
    context: str = ""


class PullRequest(_Model):
    branch: str
    base: str
    number: int | None = None
    url: str | None = None
    head_sha: str | None = None
    state: Literal["open", "merged", "closed"] = "open"
    merge_sha: str | None = None
    approved_by: str | None = None


class ReviewComment(_Model):
    """One inline comment a reviewer left on a line of the pull request's diff."""

    id: int | None = None  # the forge's comment id (None for a local comment)
    path: str
    line: int | None = None
    side: Literal["LEFT", "RIGHT"] | None = None
    start_line: int | None = None
    diff_hunk: str = ""
    commit_id: str | None = None
    body: str


class CheckFailure(_Model):
    """A merge-blocking check that failed on the pull request's head."""

    name: str
    conclusion: str
    head_sha: str
    url: str | None = None
    title: str = ""
    summary: str = ""
    text: str = ""
    annotations: tuple[str, ...] = ()  # "path:line: level: message", one each
    log_tail: str = ""


class Feedback(_Model):
    """What a person (or the repository's CI) said about a task's pull request.

    ``key`` names its source (``review:<id>``, ``comment:<id>``, ``check:<name>@<sha>``,
    ``cli:<n>``): the same feedback is taken once, however often it is delivered.
    """

    key: Annotated[str, Field(min_length=1, max_length=200)]
    kind: Literal["review", "fix", "ci"]
    by: str
    at: datetime
    body: str = ""
    comments: tuple[ReviewComment, ...] = ()
    check: CheckFailure | None = None
    # The review comment whose thread a `/scaffold fix` was written in (replied there).
    thread: int | None = None
    url: str | None = None


class ReviewRound(_Model):
    """One round of work on a task's open pull request, from the feedback to the fix."""

    number: int
    kind: Literal["review", "ci"]
    feedback: tuple[Feedback, ...]
    started_at: datetime | None = None
    commit: str | None = None  # the head pushed with the fix
    answered_at: datetime | None = None  # replies posted, review requested again


class SignalEntry(_Model):
    at: datetime
    role: Role
    session_id: str | None
    signal: dict[str, Any]


class TaskRecord(_Model):
    id: str
    title: str = ""
    dependencies: tuple[str, ...] = ()
    priority: str | None = None
    state: Lifecycle = Lifecycle.IDLE
    stage: Stage = Stage.IMPLEMENT
    role: Role | None = None
    # The agent run the runtime owes this task (None while no agent should run).
    pending_run: AgentRun | None = None
    agent_running: bool = False
    attempts: int = 0  # consecutive errors of the current agent run (retry_on_error)
    ward_fixes: int = 0  # Ward failures handed to Spiritmender in this task
    conflict_fixes: int = 0
    diagram_fixes: int = 0
    sessions: dict[str, str] = Field(default_factory=dict)  # role -> newest session id
    role_stack: tuple[RoleFrame, ...] = ()
    question_id: str | None = None
    blocked_reason: str | None = None
    missing_diagrams: tuple[str, ...] = ()
    last_summary: str | None = None
    last_error: str | None = None
    signals: tuple[SignalEntry, ...] = ()
    worktree: str | None = None
    branch: str | None = None
    pr: PullRequest | None = None
    cost_usd: float = 0.0
    agent_runs: int = 0
    run_dir: str | None = None  # folder of the newest agent run (signals, MCP config)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: Literal["merged", "rejected", "aborted"] | None = None
    # The review loop: rounds of work on the open pull request (the newest last; the
    # newest without ``answered_at`` is running), feedback waiting for the next round,
    # and the keys of every piece of feedback taken (so none is taken twice).
    review_rounds: int = 0  # rounds asked for by reviewers (review.max_rounds)
    ci_fixes: int = 0  # rounds that fixed a failing check (ci.max_fixes)
    rounds: tuple[ReviewRound, ...] = ()
    feedback: tuple[Feedback, ...] = ()
    seen_feedback: tuple[str, ...] = ()


class Question(_Model):
    id: str
    task_id: str | None  # None: asked during planning
    role: Role
    session_id: str | None
    question: str
    context: str
    asked_at: datetime
    answer: str | None = None
    answered_at: datetime | None = None
    answered_by: str | None = None


class PlanningState(_Model):
    role: Role = Role.CHAOSWHISPERER
    pending_run: AgentRun | None = None
    agent_running: bool = False
    attempts: int = 0
    sessions: dict[str, str] = Field(default_factory=dict)
    question_id: str | None = None
    last_summary: str | None = None
    file_map: tuple[str, ...] = ()
    agent_runs: int = 0
    run_dir: str | None = None
    known_before: tuple[str, ...] = ()  # backlog ids that existed when the quest began


class QuestSource(_Model):
    kind: Literal["local", "github"] = "local"
    repo: str | None = None
    issue_number: int | None = None


class Quest(_Model):
    schema_version: Literal[1] = 1
    id: str
    request: str = ""
    source: QuestSource = QuestSource()
    phase: QuestPhase = QuestPhase.EXECUTING
    requirements: Requirements = Requirements()
    planning: PlanningState = PlanningState()
    tasks: dict[str, TaskRecord] = Field(default_factory=dict)
    questions: dict[str, Question] = Field(default_factory=dict)
    cost_usd: float = 0.0
    # The same dollars by the role and by the backend (agent CLI) that spent them.
    cost_by_role: dict[str, float] = Field(default_factory=dict)
    cost_by_backend: dict[str, float] = Field(default_factory=dict)
    consecutive_failures: int = 0
    started_at: datetime = Field(default_factory=utcnow)
    stop_reason: str | None = None
    # "abort" (a person) or the safety limit that stopped new work ("cost", "time", ...).
    stop_limit: str | None = None
    # Sequence number of the last journal record folded into this snapshot.
    seq: int = 0

    def pending_questions(self) -> list[Question]:
        """Unanswered questions someone still waits on (an aborted task waits on nothing)."""

        def waited_on(q: Question) -> bool:
            if q.task_id is None:
                return self.planning.question_id == q.id
            task = self.tasks.get(q.task_id)
            return task is not None and task.question_id == q.id

        return [q for q in self.questions.values() if q.answer is None and waited_on(q)]


class HistoryEntry(_Model):
    """One line of the journal: a transition or a quest-level fact, with the state after it."""

    seq: int
    at: datetime
    kind: Literal["transition", "quest", "note"]
    task_id: str | None = None
    event: str
    source: str | None = None
    target: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
