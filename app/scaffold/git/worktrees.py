"""Task worktrees, task branches and merges on a real git repository.

One task = one branch ``scaffold/task-<num>`` = one linked worktree under
``<repo>/.scaffold/worktrees/task-<num>``. Every operation here is idempotent:
an orchestrator restarted after ``kill -9`` calls it again and gets the same
end state, never a duplicate merge, branch or worktree.

Decisions worth knowing (the why is next to the code):

* Merges never run ``git merge`` in a checkout. ``git merge-tree --write-tree``
  computes the result (and the conflicts) without touching any working tree;
  ``git commit-tree`` writes the commit and ``git update-ref <new> <old>`` moves
  the branch with a compare-and-swap.
* If the target branch is checked out somewhere (normally the user's own
  checkout of the default branch), that checkout is brought forward with
  ``git read-tree -m -u <old> <new>``: the two-tree merge ``git checkout`` uses
  to switch commits. It keeps unrelated staged and unstaged changes, and it
  REFUSES (changing nothing) when a local change or an untracked file touches
  a path the merge changes; scaffold then reports ``blocked_paths`` instead of
  clobbering the person's work. The checkout is updated before the ref moves,
  the order ``git merge`` itself uses: a crash in between leaves the merge
  result staged on top of the old commit, and calling ``merge`` again finishes
  the job cleanly.
* Commits are made as ``scaffold <scaffold@localhost>`` with repository hooks
  and signing disabled: Ward, not a hook, is where checks run, and a hook or a
  pinentry prompt must not hang an unattended run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from scaffold.errors import GitError, InvalidIdError
from scaffold.git.changes import parse_name_status_z
from scaffold.git.index_file import smudge_recent
from scaffold.git.runner import (
    IDENTITY_CONFIG,
    IDENTITY_ENV,
    SAFE_LOCAL,
    GitOutput,
    run_git,
)
from scaffold.ids import BRANCH_PREFIX, branch_for_task, task_for_branch, task_number

SCAFFOLD_DIR = ".scaffold"
WORKTREES_SUBDIR = "worktrees"

# Attempts at moving a branch when someone else moves it at the same moment.
_CAS_ATTEMPTS = 3


@dataclass(frozen=True)
class MergeResult:
    """The outcome of merging one branch into another.

    ``merged`` is true when the target now contains the source: either a new
    commit ``sha`` was made, or ``already_merged`` (nothing to do; ``sha`` is
    then the commit that brought the source in when one can be found).
    ``conflict_files`` lists the paths the two sides both changed (nothing
    was written anywhere). ``blocked_paths`` lists paths where uncommitted
    changes in the checkout of the target branch would have been overwritten
    (nothing was written either; the person commits or stashes, then retries).
    """

    merged: bool
    sha: str | None
    conflict_files: list[str] = field(default_factory=list)
    already_merged: bool = False
    blocked_paths: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WorktreeInfo:
    """A worktree (or a leftover directory) that belongs to scaffold."""

    path: Path
    task_id: str | None
    branch: str | None
    head: str | None
    registered: bool
    locked: bool = False
    prunable: bool = False


@dataclass(frozen=True)
class _Entry:
    """One record of ``git worktree list --porcelain``."""

    path: Path
    head: str | None
    ref: str | None
    bare: bool
    detached: bool
    locked: bool
    prunable: bool


@dataclass(frozen=True)
class _Head:
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


def _parse_heads(output: str) -> dict[str, _Head]:
    """``for-each-ref --format=_HEAD_FORMAT`` output by ref name (records end in NUL, LF)."""
    fields = output.split("\0")
    heads: dict[str, _Head] = {}
    for i in range(0, len(fields) - _HEAD_FIELDS + 1, _HEAD_FIELDS):
        ref, kind, sha, tree, checkout = fields[i : i + _HEAD_FIELDS]
        ref = ref.removeprefix("\n")  # the line end of the record before
        is_commit = kind == "commit" and bool(sha) and bool(tree)
        heads[ref] = _Head(
            commit=sha if is_commit else None, tree=tree if is_commit else None, checkout=checkout
        )
    return heads


def safe_child(root: Path, name: str) -> Path:
    """``root / name``, refusing any ``name`` that would land outside ``root``.

    Checked on the resolved path, so ``..``, absolute names and symlinks out of
    the root are refused even if an id slipped past validation.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise InvalidIdError(name, "worktree name")
    real_root = root.resolve()
    candidate = (real_root / name).resolve()
    if candidate.parent != real_root or candidate.name != name:
        raise InvalidIdError(name, "worktree name")
    return real_root / name


