"""scaffold's saved copies of task worktrees' indexes, and the one edit made to them.

A fresh index from ``read-tree`` has no stat data, so ``git add -A`` would hash every file
at every hand-off; with the index the last commit left (:class:`SavedIndexes`) it hashes
only the files whose stat changed. But git compares ctime to the second only, and an agent
can restore a file's mtime and size: a file changed again within that second would look
unchanged. :func:`smudge_recent` closes the window as git does for its own "racily clean"
entries: an entry whose ctime is at or after a given second gets size 0, so git hashes it
again (sandboxed agents cannot set ctime back).

Format (``Documentation/gitformat-index.txt``), versions 2 and 3 only (4 compresses
paths): a 12-byte header ``DIRC``, version, entry count; entries (40 bytes of stat
with the size at 36, the object id, 2 bytes of flags, version 3's optional 2 more, the
path, NUL padding to a multiple of 8); extensions; a hash of everything before it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path

from scaffold.fsutil import write_file
from scaffold.ids import task_number

# Under the common git directory (read-only inside the sandbox, where only the
# worktree's admin folder is writable).
INDEX_CACHE = "scaffold-indexes"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

_SIZE_AT = 36  # the size field's offset in an entry
_EXTENDED = 0x4000  # flags bit: version 3's second flags word follows


def _entries(data: bytes, hash_len: int) -> list[int] | None:
    """The offset of every entry, or None for an index this cannot read (another
    version, a short or garbled file)."""
    if len(data) < 12 + hash_len or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3):
        return None
    body_end = len(data) - hash_len
    fixed = 40 + hash_len + 2
    starts: list[int] = []
    pos = 12
    for _ in range(count):
        if pos + fixed > body_end:
            return None
        flags = int.from_bytes(data[pos + fixed - 2 : pos + fixed], "big")
        head = fixed
        if flags & _EXTENDED:
            if version < 3:
                return None
            head += 2
        nul = data.find(b"\0", pos + head, body_end)
        if nul < 0:
            return None
        size = (nul - pos + 8) & ~7
        if pos + size > body_end:
            return None
        starts.append(pos)
        pos += size
    return starts


def smudge_recent(data: bytes, since_s: int, hash_len: int) -> bytes | None:
    """``data`` with the size of every entry whose ctime second is ``>= since_s`` set
    to 0, and its trailing checksum made anew; None for an index this cannot read
    (another version, a short or garbled file), which the caller must not use."""
    algo = {20: hashlib.sha1, 32: hashlib.sha256}.get(hash_len)
    if algo is None:
        return None
    walked = _entries(data, hash_len)
    body_end = len(data) - hash_len
    if walked is None or algo(data[:body_end]).digest() != data[body_end:]:
        return None
    buf = bytearray(data)
    for pos in walked:
        if int.from_bytes(buf[pos : pos + 4], "big") >= since_s:
            buf[pos + _SIZE_AT : pos + _SIZE_AT + 4] = bytes(4)
    buf[body_end:] = algo(bytes(buf[:body_end])).digest()
    return bytes(buf)


class SavedIndexes:
    """scaffold's copy of each task worktree's index, as its last commit left it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, task_id: str, tip: str) -> Path | None:
        if _SHA.fullmatch(tip) is None:
            return None
        # A plain name from a validated id and a hex sha; opened without following links.
        return self.folder / f"task-{task_number(task_id)}-{tip}.index"

    def load(self, task_id: str, tip: str, index: Path) -> bool:
        """Copy the saved index of ``tip`` (a regular file, never through a symlink) to
        ``index``; False when there is none."""
        saved = self._path(task_id, tip)
        if saved is None:
            return False
        try:
            fd = os.open(saved, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            with os.fdopen(fd, "rb") as src:
                if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                    return False
                data = src.read()
            with open(index, "xb") as dst:
                dst.write(data)
        except OSError:
            index.unlink(missing_ok=True)
            return False
        return True

    def save(self, task_id: str, tip: str, index: Path, since_s: int) -> None:
        """Keep ``index`` (of ``tip``'s tree; files read from ``since_s`` on) for the next
        commit, in place of the task's older ones. Best effort and not fsynced: without
        it the next commit only hashes every file again."""
        saved = self._path(task_id, tip)
        if saved is None:
            return
        self.forget(task_id)
        try:
            data = smudge_recent(index.read_bytes(), since_s, len(tip) // 2)
            if data is not None:
                saved.parent.mkdir(parents=True, exist_ok=True)
                write_file(saved, data, sync=False)
        except OSError:
            return

    def forget(self, task_id: str) -> None:
        prefix = f"task-{task_number(task_id)}-"
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        for name in names:
            if name.startswith(prefix) and name.endswith(".index"):
                with contextlib.suppress(OSError):
                    os.unlink(self.folder / name)
