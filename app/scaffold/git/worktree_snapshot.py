"""What a task's worktree looked like when scaffold last committed it, to tell without
running git that nothing in it has changed since.

Most hand-offs between two agents of a task commit nothing: a reviewer or a tester that
only reads leaves every file as it was. Proving that with git takes two processes (the
worktree check and ``add -A``), each some 10 to 15 ms on a loaded machine, on the path
between one agent's exit and the next agent's start. This module proves it with one walk
of the worktree instead: the ``lstat`` of every file and folder, compared with the walk
made just before the last commit read the files.

Why an equal walk means equal files: every change to a file or a folder (its bytes,
mode, name, links, a new or removed entry) sets its ``ctime`` to the clock's time, and
nobody but the kernel sets a ``ctime``: ``utime`` moves ``mtime`` back, never ``ctime``,
and an agent cannot set the system clock. So a change after the walk gives a ``ctime``
other than the recorded one, provided the recorded one is from an earlier clock tick
than the walk. A walk is therefore trusted only when every ``ctime`` in it is older
than the coarse clock (the one file times are taken from) read before the walk began,
rounded down to the file system's time granularity, as far as the times themselves tell
it (a file system that keeps whole seconds rounds them all). A walk with an entry of
that very tick, too many entries, or anything it cannot read is not kept, and the next
commit asks git, as it always did.

Linux only (the coarse realtime clock); elsewhere nothing is kept.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_ENTRIES", "WorktreeSnapshot", "coarse_clock_ns", "scan", "take"]

# Beyond this many files and folders the walk costs about what ``add -A`` does.
MAX_ENTRIES = 10_000
# CLOCK_REALTIME_COARSE: the clock Linux stamps file times with (<linux/time.h>).
_CLOCK_REALTIME_COARSE = 5
# Granularities a file system may keep times at, coarsest first (FAT keeps 2 s).
_GRANULARITIES = (2_000_000_000, 1_000_000_000, 1_000_000, 1_000, 100, 1)

# (st_dev, st_ino, st_mode, st_nlink, st_size, st_mtime_ns, st_ctime_ns)
Stat = tuple[int, int, int, int, int, int, int]


@dataclass(frozen=True)
class WorktreeSnapshot:
    """A worktree's entries (path relative to it -> its lstat), the lstat of some files
    outside it (``extras``: git's pointers to the repository; None for a missing one),
    and the commit the branch was left at once those files were committed."""

    root: Path
    entries: dict[str, Stat]
    extras: dict[Path, Stat | None]
    tip: str = ""

    def unchanged(self) -> bool:
        """True when a walk of the worktree now finds exactly the same entries, and the
        extra files are as they were."""
        return (
            _stat_files(self.extras) == self.extras
            and scan(self.root, len(self.entries)) == self.entries
        )


def coarse_clock_ns() -> int | None:
    """The clock file times are stamped from, or None where that is not known."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return time.clock_gettime_ns(_CLOCK_REALTIME_COARSE)
    except OSError:
        return None


def _stat_of(st: os.stat_result) -> Stat:
    return (
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_nlink,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )


def _stat_files(paths: Iterable[Path]) -> dict[Path, Stat | None] | None:
    """The lstat of each path (None for a missing one); None if one cannot be read."""
    found: dict[Path, Stat | None] = {}
    for path in paths:
        try:
            found[path] = _stat_of(os.lstat(path))
        except FileNotFoundError:
            found[path] = None
        except OSError:
            return None
    return found


def scan(root: Path, limit: int = MAX_ENTRIES) -> dict[str, Stat] | None:
    """Every file and folder under ``root`` (the root itself as ""), never following a
    symlink; the ``.git`` pointer at the top is listed but not entered. None when
    something cannot be read or there are more than ``limit`` entries."""
    entries: dict[str, Stat] = {}
    try:
        entries[""] = _stat_of(os.lstat(root))
    except OSError:
        return None
    if not stat.S_ISDIR(entries[""][2]):
        return None
    folders: list[tuple[str, str]] = [("", os.fspath(root))]
    while folders:
        prefix, folder = folders.pop()
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    key = prefix + entry.name
                    info = _stat_of(entry.stat(follow_symlinks=False))
                    entries[key] = info
                    if len(entries) > limit:
                        return None
                    if stat.S_ISDIR(info[2]) and key != ".git":
                        folders.append((key + "/", entry.path))
        except OSError:
            return None
    return entries


def _granularity(ctimes: Iterable[int]) -> int:
    """The coarsest time step every ``ctime`` is a multiple of (an upper bound of the
    file system's granularity: a finer one would show in some time)."""
    candidates = list(_GRANULARITIES)
    for ctime in ctimes:
        while len(candidates) > 1 and ctime % candidates[0]:
            candidates.pop(0)
        if len(candidates) == 1:
            break
    return candidates[0]


def take(root: Path, extras: Iterable[Path] = ()) -> WorktreeSnapshot | None:
    """A walk of ``root`` (and the lstat of ``extras``) to keep, or None when it could
    not be trusted later.

    Call it before the files are read for the commit: what changes meanwhile is then
    either in the walk and the commit alike, or newer than the walk (and so noticed).
    The commit's ``tip`` is filled in afterwards (:func:`dataclasses.replace`)."""
    now = coarse_clock_ns()
    if now is None:
        return None
    extra = _stat_files(extras)
    entries = scan(root)
    if entries is None or extra is None:
        return None
    ctimes = [info[6] for info in (*entries.values(), *extra.values()) if info is not None]
    step = _granularity(ctimes)
    bound = now - now % step
    if any(ctime >= bound for ctime in ctimes):
        return None  # changed within the current clock tick: a later change may match it
    return WorktreeSnapshot(root, entries, extra)
