"""Names of the task lifecycle states, stages and events."""

from __future__ import annotations

from enum import StrEnum


class Lifecycle(StrEnum):
    IDLE = "Idle"
    READY = "Ready"
    ALLOCATING = "Allocating"
    PROCESSING = "Processing"
    TEST_VALIDATION = "TestValidation"
    DIAGRAM_CHECK = "DiagramCheck"
    BLOCKED = "Blocked"
    PR_CREATED = "PR_Created"
    MERGING = "Merging"
    CLEANUP = "Cleanup"


# The states an abort stops (back to To Do through Cleanup); a merge or a clean-up
# under way finishes. A tuple: the transition table's rows follow its order.
ABORTABLE = (
    Lifecycle.ALLOCATING,
    Lifecycle.PROCESSING,
    Lifecycle.TEST_VALIDATION,
    Lifecycle.DIAGRAM_CHECK,
    Lifecycle.BLOCKED,
    Lifecycle.PR_CREATED,
)
# States in which the task owns a worktree (and maybe a running agent).
IN_FLIGHT = frozenset({*ABORTABLE, Lifecycle.MERGING, Lifecycle.CLEANUP})
# The states in which a task holds one of the N slots (an agent at work): taken when
# selected, given back once its agents are done; DiagramCheck, the pull request, the
# merge and the clean-up hold none. A task parked on a question frees its slot too.
HOLDS_SLOT = frozenset(
    {
        Lifecycle.ALLOCATING,
        Lifecycle.PROCESSING,
        Lifecycle.TEST_VALIDATION,
    }
)


class Stage(StrEnum):
    """Which gate the next passing Ward run opens (Ward -> Siegemaster -> Ward -> Lawbringer)."""

    IMPLEMENT = "implement"  # a pass starts Siegemaster
    EDGE_CASES = "edge_cases"  # a pass starts Lawbringer
    REVIEW = "review"  # a pass goes to DiagramCheck


class EventName(StrEnum):
    DEPS_RESOLVED = "deps_resolved"
    TASK_SELECTED = "task_selected"
    ABORT_SIGNAL = "abort_signal"
    SAFETY_LIMIT_HIT = "safety_limit_hit"
    WORKTREE_CREATED = "worktree_created"
    ALLOCATION_FAILED = "allocation_failed"
    CODE_COMPLETE = "code_complete"
    CONTINUE_ROLE = "continue_role"
    QUESTION_ASKED = "question_asked"
    ANSWER_RECEIVED = "answer_received"
    ROLE_FOLLOWUP = "role_followup"
    FOLLOWUP_DONE = "followup_done"
    AGENT_FAILED = "agent_failed"
    EDGE_CASES_COMPLETE = "edge_cases_complete"
    REVIEW_COMPLETE = "review_complete"
    WARD_PASSED = "ward_passed"
    WARD_FAILED = "ward_failed"
    DIAGRAMS_SYNCED = "diagrams_synced"
    DIAGRAMS_MISSING = "diagrams_missing"
    DIAGRAMS_UPDATED = "diagrams_updated"
    RETRY_REQUESTED = "retry_requested"
    PR_APPROVED = "pr_approved"
    PR_REJECTED = "pr_rejected"
    MERGE_COMPLETE = "merge_complete"
    MERGE_CONFLICT = "merge_conflict"
    CHANGES_REQUESTED = "changes_requested"
    CI_FAILED = "ci_failed"
    BACKLOG_SYNCED = "backlog_synced"
