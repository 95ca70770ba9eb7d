"""Workspace against real git repositories: worktrees, commits, merges, cleanup."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from gitrepo import commit_file, git, make_repo, status, tip, write

from scaffold.errors import GitError, InvalidIdError
from scaffold.git.merges import MergeResult
from scaffold.git.workspace import Workspace
from scaffold.git.worktrees import safe_child


def parents(root: Path, rev: str) -> list[str]:
    return git(root, "rev-list", "--parents", "-n", "1", rev).split()[1:]


def task_commit(ws: Workspace, task: str, rel: str, content: str) -> str:
    wt = ws.create_worktree(task)
    write(wt, rel, content)
    sha = ws.commit_all(task, f"{task}: {rel}")
    assert sha is not None
    return sha


# ------------------------------------------------------------------ worktrees


def test_create_worktree_branches_from_default_tip_and_is_ignored(repo: Path) -> None:
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-1")

    assert path == repo.resolve() / ".scaffold" / "worktrees" / "task-1"
    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-1"
    assert tip(repo, "scaffold/task-1") == tip(repo, "main")
    assert (path / "README.md").read_text() == "# demo\n"
    # .scaffold/ is ignored through info/exclude; no tracked file was touched.
    assert status(repo) == ""
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert "/.scaffold/" in exclude
    assert not (repo / ".gitignore").exists()


def test_create_worktree_is_idempotent_and_keeps_work(repo: Path) -> None:
    ws = Workspace(repo)
    first = ws.create_worktree("task-2")
    write(first, "wip.txt", "unsaved agent work\n")

    again = Workspace(repo).create_worktree("2")  # a restarted orchestrator

    assert again == first
    assert (again / "wip.txt").read_text() == "unsaved agent work\n"
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.scaffold/") == 1


def test_create_worktree_reuses_existing_branch(repo: Path) -> None:
    ws = Workspace(repo)
    work = task_commit(ws, "TASK-3", "feature.py", "x = 1\n")
    commit_file(repo, "later.txt", "main moved on\n")
    shutil.rmtree(ws.worktree_path("TASK-3"))  # folder lost, branch kept

    path = ws.create_worktree("TASK-3")

    assert tip(repo, "scaffold/task-3") == work
    assert (path / "feature.py").read_text() == "x = 1\n"
    assert not (path / "later.txt").exists()


def test_create_worktree_repairs_unregistered_stale_folder(repo: Path) -> None:
    ws = Workspace(repo)
    stale = ws.worktree_path("TASK-4")
    write(stale, "junk/left-behind.txt", "from a crashed run\n")

    path = ws.create_worktree("TASK-4")

    assert path == stale
    assert not (path / "junk").exists()
    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-4"


def test_create_worktree_repairs_locked_half_made_worktree(repo: Path) -> None:
    """`git worktree add` killed mid-way leaves a locked entry (reason "initializing")."""
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-5")
    git(repo, "worktree", "lock", "--reason", "initializing", str(path))
    shutil.rmtree(path)

    again = ws.create_worktree("TASK-5")

    assert again == path
    assert git(again, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-5"
    listed = git(repo, "worktree", "list", "--porcelain")
    assert "locked" not in listed


def test_create_worktree_repairs_wrong_branch_at_path(repo: Path) -> None:
    ws = Workspace(repo)
    path = ws.worktree_path("TASK-6")
    path.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", "other", str(path))

    again = ws.create_worktree("TASK-6")

    assert git(again, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-6"


def test_create_worktree_moves_branch_out_of_an_old_scaffold_worktree(repo: Path) -> None:
    """The branch checked out in a renamed scaffold folder under the root."""
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-7")
    old = ws.worktree_root / "task-7-old"
    git(repo, "worktree", "move", str(path), str(old))

    again = ws.create_worktree("TASK-7")

    assert again == path
    assert git(again, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-7"
    assert not old.exists()
    assert str(old) not in git(repo, "worktree", "list", "--porcelain")


def test_create_worktree_when_a_gone_worktree_still_names_the_branch(repo: Path) -> None:
    """A registration whose folder is gone, its HEAD the (deleted) task branch, elsewhere
    under the root; and one at the path itself, on no branch: both pruned, not refused."""
    ws = Workspace(repo)
    other = ws.worktree_root / "elsewhere"
    other.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", "scaffold/task-8", str(other))
    git(repo, "worktree", "add", "-q", "--detach", str(ws.worktree_path("TASK-8")))
    shutil.rmtree(other)
    shutil.rmtree(ws.worktree_path("TASK-8"))
    git(repo, "update-ref", "-d", "refs/heads/scaffold/task-8")

    path = ws.create_worktree("TASK-8")

    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-8"
    assert tip(repo, "scaffold/task-8") == tip(repo, "main")
    assert "prunable" not in git(repo, "worktree", "list", "--porcelain")


def test_create_worktree_refuses_a_branch_the_person_has_checked_out(
    repo: Path, tmp_path: Path
) -> None:
    ws = Workspace(repo)
    git(repo, "branch", "scaffold/task-9")
    git(repo, "worktree", "add", "-q", str(tmp_path / "person"), "scaffold/task-9")

    with pytest.raises(GitError):
        ws.create_worktree("TASK-9")

    assert git(tmp_path / "person", "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-9"
    assert not ws.worktree_path("TASK-9").exists()


def test_create_worktree_refuses_a_planted_symlink_without_following_it(
    repo: Path, tmp_path: Path
) -> None:
    ws = Workspace(repo)
    outside = write(tmp_path / "outside", "keep.txt", "mine\n").parent
    ws.worktree_root.mkdir(parents=True)
    (ws.worktree_root / "task-2").symlink_to(outside, target_is_directory=True)

    with pytest.raises(InvalidIdError):
        ws.create_worktree("TASK-2")

    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert git(repo, "branch", "--list", "scaffold/*") == ""


def test_create_worktree_with_custom_root_inside_repo_is_ignored(repo: Path) -> None:
    ws = Workspace(repo, worktree_root=repo / "wt")
    path = ws.create_worktree("TASK-1")

    assert path == repo.resolve() / "wt" / "task-1"
    assert status(repo) == ""


@pytest.mark.parametrize(
    "bad", ["../x", "1;rm", "--upload-pack", "task-1/../../x", "/etc/passwd", "1\n2", ""]
)
def test_invalid_task_ids_are_rejected_before_touching_git(repo: Path, bad: str) -> None:
    ws = Workspace(repo)
    before = git(repo, "for-each-ref")
    with pytest.raises(InvalidIdError):
        ws.create_worktree(bad)
    for call in (ws.commit_all, ws.merge):
        with pytest.raises(InvalidIdError):
            call(bad, "msg")
    with pytest.raises(InvalidIdError):
        ws.remove_worktree(bad)
    with pytest.raises(InvalidIdError):
        ws.delete_branch(bad)
    assert git(repo, "for-each-ref") == before
    assert not (repo / ".scaffold").exists()


@pytest.mark.parametrize("name", ["../x", "..", ".", "a/b", "", "x\0y"])
def test_safe_child_refuses_escapes_even_without_id_validation(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidIdError):
        safe_child(tmp_path, name)


def test_safe_child_refuses_symlink_out_of_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "task-1").symlink_to(tmp_path)
    with pytest.raises(InvalidIdError):
        safe_child(root, "task-1")
    assert safe_child(root, "task-2") == root.resolve() / "task-2"


# ------------------------------------------------------------- default branch


def test_default_branch_follows_main_worktree_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", branch="trunk")
    ws = Workspace(repo)
    assert ws.default_branch() == "trunk"
    path = ws.create_worktree("TASK-1")
    assert tip(path, "HEAD") == tip(repo, "trunk")


def test_default_branch_configured_wins_and_is_validated(repo: Path) -> None:
    git(repo, "branch", "develop")
    assert Workspace(repo, default_branch="develop").default_branch() == "develop"
    for bad in ("-x", "a..b", "x@{1}", "has space"):
        with pytest.raises(InvalidIdError):
            Workspace(repo, default_branch=bad).default_branch()


def test_default_branch_falls_back_to_main_when_head_detached(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    assert Workspace(repo).default_branch() == "main"


def test_git_failure_raises_git_error_with_fields(tmp_path: Path) -> None:
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    with pytest.raises(GitError) as info:
        Workspace(not_a_repo).default_branch()
    assert info.value.returncode != 0
    assert "rev-parse" in info.value.argv
    assert "not a git repository" in info.value.stderr


# -------------------------------------------------------------------- commits


def test_commit_all_commits_everything_as_scaffold(repo: Path) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    write(wt, "new/module.py", "print('hi')\n")
    write(wt, "lines.txt", "one\nTWO\nthree\n")
    (wt / "README.md").unlink()

    sha = ws.commit_all("TASK-1", "TASK-1: work")

    assert sha == tip(repo, "scaffold/task-1")
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", sha) == (
        "scaffold <scaffold@localhost>|scaffold <scaffold@localhost>|TASK-1: work"
    )
    assert status(wt) == ""
    assert ws.commit_all("TASK-1", "again") is None
    assert tip(repo, "scaffold/task-1") == sha


def test_commit_all_needs_a_healthy_worktree(repo: Path) -> None:
    ws = Workspace(repo)
    with pytest.raises(GitError):
        ws.commit_all("TASK-9", "nothing here")
    path = ws.create_worktree("TASK-9")
    (path / ".git").unlink()  # broken: git would climb to the main repository
    write(repo, "user.txt", "the person's untracked file\n")
    with pytest.raises(GitError):
        ws.commit_all("TASK-9", "must not commit in the main repo")
    assert status(repo) == "?? user.txt"


# --------------------------------------------------------------------- merges


def test_merge_clean_makes_merge_commit_and_updates_checkout(repo: Path) -> None:
    ws = Workspace(repo)
    work = task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    base = commit_file(repo, "other.txt", "main moved\n")  # force a true merge

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert not result.already_merged
    assert result.sha == tip(repo, "main")
    assert parents(repo, "main") == [base, work]
    assert git(repo, "log", "-1", "--format=%an|%s", "main") == "scaffold|Merge TASK-1"
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert status(repo) == ""


def test_merge_is_no_ff_even_when_fast_forward_possible(repo: Path) -> None:
    ws = Workspace(repo)
    before = tip(repo, "main")
    work = task_commit(ws, "TASK-1", "feature.txt", "feature\n")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert parents(repo, "main") == [before, work]
    assert status(repo) == ""


def test_merge_twice_is_already_merged(repo: Path) -> None:
    ws = Workspace(repo)
    task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    first = ws.merge("TASK-1", "Merge TASK-1")
    commit_file(repo, "after.txt", "more work on main\n")
    main_tip = tip(repo, "main")

    second = Workspace(repo).merge("TASK-1", "Merge TASK-1")  # a restarted orchestrator

    assert second == MergeResult(merged=True, sha=first.sha, already_merged=True)
    assert tip(repo, "main") == main_tip


def test_merge_of_branch_without_commits_is_already_merged(repo: Path) -> None:
    ws = Workspace(repo)
    ws.create_worktree("TASK-1")
    commit_file(repo, "after.txt", "main moved\n")
    result = ws.merge("TASK-1", "Merge TASK-1")
    assert result == MergeResult(merged=True, sha=None, already_merged=True)


def test_merge_conflict_reports_files_and_touches_nothing(repo: Path) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    write(wt, "lines.txt", "one\nTASK\nthree\n")
    write(wt, "clean.txt", "no conflict here\n")
    ws.commit_all("TASK-1", "task edits line two")
    commit_file(repo, "lines.txt", "one\nMAIN\nthree\n")
    main_before = tip(repo, "main")
    branch_before = tip(repo, "scaffold/task-1")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result == MergeResult(merged=False, sha=None, conflict_files=["lines.txt"])
    assert tip(repo, "main") == main_before
    assert tip(repo, "scaffold/task-1") == branch_before
    assert status(repo) == ""
    assert status(wt) == ""
    assert (repo / "lines.txt").read_text() == "one\nMAIN\nthree\n"
    assert not (repo / ".git" / "MERGE_HEAD").exists()


def test_merge_conflict_modify_delete(repo: Path) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    (wt / "README.md").unlink()
    ws.commit_all("TASK-1", "task deletes README")
    commit_file(repo, "README.md", "# edited on main\n")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert not result.merged
    assert result.conflict_files == ["README.md"]


def test_merge_keeps_users_unrelated_uncommitted_changes(repo: Path) -> None:
    ws = Workspace(repo)
    task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    write(repo, "README.md", "# my unstaged edit\n")
    write(repo, "staged.txt", "my staged file\n")
    git(repo, "add", "staged.txt")
    write(repo, "scratch.txt", "my untracked notes\n")
    before = status(repo)

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert (repo / "README.md").read_text() == "# my unstaged edit\n"
    assert (repo / "scratch.txt").read_text() == "my untracked notes\n"
    assert status(repo) == before
    assert git(repo, "diff", "--cached", "--name-only") == "staged.txt"


def test_merge_refuses_when_users_change_touches_a_merged_file(repo: Path) -> None:
    ws = Workspace(repo)
    task_commit(ws, "TASK-1", "lines.txt", "one\ntwo\nthree\nfour\n")
    write(repo, "lines.txt", "my local edit\n")
    main_before = tip(repo, "main")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result == MergeResult(merged=False, sha=None, blocked_paths=["lines.txt"])
    assert tip(repo, "main") == main_before
    assert (repo / "lines.txt").read_text() == "my local edit\n"

    git(repo, "checkout", "--", "lines.txt")  # the person gets out of the way
    assert ws.merge("TASK-1", "Merge TASK-1").merged


def test_merge_through_stale_index_stat_data_in_the_checkout(repo: Path) -> None:
    """A merged file rewritten with the same content: only its stat data changed, which
    read-tree alone refuses; the index is refreshed and the merge goes through."""
    ws = Workspace(repo)
    task_commit(ws, "TASK-1", "lines.txt", "one\ntwo\nthree\nfour\n")
    write(repo, "lines.txt", "one\ntwo\nthree\n")
    os.utime(repo / "lines.txt", (1_000_000_000, 1_000_000_000))

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert not result.already_merged
    assert (repo / "lines.txt").read_text() == "one\ntwo\nthree\nfour\n"
    assert status(repo) == ""


def test_merge_of_a_branch_whose_changes_main_already_has(repo: Path) -> None:
    """Merging gives main's own tree, yet the branch is not in main: a merge commit."""
    ws = Workspace(repo)
    work = task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    commit_file(repo, "feature.txt", "feature\n")  # the same change, made on main
    before = tip(repo, "main")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert not result.already_merged
    assert parents(repo, "main") == [before, work]


