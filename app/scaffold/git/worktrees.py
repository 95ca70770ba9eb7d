"""Task worktrees and task branches.

One task = one branch ``scaffold/task-<num>`` = one linked worktree under
``<repo>/.scaffold/worktrees/task-<num>``. Every operation here is idempotent: an
orchestrator restarted after ``kill -9`` calls it again and gets the same end state,
never a duplicate branch or worktree.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from scaffold.errors import GitError, InvalidIdError
from scaffold.git.index_file import INDEX_CACHE, SavedIndexes
from scaffold.git.repository import (
    ListedWorktree,
    Repository,
    read_small_file,
    same_path,
)
from scaffold.ids import BRANCH_PREFIX, branch_for_task, task_for_branch, task_number

SCAFFOLD_DIR = ".scaffold"
WORKTREES_SUBDIR = "worktrees"


@dataclass(frozen=True)
class WorktreeInfo:
    """A worktree (or a leftover directory) that belongs to scaffold."""

    path: Path
    task_id: str | None
    branch: str | None
    registered: bool
    prunable: bool = False


@dataclass(frozen=True)
class _CheckedWorktree:
    """A task worktree that passed the checks, and its branch's tip when checked."""

    path: Path
    admin: Path  # its git directory: <common>/worktrees/<id>
    merge_head: Path
    tip: str
    tip_tree: str


