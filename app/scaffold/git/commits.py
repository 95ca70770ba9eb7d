"""Commits scaffold makes: an agent's work at hand-off, and files on the default branch.

Nothing the agent could touch (the worktree's index, ``HEAD``) is trusted: the tree is
built in an index of scaffold's from the worktree's files, committed on the branch's tip
by ``git commit-tree`` and the branch moved with a compare-and-swap.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from scaffold.errors import GitError, InvalidIdError
from scaffold.git.repository import CAS_ATTEMPTS, read_small_file, same_path
from scaffold.git.runner import config_options
from scaffold.git.worktrees import Worktrees
from scaffold.ids import branch_for_task

# ``add -A`` trusts an unchanged stat only as git does by default: ctime counts (an
# agent can restore a file's mtime, never its ctime) and no entry is assumed unchanged;
# the index it writes is whole (not split) and of a version ``index_file`` reads.
_FULL_STAT = config_options(
    "core.trustctime=true",
    "core.checkStat=default",
    "core.ignoreStat=false",
    "core.splitIndex=false",
    "index.version=2",
)

# What ``git reset`` removes from a worktree's git directory (merge, cherry-pick,
# revert and squash state): when one is there, the commit ends with ``reset``.
_BRANCH_STATE = (
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "AUTO_MERGE",
    "MERGE_AUTOSTASH",
    "SQUASH_MSG",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
)


class Commits(Worktrees):
    """Hand-off commits in task worktrees, and commits of files on the default branch."""

    def commit_all(self, task_id: str, message: str, *, unless_merging: bool = False) -> str | None:
        """Commit everything in the task's worktree onto its branch, as scaffold; the new
        commit, or None when there was nothing to commit.

        The tree is built in an index of scaffold's (the saved one of the tip, else one
        ``read-tree`` fills) from the files themselves, committed on the branch's tip and
        the branch moved only if its tip is still that commit; that index then becomes
        the worktree's. A conflict merge being finished gets its ``MERGE_HEAD`` as second
        parent and a ``reset`` that ends it; with ``unless_merging`` such a worktree is
        left as it is.
        """
        branch = branch_for_task(task_id)
        wt = self._checked_worktree(task_id, branch)
        path = wt.path
        if unless_merging and any(os.path.lexists(wt.admin / name) for name in _BRANCH_STATE):
            return None
        try:
            tmp = tempfile.mkdtemp(prefix="scaffold-index-", dir=wt.admin)
        except OSError as exc:
            raise GitError(["read-tree", wt.tip], -1, f"no room for an index: {exc}") from exc
        try:
            index = Path(tmp) / "index"
            env = {"GIT_INDEX_FILE": str(index)}
            loaded = self._indexes().load(task_id, wt.tip, index)
            # Entries whose ctime is this recent are hashed again next time (index_file).
            since_s = int(time.time()) - 1
            if not loaded:
                self._git([*_FULL_STAT, "read-tree", wt.tip], cwd=path, env=env)
            added = self._git([*_FULL_STAT, "add", "-A"], cwd=path, env=env, check=not loaded)
            if added.returncode != 0:
                # A saved index git cannot use (e.g. a split index's half): start afresh.
                self._indexes().forget(task_id)
                index.unlink(missing_ok=True)
                self._git([*_FULL_STAT, "read-tree", wt.tip], cwd=path, env=env)
                self._git([*_FULL_STAT, "add", "-A"], cwd=path, env=env)
            tree = self._git(["write-tree"], cwd=path, env=env).stdout.strip()
            new: str | None = None
            parents = [wt.tip, *self._merging_parent(wt.merge_head, wt.tip)]
            if len(parents) > 1 or tree != wt.tip_tree:
                new = self._commit_tree(tree, parents, message)
                if not self._compare_and_swap(branch, new, wt.tip, f"scaffold: {task_id} work"):
                    raise GitError(["update-ref", branch], 1, f"{branch} moved while committing")
            self._indexes().save(task_id, new or wt.tip, index, since_s)
            if any(os.path.lexists(wt.admin / name) for name in _BRANCH_STATE):
                # A merge (or cherry-pick...) in progress: ``reset`` ends it, as before.
                self._git(["reset", "-q"], cwd=path)
            else:
                # What ``reset -q`` would leave: the index of the branch's tip, whose
                # entries ``add -A`` has just matched to the files.
                try:
                    os.replace(index, wt.admin / "index")
                except OSError as exc:
                    raise GitError(["reset", "-q"], -1, f"cannot update the index: {exc}") from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return new

    def _merging_parent(self, merge_head: Path, tip: str) -> list[str]:
        """The commit a conflict merge in the worktree brings in: ``MERGE_HEAD``, which the
        agent could write, counts only when on the default branch and not on the task's."""
        text = read_small_file(merge_head).split()
        if not text:
            return []
        sha = self._rev(text[0])
        default = self._rev(f"refs/heads/{self.default_branch()}")
        if sha is None or default is None or not self._is_ancestor(sha, default):
            return []
        return [] if self._is_ancestor(sha, tip) else [sha]

    def commit_on_default(self, paths: Sequence[Path], message: str) -> str | None:
        """Commit these files (a missing one as a deletion), as they are in the main
        working tree, onto the default branch, whatever the main worktree has checked out;
        None when they already match. Other staged or unstaged changes stay as they were.
        A checkout of the default branch gets these paths' index entries updated before
        the branch moves (a crash in between leaves them staged; a second call finishes).
        """
        if not paths:
            return None
        rels = sorted({self._repo_relative(p) for p in paths})
        target = self.default_branch()
        for _ in range(CAS_ATTEMPTS):
            old = self._require_rev(f"refs/heads/{target}")
            old_tree = self._git(["rev-parse", f"{old}^{{tree}}"]).stdout.strip()
            with tempfile.TemporaryDirectory(prefix="scaffold-index-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                self._git(["read-tree", old], env=env)
                self._git(["update-index", "--add", "--remove", "--", *rels], env=env)
                tree = self._git(["write-tree"], env=env).stdout.strip()
            if tree == old_tree:
                return None
            new = self._commit_tree(tree, [old], message)
            checkout = self._checkout_of(target)
            if checkout is not None and same_path(checkout, self.repo_root):
                self._git(["update-index", "--add", "--remove", "--", *rels])
            elif checkout is not None:
                blocked = self._advance_checkout(checkout, old, new)
                if blocked:
                    raise GitError(
                        ["read-tree", "-m", "-u", old, new],
                        1,
                        f"local changes in {checkout} would be overwritten: {', '.join(blocked)}",
                    )
            if self._compare_and_swap(target, new, old, "scaffold: commit " + ", ".join(rels)):
                return new
        raise GitError(["update-ref", f"refs/heads/{target}"], 1, "branch kept moving; retry")

    def _repo_relative(self, path: Path) -> str:
        full = Path(path) if Path(path).is_absolute() else self.repo_root / path
        norm = Path(os.path.normpath(full))
        real = norm.parent.resolve() / norm.name
        try:
            rel = PurePosixPath(real.relative_to(self.repo_root).as_posix())
        except ValueError:
            raise InvalidIdError(str(path), "path inside the repository") from None
        if not rel.parts or rel.parts[0] in (".git", ".", ".."):
            raise InvalidIdError(str(path), "path inside the repository")
        return rel.as_posix()
