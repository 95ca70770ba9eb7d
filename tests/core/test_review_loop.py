"""The review loop in the pure core: rounds from feedback, feedback kept while a round
runs, the bounds, a retry past them, and feedback never taken twice."""

from __future__ import annotations

from datetime import UTC, datetime

from scaffold.core import review
from scaffold.core.effects import ReportBlocked, StartAgent, SyncBranch
from scaffold.core.events import Event
from scaffold.core.lifecycle import Limits, decide
from scaffold.core.states import EventName as E
from scaffold.core.states import Lifecycle as S
from scaffold.core.states import Stage
from scaffold.quest.model import (
    AgentRun,
    CheckFailure,
    Feedback,
    PullRequest,
    ReviewComment,
    TaskRecord,
)
from scaffold.roles import Role

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PR = PullRequest(branch="scaffold/task-1", base="main", number=7, approved_by="ann")


def at_pr(**fields: object) -> TaskRecord:
    return TaskRecord(
        id="TASK-1",
        state=S.PR_CREATED,
        pr=PR,
        worktree="/wt/task-1",
        sessions={"codeweaver": "s-cw", "spiritmender": "s-sp"},
        **fields,  # type: ignore[arg-type]
    )


def changes(key: str, by: str = "ann", body: str = "Rename x") -> Feedback:
    comments = (
        ReviewComment(
            id=101,
            path="src/app.py",
            line=12,
            side="RIGHT",
            diff_hunk="@@ -1,3 +1,12 @@\n+x = 1",
            commit_id="c0ffee",
            body="`x` says nothing",
        ),
        ReviewComment(id=102, path="README.md", line=2, side="RIGHT", body="typo"),
    )
    return Feedback(key=key, kind="review", by=by, at=NOW, body=body, comments=comments)


def failure(key: str, name: str = "test (3.12)") -> Feedback:
    check = CheckFailure(
        name=name,
        conclusion="failure",
        head_sha="abc",
        annotations=("tests/test_app.py:4: failure: assert 1 == 2",),
        log_tail="E   assert 1 == 2",
    )
    return Feedback(key=key, kind="ci", by="github-actions", at=NOW, check=check)


def ev(name: E, *items: Feedback) -> Event:
    return Event(name, at=NOW, feedback=items)


def test_changes_requested_resumes_the_builder_with_every_comment() -> None:
    d = decide(at_pr(), ev(E.CHANGES_REQUESTED, changes("review:1")))
    assert d.task.state is S.PROCESSING
    assert [type(e) for e in d.effects] == [SyncBranch, StartAgent]
    run = d.task.pending_run
    assert run is not None
    assert run.role is Role.CODEWEAVER
    assert run.kind == "review_fix"
    assert run.resume_session == "s-cw"
    for text in (
        "@ann asks for changes",
        "Rename x",
        "comment 101 on src/app.py, line 12",
        "made on commit c0ffee",
        "+x = 1",
        "`x` says nothing",
        "comment 102",
    ):
        assert text in run.context
    assert d.task.stage is Stage.IMPLEMENT  # the validators run again
    assert d.task.review_rounds == 1
    assert d.task.seen_feedback == ("review:1",)
    assert d.task.rounds[-1].number == 1
    assert d.task.rounds[-1].answered_at is None
    assert d.task.pr is not None
    assert d.task.pr.approved_by is None
    assert review.headline(d.task, 5, 2) == "changes requested by @ann, round 1 of 5"


def test_a_failed_check_goes_to_spiritmender_and_then_to_ward() -> None:
    d = decide(at_pr(), ev(E.CI_FAILED, failure("check:test@abc")))
    run = d.task.pending_run
    assert run is not None
    assert run.role is Role.SPIRITMENDER
    assert run.kind == "ci_fix"
    assert "`test (3.12)` concluded failure" in run.context
    assert "tests/test_app.py:4" in run.context
    assert "assert 1 == 2" in run.context
    assert d.task.stage is Stage.REVIEW
    assert d.task.ci_fixes == 1
    assert d.task.review_rounds == 0
    assert review.headline(d.task, 5, 2) == "fixing CI `test (3.12)`, 1 of 2"


