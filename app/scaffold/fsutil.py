"""Durable file-system steps shared by every writer (quest store, Backlog.md, signals)."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make the names in ``directory`` (a file just renamed or created there) durable.

    An error is raised, never swallowed: a write that cannot be made durable must not
    look as if it were. Only a file system that cannot sync a directory at all (EINVAL:
    some network and FUSE file systems) is let through, as there is nothing to do.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)
