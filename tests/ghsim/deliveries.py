"""Delivery records and the background sender that posts them, in order per repository."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .webhooks import delivery_headers

log = logging.getLogger("ghsim.deliveries")


@dataclass
class DeliveryRecord:
    event: str
    action: str | None
    delivery_id: str
    payload: dict[str, Any]
    body: bytes
    headers: dict[str, str]
    status_code: int | None = None
    response_text: str | None = None
    error: str | None = None
    held: bool = False
    redelivery: bool = False
    posted: threading.Event = field(default_factory=threading.Event, repr=False)
    # Timing (wall clock, ``time.time()``): when the simulator recorded the delivery, when
    # its POST started, and how long the receiver took to answer (POST start to the whole
    # response read), for benchmarks of a receiver's ack latency.
    queued_at: float = field(default_factory=time.time)
    sent_at: float | None = None
    elapsed_s: float | None = None
    # The same for the copy posted to ``Sender.mirror_url``, when one is set.
    mirror_status: int | None = None
    mirror_elapsed_s: float | None = None
    mirror_error: str | None = None


class Sender:
    """Posts deliveries on the simulator's loop; never blocks the API.

    Each repository has a lane of its own: its deliveries are posted one after another,
    in the order they were recorded, while other repositories' lanes post at the same
    time (GitHub itself delivers concurrently and promises no order at all; one queue
    for a whole installation would hold a repository's delivery behind every other
    repository's, tens of seconds at twenty busy repositories). Deliveries without a
    repository (installation events) share one lane.

    ``mirror_url`` (opt-in, for benchmarks): each delivery is also posted there, at the
    same moment as to ``url`` (both at once; the next waits for both), with the same
    headers and body; its answer is kept apart (``mirror_*``) and changes nothing else.
    """

    def __init__(self) -> None:
        self.url: str | None = None
        self.mirror_url: str | None = None
        self.secret: str = ""
        self.target_id: int = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[DeliveryRecord | None] | None = None
        self._pending = 0
        self._cond = threading.Condition()
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue = asyncio.Queue()
        self._task = loop.create_task(self._run())

    async def stop(self) -> None:
        if self._queue is not None:
            self._queue.put_nowait(None)
        if self._task is not None:
            await asyncio.wait([self._task], timeout=5)

    def record(
        self, event: str, action: str | None, payload: dict[str, Any], *, held: bool
    ) -> DeliveryRecord:
        body = json.dumps(payload).encode()
        headers = delivery_headers(event, body, self.secret, target_id=self.target_id)
        return DeliveryRecord(
            event=event,
            action=action,
            delivery_id=headers["X-GitHub-Delivery"],
            payload=payload,
            body=body,
            headers=headers,
            held=held,
        )

    def enqueue(self, record: DeliveryRecord) -> None:
        if record.held or self.url is None or self._loop is None or self._queue is None:
            record.posted.set()
            return
        with self._cond:
            self._pending += 1
        self._loop.call_soon_threadsafe(self._queue.put_nowait, record)

    def wait(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout=timeout)

    @property
    def pending(self) -> int:
        return self._pending

    async def _run(self) -> None:
        assert self._queue is not None
        lanes: dict[str, asyncio.Queue[DeliveryRecord | None]] = {}
        workers: list[asyncio.Task[None]] = []
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            while True:
                record = await self._queue.get()
                if record is None:
                    break
                key = _lane_of(record.payload)
                lane = lanes.get(key)
                if lane is None:
                    lane = lanes[key] = asyncio.Queue()
                    workers.append(asyncio.create_task(self._lane(session, lane)))
                lane.put_nowait(record)
            for lane in lanes.values():
                lane.put_nowait(None)
            if workers:
                await asyncio.wait(workers)

    async def _lane(
        self, session: aiohttp.ClientSession, lane: asyncio.Queue[DeliveryRecord | None]
    ) -> None:
        while True:
            record = await lane.get()
            if record is None:
                return
            try:
                await self._post(session, record)
            finally:
                record.posted.set()
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

    async def _post(self, session: aiohttp.ClientSession, record: DeliveryRecord) -> None:
        url = self.url
        if url is None:
            return
        mirror = self.mirror_url
        if mirror is None:
            await self._post_main(session, url, record)
        else:
            await asyncio.gather(
                self._post_main(session, url, record), self._post_mirror(session, mirror, record)
            )

    async def _post_main(
        self, session: aiohttp.ClientSession, url: str, record: DeliveryRecord
    ) -> None:
        record.sent_at = time.time()
        started = time.perf_counter()
        try:
            async with session.post(url, data=record.body, headers=record.headers) as resp:
                record.status_code = resp.status
                record.response_text = (await resp.text())[:2000]
        except Exception as exc:  # a refused connection is a failed delivery, as on GitHub
            record.error = f"{type(exc).__name__}: {exc}"
            log.info("delivery %s to %s failed: %s", record.delivery_id, url, record.error)
        finally:
            record.elapsed_s = time.perf_counter() - started

    async def _post_mirror(
        self, session: aiohttp.ClientSession, url: str, record: DeliveryRecord
    ) -> None:
        started = time.perf_counter()
        try:
            async with session.post(url, data=record.body, headers=record.headers) as resp:
                record.mirror_status = resp.status
                await resp.read()
        except Exception as exc:
            record.mirror_error = f"{type(exc).__name__}: {exc}"
        finally:
            record.mirror_elapsed_s = time.perf_counter() - started


def _lane_of(payload: dict[str, Any]) -> str:
    repository = payload.get("repository")
    if isinstance(repository, dict):
        return str(repository.get("full_name") or "")
    return ""
