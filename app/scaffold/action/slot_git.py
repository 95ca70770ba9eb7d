"""The git side of a slot: the task branch, scaffold's commit, the push.

:func:`take_origin` notes ``origin``'s URL and takes the checkout's credentials out of
``.git/config`` into memory before the agent starts. Every fetch and push goes to that
URL (not wherever the agent may have pointed ``origin``) through
:func:`~scaffold.git.runner.run_remote_git`, which audits the repository's config first
and hands the credentials to that one git process only; its errors are redacted. Every
git call after the agent ran goes without hooks, fsmonitor, system or global config
(the agent shares the runner's HOME), after the same audit, so ``git add -A`` runs no
filter driver the agent declared.
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


def take_origin(repo: Path) -> Origin:
    """``origin``'s URL and the checkout's credentials, taken out of its config for good."""
    out = run_git([*SAFE_LOCAL, "remote", "get-url", "origin"], repo, check=False)
    url = out.stdout.strip()
    if out.returncode != 0 or not url:
        raise UsageError(f"{repo} has no remote named origin to push the task branch to")
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
    """Have a local task branch: as it is, from ``origin``, or new from HEAD."""
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
    """A worktree of the task branch at ``path``, the agent's: nothing other workflow steps
    left in the workspace is in it. ``--force``: the workspace may have the branch out."""
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
