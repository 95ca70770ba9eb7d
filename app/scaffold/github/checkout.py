"""The App's own clone of each repository it works on, under the server's state folder.

Agents run in worktrees of this clone and can write its ``.git``, so every fetch and push
goes through :func:`~scaffold.git.runner.run_remote_git` (config audited, no hooks, the
clone URL GitHub gave, never ``remote.origin.url``), and the installation token reaches
only the one git process that needs it (never ``.git/config``, a command line or an
agent). The local default branch is the remote one plus scaffold's Backlog.md commits;
task branches start from it, so a protected default branch is never pushed to.
"""

from __future__ import annotations

import base64
import re
import threading
from pathlib import Path
from typing import Any

from scaffold.config import CONFIG_PATH, ScaffoldConfig, parse_config
from scaffold.errors import GitError, ScaffoldError
from scaffold.git.runner import (
    IDENTITY_CONFIG,
    IDENTITY_ENV,
    SAFE_LOCAL,
    GitOutput,
    auth_header_config,
    run_git,
    run_remote_git,
)

_REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")

# Where the remote's branches are kept, as `git clone` set it up.
TRACKING_REFSPEC = "+refs/heads/*:refs/remotes/origin/*"


def check_repo_name(full_name: str) -> str:
    if not _REPO_NAME.match(full_name) or ".." in full_name:
        raise ScaffoldError(f"not a repository name: {full_name!r}")
    return full_name


def token_auth(url: str, token: str) -> tuple[tuple[str, str], ...]:
    """The config entry that authenticates git to ``url`` (and nowhere else) with ``token``."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return auth_header_config(url, f"Authorization: Basic {basic}")


class Checkout:
    """The clone of one repository: fetch, read config, advance, push."""

    def __init__(self, root: Path, full_name: str, clone_url: str, default_branch: str):
        # One fetch or remote-tracking update at a time: two at once fail on git's ref
        # locks ("cannot lock ref ... but expected"). Every remote call of the clone,
        # the state branch's included, holds it.
        self.remote_lock = threading.RLock()
        self.full_name = check_repo_name(full_name)
        self.path = root / "repos" / full_name
        self.clone_url = clone_url
        self.default_branch = default_branch

    def _git(self, *args: str, check: bool = True) -> str:
        """A local call: scaffold's identity, no hooks, no fsmonitor."""
        return run_git(
            [*IDENTITY_CONFIG, *SAFE_LOCAL, *args], cwd=self.path, env=IDENTITY_ENV, check=check
        ).stdout

    def _remote(self, args: list[str], token: str, **kw: Any) -> GitOutput:
        """``git <args>`` with the clone URL, authenticated by ``token`` there only."""
        kw.setdefault("cwd", self.path)
        return run_remote_git(
            args, url=self.clone_url, auth=token_auth(self.clone_url, token), **kw
        )

    def ensure(self, token: str) -> None:
        """Clone on first use; afterwards fetch and bring the default branch up to date."""
        if not (self.path / ".git").exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._remote(
                [
                    "clone",
                    "--quiet",
                    "--template=",
                    "--branch",
                    self.default_branch,
                    "--",
                    self.clone_url,
                    str(self.path),
                ],
                token,
                cwd=self.path.parent,
                audit=False,
            )
            return
        self.update(token)

    def fetch_refspecs(self, token: str, *refspecs: str, check: bool = True) -> bool:
        """Fetch ``refspecs`` from the clone URL; False when that failed (and not ``check``)."""
        with self.remote_lock:
            out = self._remote(
                ["fetch", "--quiet", "--no-write-fetch-head", self.clone_url, *refspecs],
                token,
                check=check,
            )
        return out.returncode == 0

    def fetch(self, token: str) -> None:
        with self.remote_lock:
            self._remote(
                ["fetch", "--quiet", "--prune", self.clone_url, TRACKING_REFSPEC],
                token,
            )

    def update(self, token: str) -> None:
        """Fetch, then merge the remote default branch into the local one."""
        self.fetch(token)
        remote = f"origin/{self.default_branch}"
        current = self._git("rev-parse", "--abbrev-ref", "HEAD").strip()
        if current != self.default_branch:
            self._git("checkout", "--quiet", self.default_branch)
        try:
            self._git("merge", "--quiet", "--no-edit", remote)
        except GitError as exc:
            self._git("merge", "--abort", check=False)
            raise ScaffoldError(
                f"{self.full_name}: cannot bring {self.default_branch} up to date: {exc}"
            ) from None

    def config(self) -> ScaffoldConfig:
        """``.github/scaffold.yml`` as it is on the remote default branch (never a PR's)."""
        ref = f"origin/{self.default_branch}:{CONFIG_PATH}"
        out = run_git([*SAFE_LOCAL, "cat-file", "blob", ref], cwd=self.path, check=False)
        if out.returncode != 0:
            return ScaffoldConfig(default_branch=self.default_branch, forge="github")
        cfg = parse_config(out.stdout, f"{self.default_branch}:{CONFIG_PATH}")
        return cfg.model_copy(update={"default_branch": self.default_branch, "forge": "github"})

    def head_of(self, branch: str) -> str:
        return self._git("rev-parse", f"refs/heads/{branch}").strip()

    def contains(self, descendant: str, ancestor: str) -> bool:
        out = run_git(
            [*SAFE_LOCAL, "merge-base", "--is-ancestor", ancestor, descendant],
            cwd=self.path,
            check=False,
        )
        return out.returncode == 0

    def fetch_branch(self, branch: str, token: str) -> str | None:
        """The remote's tip of ``branch`` (fetched into ``refs/remotes/origin/``), or None
        when the remote has no such branch."""
        _owned(branch)
        tracking = f"refs/remotes/origin/{branch}"
        with self.remote_lock:
            listed = self._remote(
                ["ls-remote", "--heads", self.clone_url, f"refs/heads/{branch}"],
                token,
            )
            if not listed.stdout.strip():
                self._git("update-ref", "-d", tracking, check=False)
                return None
            self.fetch_refspecs(token, f"+refs/heads/{branch}:{tracking}")
        return self._git("rev-parse", f"{tracking}^{{commit}}").strip()

    def push_branch(self, branch: str, token: str, *, lease: str | None = None) -> bool:
        """Push a scaffold branch, only over the remote tip ``lease`` (None: only where the
        remote has no such branch), and only a head that contains it: never over a commit
        scaffold has not seen. False when the lease is lost (someone pushed meanwhile) or
        the head lacks it: fetch, build on it, push again."""
        _owned(branch)
        head = self.head_of(branch)
        if lease is not None and not self.contains(head, lease):
            return False  # the remote tip is not in the branch: build on it first
        with self.remote_lock:
            out = self._remote(
                [
                    "push",
                    "--quiet",
                    "--no-verify",
                    "--porcelain",
                    f"--force-with-lease=refs/heads/{branch}:{lease or ''}",
                    self.clone_url,
                    f"{head}:refs/heads/{branch}",
                ],
                token,
                check=False,
            )
            if out.returncode != 0:
                if "[rejected]" in out.stdout:
                    return False  # the lease is lost (or not a fast-forward without one)
                # Porcelain output names refs only (stderr could hold the remote's words).
                raise GitError(["push", branch], out.returncode, out.stdout.strip())
            # what a push to the named remote would have done
            self._git("update-ref", f"refs/remotes/origin/{branch}", head)
        return True


def _owned(branch: str) -> str:
    if not branch.startswith("scaffold/"):
        raise ScaffoldError(f"refusing to push a branch scaffold does not own: {branch}")
    return branch
