"""What scaffold adds to an agent invocation when the agent is Claude Code.

The contract (``-p``, stream-json, ``--mcp-config``, ``--resume``) is the same for
every agent; Claude Code also gets: ``--strict-mcp-config`` (only scaffold's server),
``--allowedTools`` per role (always with ``signal-back``), the role's instructions as
``--append-system-prompt``, ``--model`` and ``--max-turns`` from the config, and an
environment that keeps it hermetic and bounded (no non-essential traffic, bounded API
retries, MCP servers connected before the first turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath

from scaffold.roles import Role

SIGNAL_TOOL = "mcp__scaffold__signal-back"
REQUIREMENTS_TOOL = "mcp__scaffold__write-requirements"
TASKS_TOOL = "mcp__scaffold__create-tasks"

_READ = ("Read", "Glob", "Grep", "LS")
_WRITE = ("Write", "Edit", "MultiEdit", "NotebookEdit")
_RUN = ("Bash",)
_MINIONS = ("Task",)  # Claude Code sub-agents: the seed's minions

ROLE_TOOLS: Mapping[Role, tuple[str, ...]] = {
    Role.CHAOSWHISPERER: (*_READ, REQUIREMENTS_TOOL, SIGNAL_TOOL),
    Role.PATHSEEKER: (*_READ, *_MINIONS, TASKS_TOOL, SIGNAL_TOOL),
    Role.CODEWEAVER: (*_READ, *_WRITE, *_RUN, *_MINIONS, SIGNAL_TOOL),
    Role.SIEGEMASTER: (*_READ, *_WRITE, *_RUN, *_MINIONS, SIGNAL_TOOL),
    Role.LAWBRINGER: (*_READ, *_WRITE, *_RUN, *_MINIONS, SIGNAL_TOOL),
    Role.SPIRITMENDER: (*_READ, *_WRITE, *_RUN, *_MINIONS, SIGNAL_TOOL),
}

# The message Claude Code prints when --resume names a session it cannot find.
RESUME_LOST = "No conversation found"


def is_claude(command: Sequence[str]) -> bool:
    """Whether ``agent.command`` runs Claude Code (``claude``, a path to it, or npx)."""
    names = [PurePath(part).name for part in command[:3]]
    return any(n in ("claude", "claude-code", "@anthropic-ai/claude-code") for n in names)


def allowed_tools(role: Role, extra: Sequence[str] = ()) -> list[str]:
    tools = list(ROLE_TOOLS[role])
    tools += [t for t in extra if t not in tools]
    return tools


def claude_args(
    role: Role,
    system_prompt: str,
    *,
    model: str | None = None,
    max_turns: int | None = None,
    extra_tools: Sequence[str] = (),
) -> list[str]:
    """Arguments placed after the contract's own (``-p``, ``--mcp-config``, ...)."""
    args = [
        "--strict-mcp-config",
        "--allowedTools",
        ",".join(allowed_tools(role, extra_tools)),
        "--append-system-prompt",
        system_prompt,
    ]
    if model:
        args += ["--model", model]
    if max_turns:
        args += ["--max-turns", str(max_turns)]
    return args


def claude_env(max_retries: int = 2) -> dict[str, str]:
    """Environment additions for a bounded, quiet Claude Code run."""
    return {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
        "MCP_CONNECTION_NONBLOCKING": "0",
        "DISABLE_AUTOUPDATER": "1",
    }


def resume_was_lost(stderr_tail: str) -> bool:
    return RESUME_LOST in stderr_tail
