"""A thin, typed wrapper over the ``git`` executable.

Why not GitPython for this part: merges and worktree repair need exact exit
codes and NUL-separated plumbing output, and a direct argv call keeps those in
plain sight. Every call is an argv list run without a shell; a failure raises
:class:`scaffold.errors.GitError` carrying the argv, exit code and stderr.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.errors import GitError

GIT = "git"

# Inherited variables that would silently point git at another repository or
# index (they are set, for example, when scaffold runs inside a git hook).
_REPO_REDIRECTING_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)

SCAFFOLD_NAME = "scaffold"
SCAFFOLD_EMAIL = "scaffold@localhost"

# The fixed identity scaffold commits with, so commits work on machines that
# have no git identity configured. Environment variables win over config, so
# both are set.
IDENTITY_CONFIG: tuple[str, ...] = (
    "-c",
    f"user.name={SCAFFOLD_NAME}",
    "-c",
    f"user.email={SCAFFOLD_EMAIL}",
)
IDENTITY_ENV: Mapping[str, str] = {
    "GIT_AUTHOR_NAME": SCAFFOLD_NAME,
    "GIT_AUTHOR_EMAIL": SCAFFOLD_EMAIL,
    "GIT_COMMITTER_NAME": SCAFFOLD_NAME,
    "GIT_COMMITTER_EMAIL": SCAFFOLD_EMAIL,
}


@dataclass(frozen=True)
class GitOutput:
    """What one git call printed and how it exited."""

    returncode: int
    stdout: str
    stderr: str


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git call: the caller's, minus repository redirects."""
    env = {k: v for k, v in os.environ.items() if k not in _REPO_REDIRECTING_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if extra:
        env.update(extra)
    return env


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
) -> GitOutput:
    """Run ``git <args>`` in ``cwd``.

    ``env`` adds to (not replaces) the cleaned environment. With ``check`` a
    return code outside ``ok_codes`` raises :class:`GitError`; a missing git or
    a missing ``cwd`` raises it too (return code -1), never an ``OSError``.
    """
    argv = [str(a) for a in args]
    try:
        proc = subprocess.run(
            [GIT, *argv],
            cwd=cwd,
            env=git_env(env),
            input=input_text,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            check=False,
        )
    except OSError as exc:
        raise GitError(argv, -1, f"cannot run git in {cwd}: {exc}") from exc
    out = GitOutput(proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode not in ok_codes:
        raise GitError(argv, proc.returncode, proc.stderr)
    return out