def test_merge_refuses_to_overwrite_untracked_file(repo: Path) -> None:
    ws = Workspace(repo)
    task_commit(ws, "TASK-1", "feature.txt", "from the task\n")
    write(repo, "feature.txt", "the person's own untracked file\n")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert not result.merged
    assert result.blocked_paths == ["feature.txt"]
    assert (repo / "feature.txt").read_text() == "the person's own untracked file\n"


def test_merge_when_main_worktree_has_another_branch_checked_out(repo: Path) -> None:
    ws = Workspace(repo)  # default branch worked out while main is checked out
    assert ws.default_branch() == "main"
    work = task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    git(repo, "checkout", "-q", "-b", "personal")
    personal = commit_file(repo, "personal.txt", "mine\n")
    write(repo, "lines.txt", "dirty on personal\n")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert parents(repo, "main")[1] == work
    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/personal"
    assert tip(repo, "HEAD") == personal
    assert not (repo / "feature.txt").exists()
    assert status(repo) == " M lines.txt"


def test_merge_updates_a_linked_worktree_that_has_default_checked_out(
    repo: Path, tmp_path: Path
) -> None:
    ws = Workspace(repo)
    ws.default_branch()
    task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    git(repo, "checkout", "-q", "-b", "personal")
    linked = tmp_path / "main-checkout"
    git(repo, "worktree", "add", "-q", str(linked), "main")

    assert ws.merge("TASK-1", "Merge TASK-1").merged
    assert (linked / "feature.txt").read_text() == "feature\n"
    assert status(linked) == ""


