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


async def test_urgent_items_go_first_and_a_worker_is_kept_for_them() -> None:
    """Others fill every worker but the reserved one; an urgent item put behind a
    hundred others starts while they are all still held."""
    release = asyncio.Event()
    started: list[str] = []

    async def run(item: str) -> None:
        started.append(item)
        if item.startswith("echo"):
            await release.wait()

    queue: WorkQueue[str] = WorkQueue(run, workers=4, reserved=1)
    queue.start()
    try:
        for i in range(100):
            queue.put(f"echo-{i}")
        queue.put("person", urgent=True)
        await eventually(lambda: "person" in started)
        assert started.count("person") == 1
        assert len(started) == 4  # three echoes held, the fourth worker took the person's
        assert queue.depth == 97
        release.set()
        await eventually(lambda: len(started) == 101 and queue.in_flight == 0)
    finally:
        await queue.stop()


async def test_urgent_items_are_taken_before_earlier_others() -> None:
    order: list[str] = []

    async def run(item: str) -> None:
        order.append(item)

    queue: WorkQueue[str] = WorkQueue(run, workers=1)
    for item in ("a", "b"):
        queue.put(item)
    queue.put("now", urgent=True)
    queue.start()
    try:
        await eventually(lambda: len(order) == 3)
        assert order == ["now", "a", "b"]  # one worker: no reserve, it serves both lanes
    finally:
        await queue.stop()
