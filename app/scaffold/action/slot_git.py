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
    """Check out the task branch: as it is, from ``origin``, or new from HEAD."""
    branch = task_branch(task_id)
    current = _git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if current.returncode == 0 and current.stdout.strip() == branch:
        return branch
    local = _git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    if local.returncode == 0:
        _git(repo, "checkout", "--quiet", branch, "--")
        return branch
    listed = _remote(repo, origin, "ls-remote", "--heads", origin.url, f"refs/heads/{branch}")
    if listed.stdout.strip():
        tracking = f"refs/remotes/origin/{branch}"
        refspec = f"+refs/heads/{branch}:{tracking}"
        _remote(repo, origin, "fetch", "--no-tags", "--quiet", origin.url, refspec)
        _git(repo, "checkout", "--quiet", "-b", branch, tracking, "--")
    else:
        _git(repo, "checkout", "--quiet", "-b", branch, "--")
    return branch


def commit_work(repo: Path, message: str) -> str | None:
    """Commit everything the agent changed, as scaffold; ``None`` when nothing changed."""
    audit_repo_config(repo, "add")
    _git(repo, "add", "-A")
    if _git(repo, "diff", "--cached", "--quiet", "--no-ext-diff", check=False).returncode == 0:
        return None
    text = message if message.endswith("\n") else message + "\n"
    run_git(
        [*IDENTITY_CONFIG, *SAFE_LOCAL, "commit", "--no-verify", "--no-gpg-sign", "-q", "-F", "-"],
        repo,
        env={**IDENTITY_ENV, **ISOLATED_CONFIG_ENV},
        input_text=text,
    )
    return head_sha(repo)


def head_sha(repo: Path) -> str:
    return _git(repo, "rev-parse", "HEAD").stdout.strip()


def push_branch(repo: Path, origin: Origin, branch: str) -> None:
    """``git push <origin url> HEAD:refs/heads/<branch>`` (never forced)."""
    task_branch(task_for_branch(branch))
    _remote(repo, origin, "push", "--quiet", "--no-verify", origin.url, f"HEAD:refs/heads/{branch}")
