"""The Claude Code backend: ``claude -p`` with stream-json, and what scaffold adds.

The contract (``-p``, stream-json, ``--mcp-config``, ``--resume``) is also what the
demo's scripted agents speak; Claude Code itself also gets: ``--strict-mcp-config`` (only scaffold's server),
``--allowedTools`` per role (always with ``signal-back``), the role's instructions as
``--append-system-prompt``, ``--model`` and ``--max-turns`` from the config, and an
environment that keeps it hermetic and bounded (no non-essential traffic, bounded API
retries, MCP servers connected before the first turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath

from scaffold.agent.backend import Backend, Invocation, RunRequest
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


def is_claude(command: Sequence[str]) -> bool:
    """Whether ``agent.command`` runs Claude Code (``claude``, a path to it, or npx)."""
    names = [PurePath(part).name for part in command[:3]]
    return any(n in ("claude", "claude-code", "@anthropic-ai/claude-code") for n in names)


# Environment additions for a bounded, quiet Claude Code run.
CLAUDE_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "2",
    "MCP_CONNECTION_NONBLOCKING": "0",
    "DISABLE_AUTOUPDATER": "1",
}


class Claude(Backend):
    """Claude Code (``claude -p``), and any program that speaks its contract.

    A program that is not Claude Code itself (a wrapper of a user's, the scripted agents
    of the demo and the tests) gets the contract alone: the role's instructions in the
    prompt, and no Claude Code options.
    """

    name = "claude"
    program = "claude"
    default_model = "claude-sonnet-4-5"
    base_url_env = "ANTHROPIC_BASE_URL"
    credentials = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    default_host = ("api.anthropic.com", 443)
    # A resumed print-mode run may continue under a new session id: the newest counts.
    verifies_resume = False
    reports_cost = True
    resume_lost_markers = ("No conversation found",)

    def invocation(self, command: Sequence[str], req: RunRequest) -> Invocation:
        real = is_claude(command)
        prompt = req.prompt if real else req.whole_prompt
        argv = [
            *command,
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--mcp-config",
            str(req.mcp_config_path),
        ]
        if req.resume_session:
            argv += ["--resume", req.resume_session]
        if not real:
            return Invocation(argv)
        argv += [
            "--strict-mcp-config",
            "--allowedTools",
            ",".join(ROLE_TOOLS[req.role]),
            "--append-system-prompt",
            req.instructions,
        ]
        if req.model:
            argv += ["--model", req.model]
        if req.max_turns:
            argv += ["--max-turns", str(req.max_turns)]
        return Invocation(argv, dict(CLAUDE_ENV))
