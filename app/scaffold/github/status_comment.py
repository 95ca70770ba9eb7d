"""The one status comment of a quest on its issue, kept up to date without noise.

Progress marks it due; it is written at most once per ``interval_s`` (each edit is a
delivery back to the App), never when its text is unchanged, and at once on
:meth:`StatusComment.flush` (a run's end). The first write posts it and remembers its id
in the quest's link; later ones edit it in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime

from scaffold.config import ScaffoldConfig
from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github.client import GitHubClient, edit_comment, post_comment
from scaffold.github.comments import render_status, slot_numbers
from scaffold.github.links import LinkStore
from scaffold.quest.model import Quest

log = logging.getLogger("scaffold.github")


class StatusComment:
    def __init__(
        self,
        client: GitHubClient,
        links: LinkStore,
        config: ScaffoldConfig,
        full_name: str,
        *,
        clock: Callable[[], datetime],
        interval_s: float,
    ) -> None:
        self.gh = client
        self.links = links
        self.cfg = config
        self.full_name = full_name
        self.clock = clock
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._last_at = 0.0
        self._lock = asyncio.Lock()
        self._body: str | None = None  # what this run last wrote there
        self._latest: Quest | None = None

    def progress(self, quest: Quest) -> None:
        self._latest = quest
        if self._task is None or self._task.done():
            with contextlib.suppress(RuntimeError):
                self._task = asyncio.get_running_loop().create_task(self._soon())

    async def _soon(self) -> None:
        wait = self._last_at + self.interval_s - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        # Shielded: :meth:`flush` cancels a pending update, and cancelling one whose POST
        # is on its way would lose the new comment's id (and post a second comment).
        await asyncio.shield(self._publish(self._latest))

    async def _publish(self, quest: Quest | None) -> None:
        if quest is None:
            return
        async with self._lock:
            self._last_at = time.monotonic()
            try:
                await self.publish(quest)
            except (GitHubError, ScaffoldError) as exc:
                log.warning(
                    "status comment not updated", extra={"quest": quest.id, "error": str(exc)}
                )

    async def publish(self, quest: Quest) -> None:
        link = self.links.get(quest.id)
        if link is None:
            return
        body = render_status(
            quest,
            now=self.clock(),
            max_cost_usd=self.cfg.safety.max_cost_usd,
            max_hours=self.cfg.safety.max_hours,
            slots=self.cfg.slots,
            slot_of=slot_numbers(quest),
            max_rounds=self.cfg.review.max_rounds,
            max_ci_fixes=self.cfg.ci.max_fixes,
        )
        if link.status_comment_id is None:
            comment_id = await post_comment(self.gh, self.full_name, link.issue_number, body)
            self.links.update(quest.id, status_comment_id=comment_id)
        elif body != self._body:  # an unchanged text is not edited
            await edit_comment(self.gh, self.full_name, link.status_comment_id, body)
        self._body = body

    async def flush(self, quest: Quest) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._publish(quest)
