"""Merges: a task branch into the default branch, the forge's branch into a task's.

No ``git merge`` runs in a checkout: ``git merge-tree --write-tree`` computes the result
and its conflicts, ``git commit-tree`` writes the commit and ``git update-ref <new> <old>``
moves the branch with a compare-and-swap; called again after ``kill -9``, a merge finds
the work done and writes nothing. A checkout of the target branch (normally the person's
own) is brought forward first with ``git read-tree -m -u <old> <new>``, which keeps
unrelated local changes and refuses, writing nothing, when one touches a path the merge
changes: scaffold then reports ``blocked_paths`` instead of clobbering the person's work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scaffold.errors import GitError
from scaffold.git.repository import CAS_ATTEMPTS
from scaffold.git.worktrees import Worktrees
from scaffold.ids import branch_for_task


@dataclass(frozen=True)
class MergeResult:
    """The outcome of merging one branch into another.

    ``merged``: the target now contains the source, by the new commit ``sha`` or
    ``already_merged`` (``sha`` is then the commit that brought it in, when found).
    ``conflict_files`` and ``blocked_paths`` (local changes in the target's checkout
    that the merge would overwrite) come with nothing written.
    """

    merged: bool
    sha: str | None
    conflict_files: list[str] = field(default_factory=list)
    already_merged: bool = False
    blocked_paths: list[str] = field(default_factory=list)


class Merges(Worktrees):
    """Merges into the default branch and into task branches."""

    def merge(self, task_id: str, message: str) -> MergeResult:
        """Merge the task branch into the default branch with a merge commit."""
        target = self.default_branch()
        source_ref = f"refs/heads/{branch_for_task(task_id)}"
        for _ in range(CAS_ATTEMPTS):
            source, old = self._require_revs(
                f"{source_ref}^{{commit}}", f"refs/heads/{target}^{{commit}}"
            )
            if self._is_ancestor(source, old):
                return MergeResult(
                    merged=True, sha=self._merging_commit(source, old), already_merged=True
                )
            tree, conflicts = self._merge_tree(old, source)
            if tree is None:
                return MergeResult(merged=False, sha=None, conflict_files=conflicts)
            new = self._commit_tree(tree, [old, source], message)
            # The checkout before the ref, as ``git merge`` does: after a crash in between
            # the result is staged on the old commit, and merging again finishes the job.
            checkout = self._checkout_of(target)
            if checkout is not None:
                blocked = self._advance_checkout(checkout, old, new)
                if blocked:
                    return MergeResult(merged=False, sha=None, blocked_paths=blocked)
            if self._compare_and_swap(target, new, old, f"scaffold: merge {source_ref}"):
                return MergeResult(merged=True, sha=new)
            if checkout is not None:
                # Someone moved the branch in the instant between; put the checkout back.
                self._advance_checkout(checkout, new, old)
        raise GitError(["update-ref", f"refs/heads/{target}"], 1, "branch kept moving; retry")

    def take_in(self, task_id: str, commit: str, message: str) -> MergeResult:
        """Bring ``commit`` (the task's branch as people left it on the forge) into the task
        branch and its worktree: nothing when it is in already, a fast-forward when it only
        adds to the branch, else a merge commit. Nothing is written on a conflict."""
        branch = branch_for_task(task_id)
        for _ in range(CAS_ATTEMPTS):
            tip = self._require_rev(f"refs/heads/{branch}")
            if self._is_ancestor(commit, tip):
                return MergeResult(merged=True, sha=tip, already_merged=True)
            wt = self._checked_worktree(task_id, branch)
            old = wt.tip
            if self._is_ancestor(old, commit):
                new = commit
            else:
                tree, conflicts = self._merge_tree(old, commit)
                if tree is None:
                    return MergeResult(merged=False, sha=None, conflict_files=conflicts)
                new = self._commit_tree(tree, [old, commit], message)
            blocked = self._advance_checkout(wt.path, old, new)
            if blocked:
                return MergeResult(merged=False, sha=None, blocked_paths=blocked)
            if self._compare_and_swap(branch, new, old, f"scaffold: take in {commit[:12]}"):
                return MergeResult(merged=True, sha=new)
            self._advance_checkout(wt.path, new, old)
        raise GitError(["update-ref", f"refs/heads/{branch}"], 1, "branch kept moving; retry")

    def _merge_tree(self, ours: str, theirs: str) -> tuple[str | None, list[str]]:
        """(tree, []) for a clean merge, (None, conflicting paths) otherwise."""
        out = self._git(
            ["merge-tree", "--write-tree", "-z", "--name-only", ours, theirs], ok_codes=(0, 1)
        )
        fields = out.stdout.split("\0")
        if out.returncode == 0:
            return fields[0].strip(), []
        files: list[str] = []
        i = 1
        while i < len(fields) and fields[i]:
            files.append(fields[i])
            i += 1
        if not files:
            files = _conflict_paths_from_messages(fields[i + 1 :])
        return None, sorted(dict.fromkeys(files))

    def _merging_commit(self, source: str, target_tip: str) -> str | None:
        """The commit on the target's first-parent line that brought ``source`` in."""
        out = self._git(
            [
                "rev-list",
                "--first-parent",
                "--ancestry-path",
                "--reverse",
                f"{source}..{target_tip}",
            ]
        )
        lines = out.stdout.split()
        if not lines:
            return None
        candidate = lines[0]
        parents = self._git(["rev-list", "--parents", "-n", "1", candidate]).stdout.split()[1:]
        if len(parents) >= 2 and not self._is_ancestor(source, parents[0]):
            return candidate
        return None


def _conflict_paths_from_messages(fields: Sequence[str]) -> list[str]:
    """Paths named by CONFLICT messages of ``merge-tree -z``.

    Each message is ``<count> NUL <path>... NUL <type> NUL <text> NUL``.
    """
    paths: list[str] = []
    i = 0
    while i < len(fields) and fields[i].isdigit():
        count = int(fields[i])
        names = list(fields[i + 1 : i + 1 + count])
        kind = fields[i + 1 + count] if i + 1 + count < len(fields) else ""
        if kind.startswith("CONFLICT"):
            paths.extend(names)
        i += count + 3
    return paths
