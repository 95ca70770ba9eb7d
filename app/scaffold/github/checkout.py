"""The App's own working copy of each repository it works on.

One clone per repository under the server's state folder. The installation token
reaches git only through the environment of the one git process that needs it
(``GIT_CONFIG_*`` setting ``http.extraHeader``): it is never written to ``.git/config``,
never on a command line, and never in an agent's environment (agents run in worktrees
of this clone and can neither fetch nor push).

The local default branch is the remote one plus scaffold's own bookkeeping commits
(Backlog.md task files and statuses); task branches start from it, so each pull request
carries the Backlog.md changes of its task and a protected default branch is never
pushed to directly.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from scaffold.config import CONFIG_PATH, ScaffoldConfig, parse_config
from scaffold.errors import GitError, ScaffoldError
from scaffold.git.runner import IDENTITY_CONFIG, IDENTITY_ENV, run_git

_REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")


def check_repo_name(full_name: str) -> str:
    if not _REPO_NAME.match(full_name) or ".." in full_name:
        raise ScaffoldError(f"not a repository name: {full_name!r}")
    return full_name


def auth_env(token: str) -> dict[str, str]:
    """Environment for one git process that talks to GitHub with ``token``."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
    }


class Checkout:
    """The clone of one repository: fetch, read config, advance, push."""

    def __init__(self, root: Path, full_name: str, clone_url: str, default_branch: str):
        self.full_name = check_repo_name(full_name)
        self.path = root / "repos" / full_name
        self.clone_url = clone_url
        self.default_branch = default_branch

    def _git(self, *args: str, token: str | None = None, check: bool = True) -> str:
        env = dict(IDENTITY_ENV)
        if token is not None:
            env.update(auth_env(token))
        return run_git([*IDENTITY_CONFIG, *args], cwd=self.path, env=env, check=check).stdout

    def ensure(self, token: str) -> None:
        """Clone on first use; afterwards fetch and bring the default branch up to date."""
        if not (self.path / ".git").exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            run_git(
                [
                    "clone",
                    "--quiet",
                    "--branch",
                    self.default_branch,
                    self.clone_url,
                    str(self.path),
                ],
                cwd=self.path.parent,
                env={**IDENTITY_ENV, **auth_env(token)},
            )
            return
        self.update(token)

    def fetch(self, token: str) -> None:
        self._git("fetch", "--quiet", "--prune", "origin", token=token)

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
        out = run_git(["show", ref], cwd=self.path, check=False)
        if out.returncode != 0:
            return ScaffoldConfig(default_branch=self.default_branch, forge="github")
        cfg = parse_config(out.stdout, f"{self.default_branch}:{CONFIG_PATH}")
        return cfg.model_copy(update={"default_branch": self.default_branch, "forge": "github"})

    def head_of(self, branch: str) -> str:
        return self._git("rev-parse", f"refs/heads/{branch}").strip()

    def push_branch(self, branch: str, token: str) -> str:
        """Push a scaffold branch (scaffold owns it, so a forced update is fine)."""
        if not branch.startswith("scaffold/"):
            raise ScaffoldError(f"refusing to push a branch scaffold does not own: {branch}")
        self._git(
            "push",
            "--quiet",
            "--force",
            "origin",
            f"refs/heads/{branch}:refs/heads/{branch}",
            token=token,
        )
        return self.head_of(branch)

    def remote_head(self, branch: str) -> str | None:
        out = run_git(
            ["rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{branch}"],
            cwd=self.path,
            check=False,
        )
        return out.stdout.strip() or None
