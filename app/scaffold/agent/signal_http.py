"""``signal-back`` served by scaffold itself over MCP Streamable HTTP, JSON responses only.

One :class:`SignalHttpEndpoint` per agent run, on scaffold's own event loop (aiohttp's
low-level server): no MCP server process to start or stop. It listens

- on a loopback TCP port (``http://127.0.0.1:PORT/mcp``) when the agent runs unconfined;
- on a unix socket in the run's channel folder when the agent is sandboxed: the bridge
  inside the sandbox (:mod:`scaffold.sandbox.bridge`) serves it on a loopback address
  of the sandbox's own network namespace. That socket is bound into this run's sandbox
  only and answers only this run's binding, whatever secret it is shown.

Every request must carry ``Authorization: Bearer <secret>``, a random secret made for the
run and revoked when the run ends: a wrong or missing one is refused with 401, before
anything is read or written. When the run ends the secret is revoked (a request still
arriving gets 404), idle connections are closed and the listener goes: a replay finds
nothing to talk to, or another run's endpoint, which refuses the old secret. The tools, the step binding
and the payload checks are those of :class:`~scaffold.agent.run_tools.RunTools`; an
accepted signal is on disk (fsynced) before the answer is sent.

The transport is the JSON-response mode of Streamable HTTP: ``POST`` of one JSON-RPC
message; a request is answered with ``application/json`` (``initialize`` also with an
``Mcp-Session-Id`` header), a notification or a response with 202; ``GET`` (no server
stream) is 405; ``DELETE`` ends the session. Bodies are bounded; malformed JSON-RPC gets
a JSON-RPC error, never an exception in the loop.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import socket
from pathlib import Path
from typing import Any

from aiohttp import web

from scaffold.agent.run_tools import RunTools
from scaffold.agent.signal_server import SERVER_NAME, Binding

__all__ = [
    "MAX_BODY_BYTES",
    "MCP_PATH",
    "PROTOCOL_VERSIONS",
    "SignalHttpEndpoint",
    "http_mcp_config",
]

MAX_BODY_BYTES = 1024 * 1024
MAX_SESSIONS = 16
MCP_PATH = "/mcp"
# Newest first; a client asking for another one gets the newest (the spec's negotiation).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

_log = logging.getLogger(__name__)


def http_mcp_config(url: str, secret: str) -> dict[str, Any]:
    """The ``--mcp-config`` of a run whose tools scaffold serves over HTTP at ``url``."""
    entry = {
        "type": "http",
        "url": url,
        "headers": {"Authorization": f"Bearer {secret}"},
        "alwaysLoad": True,
    }
    return {"mcpServers": {SERVER_NAME: entry}}


def _version() -> str:
    from scaffold import __version__

    return __version__


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _error(msg_id: Any, code: int, message: str, status: int = 200) -> web.Response:
    body = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
    return _json(body, status)


def _refusal(status: int, message: str) -> web.Response:
    return _error(None, INVALID_REQUEST, message, status)


class SignalHttpEndpoint:
    """``async with SignalHttpEndpoint(binding) as ep``: ``ep.url``, ``ep.secret``, ``ep.signalled``.

    ``unix_path`` serves the endpoint on that unix socket instead of a loopback port.
    """

    def __init__(
        self, binding: Binding, *, unix_path: Path | None = None, tools: RunTools | None = None
    ) -> None:
        self.binding = binding
        self.unix_path = unix_path
        self.tools = tools or RunTools(binding)
        self.secret = secrets.token_urlsafe(32)
        self.port: int | None = None
        self._expected = f"Bearer {self.secret}".encode()
        # Insertion-ordered; bounded, so a client that keeps initializing holds no memory.
        self._sessions: dict[str, None] = {}
        self._open = False
        self._web: web.Server | None = None
        self._server: asyncio.Server | None = None

    @property
    def signalled(self) -> asyncio.Event:
        return self.tools.signalled

    @property
    def url(self) -> str:
        """The address outside a sandbox (loopback TCP)."""
        if self.port is None:
            raise RuntimeError("the endpoint listens on a unix socket, not on a port")
        return f"http://127.0.0.1:{self.port}{MCP_PATH}"

    async def __aenter__(self) -> SignalHttpEndpoint:
        loop = asyncio.get_running_loop()
        self._web = web.Server(self._handle, handler_cancellation=False, access_log=None)
        if self.unix_path is not None:
            self._server = await loop.create_unix_server(self._web, str(self.unix_path))
        else:
            self._server = await loop.create_server(
                self._web, "127.0.0.1", 0, family=socket.AF_INET
            )
            self.port = self._server.sockets[0].getsockname()[1]
        self._open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._open = False  # the secret is revoked before the listener goes
        self._sessions.clear()
        if self._server is not None:
            self._server.close()
        if self._web is not None:
            for conn in self._web.connections:
                conn.close()  # idle keep-alive connections end now, a request in hand first
            await self._web.shutdown(1.0)
        if self._server is not None:
            await self._server.wait_closed()
        self._server = None
        self._web = None

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            return await self._route(request)
        except Exception:  # never let one request take the loop's server down
            _log.exception("signal endpoint of %s: request failed", self.binding.step_id)
            return _error(None, INTERNAL_ERROR, "internal error", 500)

    async def _route(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.path != MCP_PATH:
            return _refusal(404, "not found")
        if not self._open:
            return _refusal(404, "this run has ended")
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            return _refusal(401, "unauthorized")
        session = request.headers.get("Mcp-Session-Id")
        if session is not None and session not in self._sessions:
            return _refusal(404, "unknown session")
        if request.method == "DELETE":
            if session is None:
                return _refusal(400, "Mcp-Session-Id header required")
            self._sessions.pop(session, None)
            return web.Response(status=200)
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST, DELETE"})
        if request.content_type != "application/json":
            return _refusal(415, "Content-Type must be application/json")
        body = await self._body(request)
        if body is None:
            return _refusal(413, f"body larger than {MAX_BODY_BYTES} bytes")
        try:
            message = json.loads(body)
        except ValueError:
            return _error(None, PARSE_ERROR, "parse error", 400)
        return await self._message(message)

    async def _body(self, request: web.BaseRequest) -> bytes | None:
        """The body, or ``None`` when it is larger than :data:`MAX_BODY_BYTES`."""
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return None
        chunks: list[bytes] = []
        size = 0
        while chunk := await request.content.read(65536):
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    # ------------------------------------------------------------------ JSON-RPC

    async def _message(self, message: Any) -> web.StreamResponse:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "invalid request: one JSON-RPC 2.0 object", 400)
        msg_id = message.get("id")
        method = message.get("method")
        if "method" not in message:  # a response to a server request: none are sent
            return web.Response(status=202)
        if not isinstance(method, str):
            return _error(None, INVALID_REQUEST, "invalid request: method must be a string", 400)
        if "id" not in message:
            return web.Response(status=202)  # a notification (initialized, cancelled, ...)
        if msg_id is None or isinstance(msg_id, bool) or not isinstance(msg_id, (str, int)):
            return _error(None, INVALID_REQUEST, "invalid request: bad id", 400)
        params = message.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(msg_id, INVALID_PARAMS, "params must be an object")
        if method == "initialize":
            return self._initialize(msg_id, params)
        if method == "ping":
            return _json({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        if method == "tools/list":
            return _json({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": self.tools.specs}})
        if method == "tools/call":
            return await self._call(msg_id, params)
        return _error(msg_id, METHOD_NOT_FOUND, f"method not found: {method}")

    def _initialize(self, msg_id: str | int, params: dict[str, Any]) -> web.Response:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        session = secrets.token_hex(16)
        if len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        self._sessions[session] = None
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "version": _version()},
        }
        body = {"jsonrpc": "2.0", "id": msg_id, "result": result}
        return _json(body, headers={"Mcp-Session-Id": session})

    async def _call(self, msg_id: str | int, params: dict[str, Any]) -> web.Response:
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str):
            return _error(msg_id, INVALID_PARAMS, "tools/call needs a tool name")
        if arguments is not None and not isinstance(arguments, dict):
            return _error(msg_id, INVALID_PARAMS, "arguments must be an object")
        outcome = await self.tools.call(name, arguments)
        result = {
            "content": [{"type": "text", "text": outcome.text}],
            "isError": outcome.is_error,
        }
        return _json({"jsonrpc": "2.0", "id": msg_id, "result": result})
