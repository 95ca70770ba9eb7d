"""The worker pool on its own."""

from __future__ import annotations

import asyncio
import weakref

from webhook_support import eventually

from scaffold.server.work_queue import WorkQueue


class Item:
    """A work item that can be watched with a weak reference."""


async def test_idle_workers_hold_no_item_they_ran() -> None:
    """A handled delivery (its parsed payload) is freed at once, not kept by the worker
    that ran it until the next item comes."""
    ran: list[weakref.ref[Item]] = []

    async def run(item: Item) -> None:
        ran.append(weakref.ref(item))

    queue: WorkQueue[Item] = WorkQueue(run, workers=2)
    queue.start()
    try:
        for _ in range(3):
            queue.put(Item())
        await eventually(lambda: len(ran) == 3 and queue.in_flight == 0)
        await asyncio.sleep(0.01)  # the workers wait for more
        assert [r() for r in ran] == [None, None, None]
    finally:
        await queue.stop()
