"""The slots of one repository, shared by every quest running in it at once.

The App runs one orchestrator per quest in one event loop; they share the
repository's ``slots``. Each tick, an orchestrator says how many slots its quest holds
and wants (held plus Ready tasks); it may start as many new tasks as its fair share
(``core.scheduler.fair_shares``, max-min) leaves it, and never more than are free. A
task waiting on a person (a question, an approval) holds no slot, so a parked quest
wants nothing and takes nothing. Nothing is preempted: a quest above its share after
another quest arrives keeps its running tasks and starts no new one until it is under.
"""

from __future__ import annotations

from scaffold.core.scheduler import fair_shares


class SlotPool:
    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._held: dict[str, int] = {}
        self._wants: dict[str, int] = {}

    def report(self, quest_id: str, held: int, want: int) -> None:
        self._held[quest_id] = held
        self._wants[quest_id] = max(held, want)

    def leave(self, quest_id: str) -> None:
        self._held.pop(quest_id, None)
        self._wants.pop(quest_id, None)

    @property
    def held(self) -> int:
        return sum(self._held.values())

    def allowance(self, quest_id: str) -> int:
        """How many more tasks ``quest_id`` may start now."""
        shares = fair_shares(self.slots, self._wants)
        mine = self._held.get(quest_id, 0)
        free = self.slots - self.held
        return max(0, min(shares.get(quest_id, 0) - mine, free))
