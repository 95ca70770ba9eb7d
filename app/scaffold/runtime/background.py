"""Work off the agents' path, run at a lower CPU priority.

Once a task's agents are done, scaffold still checks its diagrams, merges it, writes
Backlog.md and removes its worktree: a few dozen git processes per task. On a small
machine they compete for the CPU with the agents being started for other tasks, which
are what the slots wait on. This work runs in threads of its own whose nice value is
raised (Linux keeps one per thread, and a process forked from a thread inherits it), so
the git processes they start yield to the agents and to the hand-off path; on an idle
machine they run at full speed all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["BACKGROUND_NICE", "in_background"]

# Added to scaffold's own nice value: 10 gets about a tenth of a contended CPU.
BACKGROUND_NICE = 10

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _lower_priority() -> None:
    """Thread initializer: raise this thread's nice value (best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        base = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, base + BACKGROUND_NICE))


_executor = ThreadPoolExecutor(
    max_workers=4, thread_name_prefix="scaffold-background", initializer=_lower_priority
)


async def in_background(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``asyncio.to_thread`` on the low-priority threads."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, functools.partial(fn, *args, **kwargs))