def test_feedback_during_a_round_waits_for_the_next_one() -> None:
    first = decide(at_pr(), ev(E.CHANGES_REQUESTED, changes("review:1"))).task
    # The agent is at work: the second review is kept, nothing is started or stopped.
    kept = decide(first, ev(E.CHANGES_REQUESTED, changes("review:2", by="bob")))
    assert kept.effects == ()
    assert kept.task.state is S.PROCESSING
    assert kept.task.pending_run == first.pending_run
    assert [f.key for f in kept.task.feedback] == ["review:2"]
    # The same review delivered again is kept once.
    again = decide(kept.task, ev(E.CHANGES_REQUESTED, changes("review:2", by="bob")))
    assert [f.key for f in again.task.feedback] == ["review:2"]
    # Back at the pull request (the round answered), the waiting feedback is the next round.
    answered = first.rounds[-1].model_copy(update={"answered_at": NOW, "commit": "f1x"})
    back = again.task.model_copy(
        update={"state": S.PR_CREATED, "rounds": (answered,), "pending_run": None}
    )
    second = decide(back, Event(E.CHANGES_REQUESTED, at=NOW))
    assert second.task.state is S.PROCESSING
    assert second.task.feedback == ()
    assert second.task.rounds[-1].number == 2
    assert [f.by for f in second.task.rounds[-1].feedback] == ["bob"]
    assert second.task.seen_feedback == ("review:1", "review:2")


def test_feedback_taken_already_is_not_taken_again() -> None:
    t = decide(at_pr(), ev(E.CHANGES_REQUESTED, changes("review:1"))).task
    assert review.fresh(t, [changes("review:1")]) == ()
    assert [f.key for f in review.fresh(t, [changes("review:1"), changes("review:3")])] == [
        "review:3"
    ]


def test_past_the_round_bound_the_task_is_blocked_and_a_retry_starts_again() -> None:
    t = at_pr(review_rounds=5)
    d = decide(t, ev(E.CHANGES_REQUESTED, changes("review:6")), Limits(max_review_rounds=5))
    assert d.task.state is S.BLOCKED
    assert isinstance(d.effects[0], ReportBlocked)
    assert "review.max_rounds is 5" in d.effects[0].reason
    assert "@ann" in d.effects[0].reason
    assert [f.key for f in d.task.feedback] == ["review:6"]  # kept for the retry
    retried = decide(d.task, Event(E.RETRY_REQUESTED, at=NOW))
    assert retried.task.state is S.PROCESSING
    assert retried.task.review_rounds == 1
    assert retried.task.feedback == ()
    run = retried.task.pending_run
    assert run is not None
    assert run.kind == "review_fix"
    assert "Rename x" in run.context


def test_ci_fixes_are_bounded_apart_from_review_rounds() -> None:
    t = at_pr(ci_fixes=2, review_rounds=0)
    blocked = decide(t, ev(E.CI_FAILED, failure("check:test@abc")), Limits(max_ci_fixes=2))
    assert blocked.task.state is S.BLOCKED
    assert "`test (3.12)` still fails after 2 fix(es)" in str(blocked.task.blocked_reason)
    # A reviewer's round is still allowed.
    ok = decide(t, ev(E.CHANGES_REQUESTED, changes("review:1")), Limits(max_ci_fixes=2))
    assert ok.task.state is S.PROCESSING


def test_a_round_whose_fix_needed_a_merge_carries_its_feedback_on() -> None:
    started = decide(at_pr(), ev(E.CHANGES_REQUESTED, changes("review:1"))).task
    # Its fix could not be pushed: people's commits conflict; the forge asks for a merge.
    back = started.model_copy(update={"state": S.PR_CREATED, "pending_run": None})
    merge = Feedback(key="merge:abc", kind="fix", by=review.SCAFFOLD, at=NOW, body="merge abc")
    d = decide(back, ev(E.CHANGES_REQUESTED, merge))
    assert len(d.task.rounds) == 1
    assert d.task.rounds[0].number == 1
    assert [f.key for f in d.task.rounds[0].feedback] == ["review:1", "merge:abc"]
    assert review.reviewers(d.task.rounds[0].feedback) == ("ann",)


def test_a_validator_blocked_task_retries_its_validator_even_with_feedback_waiting() -> None:
    t = TaskRecord(
        id="TASK-1",
        state=S.BLOCKED,
        role=Role.SIEGEMASTER,
        pr=PR,
        worktree="/wt/task-1",
        feedback=(changes("review:1"),),
        pending_run=AgentRun(role=Role.SIEGEMASTER),
    )
    d = decide(t, Event(E.RETRY_REQUESTED, at=NOW))
    assert d.task.state is S.TEST_VALIDATION
    assert d.task.pending_run is not None
    assert d.task.pending_run.role is Role.SIEGEMASTER
    assert [f.key for f in d.task.feedback] == ["review:1"]  # still waiting