def _parse_worktree_list(output: str) -> list[_Entry]:
    entries: list[_Entry] = []
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
            _Entry(
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


def _same_path(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


class Workspace:
    """The task worktrees and branches of one repository."""

    def __init__(
        self,
        repo_root: Path,
        worktree_root: Path | None = None,
        default_branch: str | None = None,
    ) -> None:
        self.repo_root = Path(repo_root).resolve()
        root = worktree_root if worktree_root is not None else self._default_root()
        self.worktree_root = Path(root).resolve()
        self._configured_default = default_branch
        self._default: str | None = None
        self._common_dir: Path | None = None

    def _default_root(self) -> Path:
        return self.repo_root / SCAFFOLD_DIR / WORKTREES_SUBDIR

    # ------------------------------------------------------------------ basics

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

    def _entries(self) -> list[_Entry]:
        return _parse_worktree_list(self._git(["worktree", "list", "--porcelain", "-z"]).stdout)

    def _checkout_of(self, branch: str) -> Path | None:
        """The live worktree that has ``branch`` checked out, if any."""
        ref = f"refs/heads/{branch}"
        for entry in self._entries():
            if entry.ref == ref and not entry.bare and not entry.prunable and entry.path.is_dir():
                return entry.path
        return None

    def _heads(self, *branches: str) -> dict[str, _Head]:
        """These branches' tips, trees and checkouts in one ``for-each-ref``; a missing
        branch is left out. Each name matches its ref exactly (names of other refs
        that merely start with it are dropped)."""
        refs = [f"refs/heads/{b}" for b in branches]
        out = self._git(["for-each-ref", f"--format={_HEAD_FORMAT}", *refs])
        heads = _parse_heads(out.stdout)
        return {b: heads[r] for b, r in zip(branches, refs, strict=True) if r in heads}

    def _checkout_from(self, branch: str, head: _Head | None) -> Path | None:
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
                _same_path(Path(head.checkout), self.repo_root)
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

    # ----------------------------------------------------------------- ignore

    def ensure_excluded(self) -> None:
        """Keep scaffold's folder out of ``git status`` without touching tracked files.

        Adds ``/.scaffold/`` (and the worktree root, when it is elsewhere inside
        the repository) to ``<common-dir>/info/exclude``, once.
        """
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

    def _entry_at(self, path: Path) -> _Entry | None:
        for entry in self._entries():
            if _same_path(entry.path, path):
                return entry
        return None

    def _healthy(self, entry: _Entry, path: Path, branch: str) -> bool:
        if entry.locked or entry.prunable or entry.ref != f"refs/heads/{branch}":
            return False
        if not path.is_dir():
            return False
        top = self._git(["rev-parse", "--show-toplevel"], cwd=path, check=False)
        if top.returncode != 0 or not _same_path(Path(top.stdout.strip()), path):
            return False
        head = self._git(["symbolic-ref", "-q", "HEAD"], cwd=path, check=False)
        return head.stdout.strip() == f"refs/heads/{branch}"

    def _discard(self, path: Path) -> None:
        """Remove whatever is at ``path``: a registered worktree or a stale folder.

        The common case, the one worktree registered at ``path`` removed by ``worktree
        remove``, takes two git processes (list, remove): git took the folder and the
        registration, and there is nothing left there to unlock or prune.
        """
        at_path = [entry for entry in self._entries() if _same_path(entry.path, path)]
        if at_path:
            out = self._git(["worktree", "remove", "--force", "--force", str(path)], check=False)
            if out.returncode == 0 and len(at_path) == 1 and not os.path.lexists(path):
                return
            if self._entry_at(path) is not None:
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
        tip = self._require_rev(f"refs/heads/{self.default_branch()}")
        out = self._git(["branch", "--no-track", branch, tip], check=False)
        if out.returncode != 0 and self._rev(f"refs/heads/{branch}") is None:
            raise GitError(["branch", "--no-track", branch, tip], out.returncode, out.stderr)

    def create_worktree(self, task_id: str) -> Path:
        """The task's worktree, on branch ``scaffold/task-<num>``; made if needed.

        The branch starts at the default branch's tip and is reused when it
        exists. A healthy worktree already on that branch is reused as is
        (work in it is kept); a stale folder, a half-made (locked) or a
        wrong-branch worktree at that path is removed and made again.

        The common case (nothing at the path, the branch checked out nowhere) takes
        two git processes: ``for-each-ref`` reads both branches and where they are
        checked out, then ``worktree add`` (``-b`` when the branch is new). Anything
        else, or that ``worktree add`` failing, takes the repairing path below.
        """
        branch = branch_for_task(task_id)
        path = self.worktree_path(task_id)
        self.ensure_excluded()
        try:
            default: str | None = self.default_branch()
        except (GitError, InvalidIdError):
            default = None  # needed only for a new branch: the repairing path says why
        heads = self._heads(branch) if default is None else self._heads(branch, default)
        own = heads.get(branch)
        if self._add_fresh(
            task_id, path, branch, own, None if default is None else heads.get(default)
        ):
            return path
        self._ensure_branch(branch)
        entry = self._entry_at(path)
        if entry is not None and self._healthy(entry, path, branch):
            return path
        self._discard(path)
        # The branch may still be checked out in an old scaffold worktree elsewhere
        # under the root (a renamed folder); a checkout outside the root is the
        # person's, and `worktree add` below refuses it with a clear error.
        for other in self._entries():
            if other.ref == f"refs/heads/{branch}" and self._under_root(other.path):
                self._discard(other.path)
        self.worktree_root.mkdir(parents=True, exist_ok=True)
        self._git([*SAFE_LOCAL, "worktree", "add", str(path), branch])
        return path

    def _add_fresh(
        self, task_id: str, path: Path, branch: str, own: _Head | None, default: _Head | None
    ) -> bool:
        """``worktree add`` when there is nothing to repair; False (having changed
        nothing that the repairing path does not handle) when it is not that simple.

        Nothing may be at ``path`` (not even a dangling symlink), and the branch may be
        checked out in no worktree, not even a prunable one; a registration left at
        ``path`` whose folder is gone makes ``worktree add`` refuse, as does a branch
        made meanwhile by someone else.
        """
        if os.path.lexists(path):
            return False
        if own is not None:
            if own.commit is None or own.checkout:
                return False
            args = ["worktree", "add", str(path), branch]
        else:
            if default is None or default.commit is None:
                return False
            args = ["worktree", "add", "--no-track", "-b", branch, str(path), default.commit]
        tip = own.commit if own is not None else default.commit if default is not None else None
        self.worktree_root.mkdir(parents=True, exist_ok=True)
        since_s = int(time.time()) - 1
        if self._git(args, check=False).returncode != 0:
            return False
        if tip is not None:
            self._seed_index(task_id, path, tip, since_s)
        return True

    def _seed_index(self, task_id: str, path: Path, tip: str, since_s: int) -> None:
        """The index ``worktree add`` has just written (no agent has run there yet) is
        the tip's, with every file's stat: saved, so even the first commit hashes only
        what the agent changed."""
        link = _read_small_file(path / ".git").strip()
        admin = Path(link.removeprefix("gitdir:").strip()) if link.startswith("gitdir:") else None
        if admin is None or not admin.is_absolute():
            return
        if not _same_path(admin.parent, self.common_dir() / "worktrees"):
            return
        self._save_index(task_id, tip, admin / "index", since_s)

    def _under_root(self, path: Path) -> bool:
        return Path(os.path.realpath(path)).parent == self.worktree_root

    def remove_worktree(self, task_id: str) -> None:
        """Remove the task's worktree, uncommitted and untracked files included."""
        self._discard(self.worktree_path(task_id))
        self._forget_indexes(task_id)

    def delete_branch(self, task_id: str) -> None:
        """Delete the task's branch, merged or not; nothing happens if it is gone."""
        branch = branch_for_task(task_id)
        # Tried first: one git process when it works. It refuses a branch that a
        # worktree, even a gone one, has checked out: prune, then try once more.
        if self._git(["branch", "-D", branch], check=False).returncode == 0:
            return
        if self._rev(f"refs/heads/{branch}") is None:
            return
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
                    head=entry.head,
                    registered=True,
                    locked=entry.locked,
                    prunable=entry.prunable,
                )
            )
        if self.worktree_root.is_dir():
            for child in sorted(self.worktree_root.iterdir()):
                if os.path.realpath(child) in seen:
                    continue
                found.append(
                    WorktreeInfo(
                        path=child,
                        task_id=_task_of_dir(child.name),
                        branch=None,
                        head=None,
                        registered=False,
                    )
                )
        return found

    # ---------------------------------------------------------------- commits

    def commit_all(self, task_id: str, message: str, *, unless_merging: bool = False) -> str | None:
        """Commit everything in the task's worktree onto its branch, as scaffold.

        Nothing the agent could touch is trusted: the worktree's index and ``HEAD`` are
        the agent's to write, so the tree is built in a fresh index of scaffold's from
        the files themselves, committed on top of the branch's tip, and the branch moved
        only if its tip is still that commit. The worktree's index is then the commit's
        (scaffold's index takes its place). Returns the new commit, or None when there
        was nothing to commit.

        With scaffold's saved index of the tip (:data:`INDEX_CACHE`), ``add -A`` hashes
        only the files whose stat changed; without it, ``read-tree`` fills the index from
        the tip first. A conflict merge being finished gets its ``MERGE_HEAD`` as a second
        parent and a ``reset`` that ends it. With ``unless_merging``, a worktree in the
        middle of a merge (conflict markers an agent has yet to resolve) is left as it is.
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
            loaded = self._load_index(task_id, wt.tip, index)
            # Entries whose ctime is this recent are hashed again next time (index_file).
            since_s = int(time.time()) - 1
            if not loaded:
                self._git([*_FULL_STAT, "read-tree", wt.tip], cwd=path, env=env)
            added = self._git([*_FULL_STAT, "add", "-A"], cwd=path, env=env, check=not loaded)
            if added.returncode != 0:
                # A saved index git cannot use (e.g. a split index's half): start afresh.
                self._forget_indexes(task_id)
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
            self._save_index(task_id, new or wt.tip, index, since_s)
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

    # ------------------------------------------------------- saved indexes

    def _index_dir(self) -> Path:
        return self.common_dir() / INDEX_CACHE

    def _saved_indexes(self, task_id: str) -> list[Path]:
        folder = self._index_dir()
        prefix = f"task-{task_number(task_id)}-"
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        return [folder / n for n in names if n.startswith(prefix) and n.endswith(".index")]

    def _saved_index(self, task_id: str, tip: str) -> Path | None:
        if not _is_sha(tip):
            return None
        # A plain name from a validated id and a hex sha; opened without following links.
        return self._index_dir() / f"task-{task_number(task_id)}-{tip}.index"

    def _load_index(self, task_id: str, tip: str, index: Path) -> bool:
        """Copy scaffold's saved index of ``tip`` to ``index``; False when there is none.

        Only a regular file of scaffold's own is taken (never through a symlink)."""
        saved = self._saved_index(task_id, tip)
        if saved is None:
            return False
        try:
            fd = os.open(saved, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "rb") as src:
                if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                    return False
                data = src.read()
            with open(index, "xb") as dst:
                dst.write(data)
        except OSError:
            index.unlink(missing_ok=True)
            return False
        return True

    def _save_index(self, task_id: str, tip: str, index: Path, since_s: int) -> None:
        """Keep a copy of ``index`` (which matches ``tip``'s tree) for the next commit,
        replacing the task's older ones; entries whose ctime is at or after ``since_s``
        (when the files were read) are marked to be hashed again
        (:func:`~scaffold.git.index_file.smudge_recent`). Best effort: without a saved
        index the next commit only hashes every file again."""
        saved = self._saved_index(task_id, tip)
        if saved is None:
            return
        self._forget_indexes(task_id)
        try:
            data = smudge_recent(index.read_bytes(), since_s, len(tip) // 2)
        except OSError:
            return
        if data is None:
            return
        try:
            saved.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=saved.parent)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as dst:
                dst.write(data)
            os.replace(tmp, saved)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _forget_indexes(self, task_id: str) -> None:
        for path in self._saved_indexes(task_id):
            with contextlib.suppress(OSError):
                path.unlink()

    def _checked_worktree(self, task_id: str, branch: str) -> _CheckedWorktree:
        """The task's worktree with its branch's tip, refusing a broken or foreign one.

        One ``rev-parse`` run in the worktree says where git finds its repository from
        there: it must be this repository's worktree at this path (not the main
        repository git would climb to without a ``.git`` file), registered under
        ``<common>/worktrees/`` with a ``gitdir`` pointing back at it, not locked, and
        its ``HEAD`` the task branch (not detached, not another branch; as git resolves
        it, so a reftable repository works too): what ``git worktree list`` and ``git
        symbolic-ref HEAD`` said. ``gitdir`` may be relative to the admin folder (git's
        ``worktree.useRelativePaths``). A trailing ``--`` keeps files named like a
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
            not _same_path(Path(top), path)
            or not _same_path(Path(common), self.common_dir())
            or not _same_path(admin_dir.parent, self.common_dir() / "worktrees")
            or head != ref
            or not _same_path(
                admin_dir / _read_small_file(admin_dir / "gitdir").strip(), path / ".git"
            )
            or os.path.lexists(admin_dir / "locked")
        ):
            raise refused
        return _CheckedWorktree(path, admin_dir, Path(merge_head), tip, tip_tree)

    def _merging_parent(self, merge_head: Path, tip: str) -> list[str]:
        """The default branch's commit a conflict merge in the worktree is bringing in, if any.

        ``MERGE_HEAD`` lives where the agent could write, so it counts only when it names
        a commit already on the default branch and not yet on the task branch.
        """
        text = _read_small_file(merge_head).split()
        if not text:
            return []
        sha = self._rev(text[0])
        default = self._rev(f"refs/heads/{self.default_branch()}")
        if sha is None or default is None or not self._is_ancestor(sha, default):
            return []
        return [] if self._is_ancestor(sha, tip) else [sha]

    def commit_on_default(self, paths: Sequence[Path], message: str) -> str | None:
        """Commit these files, as they are in the main working tree, onto the default branch.

        Only these paths go into the commit (a missing file is committed as a
        deletion); other staged or unstaged changes stay exactly as they were.
        The commit is built in a temporary index from the default branch's
        tip, so it works whatever the main worktree has checked out. If the
        main worktree is on the default branch, its index entries for these
        paths are updated to match (before the branch moves, so a crash in
        between only leaves them staged and a second call completes it).
        Returns the new commit, or None when the files already match.

        Six git processes when the main worktree is on the default branch (four
        when the files already match): ``for-each-ref`` (tip, tree, checkout),
        ``read-tree``, ``update-index``, ``write-tree``, the checkout's
        ``update-index`` and ``update-ref``; the commit object is written in-process.
        """
        if not paths:
            return None
        rels = sorted({self._repo_relative(p) for p in paths})
        target = self.default_branch()
        for _ in range(_CAS_ATTEMPTS):
            head = self._heads(target).get(target)
            if head is None or head.commit is None or head.tree is None:
                old = self._require_rev(f"refs/heads/{target}")
                old_tree = self._git(["rev-parse", f"{old}^{{tree}}"]).stdout.strip()
            else:
                old, old_tree = head.commit, head.tree
            with tempfile.TemporaryDirectory(prefix="scaffold-index-") as tmp:
                env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
                self._git(["read-tree", old], env=env)
                self._git(["update-index", "--add", "--remove", "--", *rels], env=env)
                tree = self._git(["write-tree"], env=env).stdout.strip()
            if tree == old_tree:
                return None
            new = self._commit_tree(tree, [old], message)
            checkout = self._checkout_from(target, head)
            if checkout is not None and _same_path(checkout, self.repo_root):
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

    def _commit_tree(self, tree: str, parents: Sequence[str], message: str) -> str:
        args = [*IDENTITY_CONFIG, "commit-tree", "--no-gpg-sign", tree]
        for parent in parents:
            args += ["-p", parent]
        args += ["-F", "-"]
        out = self._git(args, env=dict(IDENTITY_ENV), input_text=_message(message))
        return out.stdout.strip()

    # ----------------------------------------------------------------- merges

    def merge(self, task_id: str, message: str) -> MergeResult:
        """Merge the task branch into the default branch with a merge commit.

        Idempotent: when the branch tip is already contained in the default
        branch the result is ``already_merged`` and nothing is written.
        """
        return self._merge_into(self.default_branch(), branch_for_task(task_id), message)

    def _merge_into(self, target: str, source_branch: str, message: str) -> MergeResult:
        """The merge, on the common path in four git processes: ``for-each-ref`` (both
        tips, the target's tree and checkout), ``merge-tree``, ``read-tree`` in the
        checkout and ``update-ref`` (the commit object is written in-process).

        ``merge-base --is-ancestor`` runs only when the merged tree is the target's
        own: a source already in the target merges to exactly the target's tree, so
        any other tree (or a conflict) means it is not in yet.
        """
        source_ref = f"refs/heads/{source_branch}"
        for _ in range(_CAS_ATTEMPTS):
            heads = self._heads(target, source_branch)
            head, theirs = heads.get(target), heads.get(source_branch)
            if head is None or head.commit is None or theirs is None or theirs.commit is None:
                source = self._require_rev(source_ref)
                old = self._require_rev(f"refs/heads/{target}")
                old_tree = None
            else:
                source, old, old_tree = theirs.commit, head.commit, head.tree
            tree, conflicts = self._merge_tree(old, source)
            if (tree is None or tree == old_tree or old_tree is None) and self._is_ancestor(
                source, old
            ):
                return MergeResult(
                    merged=True, sha=self._merging_commit(source, old), already_merged=True
                )
            if tree is None:
                return MergeResult(merged=False, sha=None, conflict_files=conflicts)
            new = self._commit_tree(tree, [old, source], message)
            checkout = self._checkout_from(target, head)
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
        for _ in range(_CAS_ATTEMPTS):
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
        merged = parse_name_status_z(
            self._git(["diff", "--name-status", "-z", "--no-renames", old, new]).stdout
        )
        local_out = self._git(["diff-index", "--name-only", "-z", "HEAD", "--"], cwd=checkout)
        local = set(filter(None, local_out.stdout.split("\0")))
        blocked = []
        for change in merged:
            target = checkout / change.path
            if change.path in local or (change.status == "A" and os.path.lexists(target)):
                blocked.append(change.path)
        return sorted(blocked)

    def _compare_and_swap(self, branch: str, new: str, old: str, reason: str) -> bool:
        ref = f"refs/heads/{branch}"
        out = self._git(["update-ref", "-m", reason, ref, new, old], check=False)
        if out.returncode == 0:
            return True
        if self._rev(ref) != old:
            return False
        raise GitError(["update-ref", "-m", reason, ref, new, old], out.returncode, out.stderr)


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _is_sha(text: str) -> bool:
    return _SHA.fullmatch(text) is not None


def _message(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


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


# What ``git reset`` removes from a worktree's git directory (merge, cherry-pick,
# revert and squash state): when one is there, the commit ends with ``reset``.
# scaffold's own copy of each task worktree's index, as its last commit left it, under
# the common git directory (read-only inside the sandbox, where only the worktree's admin
# folder is writable). It carries the stat data of every file, so the next commit hashes
# only the files that changed: a fresh index from ``read-tree`` has none, and ``add -A``
# would read and hash every file of the repository at every hand-off.
INDEX_CACHE = "scaffold-indexes"
# ``add -A`` trusts an unchanged stat only as git does by default: ctime counts (an
# agent can restore a file's mtime, never its ctime) and no entry is assumed unchanged;
# the index it writes is whole (not split) and of a version ``index_file`` reads.
_FULL_STAT: tuple[str, ...] = tuple(
    part
    for setting in (
        "core.trustctime=true",
        "core.checkStat=default",
        "core.ignoreStat=false",
        "core.splitIndex=false",
        "index.version=2",
    )
    for part in ("-c", setting)
)

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


@dataclass(frozen=True)
class _CheckedWorktree:
    """A task worktree that passed the checks, and its branch's tip when checked."""

    path: Path
    admin: Path  # its git directory: <common>/worktrees/<id>
    merge_head: Path
    tip: str
    tip_tree: str


def _read_small_file(path: Path) -> str:
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
