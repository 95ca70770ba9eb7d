"""``Workspace.commit_all`` with few git processes makes the very commit the long way did.

Each case is built twice, the same way and at the same fixed dates: once committed by
:func:`reference_commit_all` (the algorithm before the hand-off work: 11 to 13 git
processes), once by ``commit_all``. The commits must be identical (same sha, so same
tree, parents, message, author and committer) and leave the worktree the same.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gitrepo import commit_file, git, make_repo, status, tip, write

from scaffold.errors import GitError
from scaffold.git.runner import IDENTITY_CONFIG, IDENTITY_ENV, SAFE_LOCAL
from scaffold.git.workspace import Workspace
from scaffold.ids import branch_for_task

TASK = "TASK-1"
Setup = Callable[[Path, Path], None]  # (repo, worktree)


def reference_commit_all(ws: Workspace, task_id: str, message: str) -> str | None:
    """``commit_all`` as it was: worktree list, health checks, a temp index in /tmp,
    MERGE_HEAD checks, commit, CAS, then ``symbolic-ref`` and ``reset -q``."""
    path = ws.worktree_path(task_id)
    branch = branch_for_task(task_id)
    ws._checked_worktree(task_id, branch)  # GitError when unhealthy
    old_tip = ws._require_rev(f"refs/heads/{branch}")
    with tempfile.TemporaryDirectory(prefix="scaffold-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        ws._git([*SAFE_LOCAL, "read-tree", old_tip], cwd=path, env=env)
        ws._git([*SAFE_LOCAL, "add", "-A"], cwd=path, env=env)
        tree = ws._git([*SAFE_LOCAL, "write-tree"], cwd=path, env=env).stdout.strip()
    where = ws._git(["rev-parse", "--git-path", "MERGE_HEAD"], cwd=path).stdout.strip()
    extra = ws._merging_parent(path / where, old_tip)
    new = None
    parents = [old_tip, *extra]
    if len(parents) > 1 or tree != ws._git(["rev-parse", f"{old_tip}^{{tree}}"]).stdout.strip():
        # By git itself, not by Workspace._commit_tree (which writes the commit in-process).
        with_parents = [arg for parent in parents for arg in ("-p", parent)]
        new = ws._git(
            [*IDENTITY_CONFIG, "commit-tree", "--no-gpg-sign", tree, *with_parents, "-F", "-"],
            env=dict(IDENTITY_ENV),
            input_text=message if message.endswith("\n") else message + "\n",
        ).stdout.strip()
        assert ws._compare_and_swap(branch, new, old_tip, "ref")
    ws._git([*SAFE_LOCAL, "symbolic-ref", "HEAD", f"refs/heads/{branch}"], cwd=path)
    ws._git([*SAFE_LOCAL, "reset", "-q"], cwd=path)
    return new


@pytest.fixture(autouse=True)
def fixed_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.setenv(name, "2026-01-02T03:04:05+00:00")


def build(root: Path, setup: Setup) -> tuple[Workspace, Path]:
    repo = make_repo(root)
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    setup(repo, wt)
    return ws, wt


def outcome(ws: Workspace, wt: Path, commit: Callable[[], str | None]) -> dict[str, Any]:
    try:
        sha: str | None = commit()
        error = None
    except GitError:
        sha, error = None, "GitError"
    admin = Path(git(wt, "rev-parse", "--absolute-git-dir", check=False) or "/nonexistent")
    return {
        "sha": sha,
        "error": error,
        "branch": tip(ws.repo_root, branch_for_task(TASK)),
        "main": tip(ws.repo_root, "main"),
        "head": git(wt, "symbolic-ref", "-q", "HEAD", check=False),
        "index": git(wt, "ls-files", "-s", "-z", check=False),
        "status": status(wt) if error is None else None,
        "merging": os.path.lexists(admin / "MERGE_HEAD"),
        "parents": git(ws.repo_root, "rev-list", "--parents", "-n1", sha).split()[1:]
        if sha
        else None,
    }


def both_ways(tmp_path: Path, setup: Setup, message: str = "TASK-1 work") -> dict[str, Any]:
    ws_a, wt_a = build(tmp_path / "before", setup)
    ws_b, wt_b = build(tmp_path / "after", setup)
    before = outcome(ws_a, wt_a, lambda: reference_commit_all(ws_a, TASK, message))
    after = outcome(ws_b, wt_b, lambda: ws_b.commit_all(TASK, message))
    assert after == before
    return after


# ------------------------------------------------------------------ the cases


def normal_changes(repo: Path, wt: Path) -> None:
    write(wt, "new/module.py", "print('hi')\n")
    write(wt, "lines.txt", "one\nTWO\nthree\n")
    (wt / "README.md").unlink()
    tool = write(wt, "bin/tool", "#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    os.symlink("lines.txt", wt / "link")


def nothing_changed(repo: Path, wt: Path) -> None:
    pass


def only_staged_in_agents_index(repo: Path, wt: Path) -> None:
    """The agent staged part of its work, staged an ignored file, and left an ignored
    file and an edit of a tracked-but-ignored file."""
    commit_file(repo, ".gitignore", "*.log\nbuild/\n")
    write(wt, ".gitignore", "*.log\nbuild/\n")
    write(wt, "a.txt", "a\n")
    write(wt, "b.txt", "b\n")
    git(wt, "add", "a.txt")
    write(wt, "debug.log", "ignored\n")
    write(wt, "build/out.bin", "ignored too\n")
    write(wt, "forced.log", "agent forced it into its index\n")
    git(wt, "add", "-f", "forced.log")


def tracked_ignored_file(repo: Path, wt: Path) -> None:
    write(wt, "keep.log", "tracked although ignored\n")
    write(wt, ".gitignore", "*.log\n")
    git(wt, "add", "-f", "keep.log", ".gitignore")
    git(wt, "commit", "-q", "-m", "agent commits a tracked ignored file")
    write(wt, "keep.log", "edited\n")


def agent_committed_itself(repo: Path, wt: Path) -> None:
    write(wt, "mine.txt", "committed by the agent\n")
    git(wt, "add", "mine.txt")
    git(wt, "commit", "-q", "-m", "agent commit")
    write(wt, "more.txt", "left uncommitted\n")


def files_named_like_options_and_revisions(repo: Path, wt: Path) -> None:
    for name in ("--output=x", "-A", "HEAD", "--", "index", "MERGE_HEAD", "@", "main"):
        write(wt, name, f"{name}\n")
    write(wt, "refs/heads/scaffold/task-1", "a file named like the branch\n")
    write(wt, "refs/heads/scaffold/task-1^{commit}", "and like the revision\n")


def conflict_merge_resolved(repo: Path, wt: Path) -> None:
    """A conflict merge scaffold started (default branch into the task) that the agent
    resolved without committing: the commit gets the default branch as second parent."""
    write(wt, "lines.txt", "one\ntask\nthree\n")
    git(wt, "commit", "-q", "-am", "task edits")
    commit_file(repo, "lines.txt", "one\nmain\nthree\n", "main edits")
    git(wt, "merge", "--no-edit", "main", check=False)
    write(wt, "lines.txt", "one\nresolved\nthree\n")


def conflict_merge_unresolved_markers(repo: Path, wt: Path) -> None:
    write(wt, "lines.txt", "one\ntask\nthree\n")
    git(wt, "commit", "-q", "-am", "task edits")
    commit_file(repo, "lines.txt", "one\nmain\nthree\n", "main edits")
    git(wt, "merge", "--no-edit", "main", check=False)


def planted_merge_head(repo: Path, wt: Path) -> None:
    """MERGE_HEAD naming a commit that is not on the default branch does not count."""
    write(wt, "x.txt", "x\n")
    stray = git(wt, "commit-tree", "-m", "stray", git(wt, "rev-parse", "HEAD^{tree}"))
    admin = Path(git(wt, "rev-parse", "--absolute-git-dir"))
    (admin / "MERGE_HEAD").write_text(stray + "\n")


def merge_head_fifo(repo: Path, wt: Path) -> None:
    write(wt, "x.txt", "x\n")
    os.mkfifo(Path(git(wt, "rev-parse", "--absolute-git-dir")) / "MERGE_HEAD")


def head_on_another_branch(repo: Path, wt: Path) -> None:
    git(wt, "symbolic-ref", "HEAD", "refs/heads/main")
    write(wt, "c.txt", "c\n")


def head_detached(repo: Path, wt: Path) -> None:
    git(wt, "checkout", "-q", "--detach")
    write(wt, "c.txt", "c\n")


def head_through_another_symref(repo: Path, wt: Path) -> None:
    """HEAD -> refs/heads/alias -> the task branch: git (then and now) resolves it."""
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/scaffold/task-1")
    git(wt, "symbolic-ref", "HEAD", "refs/heads/alias")
    write(wt, "c.txt", "c\n")


def gitdir_written_relative(repo: Path, wt: Path) -> None:
    """``worktree.useRelativePaths`` (git 2.48) writes the admin folder's gitdir relative."""
    admin = Path(git(wt, "rev-parse", "--absolute-git-dir"))
    (admin / "gitdir").write_text(os.path.relpath(wt / ".git", admin) + "\n")
    write(wt, "c.txt", "c\n")


