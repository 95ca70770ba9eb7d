"""The App's own event loop, in a thread of its own.

The loop that answers webhooks must only wait (verify, store, acknowledge); quest runs
hold the thread that runs them (spawning agents, fsync, git). So the App lives on a
second loop here; the ingest's workers hand each delivery over with
:meth:`AppThread.call`, and a cancelled call cancels the coroutine on the App's loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


# Threads for the App's blocking work (``asyncio.to_thread``): git, the analyzer, file
# writes. They mostly wait for a git process; the default pool (cores + 4) would queue
# twenty repositories' fetches behind each other.
BLOCKING_THREADS = 32


class AppThread:
    def __init__(self) -> None:
        self.loop = uvloop.new_event_loop()
        self.loop.set_default_executor(
            ThreadPoolExecutor(BLOCKING_THREADS, thread_name_prefix="scaffold-app-blocking")
        )
        self._thread = threading.Thread(target=self._run, name="scaffold-app", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the App's loop and wait for its result on the caller's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self, timeout: float = 10.0) -> None:
        """Cancel what the loop still runs, stop it and join the thread (a daemon: a
        task that ignores its cancellation cannot keep the process alive)."""
        if not self._thread.is_alive():
            self.loop.close()
            return

        async def cancel_rest() -> None:
            here = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not here]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await self.loop.shutdown_asyncgens()
            self.loop.stop()

        self.loop.call_soon_threadsafe(lambda: self.loop.create_task(cancel_rest()))
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