def safe_child(root: Path, name: str) -> Path:
    """``root / name``, refusing a ``name`` that would land outside ``root`` (checked on
    the resolved path: ``..``, absolute names, symlinks out of the root)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise InvalidIdError(name, "worktree name")
    real_root = root.resolve()
    candidate = (real_root / name).resolve()
    if candidate.parent != real_root or candidate.name != name:
        raise InvalidIdError(name, "worktree name")
    return real_root / name


class Worktrees(Repository):
    """The task worktrees and branches of one repository."""

    def __init__(
        self,
        repo_root: Path,
        worktree_root: Path | None = None,
        default_branch: str | None = None,
    ) -> None:
        super().__init__(repo_root, default_branch)
        root = worktree_root or self.repo_root / SCAFFOLD_DIR / WORKTREES_SUBDIR
        self.worktree_root = Path(root).resolve()

    def _indexes(self) -> SavedIndexes:
        return SavedIndexes(self.common_dir() / INDEX_CACHE)

    # ----------------------------------------------------------------- ignore

    def ensure_excluded(self) -> None:
        """Add ``/.scaffold/`` (and the worktree root, when it is elsewhere inside the
        repository) to ``<common-dir>/info/exclude`` once, to keep it out of ``git status``."""
        patterns = [f"/{SCAFFOLD_DIR}/"]
        try:
            rel = self.worktree_root.relative_to(self.repo_root)
        except ValueError:
            rel = None
        if rel is not None and rel.parts and rel.parts[0] != SCAFFOLD_DIR:
            escaped = "".join("\\" + c if c in "*?[\\!#" else c for c in rel.as_posix())
            patterns.append(f"/{escaped}/")
        exclude = self.common_dir() / "info" / "exclude"
        existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        present = {line.strip() for line in existing.splitlines()}
        missing = [
            p for p in patterns if not present & {p, p.lstrip("/"), p.rstrip("/"), p.strip("/")}
        ]
        if not missing:
            return
        exclude.parent.mkdir(parents=True, exist_ok=True)
        prefix = "" if not existing or existing.endswith("\n") else "\n"
        with exclude.open("a", encoding="utf-8") as fh:
            fh.write(prefix + "# scaffold task worktrees\n" + "".join(p + "\n" for p in missing))

    # -------------------------------------------------------------- worktrees

    def worktree_path(self, task_id: str) -> Path:
        """Where the task's worktree lives (validates the id; creates nothing)."""
        return safe_child(self.worktree_root, f"task-{task_number(task_id)}")

    def _discard(self, path: Path, entries: list[ListedWorktree] | None = None) -> None:
        """Remove whatever is at ``path``: a registered worktree or a stale folder
        (``entries``: the worktree list, when the caller has just read it)."""
        listed = self._entries() if entries is None else entries
        if any(same_path(entry.path, path) for entry in listed):
            out = self._git(["worktree", "remove", "--force", "--force", str(path)], check=False)
            if out.returncode != 0:
                # Locked with its folder gone, or a submodule inside: unlock, then prune.
                self._git(["worktree", "unlock", str(path)], check=False)
        if path.exists() or path.is_symlink():
            if path.is_symlink() or not path.is_dir():
                path.unlink()
            else:
                shutil.rmtree(path)
        self.prune()

    def _ensure_branch(self, branch: str) -> None:
        if self._rev(f"refs/heads/{branch}") is not None:
            return
        start = f"refs/heads/{self.default_branch()}"
        out = self._git(["branch", "--no-track", branch, start], check=False)
        if out.returncode != 0 and self._rev(f"refs/heads/{branch}") is None:
            raise GitError(["branch", "--no-track", branch, start], out.returncode, out.stderr)

    def create_worktree(self, task_id: str) -> Path:
        """The task's worktree, on branch ``scaffold/task-<num>`` (made from the default
        branch's tip if needed). A healthy one is reused with its work; a stale folder, a
        half-made (locked) or wrong-branch worktree at that path is made again."""
        branch = branch_for_task(task_id)
        path = self.worktree_path(task_id)
        self.ensure_excluded()
        self._ensure_branch(branch)
        with contextlib.suppress(GitError):
            return self._checked_worktree(task_id, branch).path
        entries = self._entries()
        # The branch may still be checked out in an old scaffold worktree elsewhere
        # under the root (a renamed folder); a checkout outside the root is the
        # person's, and `worktree add` below refuses it with a clear error.
        for other in entries:
            elsewhere = not same_path(other.path, path) and self._under_root(other.path)
            if other.ref == f"refs/heads/{branch}" and elsewhere:
                self._discard(other.path, entries)
        self._discard(path, entries)
        self.worktree_root.mkdir(parents=True, exist_ok=True)
        since_s = int(time.time()) - 1
        self._git(["worktree", "add", str(path), branch])
        # The tip's index ``worktree add`` has just written (no agent has run there yet) is
        # saved, so even the first commit hashes only what the agent changed.
        out = self._git(["rev-parse", "--absolute-git-dir", "HEAD"], cwd=path)
        admin, tip = out.stdout.split("\n")[:2]
        self._indexes().save(task_id, tip, Path(admin) / "index", since_s)
        return path

    def _under_root(self, path: Path) -> bool:
        return Path(os.path.realpath(path)).parent == self.worktree_root

    def remove_worktree(self, task_id: str) -> None:
        """Remove the task's worktree, uncommitted and untracked files included."""
        self._discard(self.worktree_path(task_id))
        self._indexes().forget(task_id)

    def delete_branch(self, task_id: str) -> None:
        """Delete the task's branch, merged or not; nothing happens if it is gone."""
        branch = branch_for_task(task_id)
        # git refuses a branch that a worktree, even a gone one, has checked out.
        self.prune()
        out = self._git(["branch", "-D", branch], check=False)
        if out.returncode != 0 and self._rev(f"refs/heads/{branch}") is not None:
            raise GitError(["branch", "-D", branch], out.returncode, out.stderr)

    def prune(self) -> None:
        """Forget worktrees whose folders are gone (``git worktree prune``)."""
        self._git(["worktree", "prune"])

    def list_scaffold_worktrees(self) -> list[WorktreeInfo]:
        """Worktrees on scaffold branches or under the worktree root, plus leftover folders."""
        found: list[WorktreeInfo] = []
        seen: set[str] = set()
        for entry in self._entries()[1:]:  # the first entry is the main worktree
            branch = entry.ref.removeprefix("refs/heads/") if entry.ref else None
            task_id = _task_of_branch(branch)
            if task_id is None and not self._under_root(entry.path):
                continue
            if task_id is None:
                task_id = _task_of_dir(entry.path.name)
            seen.add(os.path.realpath(entry.path))
            found.append(
                WorktreeInfo(
                    path=entry.path,
                    task_id=task_id,
                    branch=branch,
                    registered=True,
                    prunable=entry.prunable,
                )
            )
        if self.worktree_root.is_dir():
            for child in sorted(self.worktree_root.iterdir()):
                if os.path.realpath(child) in seen:
                    continue
                found.append(WorktreeInfo(child, _task_of_dir(child.name), None, False))
        return found

    def _checked_worktree(self, task_id: str, branch: str) -> _CheckedWorktree:
        """The task's worktree with its branch's tip, refusing a broken or foreign one.

        One ``rev-parse`` in the worktree says where git finds its repository from
        there: this repository's worktree at this path (not the main repository git
        climbs to without a ``.git`` file), registered under ``<common>/worktrees/``
        with a ``gitdir`` pointing back (maybe relative: ``worktree.useRelativePaths``),
        not locked, ``HEAD`` on the task branch. The ``--`` keeps files named like a
        revision from making the revisions ambiguous.
        """
        path = self.worktree_path(task_id)
        ref = f"refs/heads/{branch}"
        refused = GitError(["worktree", "list"], 1, f"no healthy worktree for {task_id} at {path}")
        if not path.is_dir():
            raise refused
        out = self._git(
            [
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-common-dir",
                "--absolute-git-dir",
                "--git-path",
                "MERGE_HEAD",
                f"{ref}^{{commit}}",
                f"{ref}^{{tree}}",
                "--symbolic-full-name",
                "HEAD",
                "--",
            ],
            cwd=path,
            check=False,
        )
        lines = out.stdout.split("\n")
        if out.returncode != 0 or len(lines) < 8 or lines[7] != "--":
            raise refused
        top, common, admin, merge_head, tip, tip_tree, head = lines[:7]
        admin_dir = Path(admin)
        if (
            not same_path(Path(top), path)
            or not same_path(Path(common), self.common_dir())
            or not same_path(admin_dir.parent, self.common_dir() / "worktrees")
            or head != ref
            or not same_path(
                admin_dir / read_small_file(admin_dir / "gitdir").strip(), path / ".git"
            )
            or os.path.lexists(admin_dir / "locked")
        ):
            raise refused
        return _CheckedWorktree(path, admin_dir, Path(merge_head), tip, tip_tree)


def _task_of_branch(branch: str | None) -> str | None:
    if branch is None:
        return None
    try:
        return task_for_branch(branch)
    except InvalidIdError:
        return None


def _task_of_dir(name: str) -> str | None:
    if not name.startswith("task-"):
        return None
    return _task_of_branch(BRANCH_PREFIX + name.removeprefix("task-"))