def test_merge_finishes_after_crash_between_checkout_and_ref_update(repo: Path) -> None:
    """kill -9 after the checkout moved but before the branch did: call merge again."""
    ws = Workspace(repo)
    task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    old = tip(repo, "main")
    tree = git(repo, "merge-tree", "--write-tree", "main", "scaffold/task-1")
    git(repo, "read-tree", "-m", "-u", old, tree)  # what the crashed run had done
    assert status(repo) == "A  feature.txt"

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert result.merged
    assert status(repo) == ""
    assert git(repo, "rev-list", "--count", "--merges", "main") == "1"


def test_merge_into_bare_repository(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "src")
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    ws = Workspace(bare, worktree_root=tmp_path / "wts")
    task_commit(ws, "TASK-1", "feature.txt", "feature\n")
    assert ws.merge("TASK-1", "Merge TASK-1").merged
    assert git(bare, "show", "main:feature.txt") == "feature"


# ---------------------------------------------------------- commit_on_default


def test_commit_on_default_commits_only_given_paths(repo: Path) -> None:
    ws = Workspace(repo)
    write(repo, "backlog/tasks/task-1 - Demo.md", "status: Done\n")  # new, untracked
    write(repo, "lines.txt", "scaffold changed this\n")
    write(repo, "README.md", "# the person's unstaged edit\n")
    write(repo, "staged.txt", "the person's staged file\n")
    git(repo, "add", "staged.txt")
    old = tip(repo, "main")

    sha = ws.commit_on_default(
        [Path("backlog/tasks/task-1 - Demo.md"), repo / "lines.txt"], "scaffold: TASK-1 Done"
    )

    assert sha == tip(repo, "main")
    assert parents(repo, "main") == [old]
    assert git(repo, "show", "--name-only", "--format=", sha).splitlines() == [
        "backlog/tasks/task-1 - Demo.md",
        "lines.txt",
    ]
    assert git(repo, "log", "-1", "--format=%an", sha) == "scaffold"
    assert status(repo) == " M README.md\nA  staged.txt"
    assert ws.commit_on_default([repo / "lines.txt"], "again") is None


