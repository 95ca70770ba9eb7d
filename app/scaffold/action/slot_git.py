"""The git side of a slot: the task branch, scaffold's commit, the push.

Hooks are off for every call (``core.hooksPath=/dev/null``): the agent could have
written ``.git/hooks/pre-push`` and a hook must not run where the push
credentials are. The push goes to the URL ``origin`` had *before* the agent ran,
not to whatever the agent may have pointed ``origin`` at, and its errors are
redacted before anyone sees them.
"""

from __future__ import annotations

import os
from pathlib import Path

from scaffold.errors import GitError, UsageError
from scaffold.git.runner import IDENTITY_CONFIG, IDENTITY_ENV, GitOutput, run_git
from scaffold.github.sanitize import redact
from scaffold.ids import branch_for_task, normalize_task_id, task_for_branch

NO_HOOKS: tuple[str, ...] = ("-c", f"core.hooksPath={os.devnull}")


def _git(repo: Path, *args: str, check: bool = True) -> GitOutput:
    return run_git([*NO_HOOKS, *args], repo, check=check)


def task_branch(task_id: str) -> str:
    """``scaffold/task-<n>`` for a valid task id; anything else is refused."""
    tid = normalize_task_id(task_id)
    branch = branch_for_task(tid)
    task_for_branch(branch)  # the round trip refuses any other shape
    return branch


def origin_url(repo: Path) -> str:
    out = run_git(["remote", "get-url", "origin"], repo, check=False)
    url = out.stdout.strip()
    if out.returncode != 0 or not url:
        raise UsageError(f"{repo} has no remote named origin to push the task branch to")
    return url


def _remote_has(repo: Path, branch: str) -> bool:
    out = _git(repo, "ls-remote", "--heads", "origin", f"refs/heads/{branch}", check=False)
    if out.returncode != 0:
        raise GitError(["ls-remote", "--heads", "origin"], out.returncode, redact(out.stderr))
    return bool(out.stdout.strip())


def prepare_branch(repo: Path, task_id: str) -> str:
    """Check out the task branch: as it is, from ``origin``, or new from HEAD."""
    branch = task_branch(task_id)
    current = run_git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False)
    if current.returncode == 0 and current.stdout.strip() == branch:
        return branch
    local = run_git(["show-ref", "--verify", "--quiet", f"refs/heads/{branch}"], repo, check=False)
    if local.returncode == 0:
        _git(repo, "checkout", "--quiet", branch, "--")
    elif _remote_has(repo, branch):
        tracking = f"refs/remotes/origin/{branch}"
        fetched = _git(
            repo,
            "fetch",
            "--no-tags",
            "--quiet",
            "origin",
            f"+refs/heads/{branch}:{tracking}",
            check=False,
        )
        if fetched.returncode != 0:
            raise GitError(["fetch", "origin", branch], fetched.returncode, redact(fetched.stderr))
        _git(repo, "checkout", "--quiet", "-b", branch, tracking, "--")
    else:
        _git(repo, "checkout", "--quiet", "-b", branch, "--")
    return branch


def commit_work(repo: Path, message: str) -> str | None:
    """Commit everything the agent changed, as scaffold; ``None`` when nothing changed."""
    _git(repo, "add", "-A")
    if _git(repo, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return None
    text = message if message.endswith("\n") else message + "\n"
    run_git(
        [*IDENTITY_CONFIG, *NO_HOOKS, "commit", "--no-verify", "--no-gpg-sign", "-q", "-F", "-"],
        repo,
        env=dict(IDENTITY_ENV),
        input_text=text,
    )
    return head_sha(repo)


def head_sha(repo: Path) -> str:
    return run_git(["rev-parse", "HEAD"], repo).stdout.strip()


def push_branch(repo: Path, url: str, branch: str, secrets: tuple[str, ...] = ()) -> None:
    """``git push <url> HEAD:refs/heads/<branch>`` (never forced)."""
    task_branch(task_for_branch(branch))
    out = run_git(
        [
            *NO_HOOKS,
            "-c",
            "http.sslVerify=true",
            "push",
            "--quiet",
            "--no-verify",
            url,
            f"HEAD:refs/heads/{branch}",
        ],
        repo,
        check=False,
    )
    if out.returncode != 0:
        stderr = redact(out.stderr.replace(url, "<origin>"), secrets)
        raise GitError(["push", "<origin>", f"HEAD:refs/heads/{branch}"], out.returncode, stderr)
