"""The state branch: every quest's file on one ref, written with git plumbing.

``refs/heads/scaffold/state`` (config ``state.branch``) holds ``quests/<id>.json`` for
open quests and ``quests/done/<id>.json`` for finished ones (``state/document.py``).
Nothing is checked out: the tree is built in a throw-away index file and the ref moved
with ``update-ref <ref> <new> <old>``, a compare-and-swap, so no one's working tree,
index or HEAD is touched.

Two writers never lose an update: each publication is rebuilt on the tip it finds,
keeping other quests' files and replacing a quest's file only by one at least as new
(its ``seq``); when the swap fails or a push is refused because the tip moved, it is
rebuilt on the new tip and tried again. With a :class:`StateRemote` (the App and the
Action) the base is the remote's tip as last fetched, the new commit is pushed as a
fast-forward, and the local ref mirrors what was pushed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scaffold.errors import GitError, StoreError
from scaffold.git.environment import git_env
from scaffold.git.locks import repo_lock
from scaffold.git.runner import (
    IDENTITY_CONFIG,
    IDENTITY_ENV,
    LOCAL_TIMEOUT_S,
    SAFE_LOCAL,
    run_git,
    run_remote_git,
)
from scaffold.ids import validate_state_branch
from scaffold.state.document import DONE_DIR, QuestStateFile, parse, quest_id_of, quest_path

DEFAULT_BRANCH = "scaffold/state"
MAX_TRIES = 20
_ZERO = "0" * 40
_ROOT_DIR = "quests"
# What a push says when the remote's branch moved under it: publish again on the new tip.
_LOST_RACE = (
    "non-fast-forward",
    "fetch first",
    "[rejected]",
    "failed to update ref",
    "cannot lock ref",
    "incorrect old value",
)

log = logging.getLogger("scaffold.state")


class StateRemote(Protocol):
    """Where the state branch is shared (the App's and the Action's clone URL)."""

    def fetch_state(self, branch: str) -> str | None:
        """Fetch the remote's state branch into ``refs/remotes/origin/<branch>``; its tip."""
        ...

    def push_state(self, branch: str, new: str) -> bool:
        """Push ``new`` as a fast-forward of the branch (and point ``origin/<branch>`` at
        it); False when the remote moved."""
        ...


@dataclass(frozen=True)
class Publication:
    """One quest's file to put on the branch."""

    quest_id: str
    data: bytes
    seq: int
    finished: bool

    @property
    def path(self) -> str:
        return quest_path(self.quest_id, finished=self.finished)


@dataclass(frozen=True)
class StateProblem:
    path: str
    reason: str


