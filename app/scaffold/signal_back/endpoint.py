"""``signal-back`` served by scaffold over MCP Streamable HTTP, one endpoint per agent run.

The ``mcp`` SDK's stateless Streamable HTTP session manager, carried by uvicorn's HTTP
protocol on scaffold's own event loop (not uvicorn's ``Server``, whose shutdown polls and
sleeps). It listens on a loopback TCP port when the agent runs unconfined, or on a unix
socket in the run's channel folder when it is sandboxed (the sandbox's bridge,
:mod:`scaffold.sandbox.bridge`, serves that socket inside; it answers only this run).

Every request must carry ``Authorization: Bearer <secret>``, a random secret made for the
run: a wrong or missing one is refused with 401 before anything is read. When the run
ends the secret is revoked, open connections are closed and the listener goes, so a
replay finds nothing to talk to. Bodies are bounded (:data:`MAX_BODY_BYTES`, 413). An
accepted signal is on disk (fsynced) before the answer is sent.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import socket
from pathlib import Path

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from scaffold.signal_back import MCP_PATH
from scaffold.signal_back.records import Binding
from scaffold.signal_back.tools import RunTools, build_server

__all__ = ["MAX_BODY_BYTES", "SignalEndpoint"]

MAX_BODY_BYTES = 1024 * 1024


def _refusal(status: int, message: str) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return JSONResponse(body, status_code=status)


class SignalEndpoint:
    """``async with SignalEndpoint(binding) as ep``: ``ep.url``, ``ep.secret``, ``ep.signalled``.

    ``unix_path`` serves the endpoint on that unix socket instead of a loopback port.
    """

    def __init__(self, binding: Binding, *, unix_path: Path | None = None) -> None:
        self.binding = binding
        self.unix_path = unix_path
        self.tools = RunTools(binding)
        self.secret = secrets.token_urlsafe(32)
        self.port: int | None = None
        self._expected = f"Bearer {self.secret}".encode()
        self._open = False
        self._manager = StreamableHTTPSessionManager(
            build_server(self.tools),
            json_response=True,
            stateless=True,
            max_request_body_size=MAX_BODY_BYTES,
        )
        self._state = ServerState()
        self._server: asyncio.Server | None = None
        self._manager_task: asyncio.Task[None] | None = None
        self._manager_stop = asyncio.Event()

    @property
    def signalled(self) -> asyncio.Event:
        return self.tools.signalled

    @property
    def url(self) -> str:
        """The address outside a sandbox (loopback TCP)."""
        if self.port is None:
            raise RuntimeError("the endpoint listens on a unix socket, not on a port")
        return f"http://127.0.0.1:{self.port}{MCP_PATH}"

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if scope["path"] != MCP_PATH:
            await _refusal(404, "not found")(scope, receive, send)
        elif not self._open:
            await _refusal(404, "this run has ended")(scope, receive, send)
        elif not hmac.compare_digest(given, self._expected):
            await _refusal(401, "unauthorized")(scope, receive, send)
        else:
            await self._manager.handle_request(scope, receive, send)

    async def __aenter__(self) -> SignalEndpoint:
        config = Config(
            self._app,
            http="h11",
            interface="asgi3",
            lifespan="off",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
        )
        config.load()

        def protocol() -> H11Protocol:
            return H11Protocol(config=config, server_state=self._state, app_state={})

        loop = asyncio.get_running_loop()
        started = loop.create_future()
        self._manager_task = asyncio.create_task(self._run_manager(started))
        try:
            await started
            if self.unix_path is not None:
                self._server = await loop.create_unix_server(protocol, str(self.unix_path))
            else:
                self._server = await loop.create_server(
                    protocol, "127.0.0.1", 0, family=socket.AF_INET
                )
                self.port = self._server.sockets[0].getsockname()[1]
        except BaseException:
            await self._stop_manager()
            raise
        self._open = True
        return self

    async def _run_manager(self, started: asyncio.Future[None]) -> None:
        """The SDK's session manager, in a task of its own: its task group must be entered
        and left by one task, and the endpoint may be opened and closed by two."""
        try:
            async with self._manager.run():
                started.set_result(None)
                await self._manager_stop.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    async def _stop_manager(self) -> None:
        self._manager_stop.set()
        if self._manager_task is not None:
            await self._manager_task
            self._manager_task = None

    async def __aexit__(self, *exc: object) -> None:
        self._open = False  # the secret is revoked before the listener goes
        if self._server is not None:
            self._server.close()
        for connection in list(self._state.connections):
            connection.shutdown()  # idle keep-alive connections end now, a request in hand first
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        await self._stop_manager()
