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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scaffold.agent.backend import Backend
from scaffold.agent.choice import RoleAgent, agents_in_use, unpriced
from scaffold.config import CONFIG_PATH, ScaffoldConfig
from scaffold.errors import ConfigError, UsageError
from scaffold.git.runner import SAFE_LOCAL, run_git
from scaffold.roles import Role

# How to get each backend's CLI.
INSTALL_HINTS = {
    "claude": "install Claude Code: npm install -g @anthropic-ai/claude-code "
    "(https://docs.anthropic.com/en/docs/claude-code)",
    "codex": "install the Codex CLI: npm install -g @openai/codex",
    "gemini": "install the Gemini CLI: npm install -g @google/gemini-cli",
}


@dataclass(frozen=True)
class AgentProgram:
    """One program the configured roles run: its backend, argv, roles and where it is."""

    backend: Backend
    command: tuple[str, ...]
    roles: tuple[Role, ...]
    key: str  # the configuration key that names it
    found: str | None


def agent_programs(config: ScaffoldConfig, repo: Path) -> list[AgentProgram]:
    """Every distinct (backend, program) the six roles use, looked up."""
    groups: dict[tuple[str, tuple[str, ...]], list[RoleAgent]] = {}
    for agent in agents_in_use(config.agent):
        groups.setdefault((agent.backend.name, agent.command), []).append(agent)
    out = []
    for (_, command), agents in groups.items():
        first = agents[0]
        own = config.agent.roles.get(first.role.value)
        key = f"{first.config_key}.command" if own and own.command else "agent.command"
        roles = tuple(a.role for a in agents)
        out.append(AgentProgram(first.backend, command, roles, key, _find(command[0], repo)))
    return out


def _find(program: str, repo: Path) -> str | None:
    """A bare name is looked up on PATH; a relative path is the repository's."""
    if os.sep not in program:
        return shutil.which(program)
    path = Path(program) if Path(program).is_absolute() else repo / program
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def find_agent(config: ScaffoldConfig, repo: Path) -> str | None:
    """The first role's agent program, if every role's program can be run; else None."""
    programs = agent_programs(config, repo)
    if any(p.found is None for p in programs):
        return None
    return ", ".join(str(p.found) for p in programs)


def missing_agent(config: ScaffoldConfig, repo: Path | None = None) -> str:
    programs = agent_programs(config, repo or Path.cwd())
    missing = next((p for p in programs if p.found is None), programs[0])
    program = missing.command[0]
    hint = INSTALL_HINTS.get(missing.backend.name, "install it, or name another program")
    roles = ", ".join(r.value for r in missing.roles)
    return (
        f"the {missing.backend.name} agent program {program!r} ({roles}) is not installed "
        f"or not on PATH; {hint}; or set {missing.key} in {CONFIG_PATH} to the argv of "
        "the agent to run"
    )


def require_agent(config: ScaffoldConfig, repo: Path) -> None:
    """Every role's program can be run, and every model scaffold must price has a price."""
    for program in agent_programs(config, repo):
        if program.found is None:
            raise ConfigError(repo / CONFIG_PATH, program.key, missing_agent(config, repo))
    require_prices(config, repo)


def describe_program(program: AgentProgram, env: Mapping[str, str]) -> str:
    """For ``doctor``: the program and its version, the model host, whether the key is
    set (never its value), and the roles it runs."""
    roles = ", ".join(r.value for r in program.roles)
    if program.found is None:
        hint = INSTALL_HINTS.get(program.backend.name, "install it")
        return f"{program.command[0]!r} not found ({program.key}; {hint}); roles: {roles}"
    host, port = program.backend.model_host(env)
    keys = program.backend.credentials
    key_set = any(env.get(k) for k in keys)
    return (
        f"{program.found} ({_version(program.found)}); model host {host}:{port}; "
        f"{keys[0]} {'set' if key_set else 'not set'}; roles: {roles}"
    )


def _version(path: str) -> str:
    try:
        proc = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    first = (proc.stdout or proc.stderr).strip().splitlines()
    return first[0][:80] if proc.returncode == 0 and first else "version unknown"


def require_prices(config: ScaffoldConfig, repo: Path) -> None:
    """``safety.max_cost_usd`` is a promise: a model whose tokens cannot be priced
    (its CLI reports no dollars) does not run."""
    for agent in unpriced(config.agent):
        raise ConfigError(
            repo / CONFIG_PATH,
            f"agent.prices.{agent.model}",
            f"{agent.role.value} runs {agent.backend.name} with model {agent.model!r}, which "
            "has no price: give it input_per_mtok and output_per_mtok (dollars per million "
            "tokens), so that safety.max_cost_usd can hold",
        )


def has_commits(repo: Path) -> bool:
    head = run_git(
        [*SAFE_LOCAL, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], repo, check=False
    )
    return head.returncode == 0


NO_COMMITS = (
    "the repository has no commits yet: commit first "
    "(git add -A && git commit -m 'initial commit'); "
    "each task's worktree and branch start from the default branch's head"
)


def require_commit(repo: Path) -> None:
    if not has_commits(repo):
        raise UsageError(NO_COMMITS)


def scaffold_command() -> str:
    """How a person calls scaffold from a shell: ``scaffold`` when it is on PATH, else
    the console script of this installation (``./scripts/install`` puts it in .venv/bin)."""
    if shutil.which("scaffold"):
        return "scaffold"
    script = Path(sys.executable).parent / "scaffold"
    if script.is_file() and os.access(script, os.X_OK):
        return str(script)
    return f"{sys.executable} -m scaffold"