def head_on_unborn_branch(repo: Path, wt: Path) -> None:
    git(wt, "symbolic-ref", "HEAD", "refs/heads/orphan")


def git_file_points_at_main_repo(repo: Path, wt: Path) -> None:
    (wt / ".git").write_text(f"gitdir: {repo / '.git'}\n")
    write(wt, "c.txt", "c\n")


def git_file_removed(repo: Path, wt: Path) -> None:
    (wt / ".git").unlink()
    write(repo, "user.txt", "the person's untracked file\n")


def worktree_locked(repo: Path, wt: Path) -> None:
    git(repo, "worktree", "lock", str(wt))
    write(wt, "c.txt", "c\n")


CASES: list[Setup] = [
    normal_changes,
    nothing_changed,
    only_staged_in_agents_index,
    tracked_ignored_file,
    agent_committed_itself,
    files_named_like_options_and_revisions,
    conflict_merge_resolved,
    conflict_merge_unresolved_markers,
    planted_merge_head,
    merge_head_fifo,
    head_on_another_branch,
    head_detached,
    head_through_another_symref,
    head_on_unborn_branch,
    git_file_points_at_main_repo,
    git_file_removed,
    worktree_locked,
]


@pytest.mark.parametrize("setup", CASES, ids=[c.__name__ for c in CASES])
def test_commit_is_the_same_as_before(tmp_path: Path, setup: Setup) -> None:
    both_ways(tmp_path, setup)