def test_commit_on_default_records_deletion(repo: Path) -> None:
    ws = Workspace(repo)
    (repo / "lines.txt").unlink()
    sha = ws.commit_on_default([repo / "lines.txt"], "remove lines")
    assert sha is not None
    assert git(repo, "show", "--name-status", "--format=", sha) == "D\tlines.txt"
    assert status(repo) == ""


def test_commit_on_default_when_another_branch_is_checked_out(repo: Path) -> None:
    ws = Workspace(repo)
    ws.default_branch()
    git(repo, "checkout", "-q", "-b", "personal")
    personal = tip(repo, "HEAD")
    write(repo, "backlog/config.yml", "project: demo\n")

    sha = ws.commit_on_default([repo / "backlog/config.yml"], "scaffold: config")

    assert sha == tip(repo, "main")
    assert tip(repo, "personal") == personal
    assert git(repo, "show", "main:backlog/config.yml") == "project: demo"


def test_commit_on_default_advances_a_linked_worktree_on_the_default_branch(
    repo: Path, tmp_path: Path
) -> None:
    ws = Workspace(repo)
    ws.default_branch()
    git(repo, "checkout", "-q", "-b", "personal")
    linked = tmp_path / "main-checkout"
    git(repo, "worktree", "add", "-q", str(linked), "main")
    write(repo, "backlog/config.yml", "project: demo\n")

    sha = ws.commit_on_default([repo / "backlog/config.yml"], "scaffold: config")

    assert sha == tip(repo, "main")
    assert (linked / "backlog/config.yml").read_text() == "project: demo\n"
    assert status(linked) == ""

    write(linked, "backlog/config.yml", "the person's edit\n")
    write(repo, "backlog/config.yml", "project: other\n")
    with pytest.raises(GitError):
        ws.commit_on_default([repo / "backlog/config.yml"], "scaffold: config again")
    assert tip(repo, "main") == sha
    assert (linked / "backlog/config.yml").read_text() == "the person's edit\n"


