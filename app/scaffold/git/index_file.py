"""Git's index file, just enough of it to make recent entries be hashed again.

scaffold keeps a copy of each task worktree's index between two commits (see
``Workspace.commit_all``), so that ``git add -A`` hashes only the files whose stat
changed. git trusts an entry whose stat (ctime, mtime, size, inode, ...) is unchanged.
This git compares ctime to the second only, and an agent can restore a file's mtime and
keep its size: a file changed again within the same second as its last change would
then look unchanged. :func:`smudge_recent` closes that window the way git handles its
own "racily clean" entries: every entry whose ctime falls at or after a given second
gets size 0, so git reads and hashes that file again. ctime itself cannot be set back
without the system clock, which sandboxed agents cannot touch.

Format (``Documentation/gitformat-index.txt``): a 12-byte header ``DIRC``, version,
entry count; then the entries (ctime, mtime, dev, ino, mode, uid, gid, size: 40
bytes, the object id, 2 bytes of flags, version 3's optional 2 more, the path, NUL
padding to a multiple of 8); then extensions; then a hash of everything before it.
Versions 2 and 3 only (version 4 compresses paths, and scaffold writes its own
indexes as version 2 or 3).
"""

from __future__ import annotations

import hashlib

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
