"""Stopping an agent's process group, and watching it end, each wait with a deadline.

:func:`stop_process_group`: close stdin, wait; SIGTERM the group, wait; SIGKILL the
group, wait. :class:`LiveChildren` tracks the groups of running agents so the
orchestrator can stop them all when it exits.

Nothing here polls. The agent's exit is an event: the process is spawned with a protocol
(`_ExitWatch`) whose `process_exited`, called as soon as the event loop's child watcher
has reaped the leader, resolves a future; unlike `proc.wait()` before Python 3.12, it does
not wait for stdout and stderr to close, which an escaped grandchild can keep open for
ever. What is left of the group after that (an MCP server the agent forgot) is watched
through one pidfd per member (`os.pidfd_open`, readable once the process has ended); a
group that is already empty is seen with a single `killpg(pgid, 0)`, without listing
/proc. Only a kernel without pidfds falls back to re-checking the group every 25 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from typing import Any, Literal

from scaffold.agent.stream import DEFAULT_CHUNK_BYTES

__all__ = [
    "LiveChildren",
    "StopResult",
    "WatchedProcess",
    "spawn_watched",
    "stop_process_group",
]

StopResult = Literal["exited", "terminated", "killed", "survived"]
_POLL_S = 0.025


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _has_live_member(pgid: int) -> bool:
    """Any process in group `pgid` that is not a zombie. Zombies whose parent died wait
    for init to reap them; they hold no resources, so they count as gone."""
    members = _live_members(pgid, first=True)
    return members is None or bool(members)  # no procfs: assume alive, the caller escalates


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _has_live_member(pgid)


def _live_members(pgid: int, *, first: bool = False) -> list[int] | None:
    """The pids of group `pgid`'s members that are not zombies, from one pass over
    /proc (stopping at the first with `first`); None without procfs."""
    group = str(pgid).encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    members = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ..." — comm may contain spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[2] == group and fields[0] not in (b"Z", b"X"):
            members.append(int(entry))
            if first:
                break
    return members


class _ExitWatch(asyncio.subprocess.SubprocessStreamProtocol):
    """`create_subprocess_exec`'s protocol, plus `exited`: a future resolved as soon as the
    child watcher has reaped the process (its returncode is set by then), whether or
    not its pipes are still open."""

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


async def spawn_watched(
    program: str, *args: str, limit: int = DEFAULT_CHUNK_BYTES, **kwargs: Any
) -> WatchedProcess:
    """`asyncio.create_subprocess_exec`, returning a `WatchedProcess`. The future exists
    before the process does, so an exit that comes before anyone awaits it is kept."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ExitWatch(limit, loop), program, *args, **kwargs
    )
    return WatchedProcess(transport, protocol, loop)


