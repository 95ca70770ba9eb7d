"""Durable file writes, one way for every writer (quest store, Backlog.md, inbox, caches),
and when a file's stat can be trusted to tell it changed."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from pathlib import Path

# A file written twice within one tick of the file system's clock (a few milliseconds on
# Linux) keeps its modification time, and maybe its size: a cache keyed on the stat does
# not keep what it read less than this after the file's last change (git calls such an
# entry "racily clean").
RACY_NS = 10_000_000


def racy(mtime_ns: int) -> bool:
    """Whether a file last changed at ``mtime_ns`` may still change unseen by its stat."""
    return time.time_ns() - mtime_ns < RACY_NS


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


def write_file(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    exclusive: bool = False,
    sync: bool = True,
) -> os.stat_result:
    """Write ``data`` as ``path``: a reader sees the old file or the new, never half of one.

    A fsynced temp file beside ``path`` is renamed over it (``exclusive``: linked, so an
    existing ``path`` raises FileExistsError). ``sync=False`` skips the fsyncs, for a cache
    that may be lost. Returns the stat of the content written (taken before the rename).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            if sync:
                os.fsync(fd)
            written = os.fstat(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):  # gone already after a rename
            os.unlink(tmp)
    if sync:
        fsync_dir(path.parent)
    return written


def leftover_temps(path: Path) -> list[Path]:
    """Temp files of :func:`write_file` for ``path`` that a killed process left behind."""
    return sorted(path.parent.glob(f".{path.name}.*.tmp"))
