"""A pull request is a task's by identity, never by name: a fork's PR whose head is named
``scaffold/task-1`` is never the task's (approving it merges nothing, closing it rejects
nothing), and closing the task's PR rejects the task only from a writer (a writer's
close: test_app_people); a reader's close is undone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    AppProcess,
    app_process,
    codeweaver,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    wait_for,
    write_script,
)
from app_settle import settle

from ghsim import GitHubSimulator
from scaffold.core.states import Lifecycle
from scaffold.runtime.session import quest_store

REPO = "acme/widgets"
FORK = "mallory/widgets"
BRANCH = "scaffold/task-1"


def _setup(sim: GitHubSimulator) -> None:
    for login in ("alice", "mallory"):
        sim.add_user(login)
    sim.create_repo("acme", "widgets", repo_files())
    sim.set_permission(REPO, "alice", "write")
    sim.set_permission(REPO, "mallory", "read")
    sim.install("acme", ["widgets"])


def _script() -> list[dict[str, object]]:
    return [
        {
            "role": "chaoswhisperer",
            "actions": [planning_tool("requirements", requirements("A widget")), complete("ok")],
        },
        {
            "role": "pathseeker",
            "actions": [planning_tool("tasks", plan(("a", "The widget", []))), complete("ok")],
        },
        codeweaver("task-1", {"widget.txt": "the real widget\n"}),
        *VALIDATORS,
    ]


def _task_pr(sim: GitHubSimulator) -> Any | None:
    return next(
        (p for p in sim.repo(REPO).pulls.values() if p.head == BRANCH and p.head_repo is None),
        None,
    )


def _reviewed(sim: GitHubSimulator, number: int) -> bool | None:
    reviews = sim.repo(REPO).reviews.values()
    return any(r.pr_number == number and "Lawbringer review" in r.body for r in reviews) or None


def _start(sim: GitHubSimulator, app: AppProcess) -> tuple[int, Any, str]:
    """The quest's issue, the task's PR (Lawbringer's review on it) and its head."""
    issue = sim.open_issue(REPO, "Widget", "Make the widget.", by="alice")
    sim.label_issue(REPO, issue, "scaffold", by="alice")
    real = wait_for("the task's PR", lambda: _task_pr(sim))
    wait_for("Lawbringer's review on it", lambda: _reviewed(sim, real.number))
    head = sim.repo(REPO).branch_sha(BRANCH)
    assert head is not None
    return issue, real, head


def _task(app: AppProcess) -> Any:
    return quest_store(app.state / "repos" / REPO).read("issue-1").tasks["TASK-1"]


def test_a_fork_pr_named_like_the_task_is_not_the_tasks(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    write_script(tmp_path, _script())
    with app_process(sim, tmp_path) as app:
        issue, real, head = _start(sim, app)
        # Mallory forks, pushes her own scaffold/task-1 and opens a PR from it.
        sim.fork(REPO, "mallory")
        sim.push_files(FORK, BRANCH, {"evil.txt": "pwned\n"}, "mallory", "TASK-1")
        fake = sim.open_pull(REPO, BRANCH, by="mallory", title="TASK-1", head_repo=FORK)
        # A writer approving the fork's PR approves that PR: not the task's, nothing merges.
        sim.submit_review(REPO, fake, "APPROVED", by="alice")
        settle(sim, app, REPO, issue)
        assert not sim.repo(REPO).pulls[real.number].merged
        assert not sim.repo(REPO).pulls[fake].merged
        # Its author closes it: the task is not rejected, its branch is not deleted.
        sim.close_pr(REPO, fake, by="mallory")
        settle(sim, app, REPO, issue)
        assert sim.repo(REPO).branch_sha(BRANCH) == head
        task = _task(app)
        assert (task.state, task.outcome) == (Lifecycle.PR_CREATED, None)
        assert task.pr is not None
        assert task.pr.number == real.number

        # The task's own PR, approved by a writer, merges: the real work only.
        sim.submit_review(REPO, real.number, "APPROVED", by="alice")
        wait_for("the task's PR merged", lambda: sim.repo(REPO).pulls[real.number].merged)

    repo = sim.repo(REPO)
    assert not repo.pulls[fake].merged
    assert repo.file_at("main", "widget.txt") == b"the real widget\n"
    assert repo.file_at("main", "evil.txt") is None
    # The fork's PR was DiagramChecked like any PR, but never reviewed as a task's.
    assert not _reviewed(sim, fake)
    assert any(r.head_sha == repo.pulls[fake].head_sha for r in repo.check_runs.values())


def test_a_reader_closing_the_tasks_pr_rejects_nothing(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    write_script(tmp_path, _script())
    with app_process(sim, tmp_path) as app:
        issue, real, head = _start(sim, app)
        sim.close_pr(REPO, real.number, by="mallory")  # read access only
        settle(sim, app, REPO, issue)
        # Not rejected: the branch stays, and scaffold reopens the same PR.
        assert sim.repo(REPO).branch_sha(BRANCH) == head
        task = _task(app)
        assert (task.state, task.outcome) == (Lifecycle.PR_CREATED, None)
        wait_for("the task's PR reopened", lambda: real.issue.state == "open" or None)
        assert task.pr is not None
        assert task.pr.number == real.number
        assert len(sim.repo(REPO).pulls) == 1  # no second PR

        sim.submit_review(REPO, real.number, "APPROVED", by="alice")
        wait_for("the task's PR merged", lambda: sim.repo(REPO).pulls[real.number].merged)
    assert any(
        r.get("msg") == "pull request closed by someone without write access: the task goes on"
        and r.get("sender") == "mallory"
        for r in app.log_records()
    )
