"""One repository's branches and checkouts, driven through git plumbing.

What the worktree, commit and merge operations share: branch tips, the default branch,
``git commit-tree``, moving a branch with a compare-and-swap (``git update-ref <new>
<old>``) and bringing a checkout from one commit to another. Commits are made as ``scaffold <scaffold@localhost>`` with repository hooks and signing
disabled: Ward, not a hook, is where checks run, and a hook or a pinentry prompt must not
hang an unattended run.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaffold.errors import GitError, InvalidIdError
from scaffold.git.changes import parse_raw_z
from scaffold.git.runner import IDENTITY_CONFIG, IDENTITY_ENV, SAFE_LOCAL, GitOutput, run_git
from scaffold.ids import BRANCH_PREFIX

# Attempts at moving a branch when someone else moves it at the same moment.
CAS_ATTEMPTS = 3


@dataclass(frozen=True)
class ListedWorktree:
    """One record of ``git worktree list --porcelain``."""

    path: Path
    ref: str | None
    bare: bool
    prunable: bool


def _parse_worktree_list(output: str) -> list[ListedWorktree]:
    """``worktree list --porcelain -z``: NUL-ended lines, an empty one after each record."""
    entries = []
    for record in output.split("\0\0"):
        attrs = dict(line.partition(" ")[::2] for line in record.split("\0") if line)
        if "worktree" in attrs:
            entries.append(
                ListedWorktree(
                    path=Path(attrs["worktree"]),
                    ref=attrs.get("branch"),
                    bare="bare" in attrs,
                    prunable="prunable" in attrs,
                )
            )
    return entries


def same_path(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def read_small_file(path: Path) -> str:
    """The start of a regular file an agent could have written (never through a symlink,
    never a FIFO that would block); "" for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)


