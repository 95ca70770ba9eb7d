"""The backlog as the orchestrator sees it, re-read only when a file changed.

The loop looks at the backlog on every turn; parsing every task file each time costs
more than the agents' own bookkeeping on a backlog of a few dozen tasks. A snapshot is
kept until the set of files or any file's size or modification time changes; with
``recheck_s`` the files are not even listed again within that time unless scaffold
itself changed them (:meth:`BacklogCache.invalidate`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from scaffold import backlog as bl
from scaffold.errors import BacklogError

_FOLDERS = ("tasks", "completed", "drafts")


def _fingerprint(repo: Path) -> tuple[tuple[str, int, int], ...]:
    try:
        backlog_dir = bl.find_backlog_dir(repo)
    except BacklogError:
        return ()
    marks: list[tuple[str, int, int]] = []
    for name in (*_FOLDERS, ""):
        folder = backlog_dir / name if name else backlog_dir
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_file() and entry.name.endswith((".md", ".yml", ".yaml")):
                st = entry.stat()
                marks.append((entry.path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(marks))


class BacklogCache:
    """``recheck_s``: how long a snapshot is trusted without looking at the files again.

    0 (the default) looks every time. The orchestrator, which asks on every turn of its
    loop, passes its ``poll_s``: a person's edit is seen within that time, and scaffold's
    own writes (status changes, merges, planning output) call :meth:`invalidate`, so they
    are seen at once."""

    def __init__(
        self,
        repo: Path,
        *,
        recheck_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.repo = repo
        self.recheck_s = recheck_s
        self._clock = clock
        self._key: tuple[tuple[str, int, int], ...] | None = None
        self._snapshot: bl.BacklogSnapshot | None = None
        self._looked_at: float | None = None
        self._lock = threading.Lock()  # the loop and worker threads share one cache

    def invalidate(self) -> None:
        """The files may have changed: the next :meth:`get` looks at them."""
        with self._lock:
            self._looked_at = None

    def get(self) -> bl.BacklogSnapshot:
        with self._lock:
            now = self._clock()
            if (
                self._snapshot is not None
                and self._looked_at is not None
                and now - self._looked_at < self.recheck_s
            ):
                return self._snapshot
            key = _fingerprint(self.repo)
            if self._snapshot is None or key != self._key:
                self._snapshot = bl.load_backlog(self.repo)
                self._key = key
            self._looked_at = now
            return self._snapshot
