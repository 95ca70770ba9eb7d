"""How many git processes each Workspace operation starts on its common path.

Every one is a fork and exec on the path between one task and the next, so each
operation's count has an upper bound here (counting is deterministic; time is not
measured). Each call must also carry the options that turn hooks and fsmonitor off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from gitrepo import commit_file, git, make_repo, tip

import scaffold.git.worktrees as worktrees
from scaffold.git.runner import SAFE_LOCAL
from scaffold.git.worktrees import Workspace


class Calls:
    """The git commands Workspace ran (subcommand first), since the last ``clear``."""

    def __init__(self) -> None:
        self.argv: list[list[str]] = []

    def clear(self) -> None:
        self.argv.clear()

    def names(self) -> list[str]:
        return [argv[0] for argv in self.argv]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    seen = Calls()
    real = worktrees.run_git

    def counting(args: Sequence[str], *a: Any, **kw: Any) -> Any:
        argv = [str(x) for x in args]
        assert argv[: len(SAFE_LOCAL)] == list(SAFE_LOCAL), argv  # no hook, no fsmonitor
        rest = argv[len(SAFE_LOCAL) :]
        while rest[:1] == ["-c"]:
            rest = rest[2:]
        seen.argv.append(rest)
        return real(args, *a, **kw)

    monkeypatch.setattr(worktrees, "run_git", counting)
    return seen


def warm(ws: Workspace) -> None:
    """What a Workspace works out once: the default branch, the common dir, the exclude."""
    ws.default_branch()
    ws.ensure_excluded()
    ws.object_format()


def test_create_worktree_for_a_new_task_runs_two(repo: Path, calls: Calls) -> None:
    ws = Workspace(repo)
    warm(ws)
    calls.clear()
    path = ws.create_worktree("TASK-1")
    assert calls.names() == ["for-each-ref", "worktree"]
    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-1"
    assert tip(repo, "scaffold/task-1") == tip(repo, "main")
    assert git(repo, "config", "--get-regexp", "^branch\\.", check=False) == ""  # no tracking


def test_create_worktree_on_a_kept_branch_runs_two(repo: Path, calls: Calls) -> None:
    ws = Workspace(repo)
    ws.create_worktree("TASK-1")
    ws.remove_worktree("TASK-1")  # the branch stays
    calls.clear()
    path = ws.create_worktree("TASK-1")
    assert calls.names() == ["for-each-ref", "worktree"]
    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-1"


def test_remove_worktree_runs_two_and_delete_branch_one(repo: Path, calls: Calls) -> None:
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-1")
    (path / "untracked.txt").write_text("x\n")
    calls.clear()
    ws.remove_worktree("TASK-1")
    assert [argv[:2] for argv in calls.argv] == [["worktree", "list"], ["worktree", "remove"]]
    assert not path.exists()
    assert "task-1" not in git(repo, "worktree", "list", "--porcelain")
    calls.clear()
    ws.delete_branch("TASK-1")
    assert calls.names() == ["branch"]
    assert git(repo, "branch", "--list", "scaffold/*") == ""


def test_merge_runs_four(repo: Path, calls: Calls) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    (wt / "feature.txt").write_text("feature\n")
    assert ws.commit_all("TASK-1", "work") is not None
    calls.clear()
    result = ws.merge("TASK-1", "Merge TASK-1")
    assert result.merged
    assert not result.already_merged
    # The merge commit is written in-process (scaffold.git.objects): no commit-tree.
    assert calls.names() == ["for-each-ref", "merge-tree", "read-tree", "update-ref"]
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert git(repo, "status", "--porcelain") == ""
    calls.clear()
    assert ws.merge("TASK-1", "Merge TASK-1").already_merged


def test_commit_on_default_runs_six_and_four_when_nothing_changed(repo: Path, calls: Calls) -> None:
    ws = Workspace(repo)
    warm(ws)
    task = repo / "backlog" / "tasks" / "task-1.md"
    task.parent.mkdir(parents=True)
    task.write_text("status: In Progress\n")
    calls.clear()
    assert ws.commit_on_default([task], "scaffold: TASK-1 In Progress") is not None
    assert calls.names() == [
        "for-each-ref",
        "read-tree",
        "update-index",
        "write-tree",
        "update-index",
        "update-ref",
    ]
    assert git(repo, "status", "--porcelain") == ""
    calls.clear()
    assert ws.commit_on_default([task], "scaffold: TASK-1 In Progress") is None
    assert calls.names() == ["for-each-ref", "read-tree", "update-index", "write-tree"]


def test_a_task_from_start_to_cleanup_runs_no_hook_and_few_processes(
    repo: Path, tmp_path: Path, calls: Calls
) -> None:
    """Hooks git would run on the way (the hooks folder is the agents' to write)."""
    ran = tmp_path / "hooks-ran"
    for name in ("reference-transaction", "post-checkout", "post-index-change", "post-commit"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {ran}\n")
        hook.chmod(0o755)
    ws = Workspace(repo)
    warm(ws)
    task = repo / "backlog" / "tasks" / "task-1.md"
    task.parent.mkdir(parents=True)
    calls.clear()

    task.write_text("status: In Progress\n")
    assert ws.commit_on_default([task], "scaffold: TASK-1 In Progress") is not None
    wt = ws.create_worktree("TASK-1")
    (wt / "feature.txt").write_text("feature\n")
    assert ws.commit_all("TASK-1", "work") is not None
    assert ws.merge("TASK-1", "Merge TASK-1").merged
    ws.remove_worktree("TASK-1")
    ws.delete_branch("TASK-1")
    task.write_text("status: Done\n")
    assert ws.commit_on_default([task], "scaffold: TASK-1 Done") is not None

    assert not ran.exists()
    # commit_all: 4 (the saved index of the tip makes read-tree unneeded); no commit-tree
    assert len(calls.argv) == 6 + 2 + 4 + 4 + 2 + 1 + 6  # 25; 49 before
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / "feature.txt").read_text() == "feature\n"


def test_a_repository_path_with_a_newline_is_read_right(tmp_path: Path, calls: Calls) -> None:
    """for-each-ref's records are NUL-separated fields; a path may hold a newline."""
    repo = make_repo(tmp_path / "we ird\nrepo")
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    commit_file(wt, "feature.txt", "feature\n")  # (commit_all refuses such a path)
    ws.object_format()
    calls.clear()
    assert ws.merge("TASK-1", "Merge TASK-1").merged
    assert len(calls.argv) == 4  # the checkout was recognised without worktree list
    assert (repo / "feature.txt").read_text() == "feature\n"