def test_commit_on_default_rejects_paths_outside_repo(repo: Path, tmp_path: Path) -> None:
    ws = Workspace(repo)
    for bad in (tmp_path / "outside.txt", Path("../outside.txt"), repo / ".git" / "config"):
        with pytest.raises(InvalidIdError):
            ws.commit_on_default([bad], "nope")
    assert ws.commit_on_default([], "nothing") is None


# -------------------------------------------------------------------- cleanup


def test_remove_and_delete_are_idempotent(repo: Path) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    write(wt, "untracked.txt", "x\n")
    write(wt, "README.md", "modified\n")

    ws.remove_worktree("TASK-1")
    ws.remove_worktree("TASK-1")
    ws.delete_branch("TASK-1")
    ws.delete_branch("TASK-1")

    assert not wt.exists()
    assert git(repo, "branch", "--list", "scaffold/*") == ""
    assert ws.list_scaffold_worktrees() == []
    assert status(repo) == ""


@pytest.mark.parametrize("locked", [False, True])
def test_remove_worktree_whose_folder_is_gone_forgets_it(repo: Path, locked: bool) -> None:
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-1")
    if locked:
        git(repo, "worktree", "lock", str(path))
    shutil.rmtree(path)

    ws.remove_worktree("TASK-1")

    assert ws.list_scaffold_worktrees() == []
    assert str(path) not in git(repo, "worktree", "list", "--porcelain")


