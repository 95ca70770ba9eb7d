"""The backlog as the orchestrator sees it, parsed again only when a file changed.

The loop looks at the backlog on every turn; a snapshot is kept until the set of files,
or any file's modification time, size or inode (an atomic write replaces it), changes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from scaffold import backlog as bl
from scaffold.errors import BacklogError

_FOLDERS = ("tasks", "completed", "drafts")


def _fingerprint(repo: Path) -> tuple[tuple[str, int, int, int], ...]:
    try:
        backlog_dir = bl.find_backlog_dir(repo)
    except BacklogError:
        return ()
    marks: list[tuple[str, int, int, int]] = []
    for name in (*_FOLDERS, ""):
        try:
            entries = list(os.scandir(backlog_dir / name))
        except OSError:
            continue
        for entry in entries:
            if entry.is_file() and entry.name.endswith((".md", ".yml", ".yaml")):
                st = entry.stat()
                marks.append((entry.path, st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(sorted(marks))


class BacklogCache:
    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._key: tuple[tuple[str, int, int, int], ...] | None = None
        self._snapshot: bl.BacklogSnapshot | None = None
        self._lock = threading.Lock()  # the loop and worker threads share one cache

    def get(self) -> bl.BacklogSnapshot:
        with self._lock:
            key = _fingerprint(self.repo)
            if self._snapshot is None or key != self._key:
                self._snapshot = bl.load_backlog(self.repo)
                self._key = key
            return self._snapshot
