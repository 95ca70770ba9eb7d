"""One repository's branches and checkouts, driven through git plumbing.

What the worktree, commit and merge operations share: the git runner (no hook, no
fsmonitor command on any call), reading branch tips, the default branch, writing a
commit (``git commit-tree``), moving a branch with a compare-and-swap (``git update-ref
<new> <old>``) and bringing a checkout from one commit to another.

Commits are made as ``scaffold <scaffold@localhost>`` with repository hooks and signing
disabled: Ward, not a hook, is where checks run, and a hook or a pinentry prompt must not
hang an unattended run.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
    head: str | None
    ref: str | None
    bare: bool
    detached: bool
    locked: bool
    prunable: bool


@dataclass(frozen=True)
class BranchHead:
    """One branch as ``git for-each-ref`` sees it, in one read of the ref.

    ``commit`` and ``tree`` are None when the ref names something other than a
    commit (callers then take the slow path, which peels as ``rev-parse`` does).
    ``checkout`` is ``%(worktreepath)``: a worktree (any, even a prunable or a bare
    main one) whose ``HEAD`` is this branch, or "" when no worktree has it.
    """

    commit: str | None
    tree: str | None
    checkout: str


# %(refname), %(objecttype), %(objectname), %(tree), %(worktreepath), each ended by a NUL.
_HEAD_FORMAT = "%(refname)%00%(objecttype)%00%(objectname)%00%(tree)%00%(worktreepath)%00"
_HEAD_FIELDS = 5


def _parse_heads(output: str) -> dict[str, BranchHead]:
    """``for-each-ref --format=_HEAD_FORMAT`` output by ref name (records end in NUL, LF)."""
    fields = output.split("\0")
    heads: dict[str, BranchHead] = {}
    for i in range(0, len(fields) - _HEAD_FIELDS + 1, _HEAD_FIELDS):
        ref, kind, sha, tree, checkout = fields[i : i + _HEAD_FIELDS]
        ref = ref.removeprefix("\n")  # the line end of the record before
        is_commit = kind == "commit" and bool(sha) and bool(tree)
        heads[ref] = BranchHead(
            commit=sha if is_commit else None, tree=tree if is_commit else None, checkout=checkout
        )
    return heads


def _parse_worktree_list(output: str) -> list[ListedWorktree]:
    entries: list[ListedWorktree] = []
    record: list[str] = []
    for item in [*output.split("\0"), ""]:
        if item:
            record.append(item)
            continue
        if not record:
            continue
        attrs: dict[str, str] = {}
        for line in record:
            key, _, value = line.partition(" ")
            attrs[key] = value
        record = []
        if "worktree" not in attrs:
            continue
        entries.append(
            ListedWorktree(
                path=Path(attrs["worktree"]),
                head=attrs.get("HEAD"),
                ref=attrs.get("branch"),
                bare="bare" in attrs,
                detached="detached" in attrs,
                locked="locked" in attrs,
                prunable="prunable" in attrs,
            )
        )
    return entries


def same_path(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def commit_message(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def read_small_file(path: Path) -> str:
    """The start of a small regular file the agent could have written; "" otherwise.

    Not a symlink, not a FIFO that would block: a small regular file or nothing.
    """
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

    def _git(
        self,
        args: Sequence[str],
        cwd: Path | None = None,
        *,
        check: bool = True,
        ok_codes: Sequence[int] = (0,),
        env: dict[str, str] | None = None,
        input_text: str | None = None,
    ) -> GitOutput:
        # No hook and no fsmonitor command on any call: the repository's hooks folder
        # is writable by agents, and even ``update-ref`` runs the reference-transaction hook.
        return run_git(
            [*SAFE_LOCAL, *args],
            cwd if cwd is not None else self.repo_root,
            shown=args,
            check=check,
            ok_codes=ok_codes,
            env=env,
            input_text=input_text,
        )

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

    def _heads(self, *branches: str) -> dict[str, BranchHead]:
        """These branches' tips, trees and checkouts in one ``for-each-ref``; a missing
        branch is left out. Each name matches its ref exactly (names of other refs
        that merely start with it are dropped)."""
        refs = [f"refs/heads/{b}" for b in branches]
        out = self._git(["for-each-ref", f"--format={_HEAD_FORMAT}", *refs])
        heads = _parse_heads(out.stdout)
        return {b: heads[r] for b, r in zip(branches, refs, strict=True) if r in heads}

    def _checkout_from(self, branch: str, head: BranchHead | None) -> Path | None:
        """What :meth:`_checkout_of` would say, without listing worktrees when ``head``
        (a :meth:`_heads` reading) already settles it.

        No worktree has the branch: None. The one ``for-each-ref`` names is the main
        worktree at ``repo_root`` (its ``.git`` folder is there: not a linked worktree,
        not a bare repository, whose main worktree it names too): that checkout, which
        ``worktree list`` puts first. Anything else is looked up.
        """
        if head is not None and head.commit is not None:
            if not head.checkout:
                return None
            if (
                same_path(Path(head.checkout), self.repo_root)
                and (self.repo_root / ".git").is_dir()
            ):
                return self.repo_root
        return self._checkout_of(branch)

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
        out = self._git(args, env=dict(IDENTITY_ENV), input_text=commit_message(message))
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
        """Move a checkout's index and files from ``old`` to ``new``; [] when done.

        Returns the paths whose local changes stopped it (nothing written).
        """
        # Tried first without refreshing the index: one git process when the checkout's
        # index is up to date. read-tree refuses (writing nothing) when an entry's stat
        # data is stale; then the index is refreshed and read-tree tried again.
        args = ["read-tree", "-m", "-u", old, new]
        if self._git(args, cwd=checkout, check=False).returncode == 0:
            return []
        self._git(["update-index", "-q", "--refresh"], cwd=checkout, check=False)
        out = self._git(args, cwd=checkout, check=False)
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