def test_delete_branch_of_a_gone_worktree_prunes_it_first(repo: Path) -> None:
    """`git branch -D` refuses a branch a gone (prunable) worktree still has checked out."""
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-1")
    shutil.rmtree(path)

    ws.delete_branch("TASK-1")

    assert git(repo, "branch", "--list", "scaffold/*") == ""
    assert ws.list_scaffold_worktrees() == []


def test_delete_branch_refuses_a_branch_checked_out_elsewhere(repo: Path, tmp_path: Path) -> None:
    ws = Workspace(repo)
    ws.create_worktree("TASK-1")
    ws.remove_worktree("TASK-1")
    git(repo, "worktree", "add", "-q", str(tmp_path / "person"), "scaffold/task-1")
    with pytest.raises(GitError):
        ws.delete_branch("TASK-1")


def test_orphan_listing(repo: Path) -> None:
    ws = Workspace(repo)
    ws.create_worktree("TASK-1")
    ws.create_worktree("TASK-10")
    ws.create_worktree("TASK-2")
    ws.remove_worktree("TASK-2")  # branch left behind
    write(ws.worktree_root, "task-7/leftover.txt", "x\n")  # folder left behind
    git(repo, "branch", "scaffold/state")  # not a task branch
    git(repo, "branch", "feature")

    listed = {(w.task_id, w.registered, w.branch) for w in ws.list_scaffold_worktrees()}
    assert listed == {
        ("TASK-1", True, "scaffold/task-1"),
        ("TASK-10", True, "scaffold/task-10"),
        ("TASK-7", False, None),
    }

    shutil.rmtree(ws.worktree_path("TASK-10"))
    prunable = [w for w in ws.list_scaffold_worktrees() if w.task_id == "TASK-10"]
    assert prunable[0].prunable
    ws.prune()
    assert {w.task_id for w in ws.list_scaffold_worktrees()} == {"TASK-1", "TASK-7"}


class RacingWorkspace(Workspace):
    """A Workspace during whose first merge another writer commits to main.

    A fake passed in explicitly (a subclass), standing in for a person who
    commits in their checkout at the very moment scaffold merges.
    """

    def __init__(self, repo_root: Path) -> None:
        super().__init__(repo_root)
        self.raced = False

    def _commit_tree(self, tree: str, parents: Sequence[str], message: str) -> str:
        sha = super()._commit_tree(tree, parents, message)
        if not self.raced:
            self.raced = True
            commit_file(self.repo_root, "racer.txt", "committed meanwhile\n")
        return sha


def test_merge_retries_when_default_branch_moves_underneath(repo: Path) -> None:
    ws = RacingWorkspace(repo)
    work = task_commit(ws, "TASK-1", "feature.txt", "feature\n")

    result = ws.merge("TASK-1", "Merge TASK-1")

    assert ws.raced
    assert result.merged
    racer = git(repo, "log", "-1", "--format=%H", "--", "racer.txt")
    assert parents(repo, "main") == [racer, work]
    assert (repo / "racer.txt").exists()
    assert (repo / "feature.txt").exists()
    assert status(repo) == ""