class Repository:
    """The branches of one repository and the checkouts that have them."""

    def __init__(self, repo_root: Path, default_branch: str | None = None) -> None:
        self.repo_root = Path(repo_root).resolve()
        self._configured_default = default_branch
        self._default: str | None = None
        self._common_dir: Path | None = None

    def _git(self, args: Sequence[str], cwd: Path | None = None, **options: Any) -> GitOutput:
        # No hook and no fsmonitor command on any call: the repository's hooks folder
        # is writable by agents, and even ``update-ref`` runs the reference-transaction hook.
        return run_git([*SAFE_LOCAL, *args], cwd or self.repo_root, shown=args, **options)

    def _rev(self, rev: str) -> str | None:
        """The commit ``rev`` names, or None when it does not exist."""
        out = self._git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], check=False)
        return out.stdout.strip() if out.returncode == 0 else None

    def branch_head(self, branch: str) -> str | None:
        """The tip of the local branch ``branch`` (None when there is none)."""
        return self._rev(f"refs/heads/{self._check_branch_name(branch)}")

    def _require_rev(self, rev: str) -> str:
        sha = self._rev(rev)
        if sha is None:
            raise GitError(["rev-parse", "--verify", rev], 128, f"unknown revision {rev!r}")
        return sha

    def _require_revs(self, *revs: str) -> list[str]:
        """What each of ``revs`` names (``rev^{commit}``, ``rev^{tree}``...), in one call;
        a GitError naming the first that does not exist."""
        out = self._git(["rev-parse", *revs, "--"], check=False)
        lines = out.stdout.split()
        if out.returncode == 0 and len(lines) == len(revs) + 1:
            return lines[:-1]
        for rev in revs:
            if self._git(["rev-parse", "--verify", "--quiet", rev], check=False).returncode:
                raise GitError(["rev-parse", "--verify", rev], 128, f"unknown revision {rev!r}")
        raise GitError(["rev-parse", *revs], out.returncode, out.stderr)

    def _is_ancestor(self, ancestor: str, descendant: str) -> bool:
        out = self._git(["merge-base", "--is-ancestor", ancestor, descendant], ok_codes=(0, 1))
        return out.returncode == 0

    def common_dir(self) -> Path:
        """The repository's shared git directory (``.git`` of the main worktree)."""
        if self._common_dir is None:
            out = self._git(["rev-parse", "--path-format=absolute", "--git-common-dir"])
            self._common_dir = Path(out.stdout.strip())
        return self._common_dir

    def _entries(self) -> list[ListedWorktree]:
        return _parse_worktree_list(self._git(["worktree", "list", "--porcelain", "-z"]).stdout)

    def _checkout_of(self, branch: str) -> Path | None:
        """The live worktree that has ``branch`` checked out, if any."""
        ref = f"refs/heads/{branch}"
        for entry in self._entries():
            if entry.ref == ref and not entry.bare and not entry.prunable and entry.path.is_dir():
                return entry.path
        return None

    # ---------------------------------------------------------- default branch

    def default_branch(self) -> str:
        """The branch tasks start from and merge into.

        The configured name if one was given; else the branch the main
        worktree's HEAD points at (unless that is a scaffold task branch);
        else ``origin/HEAD``'s branch, ``main`` or ``master``. Worked out once
        per Workspace so a person switching branches mid-run changes nothing.
        """
        if self._default is not None:
            return self._default
        if self._configured_default is not None:
            self._default = self._check_branch_name(self._configured_default)
            return self._default
        git_dir = f"--git-dir={self.common_dir()}"
        head = self._git([git_dir, "symbolic-ref", "-q", "HEAD"], ok_codes=(0, 1)).stdout.strip()
        if head.startswith("refs/heads/") and not head.startswith(f"refs/heads/{BRANCH_PREFIX}"):
            self._default = head.removeprefix("refs/heads/")
            return self._default
        origin = self._git(
            ["symbolic-ref", "-q", "refs/remotes/origin/HEAD"], ok_codes=(0, 1)
        ).stdout.strip()
        candidates = []
        if origin.startswith("refs/remotes/origin/"):
            candidates.append(origin.removeprefix("refs/remotes/origin/"))
        candidates += ["main", "master"]
        for name in candidates:
            if self._rev(f"refs/heads/{name}") is not None:
                self._default = name
                return name
        raise GitError(
            ["symbolic-ref", "HEAD"],
            1,
            "cannot tell the default branch (detached HEAD, no main or master); configure it",
        )

    def _check_branch_name(self, name: str) -> str:
        if not name or name.startswith("-") or "@{" in name:
            raise InvalidIdError(name, "branch name")
        out = self._git(["check-ref-format", f"refs/heads/{name}"], check=False)
        if out.returncode != 0:
            raise InvalidIdError(name, "branch name")
        return name

    # ------------------------------------------------- commits and branch moves

    def _commit_tree(self, tree: str, parents: Sequence[str], message: str) -> str:
        args = [*IDENTITY_CONFIG, "commit-tree", "--no-gpg-sign", tree]
        for parent in parents:
            args += ["-p", parent]
        args += ["-F", "-"]
        text = message if message.endswith("\n") else message + "\n"
        out = self._git(args, env=IDENTITY_ENV, input_text=text)
        return out.stdout.strip()

    def _compare_and_swap(self, branch: str, new: str, old: str, reason: str) -> bool:
        ref = f"refs/heads/{branch}"
        out = self._git(["update-ref", "-m", reason, ref, new, old], check=False)
        if out.returncode == 0:
            return True
        if self._rev(ref) != old:
            return False
        raise GitError(["update-ref", "-m", reason, ref, new, old], out.returncode, out.stderr)

    def _advance_checkout(self, checkout: Path, old: str, new: str) -> list[str]:
        """Move a checkout's index and files from ``old`` to ``new``; [] when done, else
        the paths whose local changes stopped it (nothing written)."""
        self._git(["update-index", "-q", "--refresh"], cwd=checkout, check=False)
        out = self._git(["read-tree", "-m", "-u", old, new], cwd=checkout, check=False)
        if out.returncode == 0:
            return []
        blocked = self._locally_changed(checkout, old, new)
        if blocked:
            return blocked
        raise GitError(["read-tree", "-m", "-u", old, new], out.returncode, out.stderr)

    def _locally_changed(self, checkout: Path, old: str, new: str) -> list[str]:
        """Paths ``old``->``new`` changes that have local changes or untracked files."""
        merged = parse_raw_z(
            self._git(["diff", "--raw", "-z", "--no-abbrev", "--no-renames", old, new]).stdout
        )
        local_out = self._git(["diff-index", "--name-only", "-z", "HEAD", "--"], cwd=checkout)
        local = set(filter(None, local_out.stdout.split("\0")))
        blocked = []
        for change in merged:
            target = checkout / change.path
            if change.path in local or (change.status == "A" and os.path.lexists(target)):
                blocked.append(change.path)
        return sorted(blocked)
