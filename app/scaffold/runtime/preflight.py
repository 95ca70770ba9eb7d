"""What must hold before a run starts anything: a first commit, and the agent program.

Both are a person's setup, not an agent's failure: found here, they end the command
with exit 2 and what to do, instead of a raw git error or an agent "crashing" in a
retry loop.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from scaffold.config import CONFIG_PATH, ScaffoldConfig
from scaffold.errors import ConfigError, UsageError

# How to get the agent programs people usually name in ``agent.command``.
INSTALL_HINTS = {
    "claude": "install Claude Code: npm install -g @anthropic-ai/claude-code "
    "(https://docs.anthropic.com/en/docs/claude-code)",
}


def has_commits(repo: Path) -> bool:
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0


NO_COMMITS = (
    "the repository has no commits yet: commit first "
    "(git add -A && git commit -m 'initial commit'); "
    "each task's worktree and branch start from the default branch's head"
)


def require_commit(repo: Path) -> None:
    if not has_commits(repo):
        raise UsageError(NO_COMMITS)


def find_agent(config: ScaffoldConfig, repo: Path) -> str | None:
    """The agent program ``agent.command`` names, if it can be run; else None.

    A bare name is looked up on PATH; a relative path is the repository's.
    """
    program = config.agent.command[0]
    if os.sep not in program:
        return shutil.which(program)
    path = Path(program) if Path(program).is_absolute() else repo / program
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def missing_agent(config: ScaffoldConfig) -> str:
    program = config.agent.command[0]
    hint = INSTALL_HINTS.get(Path(program).name, "install it, or name another program")
    return (
        f"the agent program {program!r} is not installed or not on PATH; {hint}; "
        f"or set agent.command in {CONFIG_PATH} to the argv of the agent to run"
    )


def require_agent(config: ScaffoldConfig, repo: Path) -> None:
    if find_agent(config, repo) is None:
        raise ConfigError(repo / CONFIG_PATH, "agent.command", missing_agent(config))


def scaffold_command() -> str:
    """How a person calls scaffold from a shell: ``scaffold`` when it is on PATH, else
    the console script of this installation (``./scripts/install`` puts it in .venv/bin)."""
    if shutil.which("scaffold"):
        return "scaffold"
    script = Path(sys.executable).parent / "scaffold"
    if script.is_file() and os.access(script, os.X_OK):
        return str(script)
    return f"{sys.executable} -m scaffold"
