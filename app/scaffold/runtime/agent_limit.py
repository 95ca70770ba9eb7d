"""The server's cap on agents running at once, across every repository it serves.

Each repository's ``slots`` bound its own tasks; on a server for an organisation,
twenty repositories with two slots each would still start forty agents on a machine
with two cores. An agent (planning runs and validators included) takes a permit right
before it runs and gives it back when its process is gone; a permit is never taken
from a running agent. When one frees, it goes to the waiting agent whose repository
holds the fewest permits, then whose quest holds the fewest, then the one that has
waited longest: the greedy form of the max-min fair shares of ``core.scheduler``, one
permit at a time. A repository alone on the server may use every permit.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_AGENTS_ENV = "SCAFFOLD_MAX_AGENTS"


def default_max_agents() -> int:
    """Two agents per core: an agent mostly waits for its model, its checks do not."""
    return max(2, 2 * (os.cpu_count() or 1))


def describe_max_agents(environ: Mapping[str, str]) -> tuple[bool, str]:
    """What ``scaffold serve`` would cap agents at with this environment (for doctor)."""
    raw = environ.get(MAX_AGENTS_ENV, "").strip()
    if not raw:
        return True, f"{default_max_agents()} at once across repositories (two per core)"
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        return False, f"{MAX_AGENTS_ENV}={raw!r} is not a whole number of at least 1"
    return True, f"{int(raw)} at once across repositories ({MAX_AGENTS_ENV})"


@dataclass(eq=False)
class _Waiter:
    repo: str
    quest: str
    seq: int
    granted: asyncio.Future[None] = field(default_factory=asyncio.Future)


class AgentLimit:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the agent limit must be at least 1")
        self.limit = limit
        self._by_repo: Counter[str] = Counter()
        self._by_quest: Counter[tuple[str, str]] = Counter()
        self._waiting: list[_Waiter] = []
        self._order = itertools.count()

    @property
    def running(self) -> int:
        return sum(self._by_repo.values())

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def running_in(self, repo: str) -> int:
        return self._by_repo[repo]

    async def acquire(self, repo: str, quest: str) -> None:
        """Wait for a permit for an agent of ``quest`` in ``repo``."""
        waiter = _Waiter(repo, quest, next(self._order))
        self._waiting.append(waiter)
        self._grant()
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            elif waiter.granted.done() and not waiter.granted.cancelled():
                self.release(repo, quest)  # granted as it was cancelled
            raise

    def release(self, repo: str, quest: str) -> None:
        # Counter subtraction drops the counts that reach zero.
        self._by_repo -= Counter([repo])
        self._by_quest -= Counter([(repo, quest)])
        self._grant()

    def _rank(self, w: _Waiter) -> tuple[int, int, int]:
        return (self._by_repo[w.repo], self._by_quest[(w.repo, w.quest)], w.seq)

    def _grant(self) -> None:
        while self._waiting and self.running < self.limit:
            waiter = min(self._waiting, key=self._rank)
            self._waiting.remove(waiter)
            self._by_repo[waiter.repo] += 1
            self._by_quest[(waiter.repo, waiter.quest)] += 1
            waiter.granted.set_result(None)


class RepoAgents:
    """One repository's view of the limit: what its quests' runs hold and ask for."""

    def __init__(self, limit: AgentLimit, repo: str) -> None:
        self.limit = limit
        self.repo = repo

    async def acquire(self, quest: str) -> None:
        await self.limit.acquire(self.repo, quest)

    def release(self, quest: str) -> None:
        self.limit.release(self.repo, quest)