def test_the_cases_do_what_they_say(tmp_path: Path) -> None:
    """A few outcomes spelled out, so the comparison is not between two wrong answers."""
    assert both_ways(tmp_path / "n", normal_changes)["sha"] is not None
    assert both_ways(tmp_path / "e", nothing_changed)["sha"] is None
    merged = both_ways(tmp_path / "c", conflict_merge_resolved)
    assert len(merged["parents"]) == 2
    assert merged["parents"][1] == merged["main"]
    assert not merged["merging"]
    assert merged["status"] == ""
    assert len(both_ways(tmp_path / "p", planted_merge_head)["parents"]) == 1
    for refused in (head_on_another_branch, head_detached, git_file_points_at_main_repo):
        assert both_ways(tmp_path / refused.__name__, refused)["error"] == "GitError"
    odd = both_ways(tmp_path / "o", files_named_like_options_and_revisions)
    names = git(tmp_path / "o" / "after", "ls-tree", "-r", "--name-only", odd["sha"]).split("\n")
    assert {"--output=x", "-A", "HEAD", "--", "refs/heads/scaffold/task-1"} <= set(names)


def test_a_stale_index_lock_does_not_stop_the_commit(repo: Path) -> None:
    """An agent killed in the middle of a git command leaves ``index.lock`` behind."""
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    admin = Path(git(wt, "rev-parse", "--absolute-git-dir"))
    (admin / "index.lock").write_text("")
    write(wt, "a.txt", "a\n")
    sha = ws.commit_all(TASK, "work")
    assert sha == tip(repo, "scaffold/task-1")
    assert "a.txt" in git(wt, "ls-files")
    assert not [p for p in admin.iterdir() if p.name.startswith("scaffold-index-")]


def test_no_repository_hook_runs_when_scaffold_moves_a_branch(repo: Path, tmp_path: Path) -> None:
    """The hooks folder is the agents' to write; ``update-ref`` alone would run the
    reference-transaction hook."""
    ran = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    write(wt, "a.txt", "a\n")
    assert ws.commit_all(TASK, "work") is not None
    assert ws.merge(TASK, "merge").merged
    assert not ran.exists()


