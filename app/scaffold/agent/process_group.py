"""Stopping an agent's process group, and watching it end, each wait with a deadline.

:func:`stop_process_group`: SIGTERM the group, wait; SIGKILL the group, wait.
:class:`LiveChildren` tracks the groups of running agents so the orchestrator can kill
them all when it exits.

An agent is spawned with :func:`spawn_watched`, whose ``exited`` future resolves as soon
as the event loop's child watcher has reaped the leader: before Python 3.12,
``proc.wait()`` also waits for stdout and stderr to close, which an escaped grandchild
can keep open for ever. What is left of the group after that (an MCP server the agent
forgot) is looked at every 25 ms until it is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import signal
from pathlib import Path
from typing import Any, Literal

from scaffold.agent.stream import DEFAULT_CHUNK_BYTES

__all__ = ["LiveChildren", "StopResult", "WatchedProcess", "spawn_watched", "stop_process_group"]

StopResult = Literal["exited", "terminated", "killed", "survived"]
_POLL_S = 0.025


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_live_member(pgid)


def _has_live_member(pgid: int) -> bool:
    """Any process in group `pgid` that is not a zombie (zombies whose parent died wait
    for init to reap them and hold nothing). Without procfs: assume one."""
    if not os.path.isdir("/proc/self"):
        return True
    group = str(pgid).encode()
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            stat = Path(path).read_bytes()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ..." — comm may contain spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[2] == group and fields[0] not in (b"Z", b"X"):
            return True
    return False


class _ExitWatch(asyncio.subprocess.SubprocessStreamProtocol):
    """`create_subprocess_exec`'s protocol, plus `exited`: resolved once the child
    watcher has reaped the process, whether or not its pipes are still open."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class WatchedProcess(asyncio.subprocess.Process):
    """An `asyncio.subprocess.Process` whose exit can be awaited without its pipes."""

    def __init__(
        self,
        transport: asyncio.SubprocessTransport,
        protocol: _ExitWatch,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        super().__init__(transport, protocol, loop)
        self.exited = protocol.exited


async def spawn_watched(program: str, *args: str, **kwargs: Any) -> WatchedProcess:
    """`asyncio.create_subprocess_exec`, returning a `WatchedProcess`."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ExitWatch(DEFAULT_CHUNK_BYTES, loop), program, *args, **kwargs
    )
    return WatchedProcess(transport, protocol, loop)


async def _wait_exited(proc: WatchedProcess) -> None:
    """Until the leader is reaped. Shielded: a cancelled waiter must not cancel the
    future others wait on."""
    await asyncio.shield(proc.exited)


async def _wait_gone(proc: WatchedProcess, timeout_s: float) -> bool:
    """Wait until the leader is reaped and no live process is left in its group."""

    async def gone() -> None:
        await _wait_exited(proc)
        while _group_alive(proc.pid):
            await asyncio.sleep(_POLL_S)

    try:
        await asyncio.wait_for(gone(), timeout=timeout_s)
    except TimeoutError:
        return False
    return True


async def stop_process_group(
    proc: WatchedProcess, *, terminate_wait_s: float = 5.0, kill_wait_s: float = 5.0
) -> StopResult:
    """Stop `proc` and every process in its group: SIGTERM, then SIGKILL, each followed
    by a wait. "survived" means even SIGKILL did not end it (a process stuck in the
    kernel)."""
    if proc.returncode is not None and not _group_alive(proc.pid):
        return "exited"
    _signal_group(proc.pid, signal.SIGTERM)
    if await _wait_gone(proc, terminate_wait_s):
        return "terminated"
    _signal_group(proc.pid, signal.SIGKILL)
    if await _wait_gone(proc, kill_wait_s):
        return "killed"
    return "survived"


class LiveChildren(set[int]):
    """The process groups (leader pids) of agents that are running now.

    `run_agent` adds a leader when it starts and removes it once it is reaped, so the
    orchestrator can `kill_all()` at exit, from a signal handler or an atexit hook.
    """

    def pids(self) -> list[int]:
        return sorted(self)

    def kill_all(self) -> list[int]:
        """SIGKILL every tracked group at once (synchronous); returns the pids."""
        pids = self.pids()
        for pid in pids:
            _signal_group(pid, signal.SIGKILL)
        return pids
