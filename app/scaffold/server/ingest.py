"""The ingest pipeline: verify, store, enqueue; and the worker side: handle, mark done.

:meth:`Ingest.accept` never waits for a handler: it answers as soon as the delivery is
committed to the :class:`DeliveryStore` and queued. If it cannot be stored the answer
is 503, and GitHub delivers it again. A copy of a delivery already stored is answered
as a duplicate. At most ``settings.max_parsed_in_queue`` deliveries wait in memory
parsed; beyond that the queue holds just their ids, and the worker reads the JSON back
from the store, so a burst costs little memory. What a person did (``by_a_person``)
goes to the queue's urgent lane: it never waits behind scaffold's own echoes.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from scaffold.errors import StoreLocked
from scaffold.server.deliveries import Accepted, DeliveryStore
from scaffold.server.delivery import (
    EVENT_HEADER,
    EVENT_NAME,
    Delivery,
    DeliveryHandler,
    Rejection,
    by_a_person,
    delivery_from,
    parse_payload,
    verify_and_parse,
)
from scaffold.server.metrics import UNVERIFIED, AppGauges, IngestMetrics
from scaffold.server.settings import ServerSettings
from scaffold.server.work_queue import WorkQueue

_log = logging.getLogger("scaffold.server")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes


def _reply(status: int, outcome: str, **fields: str) -> Reply:
    return Reply(status, json.dumps({"status": outcome, **fields}).encode())


def _queued(delivery_id: str) -> Reply:
    # The id matched DELIVERY_ID (no quote or backslash), so no JSON escaping is needed.
    return Reply(202, b'{"status":"queued","delivery":"' + delivery_id.encode() + b'"}')


PONG = Reply(200, b'{"status":"pong"}')
TOO_LARGE = Reply(413, b'{"status":"too_large"}')
DRAINING = Reply(503, b'{"status":"draining"}')
UNSTORED = Reply(503, b'{"status":"unavailable","reason":"not stored"}')


class Ingest:
    def __init__(
        self,
        settings: ServerSettings,
        handler: DeliveryHandler,
        *,
        gauges: Callable[[], Awaitable[AppGauges]] | None = None,
    ) -> None:
        self.settings = settings
        self._handler = handler
        self._secret = settings.webhook_secret
        self._root = settings.state_dir / "webhooks"
        self.store = DeliveryStore(self._root / "deliveries.sqlite", durable=settings.fsync)
        self.queue: WorkQueue[Delivery | Accepted] = WorkQueue(self._run, settings.workers)
        self.metrics = IngestMetrics(lambda: self.queue.depth, lambda: self.queue.in_flight, gauges)
        self.draining = False
        self._parsed_in_queue = 0
        self._lock_fd = -1

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Lock the state directory, open the store, re-queue what was left unhandled."""
        self._root.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            left = await self.store.open()
        except BaseException:
            self._unlock()
            raise
        for accepted in left:
            self.queue.put(accepted, urgent=accepted.urgent)
        if left:
            _log.info("re-queued deliveries left by an earlier run", extra={"count": len(left)})
        self.queue.start()

    async def drain(self, timeout: float) -> bool:
        """Refuse new deliveries and wait for the queued ones; False if time ran out."""
        self.draining = True
        done = await self.queue.drain(timeout)
        if not done:
            _log.warning(
                "drain timed out; the rest is handled at the next start",
                extra={"queue": self.queue.depth, "in_flight": self.queue.in_flight},
            )
        return done

    async def stop(self) -> None:
        await self.queue.stop()
        await self.store.close()
        self._unlock()

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

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- the request side --------------------------------------------------------------------

    def refuse_too_large(self) -> Reply:
        self.metrics.count(UNVERIFIED, "too_large")
        return TOO_LARGE

    def refuse_draining(self) -> Reply:
        self.metrics.count(UNVERIFIED, "unavailable")
        return DRAINING

    async def accept(self, headers: Mapping[str, str], body: bytes) -> Reply:
        if self.draining:
            return self.refuse_draining()
        parsed = verify_and_parse(headers, body, self._secret, received_at=time.time())
        if isinstance(parsed, Rejection):
            return self._refuse(headers, parsed)
        delivery, raw = parsed
        event = delivery.event
        if event == "ping":
            self.metrics.count(event, "handled")
            return PONG
        urgent = by_a_person(delivery)
        accepted = Accepted(delivery.id, event, delivery.received_at, urgent)
        try:
            stored = await self.store.add(accepted, raw)
        except sqlite3.Error as exc:
            _log.error(
                "delivery could not be stored; not acknowledged",
                extra={"delivery": delivery.id, "error": str(exc)},
            )
            self.metrics.count(event, "unavailable")
            return UNSTORED
        if not stored:
            self.metrics.count(event, "duplicate")
            _log.info("duplicate delivery", extra={"delivery": delivery.id, "event": event})
            return _reply(200, "duplicate", delivery=delivery.id)
        if self._parsed_in_queue < self.settings.max_parsed_in_queue:
            self._parsed_in_queue += 1
            self.queue.put(delivery, urgent=urgent)
        else:
            self.queue.put(accepted, urgent=urgent)
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

    async def _run(self, item: Delivery | Accepted) -> None:
        if isinstance(item, Delivery):
            self._parsed_in_queue -= 1
            delivery = item
        else:
            raw = await self.store.payload(item.id)
            payload = None if raw is None else parse_payload(raw)
            if payload is None:
                _log.error("unreadable stored delivery", extra={"delivery": item.id})
                self.metrics.count(item.event, "failed")
                self.store.finish(item.id, "failed")
                return
            delivery = delivery_from(item.id, item.event, payload, item.received_at)
        start = time.perf_counter()
        outcome: Literal["handled", "failed"] = "handled"
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
        self.metrics.observe_handle(elapsed)
        self.metrics.count(delivery.event, outcome)
        self.store.finish(delivery.id, outcome)
        if outcome == "handled" and _log.isEnabledFor(logging.INFO):
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
