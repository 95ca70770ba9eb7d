"""The git side of a slot: the task branch, scaffold's commit, the push.

Before the agent starts, :func:`take_origin` notes the URL ``origin`` has and takes
the checkout's credentials out of ``.git/config`` into memory
(:mod:`~scaffold.action.credentials`); they never go back. Every fetch, ls-remote and
push goes to that URL (not to whatever the agent may have pointed ``origin`` at)
through :func:`~scaffold.git.runner.run_remote_git`: the repository's config is
audited first, hooks and fsmonitor are off, and the credentials reach only that one
git process, through its environment. Its errors are redacted before anyone sees
them.

Every git call after the agent ran also runs without hooks or fsmonitor, without
system or global config (the agent shares the runner's HOME), and after the same
audit, so ``git add -A`` runs no filter driver the agent declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaffold.action.credentials import Credentials, take_credentials
from scaffold.errors import GitError, UsageError
from scaffold.git.runner import (
    IDENTITY_CONFIG,
    IDENTITY_ENV,
    ISOLATED_CONFIG_ENV,
    SAFE_LOCAL,
    GitOutput,
    audit_repo_config,
    run_git,
    run_remote_git,
)
from scaffold.ids import branch_for_task, normalize_task_id, task_for_branch
from scaffold.sanitize import redact


@dataclass(frozen=True)
class Origin:
    """Where the task branch goes, and the credentials taken out of the checkout."""

    url: str
    credentials: Credentials

    def shown(self, text: str) -> str:
        return redact(text.replace(self.url, "<origin>"), self.credentials.secrets())


def _git(repo: Path, *args: str, check: bool = True) -> GitOutput:
    return run_git([*SAFE_LOCAL, *args], repo, check=check, env=ISOLATED_CONFIG_ENV)


def task_branch(task_id: str) -> str:
    """``scaffold/task-<n>`` for a valid task id; anything else is refused."""
    tid = normalize_task_id(task_id)
    branch = branch_for_task(tid)
    task_for_branch(branch)  # the round trip refuses any other shape
    return branch


def origin_url(repo: Path) -> str:
    out = run_git([*SAFE_LOCAL, "remote", "get-url", "origin"], repo, check=False)
    url = out.stdout.strip()
    if out.returncode != 0 or not url:
        raise UsageError(f"{repo} has no remote named origin to push the task branch to")
    return url


def take_origin(repo: Path) -> Origin:
    """``origin``'s URL and the checkout's credentials, taken out of its config for good."""
    url = origin_url(repo)
    return Origin(url, take_credentials(repo))


def _remote(repo: Path, origin: Origin, *args: str) -> GitOutput:
    out = run_remote_git(
        list(args), repo, url=origin.url, auth=origin.credentials.entries, check=False
    )
    if out.returncode != 0:
        shown = [origin.shown(a) for a in args]
        raise GitError(shown, out.returncode, origin.shown(out.stderr))
    return out


def prepare_branch(repo: Path, task_id: str, origin: Origin) -> str:
    """Have a local task branch: as it is, from ``origin``, or new from HEAD.

    The workspace's own checkout is left as it is: the agent works in a worktree of
    its own (:func:`add_worktree`).
    """
    branch = task_branch(task_id)
    local = _git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    if local.returncode == 0:
        return branch
    listed = _remote(repo, origin, "ls-remote", "--heads", origin.url, f"refs/heads/{branch}")
    if listed.stdout.strip():
        tracking = f"refs/remotes/origin/{branch}"
        refspec = f"+refs/heads/{branch}:{tracking}"
        _remote(repo, origin, "fetch", "--no-tags", "--quiet", origin.url, refspec)
        _git(repo, "branch", "--quiet", "--no-track", branch, tracking)
    else:
        _git(repo, "branch", "--quiet", "--no-track", branch, "HEAD")
    return branch


def add_worktree(repo: Path, branch: str, path: Path) -> Path:
    """A worktree of the task branch at ``path`` (absent or empty): the agent's, and only its.

    Nothing another workflow step left in the workspace (untracked or ignored files,
    credentials, build output, changes to tracked files) is in it, so nothing of that
    reaches the commit. ``--force``: the workspace may have the branch checked out.
    """
    task_branch(task_for_branch(branch))
    _git(repo, "worktree", "add", "--quiet", "--force", str(path), branch)
    return path


def remove_worktree(repo: Path, path: Path) -> None:
    """Unregister and delete the agent's worktree (best effort: the runner is thrown away)."""
    _git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)


def commit_work(worktree: Path, message: str) -> str | None:
    """Commit everything the agent changed in its worktree, as scaffold; ``None`` when
    nothing changed. Ignored files stay out (``git add -A`` honours .gitignore)."""
    audit_repo_config(worktree, "add")
    _git(worktree, "add", "-A")
    if _git(worktree, "diff", "--cached", "--quiet", "--no-ext-diff", check=False).returncode == 0:
        return None
    text = message if message.endswith("\n") else message + "\n"
    run_git(
        [*IDENTITY_CONFIG, *SAFE_LOCAL, "commit", "--no-verify", "--no-gpg-sign", "-q", "-F", "-"],
        worktree,
        env={**IDENTITY_ENV, **ISOLATED_CONFIG_ENV},
        input_text=text,
    )
    return head_sha(worktree)


def head_sha(repo: Path) -> str:
    return _git(repo, "rev-parse", "HEAD").stdout.strip()


def push_branch(repo: Path, origin: Origin, branch: str) -> None:
    """``git push <origin url> HEAD:refs/heads/<branch>`` (never forced)."""
    task_branch(task_for_branch(branch))
    _remote(repo, origin, "push", "--quiet", "--no-verify", origin.url, f"HEAD:refs/heads/{branch}")