def test_a_relative_gitdir_is_understood(tmp_path: Path) -> None:
    ws, _wt = build(tmp_path / "rel", gitdir_written_relative)
    sha = ws.commit_all(TASK, "work")
    assert sha is not None
    assert "c.txt" in git(ws.repo_root, "ls-tree", "--name-only", sha).split()


# ------------------------------------------------ after a first commit (a saved index)


def settle(ws: Workspace) -> None:
    """A first commit of nothing: the next one starts from the index it saved."""
    assert ws.commit_all(TASK, "settle") is None


@pytest.mark.parametrize("setup", CASES, ids=[c.__name__ for c in CASES])
def test_a_settled_worktree_commits_the_same_as_before(tmp_path: Path, setup: Setup) -> None:
    """The same cases, made after a commit that kept its walk: every change (or refusal)
    is seen as a fresh index sees it."""
    ws_a, wt_a = build(tmp_path / "before", nothing_changed)
    ws_b, wt_b = build(tmp_path / "after", nothing_changed)
    settle(ws_b)
    setup(ws_a.repo_root, wt_a)
    setup(ws_b.repo_root, wt_b)
    before = outcome(ws_a, wt_a, lambda: reference_commit_all(ws_a, TASK, "TASK-1 work"))
    after = outcome(ws_b, wt_b, lambda: ws_b.commit_all(TASK, "TASK-1 work"))
    assert after == before


@pytest.mark.parametrize(
    "change",
    [
        "same_size_rewrite_mtime_back",
        "touch_only",
        "chmod",
        "new_empty_folder",
        "rename",
        "symlink_retarget",
        "nested_new_file",
        "hard_link",
    ],
)
def test_after_settling_every_change_goes_to_git(repo: Path, change: str) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    write(wt, "deep/er/file.txt", "deep\n")
    os.symlink("lines.txt", wt / "link")
    assert ws.commit_all(TASK, "setup") is not None
    settle(ws)
    lines = wt / "lines.txt"
    before = os.stat(lines)
    if change == "same_size_rewrite_mtime_back":
        lines.write_text("one\nTWO\nthree\n")
        os.utime(lines, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif change == "touch_only":
        os.utime(lines, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif change == "chmod":
        lines.chmod(0o755)
    elif change == "new_empty_folder":
        (wt / "deep" / "empty").mkdir()
    elif change == "rename":
        os.rename(wt / "deep" / "er" / "file.txt", wt / "deep" / "er" / "moved.txt")
    elif change == "symlink_retarget":
        (wt / "link").unlink()
        os.symlink("README.md", wt / "link")
    elif change == "nested_new_file":
        write(wt, "deep/er/new.txt", "new\n")
    elif change == "hard_link":
        os.link(lines, wt / "deep" / "twin.txt")
    tip_before = tip(repo, "scaffold/task-1")
    new = ws.commit_all(TASK, "after")
    committed = change not in ("touch_only", "new_empty_folder")  # git keeps neither
    assert (new is not None) == committed
    expected = fresh_tree(wt, tip_before)
    assert git(repo, "rev-parse", f"{new or tip_before}^{{tree}}") == expected


def fresh_tree(wt: Path, base: str) -> str:
    """The tree a fresh index of the worktree's files gives (git alone)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        for args in (["read-tree", base], ["add", "-A"], ["write-tree"]):
            out = subprocess.run(
                ["git", *args], cwd=wt, env=env, check=True, capture_output=True, text=True
            )
        return out.stdout.strip()


def test_after_settling_head_moved_alone_is_refused(repo: Path) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    settle(ws)
    git(wt, "symbolic-ref", "HEAD", "refs/heads/main")  # the same commit, the same files
    with pytest.raises(GitError):
        ws.commit_all(TASK, "work")


def test_after_settling_a_branch_moved_elsewhere_is_followed(repo: Path) -> None:
    """Another scaffold process (a restart) moved the branch to a commit of the same
    tree: git says nothing changed, the new tip is kept."""
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    settle(ws)
    same_tree = git(repo, "commit-tree", "-m", "elsewhere", "-p", "scaffold/task-1", "main^{tree}")
    git(repo, "update-ref", "refs/heads/scaffold/task-1", same_tree)
    assert ws.commit_all(TASK, "work") is None
    write(wt, "a.txt", "a\n")
    new = ws.commit_all(TASK, "work")
    assert new is not None
    assert git(repo, "rev-parse", f"{new}^") == same_tree