class StateBranch:
    """The state branch of one repository (a clone, a worktree's main repository)."""

    def __init__(
        self, repo: Path, branch: str = DEFAULT_BRANCH, *, remote: StateRemote | None = None
    ) -> None:
        self.repo = Path(repo)
        self.branch = validate_state_branch(branch)
        self.ref = f"refs/heads/{self.branch}"
        self.tracking_ref = f"refs/remotes/origin/{self.branch}"
        self.remote = remote
        self._lock = repo_lock(self.repo, self.ref)
        self.problems: list[StateProblem] = []

    # ------------------------------------------------------------------ git

    def _git(
        self, *args: str, env: Mapping[str, str] | None = None, input_text: str | None = None
    ) -> str:
        return run_git(
            [*IDENTITY_CONFIG, *SAFE_LOCAL, *args],
            cwd=self.repo,
            env={**IDENTITY_ENV, **(env or {})},
            input_text=input_text,
        ).stdout

    def _rev(self, ref: str) -> str | None:
        out = run_git(
            [*SAFE_LOCAL, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            cwd=self.repo,
            check=False,
        )
        return out.stdout.strip() or None

    def tip(self) -> str | None:
        """The commit the branch is read from: with a remote, the remote's as last fetched
        (or pushed); else the local branch, or the fetched one when there is none."""
        if self.remote is not None:
            return self._rev(self.tracking_ref) or self._rev(self.ref)
        return self._rev(self.ref) or self._rev(self.tracking_ref)

    def has_local(self) -> bool:
        """Whether this repository has the branch itself (not only as fetched)."""
        return self._rev(self.ref) is not None

    def _base(self) -> str | None:
        if self.remote is not None:
            return self._rev(self.tracking_ref)
        return self.tip()

    def _blobs(self, rev: str, *paths: str) -> dict[str, str]:
        """path -> blob id of every file under ``quests/`` (or of ``paths``) at ``rev``."""
        out = self._git("ls-tree", "-r", "-z", "--full-tree", rev, "--", *(paths or (_ROOT_DIR,)))
        blobs: dict[str, str] = {}
        for record in out.split("\0"):
            if not record:
                continue
            meta, _, path = record.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                blobs[path] = parts[2]
        return blobs

    def _bytes(self, args: Sequence[str], data: bytes) -> bytes:
        """``git <args>`` with binary input and output (blobs are bytes, not text)."""
        argv = ["git", *SAFE_LOCAL, *args]
        try:
            proc = subprocess.run(
                argv,
                cwd=self.repo,
                input=data,
                capture_output=True,
                env=git_env(),
                check=False,
                timeout=LOCAL_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitError(list(args), -1, str(exc)) from None
        if proc.returncode != 0:
            raise GitError(list(args), proc.returncode, proc.stderr.decode(errors="replace"))
        return proc.stdout

    def _cat(self, blob_ids: Sequence[str]) -> list[bytes]:
        """The contents of ``blob_ids``, in order, with one ``cat-file --batch``."""
        if not blob_ids:
            return []
        out = self._bytes(["cat-file", "--batch"], ("\n".join(blob_ids) + "\n").encode())
        contents: list[bytes] = []
        pos = 0
        for blob in blob_ids:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            if len(header) != 3:
                raise GitError(["cat-file", "--batch"], 1, f"missing object {blob}")
            size = int(header[2])
            contents.append(out[end + 1 : end + 1 + size])
            pos = end + 1 + size + 1
        return contents

    # ------------------------------------------------------------------ reading

    def read(self, rev: str | None = None, *, open_only: bool = False) -> dict[str, QuestStateFile]:
        """Every quest file on the branch (open and finished, or ``open_only``), by id.

        A file that does not parse is left out and recorded in :attr:`problems`
        (the branch itself is never changed by reading)."""
        rev = rev or self.tip()
        self.problems = []
        if rev is None:
            return {}
        blobs = self._blobs(rev)
        paths = [
            p
            for p in blobs
            if quest_id_of(p) is not None and not (open_only and p.startswith(f"{DONE_DIR}/"))
        ]
        docs: dict[str, QuestStateFile] = {}
        for path, data in zip(paths, self._cat([blobs[p] for p in paths]), strict=True):
            try:
                doc = parse(data, f"{self.branch}:{path}")
            except StoreError as exc:
                self.problems.append(StateProblem(path, exc.reason))
                continue
            qid = quest_id_of(path)
            if doc.quest.id != qid:
                self.problems.append(StateProblem(path, f"holds quest {doc.quest.id!r}"))
                continue
            held = docs.get(doc.quest.id)
            if held is None or doc.seq > held.seq:
                docs[doc.quest.id] = doc
        return docs

    def read_quest(self, quest_id: str) -> QuestStateFile | None:
        """One quest's file (the newer, should it be both open and done), reading no other."""
        rev = self.tip()
        if rev is None:
            return None
        blobs = self._blobs(rev, *(quest_path(quest_id, finished=f) for f in (False, True)))
        found: QuestStateFile | None = None
        for path, data in zip(blobs, self._cat(list(blobs.values())), strict=True):
            doc = parse(data, f"{self.branch}:{path}")
            if doc.quest.id == quest_id and (found is None or doc.seq > found.seq):
                found = doc
        return found

    def log(self, quest_id: str, limit: int = 200) -> list[tuple[str, str, str]]:
        """(commit, date, subject) of the commits that changed the quest's file, newest first."""
        rev = self.tip()
        if rev is None:
            return []
        paths = [quest_path(quest_id, finished=f) for f in (False, True)]
        out = self._git(
            "log", f"--max-count={limit}", "--format=%H%x00%aI%x00%s", rev, "--", *paths
        )
        return [
            (sha, date, subject)
            for sha, date, subject in (line.split("\0", 2) for line in out.splitlines())
        ]

    # ------------------------------------------------------------------ writing

    def publish(self, publications: Sequence[Publication], message: str) -> str | None:
        """Put ``publications`` on the branch; the new tip (None: nothing to publish).

        Retries on a moved tip (merge by quest id); raises StoreError after
        :data:`MAX_TRIES` lost races and GitError when git or the remote fails."""
        if not publications:
            return self.tip()
        with self._lock:
            for attempt in range(MAX_TRIES):
                if self.remote is not None and attempt > 0:
                    self.remote.fetch_state(self.branch)
                base = self._base()
                new = self._build(base, publications, message)
                if new is None:
                    return base
                if self._swap(new, base):
                    return new
                log.info("state branch moved; publishing again", extra={"try": attempt + 1})
                # Jittered back-off: two writers that keep colliding fall out of step.
                time.sleep(random.uniform(0, min(0.02 * (attempt + 1), 0.3)))
        raise StoreError(
            f"{self.repo}:{self.ref}",
            f"the state branch kept moving; gave up after {MAX_TRIES} tries",
        )

    def _swap(self, new: str, base: str | None) -> bool:
        if self.remote is not None:
            if not self.remote.push_state(self.branch, new):
                return False
            self._git("update-ref", "-m", "scaffold: state pushed", self.ref, new)
            return True
        out = run_git(
            [*SAFE_LOCAL, "update-ref", "-m", "scaffold: state", self.ref, new, base or _ZERO],
            cwd=self.repo,
            check=False,
        )
        return out.returncode == 0

    def _newest_seq(self, data: bytes) -> int:
        try:
            seq = json.loads(data)["quest"]["seq"]
        except (ValueError, KeyError, TypeError):
            return -1  # unreadable: any publication replaces it
        return seq if isinstance(seq, int) else -1

    def _build(
        self, base: str | None, publications: Sequence[Publication], message: str
    ) -> str | None:
        existing = self._blobs(base) if base else {}
        held: dict[str, list[str]] = {}
        for path in existing:
            qid = quest_id_of(path)
            if qid is not None:
                held.setdefault(qid, []).append(path)
        changes: list[str] = []
        subjects: list[str] = []
        for pub in publications:
            theirs = held.get(pub.quest_id, [])
            contents = self._cat([existing[p] for p in theirs])
            if any(self._newest_seq(c) > pub.seq for c in contents):
                log.info("a newer file of %s is on the branch; kept", pub.quest_id)
                continue
            blob = self._hash(pub.data)
            if existing.get(pub.path) == blob and theirs == [pub.path]:
                continue
            changes.append(f"100644 {blob}\t{pub.path}")
            changes.extend(f"0 {_ZERO}\t{p}" for p in theirs if p != pub.path)
            subjects.append(pub.quest_id)
        if not changes:
            return None
        tree = self._tree(base, changes)  # never the base's: each change differs from it
        named = all(qid in message for qid in subjects)
        subject = message if named else f"{message} ({', '.join(subjects)})"
        parent = ["-p", base] if base else []
        return self._git("commit-tree", tree, *parent, "-m", subject).strip()

    def _hash(self, data: bytes) -> str:
        return self._bytes(["hash-object", "-w", "--stdin"], data).decode().strip()

    def _tree(self, base: str | None, changes: Sequence[str]) -> str:
        with tempfile.TemporaryDirectory(prefix="scaffold-state-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base is not None:
                self._git("read-tree", base, env=env)
            self._git("update-index", "--index-info", env=env, input_text="\n".join(changes) + "\n")
            return self._git("write-tree", env=env).strip()


class GitRemote:
    """A :class:`StateRemote` over git: the clone URL, the credential in one process's
    environment only (:func:`~scaffold.git.runner.run_remote_git`: audited config, no
    hooks), and ``auth`` read anew for each call (installation tokens expire)."""

    def __init__(
        self,
        repo: Path,
        url: str,
        auth: Callable[[], Sequence[tuple[str, str]]] = lambda: (),
        lock: AbstractContextManager[object] | None = None,
    ) -> None:
        self.repo = Path(repo)
        self.url = url
        self.auth = auth
        # Held around each remote call and remote-tracking update (the clone's own lock,
        # so that no fetch of the clone runs at the same time).
        self.lock: AbstractContextManager[object] = lock or contextlib.nullcontext()

    def fetch_state(self, branch: str) -> str | None:
        ref = f"refs/heads/{validate_state_branch(branch)}"
        tracking = f"refs/remotes/origin/{branch}"
        with self.lock:
            out = run_remote_git(
                ["ls-remote", "--heads", self.url, ref], self.repo, url=self.url, auth=self.auth()
            )
            tip = next((line.split()[0] for line in out.stdout.splitlines() if line.strip()), None)
            if tip is None:
                run_git([*SAFE_LOCAL, "update-ref", "-d", tracking], cwd=self.repo, check=False)
                return None
            run_remote_git(
                ["fetch", "--quiet", "--no-write-fetch-head", self.url, f"+{ref}:{tracking}"],
                self.repo,
                url=self.url,
                auth=self.auth(),
            )
            return tip

    def push_state(self, branch: str, new: str) -> bool:
        ref = f"refs/heads/{validate_state_branch(branch)}"
        with self.lock:
            # Exit 1 is a refused update; anything else (auth, network) raises, redacted.
            out = run_remote_git(
                ["push", "--quiet", "--no-verify", "--porcelain", self.url, f"{new}:{ref}"],
                self.repo,
                url=self.url,
                auth=self.auth(),
                ok_codes=(0, 1),
            )
            if out.returncode == 0:  # origin/<branch> moves, as with a push to a named remote
                tracking = f"refs/remotes/origin/{branch}"
                run_git([*SAFE_LOCAL, "update-ref", tracking, new], cwd=self.repo)
                return True
        text = f"{out.stdout}\n{out.stderr}"
        if any(word in text for word in _LOST_RACE):
            return False
        said = next((ln for ln in out.stdout.splitlines() if ln.startswith("!")), "")
        reason = said.rpartition("\t")[2] or "the remote refused the update"
        raise GitError(["push", "<remote>", ref], out.returncode, reason)
