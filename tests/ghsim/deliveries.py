"""Delivery records and the background sender that posts them, in order."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
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


class Sender:
    """Posts deliveries one after another on the simulator's loop; never blocks the API."""

    def __init__(self) -> None:
        self.url: str | None = None
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
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            while True:
                record = await self._queue.get()
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
        try:
            async with session.post(url, data=record.body, headers=record.headers) as resp:
                record.status_code = resp.status
                record.response_text = (await resp.text())[:2000]
        except Exception as exc:  # a refused connection is a failed delivery, as on GitHub
            record.error = f"{type(exc).__name__}: {exc}"
            log.info("delivery %s to %s failed: %s", record.delivery_id, url, record.error)