def test_commit_on_default_finishes_after_crash_with_paths_staged(repo: Path) -> None:
    """kill -9 after the index was updated but before the branch moved."""
    ws = Workspace(repo)
    write(repo, "backlog/tasks/task-1 - Demo.md", "status: Done\n")
    git(repo, "add", "backlog")  # what the crashed run had done
    sha = ws.commit_on_default([repo / "backlog/tasks/task-1 - Demo.md"], "scaffold: Done")
    assert sha == tip(repo, "main")
    assert status(repo) == ""


def test_inherited_git_dir_does_not_redirect_scaffold(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from inside a git hook, GIT_DIR points elsewhere; scaffold ignores it."""
    other = make_repo(tmp_path / "other", branch="elsewhere")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    ws = Workspace(repo)
    assert ws.default_branch() == "main"
    path = ws.create_worktree("TASK-1")
    monkeypatch.delenv("GIT_DIR")
    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-1"
    assert git(other, "branch", "--list", "scaffold/*") == ""


def test_commit_trusts_neither_the_agents_index_nor_a_planted_merge_head(repo: Path) -> None:
    """The worktree's index, HEAD and MERGE_HEAD are the agent's to write: a FIFO for
    MERGE_HEAD must not hang scaffold, an index that leaves a file out must not keep it
    out of the commit, and a HEAD moved to another branch is refused, not followed."""
    ws = Workspace(repo)
    path = ws.create_worktree("TASK-8")
    (path / "a.txt").write_text("a\n")
    (path / "b.txt").write_text("b\n")
    git(path, "add", "a.txt")  # b.txt is not in the agent's index
    own = Path(git(path, "rev-parse", "--absolute-git-dir"))
    os.mkfifo(own / "MERGE_HEAD")
    sha = ws.commit_all("TASK-8", "TASK-8: both files")
    assert sha is not None
    assert {"a.txt", "b.txt"} <= set(git(repo, "ls-tree", "--name-only", sha).split())
    assert len(git(repo, "rev-list", "--parents", "-n1", sha).split()) == 2  # one parent
    main_before = git(repo, "rev-parse", "main")
    git(path, "symbolic-ref", "HEAD", "refs/heads/main")
    (path / "c.txt").write_text("c\n")
    with pytest.raises(GitError):
        ws.commit_all("TASK-8", "TASK-8: on another branch")
    assert git(repo, "rev-parse", "main") == main_before


def test_create_worktree_on_a_kept_branch_needs_no_default_branch(repo: Path) -> None:
    """Only a new branch needs the default branch: with HEAD detached and no main or
    master, a task whose branch exists still gets its worktree; a new one is refused."""
    ws = Workspace(repo)
    ws.create_worktree("TASK-1")
    ws.remove_worktree("TASK-1")
    git(repo, "checkout", "-q", "--detach")
    git(repo, "branch", "-m", "main", "trunk")

    fresh = Workspace(repo)
    path = fresh.create_worktree("TASK-1")

    assert git(path, "symbolic-ref", "HEAD") == "refs/heads/scaffold/task-1"
    with pytest.raises(GitError):
        fresh.create_worktree("TASK-2")
    assert not fresh.worktree_path("TASK-2").exists()


def test_a_task_from_start_to_cleanup_runs_no_hook(repo: Path, tmp_path: Path) -> None:
    """Hooks git would run on the way (the hooks folder is the agents' to write)."""
    ran = tmp_path / "hooks-ran"
    for name in ("reference-transaction", "post-checkout", "post-index-change", "post-commit"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {ran}\n")
        hook.chmod(0o755)
    ws = Workspace(repo)
    task = repo / "backlog" / "tasks" / "task-1.md"
    task.parent.mkdir(parents=True)

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
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / "feature.txt").read_text() == "feature\n"


def test_a_repository_path_with_a_newline_is_read_right(tmp_path: Path) -> None:
    """worktree list's records are NUL-separated fields; a path may hold a newline."""
    repo = make_repo(tmp_path / "we ird\nrepo")
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    commit_file(wt, "feature.txt", "feature\n")  # (commit_all refuses such a path)
    assert ws.merge("TASK-1", "Merge TASK-1").merged
    assert (repo / "feature.txt").read_text() == "feature\n"