def _pidfds(pids: Sequence[int]) -> list[int] | None:
    """A pidfd for each pid still there; None when this kernel (or Python) has none."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    fds = []
    for pid in pids:
        try:
            fds.append(opener(pid))
        except ProcessLookupError:
            continue  # already gone
        except OSError:
            for fd in fds:
                os.close(fd)
            return None
    return fds


async def _all_readable(fds: Sequence[int]) -> None:
    """Until every pidfd in `fds` is readable, that is until each process has ended."""
    loop = asyncio.get_running_loop()
    pending = set(fds)
    done = loop.create_future()

    def ended(fd: int) -> None:
        loop.remove_reader(fd)
        pending.discard(fd)
        if not pending and not done.done():
            done.set_result(None)

    for fd in fds:
        loop.add_reader(fd, ended, fd)
    try:
        await done
    finally:
        for fd in fds:
            loop.remove_reader(fd)


async def _wait_exited(proc: asyncio.subprocess.Process) -> None:
    """Until the leader has exited: for a `WatchedProcess`, until it is reaped (its
    returncode set); for another process, until it has ended (a pidfd, or a poll).

    Not `proc.wait()`: before Python 3.12 that also waits for stdout and stderr to
    close, which never happens while an escaped grandchild holds them open.
    """
    if proc.returncode is not None:
        return
    if isinstance(proc, WatchedProcess):
        # Shielded: a cancelled waiter must not cancel the future others wait on.
        await asyncio.shield(proc.exited)
        return
    fds = _pidfds([proc.pid])
    if fds is None:
        while proc.returncode is None:
            await asyncio.sleep(_POLL_S)
        return
    try:
        await _all_readable(fds)
    finally:
        for fd in fds:
            os.close(fd)


async def _wait_group_empty(pgid: int) -> None:
    """Until no live process is left in group `pgid`: each member found is awaited
    through its pidfd, then the group is looked at again (a member may have forked)."""
    missed = 0
    while _group_alive(pgid):
        members = _live_members(pgid)
        fds = None if members is None else _pidfds(members)
        if fds is None or (not fds and missed):
            # No procfs or no pidfds; or twice a group that signals but shows no live
            # member (say only processes we may not signal): look again later.
            await asyncio.sleep(_POLL_S)
            continue
        if not fds:
            # Members seen alive a moment ago are gone already; the kernel may still
            # be tearing one down, so yield once before looking again.
            missed += 1
            await asyncio.sleep(0)
            continue
        missed = 0
        try:
            await _all_readable(fds)
        finally:
            for fd in fds:
                os.close(fd)


async def _wait_gone(proc: asyncio.subprocess.Process, pgid: int, timeout_s: float) -> bool:
    """Wait until the leader is reaped and no live process is left in its group."""

    async def gone() -> None:
        await _wait_exited(proc)
        await _wait_group_empty(pgid)

    if proc.returncode is not None and not _group_alive(pgid):
        return True
    try:
        await asyncio.wait_for(gone(), timeout=max(0.0, timeout_s))
    except TimeoutError:
        return False
    return True


async def stop_process_group(
    proc: asyncio.subprocess.Process,
    *,
    pgid: int | None = None,
    stdin_wait_s: float = 0.0,
    terminate_wait_s: float = 5.0,
    kill_wait_s: float = 5.0,
) -> StopResult:
    """Stop `proc` and every process in its group, each step with a deadline.

    1. close stdin (if open) and wait `stdin_wait_s` for a clean exit;
    2. SIGTERM the group and wait `terminate_wait_s`;
    3. SIGKILL the group and wait `kill_wait_s`.

    Returns which step ended it; "survived" means even SIGKILL did not (a process stuck
    in the kernel), and the caller should keep tracking it.
    """
    group = proc.pid if pgid is None else pgid
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
        if stdin_wait_s > 0 and await _wait_gone(proc, group, stdin_wait_s):
            return "exited"
    if proc.returncode is not None and not _group_alive(group):
        return "exited"
    _signal_group(group, signal.SIGTERM)
    if await _wait_gone(proc, group, terminate_wait_s):
        return "terminated"
    _signal_group(group, signal.SIGKILL)
    if await _wait_gone(proc, group, kill_wait_s):
        return "killed"
    return "survived"


class LiveChildren:
    """The process groups of agents that are running now (keyed by leader pid).

    `run_agent` adds a process when it starts and removes it once it is reaped, so at
    exit the orchestrator can `await stop_all()` or, from a signal handler or atexit
    hook where no loop runs, `kill_all()`.
    """

    def __init__(self) -> None:
        self._procs: dict[int, asyncio.subprocess.Process] = {}

    def add(self, proc: asyncio.subprocess.Process) -> None:
        self._procs[proc.pid] = proc

    def discard(self, proc: asyncio.subprocess.Process) -> None:
        self._procs.pop(proc.pid, None)

    def pids(self) -> list[int]:
        return sorted(self._procs)

    def __len__(self) -> int:
        return len(self._procs)

    def __contains__(self, pid: object) -> bool:
        return pid in self._procs

    def kill_all(self, sig: int = signal.SIGKILL) -> list[int]:
        """Signal every tracked group at once (synchronous); returns the pids."""
        pids = self.pids()
        for pid in pids:
            _signal_group(pid, sig)
        return pids

    async def stop_all(
        self, *, terminate_wait_s: float = 5.0, kill_wait_s: float = 5.0
    ) -> dict[int, StopResult]:
        """Stop every tracked group concurrently; forget those that are gone."""
        procs = list(self._procs.values())
        results = await asyncio.gather(
            *(
                stop_process_group(p, terminate_wait_s=terminate_wait_s, kill_wait_s=kill_wait_s)
                for p in procs
            )
        )
        for proc, result in zip(procs, results, strict=True):
            if result != "survived":
                self.discard(proc)
        return {p.pid: r for p, r in zip(procs, results, strict=True)}
