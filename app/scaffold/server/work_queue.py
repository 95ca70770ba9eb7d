"""Two FIFOs of work items (urgent first) served by a fixed pool of asyncio worker tasks.

Lighter than ``asyncio.Queue`` on the hot path: ``put`` appends to a deque and wakes
one idle worker only if there is one; a busy worker keeps taking items without
suspending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

_log = logging.getLogger(__name__)
T = TypeVar("T")


class WorkQueue(Generic[T]):
    """``run`` is called for each item by one of ``workers`` tasks; it should not raise.

    Two lanes: an urgent item (one a person caused: a label, a comment, a review) is
    taken before every other, and ``reserved`` workers are kept for urgent items, so
    however many others are being handled (scaffold's own echoes: check suites, pushes)
    a person's delivery starts at once.
    """

    def __init__(
        self, run: Callable[[T], Awaitable[None]], workers: int = 4, *, reserved: int = 1
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._run = run
        self._size = workers
        self._reserved = max(0, min(reserved, workers - 1))  # one worker serves all
        self._urgent: deque[T] = deque()
        self._items: deque[T] = deque()
        self._idle: deque[asyncio.Future[None]] = deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight = 0
        self._others_in_flight = 0
        self._settled: asyncio.Event | None = None

    @property
    def depth(self) -> int:
        return len(self._urgent) + len(self._items)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._work(), name=f"scaffold-webhook-worker-{i}")
                for i in range(self._size)
            ]

    def put(self, item: T, *, urgent: bool = False) -> None:
        (self._urgent if urgent else self._items).append(item)
        self._wake()

    def _wake(self) -> None:
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    def _take(self) -> tuple[T, bool] | None:
        if self._urgent:
            return self._urgent.popleft(), True
        if self._items and self._others_in_flight < self._size - self._reserved:
            return self._items.popleft(), False
        return None

    async def drain(self, timeout: float) -> bool:
        """Wait until every queued item has been run; False if ``timeout`` came first."""
        if not self.depth and not self._in_flight:
            return True
        self._settled = asyncio.Event()
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
        except TimeoutError:
            return False
        finally:
            self._settled = None
        return True

    async def stop(self) -> None:
        """Cancel the workers; items still queued or running are abandoned."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            taken = self._take()
            if taken is None:
                if self._settled is not None and not self._in_flight and not self.depth:
                    self._settled.set()
                waiter = loop.create_future()
                self._idle.append(waiter)
                await waiter
                continue
            item, urgent = taken
            self._in_flight += 1
            self._others_in_flight += not urgent
            try:
                await self._run(item)
            except Exception:
                _log.exception("a work item raised")
            finally:
                del item  # an idle worker holds no payload
                self._in_flight -= 1
                if not urgent:
                    self._others_in_flight -= 1
                    self._wake()  # an item held back by the reserve may go now
