"""The aiohttp adapter: routes, and the ingest's start and stop tied to the app's lifecycle.

app = create_app(settings, handler, gauges=read_gauges)  # async () -> AppGauges
app.on_shutdown.append(stop_agents)   # runs after the queue has drained
serve(app, "0.0.0.0", 8080, drain_timeout_s=settings.drain_timeout_s)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import StreamReader, web

from scaffold.server.delivery import DeliveryHandler
from scaffold.server.ingest import Ingest, Reply
from scaffold.server.metrics import AppGauges
from scaffold.server.settings import ServerSettings

INGEST = web.AppKey("scaffold_ingest", Ingest)
WEBHOOK_PATH = "/webhook"
_PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def create_app(
    settings: ServerSettings,
    handler: DeliveryHandler,
    *,
    gauges: Callable[[], Awaitable[AppGauges]] | None = None,
) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[INGEST] = Ingest(settings, handler, gauges=gauges)
    app.router.add_post(WEBHOOK_PATH, _webhook)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.cleanup_ctx.append(_ingest_lifecycle)
    return app


async def _ingest_lifecycle(app: web.Application) -> AsyncIterator[None]:
    ingest = app[INGEST]
    await ingest.start()
    yield
    await ingest.stop()


def _respond(reply: Reply) -> web.Response:
    return web.Response(status=reply.status, body=reply.body, content_type="application/json")


async def _webhook(request: web.Request) -> web.Response:
    ingest = request.app[INGEST]
    if ingest.draining:
        return _respond(ingest.refuse_draining())
    limit = ingest.settings.max_body_bytes
    length = request.content_length
    if length is not None and length > limit:
        return _respond(ingest.refuse_too_large())
    body = await _read_body(request.content, limit)
    if body is None:
        return _respond(ingest.refuse_too_large())
    return _respond(await ingest.accept(request.headers, body))


async def _read_body(stream: StreamReader, limit: int) -> bytes | None:
    """The body, or None once it passes ``limit`` bytes.

    Not ``request.read()``: that keeps the body on the request, and aiohttp keeps a
    keep-alive connection's last request until the next one comes, so every idle
    connection would hold a body. A body that came in one chunk is not copied.
    """
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.readany():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _healthz(request: web.Request) -> web.Response:
    ingest = request.app[INGEST]
    status = "draining" if ingest.draining else "ok"
    body = {"status": status, "queue": ingest.queue.depth, "in_flight": ingest.queue.in_flight}
    return web.Response(
        status=503 if ingest.draining else 200,
        body=json.dumps(body).encode(),
        content_type="application/json",
    )


async def _metrics(request: web.Request) -> web.Response:
    body = await request.app[INGEST].metrics.render()
    return web.Response(body=body, headers={"Content-Type": _PROMETHEUS_TEXT})
