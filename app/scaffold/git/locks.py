"""One lock per repository and purpose, shared by everything in the process.

Several objects write the same repository at once: one orchestrator per quest that
``scaffold run`` drives, the App's checkout refresh beside them. Whoever made them,
writers of the same ref (the default branch and its checkout, the state branch) take the
same lock, found here by the repository's real path.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_GUARD = threading.Lock()


def repo_lock(repo: Path, purpose: str) -> threading.Lock:
    """The process's one lock for ``purpose`` in the repository at ``repo``."""
    key = (os.path.realpath(repo), purpose)
    with _GUARD:
        return _LOCKS.setdefault(key, threading.Lock())
