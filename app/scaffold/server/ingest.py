"""The ingest pipeline: verify, dedupe, spool, enqueue; and the worker side: handle, mark done.

:meth:`Ingest.accept` never waits for a handler: it answers as soon as the delivery
is in the spool and the queue. Stores are group commits: the deliveries verified
while the previous batch was being written (and, with ``settings.fsync``, fsynced in
a thread) are written together, the spool records in one ``writev`` and their ids in
one write to the dedupe log, fsynced together, and only then all acknowledged; if
the write or the fsync fails none of them is (503, GitHub delivers again). A second
copy of a delivery that arrives while the first is being stored waits for it and is
answered as a duplicate; it is written once. At most ``settings.max_parsed_in_queue``
deliveries wait in memory parsed; beyond that the queue holds only where they lie in
the spool, so a burst costs little memory. What a person did (``by_a_person``) goes
to the queue's urgent lane: it never waits behind scaffold's own echoes.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from scaffold.errors import StoreLocked
from scaffold.server.dedupe import SeenIds
from scaffold.server.delivery import (
    EVENT_HEADER,
    EVENT_NAME,
    PERSON_EVENTS,
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
from scaffold.server.spool import Spool, SpoolBatch, SpoolRef
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
UNSTORED = Reply(503, b'{"status":"unavailable","reason":"not stored"}', "unavailable")
Sync = Callable[[Sequence[int]], None]


def fsync_all(fds: Sequence[int]) -> None:
    for fd in fds:
        os.fdatasync(fd)


class _Pending:
    """A delivery verified and waiting for its batch to be stored."""

    __slots__ = ("delivery", "done", "raw")

    def __init__(self, delivery: Delivery, raw: bytes, done: asyncio.Future[None]) -> None:
        self.delivery = delivery
        self.raw = raw
        self.done = done


class Ingest:
    def __init__(
        self,
        settings: ServerSettings,
        handler: DeliveryHandler,
        *,
        gauges: Callable[[], Awaitable[AppGauges]] | None = None,
        sync: Sync | None = None,
    ) -> None:
        """``sync`` makes a written batch durable (default: fdatasync if ``settings.fsync``)."""
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
        self._sync = sync if sync is not None else (fsync_all if settings.fsync else None)
        self._batch: list[_Pending] = []
        self._storing: dict[str, asyncio.Future[None]] = {}
        self._flushing = False
        self._flush_task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Lock the state directory, load the ids and the spool, re-queue what was left."""
        self._root.mkdir(parents=True, exist_ok=True)
        self._lock()
        self.seen.load()
        left = self.spool.open()
        for ref in left:
            self.seen.add(ref.id)
            # Not parsed again here: by its event alone (a bot's comment goes early too).
            self.queue.put(ref, urgent=ref.event in PERSON_EVENTS)
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
        if self._flush_task is not None:  # let the batch under way finish, for its answers
            await asyncio.gather(self._flush_task, return_exceptions=True)
        if self._sync is None:
            self._flush_unsynced()
        self._closed = True
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

    async def accept(self, headers: Mapping[str, str], body: bytes) -> Reply:
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
        storing = self._storing.get(delivery.id)
        if storing is not None:  # a copy of a delivery still being stored: wait for it
            try:
                await asyncio.shield(storing)
            except OSError:
                return self._unstored(event)
        elif delivery.id not in self.seen:
            done = asyncio.get_running_loop().create_future()
            self._storing[delivery.id] = done
            self._batch.append(_Pending(delivery, raw, done))
            self._kick()
            try:
                await done
            except OSError:
                return self._unstored(event)
            self.metrics.count(event, "queued")
            return _queued(delivery.id)
        self.metrics.count(event, "duplicate")
        _log.info("duplicate delivery", extra={"delivery": delivery.id, "event": event})
        return _reply(200, "duplicate", delivery=delivery.id)

    def _unstored(self, event: str) -> Reply:
        self.metrics.count(event, "unavailable")
        return UNSTORED

    # -- the group commit --------------------------------------------------------------------

    def _kick(self) -> None:
        """Start a flush unless one is under way (it takes what has come when it ends)."""
        if not self._flushing:
            self._flushing = True
            if self._sync is None:
                asyncio.get_running_loop().call_soon(self._flush_unsynced)
            else:
                self._flush_task = asyncio.get_running_loop().create_task(self._flush_synced())

    def _flush_unsynced(self) -> None:
        self._flushing = False
        if self._closed:
            return
        batch, self._batch = self._batch, []
        try:
            written = self._write(batch)
        except OSError as exc:
            self._fail(batch, exc)
            return
        self._confirm(batch, *written)

    async def _flush_synced(self) -> None:
        assert self._sync is not None
        loop = asyncio.get_running_loop()
        try:
            while self._batch or self.spool.has_marks:
                batch, self._batch = self._batch, []
                try:
                    spooled, logged = self._write(batch)
                except OSError as exc:
                    self._fail(batch, exc)
                    continue
                if batch:
                    fds = (spooled.fd, self.seen.fileno())
                    try:
                        await loop.run_in_executor(None, self._sync, fds)
                    except OSError as exc:
                        self.spool.rollback(spooled)
                        self.seen.rollback(logged)
                        self._fail(batch, exc)
                        continue
                self._confirm(batch, spooled, logged)
        finally:
            self._flushing = False

    def _write(self, batch: list[_Pending]) -> tuple[SpoolBatch, int]:
        """Write the batch to the spool, then its ids to the dedupe log (undoing the spool's
        write if that fails)."""
        spooled = self.spool.write(
            [(p.delivery.id, p.delivery.event, p.delivery.received_at, p.raw) for p in batch]
        )
        try:
            logged = self.seen.write([p.delivery.id for p in batch])
        except OSError:
            self.spool.rollback(spooled)
            raise
        return spooled, logged

    def _confirm(self, batch: list[_Pending], spooled: SpoolBatch, logged: int) -> None:
        self.spool.confirm(spooled)
        ids = [p.delivery.id for p in batch]
        self.seen.confirm(ids, logged)
        queue = self.queue
        for p, ref in zip(batch, spooled.refs, strict=True):
            del self._storing[p.delivery.id]
            urgent = by_a_person(p.delivery)
            if self._parsed_in_queue < self.settings.max_parsed_in_queue:
                self._parsed_in_queue += 1
                queue.put(p.delivery, urgent=urgent)
            else:
                queue.put(ref, urgent=urgent)
            if not p.done.done():
                p.done.set_result(None)

    def _fail(self, batch: list[_Pending], exc: OSError) -> None:
        if batch:
            _log.error(
                "deliveries could not be stored; none acknowledged",
                extra={"count": len(batch), "error": str(exc)},
            )
        for p in batch:
            del self._storing[p.delivery.id]
            if not p.done.done():
                p.done.set_exception(exc)

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
                self._kick()
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
        self.metrics.observe_handle(elapsed)
        self.metrics.count(delivery.event, outcome)
        self.spool.done(delivery.id)
        self._kick()
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
