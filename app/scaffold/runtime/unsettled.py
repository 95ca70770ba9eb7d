"""Work a task's next steps wait for: the commit of its last agent's work, still running.

An agent's end is applied at once (its signal decides what comes next) while the commit
of what it changed runs in a worker thread. The task's next agent is started beside
that commit: its sandbox is made and it runs once the commit is done (the start gate
of :class:`~scaffold.runtime.run_channel.RunChannel`). Every other effect of the task
(Ward, DiagramCheck, a pull request, a merge, a Backlog.md write) waits for the commit
first, so nothing reads the branch before the agent's work is on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Unsettled"]


class Unsettled:
    """Per task, the commits started and not yet waited for."""

    def __init__(self, warn: Callable[[str], None], wake: Callable[[], None]) -> None:
        self._warn = warn
        self._wake = wake  # called when one finishes (the main loop may be waiting on it)
        self._work: dict[str, list[asyncio.Future[None]]] = {}

    def add(self, key: str, work: asyncio.Future[None]) -> None:
        self._work.setdefault(key, []).append(work)
        work.add_done_callback(lambda _done: self._wake())

    def pending(self, key: str) -> bool:
        return any(not w.done() for w in self._work.get(key, ()))

    def busy(self) -> bool:
        return any(self.pending(key) for key in self._work)

    async def settle(self, key: str) -> None:
        """Wait for ``key``'s work; a failure is reported, not raised (the next commit
        of the task takes whatever this one left). Cancelling the waiter leaves the
        work running."""
        works = self._work.get(key)
        if not works:
            return
        for work in list(works):
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                if not work.done():
                    raise  # the waiter was cancelled, not the work
            except Exception as exc:  # reported, and the task goes on
                self._warn(f"{key}: committing the agent's work failed: {exc}")
            if work in works:
                works.remove(work)
        if not works and self._work.get(key) is works:
            del self._work[key]

    async def settle_all(self) -> None:
        for key in list(self._work):
            await self.settle(key)
