"""Atomic file writes for task files, with Backlog.md's errors.

Agents, the Backlog.md CLI and people all read these files while scaffold writes them;
a reader must see the old or the new content, never half of it
(:func:`scaffold.fsutil.write_file`: its hidden temp file is never matched by the
tool's ``task-*.md`` scan).
"""

from __future__ import annotations

import os
from pathlib import Path

from scaffold.errors import BacklogError
from scaffold.fsutil import write_file


def replace_file(target: Path, data: bytes) -> os.stat_result:
    """Atomically replace an existing file, keeping its permission bits.

    Returns the new file's stat as it was written (taken before the rename, so it
    describes this content even if someone replaces the file again right after)."""
    try:
        return write_file(target, data, mode=target.stat().st_mode & 0o7777)
    except OSError as exc:
        raise BacklogError(target, f"cannot write: {exc.strerror or exc}") from exc


def create_file(target: Path, data: bytes) -> None:
    """Atomically create a new file; fail if the name is already taken."""
    try:
        write_file(target, data, exclusive=True)
    except FileExistsError as exc:
        raise BacklogError(target, "a file with this name already exists") from exc
    except OSError as exc:
        raise BacklogError(target, f"cannot write: {exc.strerror or exc}") from exc
