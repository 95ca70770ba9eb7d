"""The ingest pipeline: verify, dedupe, spool, enqueue; and the worker side: handle, mark done.

:meth:`Ingest.accept` is synchronous and never waits for a handler: it answers as
soon as the delivery is in the spool and the queue. At most
``settings.max_parsed_in_queue`` deliveries wait in memory parsed; beyond that the
queue holds only where they lie in the spool, so a burst costs little memory.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scaffold.errors import StoreLocked
from scaffold.server.dedupe import SeenIds
from scaffold.server.delivery import (
    EVENT_HEADER,
    EVENT_NAME,
    Delivery,
    DeliveryHandler,
    Rejection,
    delivery_from,
    parse_payload,
    verify_and_parse,
)
from scaffold.server.metrics import UNVERIFIED, AppGauges, IngestMetrics
from scaffold.server.settings import ServerSettings
from scaffold.server.spool import Spool, SpoolRef
from scaffold.server.work_queue import WorkQueue

_log = logging.getLogger("scaffold.server")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    outcome: str


def _reply(status: int, outcome: str, **fields: str) -> Reply:
    return Reply(status, json.dumps({"status": outcome, **fields}).encode(), outcome)


def _queued(delivery_id: str) -> Reply:
    # The id matched DELIVERY_ID (no quote or backslash), so no JSON escaping is needed.
    return Reply(202, b'{"status":"queued","delivery":"' + delivery_id.encode() + b'"}', "queued")


PONG = Reply(200, b'{"status":"pong"}', "handled")
TOO_LARGE = Reply(413, b'{"status":"too_large"}', "too_large")
DRAINING = Reply(503, b'{"status":"draining"}', "unavailable")


class Ingest:
    def __init__(
        self,
        settings: ServerSettings,
        handler: DeliveryHandler,
        *,
        gauges: Callable[[], AppGauges] | None = None,
    ) -> None:
        self.settings = settings
        self._handler = handler
        self._secret = settings.webhook_secret
        root = settings.state_dir / "webhooks"
        self._root = root
        self.seen = SeenIds(root / "delivery-ids.log")
        self.spool = Spool(root / "spool")
        self.queue: WorkQueue[Delivery | SpoolRef] = WorkQueue(self._run, settings.workers)
        self.metrics = IngestMetrics(lambda: self.queue.depth, lambda: self.queue.in_flight, gauges)
        self.draining = False
        self._parsed_in_queue = 0
        self._lock_fd = -1

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Lock the state directory, load the ids and the spool, re-queue what was left."""
        self._root.mkdir(parents=True, exist_ok=True)
        self._lock()
        self.seen.load()
        left = self.spool.open()
        for ref in left:
            self.seen.add(ref.id)
            self.queue.put(ref)
        if left:
            _log.info("re-queued deliveries left by an earlier run", extra={"count": len(left)})
        self.queue.start()

    async def drain(self, timeout: float) -> bool:
        """Refuse new deliveries and wait for the queued ones; False if time ran out."""
        self.draining = True
        done = await self.queue.drain(timeout)
        if not done:
            _log.warning(
                "drain timed out; the rest stays in the spool for the next start",
                extra={"queue": self.queue.depth, "in_flight": self.queue.in_flight},
            )
        return done

    async def stop(self) -> None:
        await self.queue.stop()
        self.spool.close()
        self.seen.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _lock(self) -> None:
        path = self._root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).strip()
            os.close(fd)
            raise StoreLocked(path, int(holder) if holder.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    # -- the request side --------------------------------------------------------------------

    def refuse_too_large(self) -> Reply:
        self.metrics.count(UNVERIFIED, "too_large")
        return TOO_LARGE

    def refuse_draining(self) -> Reply:
        self.metrics.count(UNVERIFIED, "unavailable")
        return DRAINING

    def accept(self, headers: Mapping[str, str], body: bytes) -> Reply:
        if self.draining:
            return self.refuse_draining()
        now = time.time()
        parsed = verify_and_parse(headers, body, self._secret, received_at=now)
        if isinstance(parsed, Rejection):
            return self._refuse(headers, parsed)
        delivery, raw = parsed
        event = delivery.event
        if event == "ping":
            self.metrics.count(event, "handled")
            return PONG
        if delivery.id in self.seen:
            self.metrics.count(event, "duplicate")
            _log.info("duplicate delivery", extra={"delivery": delivery.id, "event": event})
            return _reply(200, "duplicate", delivery=delivery.id)
        ref = self.spool.append(delivery.id, event, now, raw)
        self.seen.add(delivery.id)
        if self._parsed_in_queue < self.settings.max_parsed_in_queue:
            self._parsed_in_queue += 1
            self.queue.put(delivery)
        else:
            self.queue.put(ref)
        self.metrics.count(event, "queued")
        return _queued(delivery.id)

    def _refuse(self, headers: Mapping[str, str], why: Rejection) -> Reply:
        event = headers.get(EVENT_HEADER, "")
        trusted = why.outcome != "bad_signature" and EVENT_NAME.match(event)
        self.metrics.count(event if trusted else UNVERIFIED, why.outcome)
        _log.warning(
            "delivery refused",
            extra={"outcome": why.outcome, "reason": why.reason, "status": why.status},
        )
        return _reply(why.status, why.outcome, reason=why.reason)

    # -- the worker side ---------------------------------------------------------------------

    async def _run(self, item: Delivery | SpoolRef) -> None:
        if isinstance(item, Delivery):
            self._parsed_in_queue -= 1
            delivery = item
        else:
            payload = parse_payload(self.spool.read(item))
            if payload is None:
                _log.error("unreadable spooled delivery", extra={"delivery": item.id})
                self.metrics.count(item.event, "failed")
                self.spool.done(item.id)
                return
            delivery = delivery_from(item.id, item.event, payload, item.received_at)
        start = time.perf_counter()
        outcome = "handled"
        try:
            await self._handler(delivery)
        except asyncio.CancelledError:
            raise  # not marked done: the next start handles it again
        except Exception:
            outcome = "failed"
            _log.exception(
                "handler failed",
                extra={"delivery": delivery.id, "event": delivery.event, "action": delivery.action},
            )
        elapsed = time.perf_counter() - start
        self.metrics.handle_seconds.observe(elapsed)
        self.metrics.count(delivery.event, outcome)
        self.spool.done(delivery.id)
        if outcome == "handled":
            _log.info(
                "handled",
                extra={
                    "delivery": delivery.id,
                    "event": delivery.event,
                    "action": delivery.action,
                    "outcome": outcome,
                    "ms": round(elapsed * 1000, 3),
                },
            )
