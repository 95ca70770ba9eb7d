"""Publishing one quest to the state branch while its run goes on.

The publisher listens to the quest writer's commits (keeping the bounded history up to
date as they happen), asks the pure policy (``core/publication.py``) whether the
current quest should go to the branch now, and writes it there. Publishing never
blocks or fails the run: a failure (a slow or unreachable remote) is said once and
tried again at the next occasion; the journal under ``.scaffold/`` already holds
every transition, so nothing is lost meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scaffold.core.publication import publish_reason
from scaffold.errors import ScaffoldError
from scaffold.quest.model import HistoryEntry, Quest
from scaffold.quest.store import QuestStore, QuestWriter
from scaffold.state.branch import Publication, StateBranch
from scaffold.state.document import HistoryDigest, is_finished, portable, render

Link = Callable[[], Mapping[str, Any] | None]
MERGE_GAP_S = 1.0  # merges less than this apart share a publication (core/publication.py)


class StatePublisher:
    def __init__(
        self,
        branch: StateBranch,
        store: QuestStore,
        writer: QuestWriter,
        *,
        interval_s: float = 5.0,
        link: Link | None = None,
    ) -> None:
        self.branch = branch
        self.writer = writer
        self.interval_s = interval_s
        self.link = link or (lambda: None)
        self._lock = threading.Lock()
        self.published: Quest | None = None
        self.published_at = time.monotonic()
        self.last_error: str | None = None
        quest = writer.quest
        try:
            doc = branch.read_quest(quest.id)
        except ScaffoldError as exc:  # unreadable: the next publication replaces it
            self.last_error = str(exc)
            doc = None
        self.digest = HistoryDigest()
        if doc is not None and doc.seq <= quest.seq:
            self.digest = HistoryDigest(doc.history)
            if doc.seq == quest.seq and doc.quest == portable(quest):
                self.published = quest  # the branch has it already
        self.digest.add(store.history(quest.id, since_seq=self.digest.last_seq))
        writer.observe(self._on_commit)

    def _on_commit(self, quest: Quest, entries: Sequence[HistoryEntry]) -> None:
        if entries:
            with self._lock:
                self.digest.add(entries)

    def due(self) -> str | None:
        """Why the quest should be published now; None when it need not be."""
        return publish_reason(
            self.published,
            self.writer.quest,
            time.monotonic() - self.published_at,
            self.interval_s,
            MERGE_GAP_S,
        )

    def publish(self, reason: str | None = None) -> bool:
        """Publish the quest as it is now (thread-safe). False when that failed (said in
        :attr:`last_error`; the next call tries again)."""
        with self._lock:
            quest = self.writer.quest
            if reason is None:
                reason = publish_reason(self.published, quest, float("inf"), 0.0)
                if reason is None:
                    return True
            data = render(quest, self.digest, self.link())
        try:
            self.branch.publish(
                [Publication(quest.id, data, quest.seq, is_finished(quest))], f"scaffold: {reason}"
            )
        except Exception as exc:  # a publication never takes the run down
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.published_at = time.monotonic()  # try again after the interval, not at once
            return False
        self.last_error = None
        self.published = quest
        self.published_at = time.monotonic()
        return True
