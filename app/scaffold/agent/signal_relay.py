"""``signal-back`` answered by scaffold itself, for one agent run, over a unix socket.

The endpoint of ``agent.signal_transport: stdio`` (agents that cannot speak HTTP MCP, and
the Actions slot); the default transport is :mod:`scaffold.agent.signal_http`. The tools
themselves (binding, checks, durable write, retries) are :class:`~scaffold.agent.run_tools.RunTools`.

The agent's MCP server (``scaffold signal-server --relay SOCK``) holds
no binding and writes nothing: it forwards each ``tools/list`` and ``tools/call`` to
the :class:`SignalEndpoint` of its run, which scaffold serves outside the sandbox.
The endpoint owns the binding (quest, step, role), checks every call with the same
:func:`~scaffold.agent.signal_server.handle_call` the stdio server uses, and stores an
accepted signal durably in the run's signal folder, which no agent can see, before it
answers. The socket is bound into that run's sandbox only, so the one thing an agent
that talks to it directly can do is signal for its own step: what the tool does anyway.

Wire format: one JSON object per line, one request per connection::

    {"op": "list"}                                  -> {"tools": [{name, description, inputSchema}]}
    {"op": "call", "name": ..., "arguments": {...}} -> {"text": ..., "is_error": bool}
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from scaffold.agent.run_tools import RunTools, tool_specs
from scaffold.agent.signal_server import Binding

__all__ = ["MAX_REQUEST_BYTES", "SignalEndpoint", "relay_request", "tool_specs"]

MAX_REQUEST_BYTES = 4 * 1024 * 1024


class SignalEndpoint:
    """Serves one run's tools at ``path`` until closed; ``signalled`` is set on a signal."""

    def __init__(self, binding: Binding, path: Path, tools: RunTools | None = None) -> None:
        self.binding = binding
        self.path = path
        self.tools = tools or RunTools(binding)
        self._server: asyncio.Server | None = None

    @property
    def signalled(self) -> asyncio.Event:
        return self.tools.signalled

    async def __aenter__(self) -> SignalEndpoint:
        self._server = await asyncio.start_unix_server(
            self._handle, path=str(self.path), limit=MAX_REQUEST_BYTES
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            reply = await self._answer(line)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError:
            return {"text": "malformed request", "is_error": True}
        if not isinstance(request, dict):
            return {"text": "malformed request", "is_error": True}
        if request.get("op") == "list":
            return {"tools": self.tools.specs}
        if request.get("op") != "call" or not isinstance(request.get("name"), str):
            return {"text": "unknown request", "is_error": True}
        arguments = request.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return {"text": "arguments must be an object", "is_error": True}
        outcome = await self.tools.call(request["name"], arguments)
        return {"text": outcome.text, "is_error": outcome.is_error}


def relay_request(path: str, request: dict[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
    """One request to a run's endpoint (blocking; the relay calls it in a worker thread)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(json.dumps(request).encode() + b"\n")
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            if len(buf) > MAX_REQUEST_BYTES:
                raise ValueError("reply too large")
    reply = json.loads(buf)
    if not isinstance(reply, dict):
        raise ValueError("malformed reply")
    return reply
