"""Everything one agent run needs from outside its process, for as long as it runs.

- a short-lived folder (a short path: unix socket names are limited to 108 bytes)
  holding the run's MCP config, its ``signal-back`` socket and its egress sockets;
- the :class:`~scaffold.agent.signal_relay.SignalEndpoint` that answers the run's
  tools, bound to its quest, step and role, storing signals where no agent can see;
- with a sandbox: the :class:`~scaffold.sandbox.egress.EgressGate` (the model API and
  ``sandbox.allow_domains``, nothing else) and the bwrap command line.

The folder is seen inside the sandbox at ``/run/scaffold``, read-only; without a
sandbox the same files are used at their real paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from scaffold.agent.signal_relay import SignalEndpoint
from scaffold.agent.signal_server import Binding, relay_mcp_config
from scaffold.sandbox.confinement import CHANNEL_INSIDE, Confinement, confine
from scaffold.sandbox.egress import EgressGate, model_endpoint, plan_egress
from scaffold.sandbox.settings import Sandbox

__all__ = ["RunChannel", "private_dir", "sweep_stale_channels"]

_PREFIX = "scaffold-run-"


def sweep_stale_channels() -> list[Path]:
    """Remove the channel folders of scaffold processes that are gone (``kill -9``)."""
    removed: list[Path] = []
    for path in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = path.name.removeprefix(_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def private_dir(repo: Path, quest_id: str, step: str) -> Path:
    """The private HOME/TMPDIR/objects folder of one step; it lives as long as its task."""
    return repo / ".scaffold" / "sandbox" / quest_id / step


class RunChannel:
    """``async with RunChannel(...) as ch``: ``ch.config_path``, ``ch.wrap()``, ``ch.signalled``."""

    def __init__(
        self,
        sandbox: Sandbox,
        binding: Binding,
        confinement: Confinement,
        *,
        python: str,
        env: Mapping[str, str],
    ) -> None:
        self.sandbox = sandbox
        self.binding = binding
        self.confinement = confinement
        self.python = python
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        self.endpoint = SignalEndpoint(binding, self.dir / "signal.sock")
        self.routes = (
            plan_egress(model_endpoint(env), sandbox.allow_domains) if sandbox.active else []
        )
        self._stack = contextlib.AsyncExitStack()

    @property
    def inside(self) -> Path:
        """Where the channel folder is, as the agent sees it."""
        return CHANNEL_INSIDE if self.sandbox.active else self.dir

    @property
    def config_path(self) -> Path:
        return self.inside / "mcp.json"

    @property
    def signalled(self) -> asyncio.Event:
        return self.endpoint.signalled

    async def __aenter__(self) -> RunChannel:
        try:
            await self._stack.enter_async_context(self.endpoint)
            if self.routes:
                await self._stack.enter_async_context(EgressGate(self.dir, self.routes))
            config = relay_mcp_config(self.inside / "signal.sock", self.python)
            (self.dir / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stack.aclose()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def wrap(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """The agent's command line and environment, sandboxed when the sandbox is on."""
        if not self.sandbox.active:
            return list(argv), dict(env)
        c = self.confinement
        confinement = Confinement(
            repo=c.repo,
            cwd=c.cwd,
            private=c.private,
            worktree=c.worktree,
            channel=self.dir,
            routes=self.routes,
            programs=(self.python, *c.programs),
            extra_hidden=c.extra_hidden,
        )
        return confine(self.sandbox, confinement, argv, env)
