"""An agent's work is committed before what follows it: the task's next agent and
every other effect of the task see it, and a commit that was not made is made by the
next run before the task goes on.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from repo_builder import MakeProject, codeweaver_done, complete

from scaffold.git.workspace import Workspace
from scaffold.roles import Role
from scaffold.runtime.agent_jobs import AgentJobs
from scaffold.runtime.repo_ops import RepoOps


def slow_commits(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[tuple[str, float]]:
    """Every worktree commit takes ``seconds`` longer; returns (task, time done) of each."""
    real = Workspace.commit_all
    done: list[tuple[str, float]] = []

    def slow(self: Workspace, task_id: str, message: str, **kwargs: Any) -> str | None:
        time.sleep(seconds)
        try:
            return real(self, task_id, message, **kwargs)
        finally:
            done.append((task_id, time.time()))

    monkeypatch.setattr(Workspace, "commit_all", slow)
    return done


@pytest.mark.parametrize("sandbox", ["bwrap", "off"])
def test_the_next_agent_runs_on_the_last_agents_commit_however_slow_it_is(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    slow_commits(monkeypatch, 0.6)
    seen = ["sh", "-c", "git log -1 --format=%s > seen-by-siegemaster.txt"]
    project = make_project(
        ["Add the notes"],
        [codeweaver_done("TASK-1")],
        {"slots": 1, "sandbox": {"mode": sandbox}},
        validators=[
            {"role": "siegemaster", "actions": [{"run": seen}, complete("edges hold")]},
            {"role": "lawbringer", "actions": [complete("reviewed: fine")]},
        ],
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == "merged"
    # Siegemaster's first command saw Codeweaver's commit at the branch's tip.
    subject = project.git("show", "main:seen-by-siegemaster.txt").strip()
    assert subject == "TASK-1 codeweaver: TASK-1 implemented"
    # Every agent's work reached main, each in its own commit.
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1 done\n"
    subjects = project.git("log", "--format=%s", "main").splitlines()
    assert "TASK-1 codeweaver: TASK-1 implemented" in subjects
    assert "TASK-1 siegemaster: edges hold" in subjects


def reviewer_writes(path: str, content: str) -> list[dict[str, Any]]:
    return [
        {"role": "siegemaster", "actions": [complete("edges hold")]},
        {
            "role": "lawbringer",
            "actions": [{"write": path, "content": content}, complete("reviewed: fine")],
        },
    ]


def test_diagramcheck_and_the_merge_wait_for_the_last_commit(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = slow_commits(monkeypatch, 0.6)
    checked: list[float] = []
    real = RepoOps.check_diagrams

    def check(self: RepoOps, task_id: str) -> Any:
        checked.append(time.time())
        return real(self, task_id)

    monkeypatch.setattr(RepoOps, "check_diagrams", check)
    project = make_project(
        ["Add the notes"],
        [codeweaver_done("TASK-1")],
        {"slots": 1},
        validators=reviewer_writes("notes/review.txt", "looked at it\n"),
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    # DiagramCheck ran only once Lawbringer's commit (the last one) was done, and the
    # merge carries what Lawbringer wrote.
    [when] = checked
    assert when >= max(t for task, t in done if task == "TASK-1")
    assert project.git("show", "main:notes/review.txt") == "looked at it\n"


def test_an_agents_work_left_uncommitted_is_committed_by_the_next_run(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lawbringer's work was not committed (the commit failed) and scaffold stopped
    before DiagramCheck: the next run commits what the worktree holds before
    DiagramCheck and the merge."""
    project = make_project(
        ["Add the notes"],
        [codeweaver_done("TASK-1")],
        {"slots": 1},
        validators=reviewer_writes("notes/review.txt", "looked at it\n"),
    )
    real_commit = AgentJobs.commit_work

    def no_commit_for_the_reviewer(self: AgentJobs, key: str, sig: Any, role: Role) -> None:
        if role is not Role.LAWBRINGER:
            real_commit(self, key, sig, role)

    def stop(self: RepoOps, task_id: str) -> Any:
        raise RuntimeError("scaffold stops here")

    with monkeypatch.context() as patch:
        patch.setattr(AgentJobs, "commit_work", no_commit_for_the_reviewer)
        patch.setattr(RepoOps, "check_diagrams", stop)
        project.run()
    # The journal has the review complete; the reviewer's file is in no commit.
    assert "review_complete" in project.events("TASK-1")
    assert project.task("TASK-1").outcome is None
    branch = project.task("TASK-1").branch
    assert branch is not None
    assert "notes/review.txt" not in project.git("ls-tree", "-r", "--name-only", branch)

    again = project.run()

    assert again.exit_code == 0, again.output
    assert project.task("TASK-1").outcome == "merged"
    assert project.git("show", "main:notes/review.txt") == "looked at it\n"
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1 done\n"
    subjects = project.git("log", "--format=%s", "main").splitlines()
    assert "TASK-1 work left uncommitted by a restart" in subjects


def test_a_commit_that_fails_is_reported_and_the_next_one_takes_the_work(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Workspace.commit_all
    calls: list[str] = []

    def failing_once(self: Workspace, task_id: str, message: str, **kwargs: Any) -> str | None:
        calls.append(message)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        return real(self, task_id, message, **kwargs)

    monkeypatch.setattr(Workspace, "commit_all", failing_once)
    project = make_project(["Add the notes"], [codeweaver_done("TASK-1")], {"slots": 1})

    result = project.run()

    assert result.exit_code == 0, result.output
    assert "TASK-1: committing the agent's work failed: [Errno 5] Input/output error" in (
        result.output
    )
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1 done\n"
