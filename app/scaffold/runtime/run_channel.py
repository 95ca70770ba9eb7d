"""Everything one agent run needs from outside its process, for as long as it runs.

- a short-lived folder (a short path: unix socket names are limited to 108 bytes)
  holding the run's MCP config, its ``signal-back`` socket and its egress sockets;
- the endpoint that answers the run's tools, bound to its quest, step and role, storing
  signals where no agent can see: the :class:`~scaffold.signal_back.endpoint.SignalEndpoint`
  on this event loop, which the agent reaches at a loopback URL with the run's secret
  (inside a sandbox through the bridge and ``signal-http.sock``);
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
from dataclasses import replace
from pathlib import Path

from scaffold.agent.claude import Claude
from scaffold.sandbox.confinement import CHANNEL_INSIDE, Confinement, confine
from scaffold.sandbox.egress import EgressGate, Route, plan_egress
from scaffold.sandbox.settings import Sandbox
from scaffold.signal_back import MCP_PATH, mcp_config
from scaffold.signal_back.records import Binding

__all__ = ["SIGNAL_INSIDE", "RunChannel", "private_dir", "sweep_stale_channels"]

_PREFIX = "scaffold-run-"
_HTTP_SOCKET = "signal-http.sock"
# Where the bridge serves the run's HTTP endpoint inside a sandbox: a loopback address
# of the sandbox's own network namespace that no egress route uses (those are
# 127.0.0.1 and 127.0.0.10 and up).
SIGNAL_INSIDE = ("127.0.0.2", 8765)


def sweep_stale_channels() -> None:
    """Remove the channel folders of scaffold processes that are gone (``kill -9``)."""
    for path in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = path.name.removeprefix(_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(path, ignore_errors=True)


def private_dir(repo: Path, quest_id: str, step: str) -> Path:
    """The private HOME/TMPDIR/objects folder of one step; it lives as long as its task."""
    return repo / ".scaffold" / "sandbox" / quest_id / step


class RunChannel:
    """``async with RunChannel(...) as ch``: ``ch.signal``, ``ch.wrap()``, ``ch.signalled``."""

    def __init__(
        self,
        sandbox: Sandbox,
        binding: Binding,
        confinement: Confinement,
        *,
        python: str,
        env: Mapping[str, str],
        model_host: tuple[str, int] | None = None,
    ) -> None:
        """``model_host``: the model API the agent's backend talks to (the only host
        the sandbox lets through besides ``sandbox.allow_domains``); by default
        ``ANTHROPIC_BASE_URL``'s."""
        self.sandbox = sandbox
        self.binding = binding
        self.confinement = confinement
        self.python = python
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        unix = self.dir / _HTTP_SOCKET if sandbox.active else None
        # The mcp SDK is loaded by the first run, not by every ``scaffold`` command.
        from scaffold.signal_back.endpoint import SignalEndpoint

        self.endpoint = SignalEndpoint(binding, unix_path=unix)
        self.routes = (
            plan_egress(model_host or Claude().model_host(env), sandbox.allow_domains)
            if sandbox.active
            else []
        )
        self._stack = contextlib.AsyncExitStack()

    @property
    def signalled(self) -> asyncio.Event:
        return self.endpoint.signalled

    async def __aenter__(self) -> RunChannel:
        try:
            await self._stack.enter_async_context(self.endpoint)
            if self.routes:
                await self._stack.enter_async_context(EgressGate(self.dir, self.routes))
            url, secret, _ = self.signal
            config = mcp_config(url, secret)
            (self.dir / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    @property
    def signal(self) -> tuple[str, str, Path]:
        """(url, secret, MCP config file) of the run's ``signal-back`` endpoint, as the
        agent reaches them (in a sandbox: the channel folder at ``/run/scaffold``)."""
        if self.sandbox.active:
            host, port = SIGNAL_INSIDE
            url = f"http://{host}:{port}{MCP_PATH}"
            return url, self.endpoint.secret, CHANNEL_INSIDE / "mcp.json"
        return self.endpoint.url, self.endpoint.secret, self.dir / "mcp.json"

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stack.aclose()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def wrap(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """The agent's command line and environment, sandboxed when the sandbox is on."""
        if not self.sandbox.active:
            return list(argv), dict(env)
        host, port = SIGNAL_INSIDE
        signal_route = Route("scaffold-signal", port, host, _HTTP_SOCKET)  # into the sandbox
        confinement = replace(
            self.confinement,
            channel=self.dir,
            routes=[*self.routes, signal_route],
            programs=(self.python, *self.confinement.programs),
        )
        return confine(self.sandbox, confinement, argv, env)
