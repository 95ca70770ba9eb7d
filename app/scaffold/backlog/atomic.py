"""Atomic file writes for task files.

Agents, the Backlog.md CLI and people all read these files while scaffold
writes them; a reader must see the old or the new content, never half of it.
The new content goes to a hidden temp file in the same folder (so the tool's
``task-*.md`` scan never sees it), is fsynced, then renamed over the target.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from scaffold.errors import BacklogError
from scaffold.fsutil import fsync_dir


def _temp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _write_temp(target: Path, data: bytes, mode: int | None) -> Path:
    tmp = _temp_path(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def replace_file(target: Path, data: bytes) -> os.stat_result:
    """Atomically replace an existing file, keeping its permission bits.

    Returns the new file's stat as it was written (taken before the rename, so it
    describes this content even if someone replaces the file again right after)."""
    try:
        mode = target.stat().st_mode & 0o7777
        tmp = _write_temp(target, data, mode)
        written = os.stat(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise BacklogError(target, f"cannot write: {exc.strerror or exc}") from exc
    fsync_dir(target.parent)
    return written


def create_file(target: Path, data: bytes) -> None:
    """Atomically create a new file; fail if the name is already taken."""
    try:
        tmp = _write_temp(target, data, None)
    except OSError as exc:
        raise BacklogError(target, f"cannot write: {exc.strerror or exc}") from exc
    try:
        os.link(tmp, target)
    except FileExistsError as exc:
        raise BacklogError(target, "a file with this name already exists") from exc
    except OSError as exc:
        raise BacklogError(target, f"cannot create: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    fsync_dir(target.parent)
