"""The simulator's state: plain records, no I/O."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

PERMISSION_LEVELS = ("none", "read", "triage", "write", "maintain", "admin")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Ids:
    """Unique integer ids, one sequence for the whole simulator."""

    def __init__(self, start: int = 1000) -> None:
        self._counter = itertools.count(start)

    def next(self) -> int:
        return next(self._counter)


@dataclass
class User:
    login: str
    id: int
    type: str = "User"


@dataclass
class Label:
    id: int
    name: str
    color: str = "ededed"
    description: str | None = None
    default: bool = False


@dataclass
class Issue:
    number: int
    id: int
    title: str
    body: str | None
    user: str
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    state: str = "open"
    state_reason: str | None = None
    closed_at: str | None = None
    closed_by: str | None = None
    labels: list[str] = field(default_factory=list)
    is_pull: bool = False


@dataclass
class Comment:
    id: int
    issue_number: int
    body: str
    user: str
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)


@dataclass
class Reaction:
    id: int
    content: str
    user: str
    subject: tuple[str, int]  # ("issue", number) or ("comment", id)
    created_at: str = field(default_factory=now_iso)


@dataclass
class Pull:
    number: int
    id: int
    issue: Issue
    head: str  # the branch, in ``head_repo``
    base: str
    head_sha: str
    base_sha: str
    draft: bool = False
    maintainer_can_modify: bool = False
    merged: bool = False
    merged_at: str | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    # The repository the head branch lives in, when it is not the base one (a fork).
    head_repo: str | None = None
    # Logins whose review is requested (in the order asked), until they review.
    requested_reviewers: list[str] = field(default_factory=list)


@dataclass
class Review:
    id: int
    pr_number: int
    user: str
    state: str
    body: str
    commit_id: str
    submitted_at: str = field(default_factory=now_iso)


@dataclass
class ReviewComment:
    """An inline comment on a pull request's diff (``pulls/comments/{id}``): the top of a
    thread, or a reply (``in_reply_to_id``) that shares its place. What is stored is where
    it was made (the ``original_*`` of GitHub's object); where it is now on the pull
    request's current diff is worked out when it is shown (``reviews.current_place``)."""

    id: int
    pr_number: int
    review_id: int
    user: str
    body: str
    path: str
    side: str
    original_line: int
    original_start_line: int | None
    start_side: str | None
    original_position: int
    diff_hunk: str
    original_commit_id: str
    in_reply_to_id: int | None = None
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)


@dataclass
class RefChange:
    """One move of a ref, as the simulator saw it (git push, API write, merge)."""

    seq: int
    ref: str
    before: str
    after: str
    sender: str
    at: str = field(default_factory=now_iso)


@dataclass
class PullEvent:
    """A pull request's own happenings (opened, closed, merged, review requested...),
    recorded as their deliveries go out; ``seq`` orders them among ids."""

    seq: int
    pr_number: int
    action: str
    sender: str
    detail: str = ""
    at: str = field(default_factory=now_iso)


@dataclass
class CheckSuite:
    id: int
    head_sha: str
    head_branch: str | None
    app_id: int
    before: str | None = None
    after: str | None = None
    status: str = "queued"
    conclusion: str | None = None
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    suite_id: int
    status: str = "queued"
    conclusion: str | None = None
    started_at: str | None = field(default_factory=now_iso)
    completed_at: str | None = None
    external_id: str | None = ""
    details_url: str | None = None
    output: dict[str, Any] = field(default_factory=dict)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    # Where GitHub's page of the run is (an Actions job's is under its workflow run).
    html_url: str | None = None


@dataclass
class CommitStatus:
    id: int
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    creator: str
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)


@dataclass
class Artifact:
    id: int
    name: str
    run_id: int
    data: bytes
    created_at: str = field(default_factory=now_iso)


@dataclass
class WorkflowRun:
    id: int
    workflow_id: str
    name: str
    head_branch: str
    head_sha: str
    run_number: int
    inputs: dict[str, Any]
    actor: str
    job_id: int
    status: str = "queued"
    conclusion: str | None = None
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    run_started_at: str = field(default_factory=now_iso)
    job_started_at: str | None = None
    job_completed_at: str | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    cancel_requested: bool = False
    # What triggered it, its job's own name (default: the workflow's), the check suite
    # GitHub made for it (its job's check run lives there), and the job's log.
    event: str = "workflow_dispatch"
    job_name: str | None = None
    check_suite_id: int | None = None
    log: str = ""
    log_key: str = ""


@dataclass
class Protection:
    branch: str
    required_checks: list[str]
    required_approvals: int
    strict: bool = True
    # required check -> the App it must come from (GitHub's `checks[].app_id`)
    check_apps: dict[str, int] = field(default_factory=dict)


@dataclass
class RepoState:
    id: int
    owner: str
    name: str
    default_branch: str
    private: bool
    bare_path: Path
    created_at: str = field(default_factory=now_iso)
    issues: dict[int, Issue] = field(default_factory=dict)
    pulls: dict[int, Pull] = field(default_factory=dict)
    comments: dict[int, Comment] = field(default_factory=dict)
    reactions: list[Reaction] = field(default_factory=list)
    labels: dict[str, Label] = field(default_factory=dict)
    reviews: dict[int, Review] = field(default_factory=dict)
    review_comments: dict[int, ReviewComment] = field(default_factory=dict)
    ref_log: list[RefChange] = field(default_factory=list)
    pull_events: list[PullEvent] = field(default_factory=list)
    check_suites: dict[int, CheckSuite] = field(default_factory=dict)
    check_runs: dict[int, CheckRun] = field(default_factory=dict)
    statuses: list[CommitStatus] = field(default_factory=list)
    workflow_runs: dict[int, WorkflowRun] = field(default_factory=dict)
    protections: dict[str, Protection] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    next_number: int = 1
    fork_of: str | None = None  # the parent's full name, for a fork

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def take_number(self) -> int:
        number = self.next_number
        self.next_number += 1
        return number


@dataclass
class App:
    id: int
    slug: str
    owner: str


@dataclass
class Installation:
    id: int
    account: str
    repos: list[str]
    created_at: str = field(default_factory=now_iso)


@dataclass
class Token:
    token: str
    installation_id: int
    expires_at: float
    permissions: dict[str, str]
    # The GITHUB_TOKEN of a workflow run for a pull request from a fork: reads only.
    read_only: bool = False


class TimelineEntry(NamedTuple):
    """One happening of a pull request, for a test to print or assert on."""

    kind: str  # opened, pushed, review, review_comment, reply, comment, review_requested...
    when: str
    who: str
    summary: str
