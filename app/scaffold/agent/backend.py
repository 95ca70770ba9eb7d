"""The agent port: what scaffold needs from an agent CLI, whichever one runs.

A :class:`Backend` turns one agent run (:class:`RunRequest`) into the program's command
line, environment additions and start-up files (:class:`Invocation`), and reads its
output line by line into scaffold's events (:mod:`scaffold.agent.stream`): the session
id in a ``SystemInit``, and a final ``ResultEvent`` with the tokens used. Nothing
outside the adapters (:mod:`scaffold.agent.claude`, ...) knows which CLI ran;
:mod:`scaffold.agent.choice` picks one per role from the configuration.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from scaffold.agent.stream import LineParser, parse_line
from scaffold.roles import Role

__all__ = ["Backend", "Invocation", "RunRequest"]


@dataclass(frozen=True)
class RunRequest:
    """One agent run, as every backend gets it."""

    role: Role
    # The run's data (request, task, what happened before) and the role's instructions,
    # for a CLI that takes a system prompt; ``whole_prompt`` has both in one text.
    prompt: str
    instructions: str
    whole_prompt: str
    model: str | None
    max_turns: int | None
    resume_session: str | None
    # The ``signal-back`` MCP endpoint as the agent reaches it (Streamable HTTP, with
    # ``Authorization: Bearer <secret>``), and the same as a Claude Code ``--mcp-config``
    # file the run channel wrote.
    signal_url: str
    signal_secret: str
    mcp_config_path: Path
    # The step's private folder for the CLI's own state: it persists across the step's
    # runs (so a resume finds its session) and is the agent's HOME in the sandbox.
    home: Path
    # The environment the agent would get (model base URLs and keys are read from it).
    env: Mapping[str, str] = field(default_factory=dict)
    # The run is inside scaffold's sandbox (its files and network already confined): a
    # CLI that sandboxes its own commands may leave that to it (nested sandboxes fail).
    sandboxed: bool = False


@dataclass(frozen=True)
class Invocation:
    """What runs: ``argv`` (the program first), environment additions, and files to
    write before the start (absolute paths, under ``RunRequest.home``)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[Path, str] = field(default_factory=dict)


class Backend(ABC):
    """One agent CLI behind the port."""

    name: ClassVar[str]
    # The CLI's program name on PATH, when ``agent.command`` names none.
    program: ClassVar[str]
    # Passed explicitly when the configuration names no model; priced in agent.prices.
    default_model: ClassVar[str]
    # The environment variable a user already sets for this CLI's model host's base URL
    # (unset: the vendor's public host).
    base_url_env: ClassVar[str]
    # Every variable that may carry this CLI's model key, the one it reads first.
    credentials: ClassVar[tuple[str, ...]]
    default_host: ClassVar[tuple[str, int]]
    # Whether the run's first event reports the MCP servers' state (scaffold refuses a
    # run whose ``signal-back`` server is not connected).
    reports_mcp_status: ClassVar[bool] = True
    # Whether a resumed run must come back with the session id it resumed.
    verifies_resume: ClassVar[bool] = True
    # Whether the CLI reports each run's dollars; if not, its tokens are priced
    # (``scaffold.agent.prices``).
    reports_cost: ClassVar[bool] = False

    @abstractmethod
    def invocation(self, command: Sequence[str], req: RunRequest) -> Invocation:
        """The command line (``command`` is the program's argv), env and files."""

    def parser(self, req: RunRequest) -> LineParser:
        """A fresh parser for one run's output (it may keep state, e.g. turns counted);
        Claude Code's stream-json by default."""
        return parse_line

    # What the CLI prints (stderr) when a resume names a session it cannot load.
    resume_lost_markers: ClassVar[tuple[str, ...]] = ()

    def resume_lost(self, stderr_tail: str) -> bool:
        """Whether a failed resumed run says its session is gone (start afresh then)."""
        return any(marker in stderr_tail for marker in self.resume_lost_markers)

    def model_host(self, env: Mapping[str, str]) -> tuple[str, int]:
        """The model API host and port the run talks to (the sandbox lets only it through)."""
        parts = urlsplit(env.get(self.base_url_env, "").strip())
        if not parts.hostname:
            return self.default_host
        return parts.hostname, parts.port or (80 if parts.scheme == "http" else 443)
