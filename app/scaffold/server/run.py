"""Run the app until SIGTERM or SIGINT, then drain it and exit cleanly.

On the signal: stop listening and answer 503 (healthz too), wait up to
``drain_timeout_s`` for the queued and running deliveries (what is left is handled at
the next start), then run the app's on_shutdown and cleanup hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop
from aiohttp import web

from scaffold.server.app import INGEST

_log = logging.getLogger("scaffold.server")
SHUTDOWN_TIMEOUT_S = 5.0  # for HTTP requests still open after the drain


async def serve_async(
    app: web.Application,
    host: str,
    port: int,
    *,
    drain_timeout_s: float,
    after_listening: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Serve until a SIGTERM/SIGINT arrives; then drain and clean up.

    ``after_listening`` runs once the server listens; if it fails the server stops at
    once, without draining (what was accepted is handled at the next start), and its
    error is raised.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    later: asyncio.Task[None] | None = None
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        _log.info("listening", extra={"host": host, "port": _bound_port(runner, port)})
        if after_listening is not None:
            later = loop.create_task(after_listening(), name="scaffold-after-listening")
            later.add_done_callback(lambda task: _stop_on_failure(task, stop))
        await stop.wait()
        if later is not None and not later.done():
            later.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await later
        failed = later is not None and later.done() and _failed(later)
        if failed:
            drain_timeout_s = 0.0
        _log.info("stopping: draining the queue", extra={"timeout_s": drain_timeout_s})
        ingest = app[INGEST]
        ingest.draining = True
        for s in list(runner.sites):
            await s.stop()
        drained = await ingest.drain(drain_timeout_s)
        _log.info("drained" if drained else "drain incomplete", extra={"drained": drained})
    finally:
        await runner.cleanup()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    _log.info("stopped")
    if later is not None and _failed(later) and (exc := later.exception()) is not None:
        raise exc


def serve(app: web.Application, host: str, port: int, **options: Any) -> None:
    """Blocking form of :func:`serve_async`, on uvloop (libuv's event loop)."""
    uvloop.run(serve_async(app, host, port, **options))


def _failed(task: asyncio.Task[None]) -> bool:
    return not task.cancelled() and task.exception() is not None


def _stop_on_failure(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    if _failed(task):
        _log.error("the start after listening failed; stopping", exc_info=task.exception())
        stop.set()


def _bound_port(runner: web.AppRunner, port: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2 and isinstance(address[1], int):
            return address[1]
    return port
