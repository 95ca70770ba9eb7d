"""The delivery ids already accepted, kept across restarts.

An append-only log, one id per line. Ids are written many at once: :meth:`SeenIds.write`
appends a batch in one ``os.write``, the caller makes it durable (fsync) and then
:meth:`SeenIds.confirm` remembers the ids, or :meth:`SeenIds.rollback` cuts the log
back. A written line is in the kernel's page cache, so it survives the process being
killed (even ``kill -9``); the fsync makes it survive a power loss too. The set holds
the newest ``limit`` ids; the file is rewritten with just those once it has grown to
twice that (a rare, short synchronous rewrite). Loading and rewriting read the file a
line at a time, so neither holds it in memory.

In memory each id is a 64-bit BLAKE2b digest (a false duplicate among 200,000 ids has
odds of about 1 in 10^9) kept in a ring, in the order the ids came, and found through
an open-addressing index of ring positions: 8 bytes an id, plus 5.3 to 8 bytes of index
(grown when 3/4 full to 1/2 full; 5.3 once ``limit`` ids are held), where a ``set`` and
a ``deque`` of ints take about 90. Both are anonymous memory maps, whose pages cost
memory only once written: the ring, mapped for ``limit`` ids at once, costs what it
holds, and the index grows by being unmapped and then rebuilt from the ring, so an old
and a new index never coexist.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from scaffold.fsutil import fsync_dir

DEFAULT_LIMIT = 200_000
MIN_SLOTS = 16
_log = logging.getLogger(__name__)


def _zeros(count: int, typecode: Literal["I", "Q"]) -> tuple[mmap.mmap, memoryview[int]]:
    """``count`` zeroed unsigned integers in a private anonymous map (untouched pages are free)."""
    mapped = mmap.mmap(-1, count * (8 if typecode == "Q" else 4), flags=mmap.MAP_PRIVATE)
    return mapped, memoryview(mapped).cast(typecode)


class KeyRing:
    """The newest ``capacity`` distinct 64-bit keys (digests: already uniform), oldest first.

    The ring holds the keys; the index is a linear-probing table of ring positions plus
    one (zero marks an empty slot) with the key modulo its size as home slot.
    """

    def __init__(self, capacity: int) -> None:
        if not 1 <= capacity < 2**32:
            raise ValueError("capacity must be from 1 to 2**32 - 1")
        self.capacity = capacity
        self._ring_map, self._ring = _zeros(capacity, "Q")
        self._len = 0
        self._head = 0  # the oldest key's position once the ring is full
        self._max_slots = capacity * 4 // 3 + 1  # under 3/4 full with the ring full
        self._index_map, self._index = _zeros(MIN_SLOTS, "I")
        self._slots = MIN_SLOTS

    def __len__(self) -> int:
        return self._len

    def __contains__(self, key: int) -> bool:
        return self._index[self._find(key)] != 0

    def position(self, key: int) -> int:
        """Where ``key`` is in the ring, or -1."""
        return self._index[self._find(key)] - 1

    def __iter__(self) -> Iterator[int]:
        """The keys, oldest first."""
        ring, head, size = self._ring, self._head, self._len
        for i in range(size):
            yield ring[(head + i) % size]

    def add(self, key: int) -> bool:
        """Add ``key``, dropping the oldest key if the ring is full; False if it was there."""
        slot = self._find(key)
        if self._index[slot]:
            return False
        pos = self._len
        if pos < self.capacity:
            self._ring[pos] = key
            self._len += 1
            if 4 * self._len > 3 * self._slots:
                self._reindex(min(2 * self._len, self._max_slots))
            else:
                self._index[slot] = pos + 1
            return True
        pos = self._head
        self._head = (pos + 1) % self.capacity
        self._unlink(pos)
        self._ring[pos] = key
        self._index[self._find(key)] = pos + 1  # the unlink may have moved its slot
        return True

    def _find(self, key: int) -> int:
        """The index slot of ``key``, or the empty slot ending its run, where it would go."""
        index, ring, slots = self._index, self._ring, self._slots
        i = key % slots
        while True:
            pos = index[i]
            if pos == 0 or ring[pos - 1] == key:
                return i
            i += 1
            if i == slots:
                i = 0

    def _unlink(self, pos: int) -> None:
        """Remove ring position ``pos`` from the index (backward-shift deletion: move up any
        later entry of the run that may fill the hole)."""
        index, ring, slots = self._index, self._ring, self._slots
        i = ring[pos] % slots
        while index[i] != pos + 1:
            i += 1
            if i == slots:
                i = 0
        j = i
        while True:
            j += 1
            if j == slots:
                j = 0
            entry = index[j]
            if entry == 0:
                break
            home = ring[entry - 1] % slots
            if (j - home) % slots >= (j - i) % slots:
                index[i] = entry
                i = j
        index[i] = 0

    def _reindex(self, slots: int) -> None:
        """Unmap the index, then map one of ``slots`` slots and enter every ring position."""
        self._index.release()
        self._index_map.close()
        self._index_map, self._index = _zeros(slots, "I")
        self._slots = slots
        index, ring = self._index, self._ring
        for pos in range(self._len):
            i = ring[pos] % slots
            while index[i]:
                i += 1
                if i == slots:
                    i = 0
            index[i] = pos + 1


class SeenIds:
    def __init__(self, path: Path, limit: int = DEFAULT_LIMIT) -> None:
        if not 1 <= limit < 2**32:
            raise ValueError("limit must be from 1 to 2**32 - 1")
        self.path = path
        self.limit = limit
        self._ids = KeyRing(limit)
        self._lines = 0
        self._size = 0
        self._fd = -1

    def load(self) -> None:
        """Read the log (keeping the newest ``limit`` ids) and open it for appending."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torn = False
        try:
            with self.path.open("rb") as f:
                for line in f:
                    self._size += len(line)
                    if not line.endswith(b"\n"):  # the last line, cut short by a crash
                        torn = True
                        break
                    self._lines += 1
                    if len(line) > 1:
                        self._ids.add(_key(line[:-1]))
        except FileNotFoundError:
            pass
        if torn or self._lines > 2 * self.limit:
            self._rewrite()
        else:
            self._open()

    def __contains__(self, delivery_id: object) -> bool:
        return isinstance(delivery_id, str) and _key(delivery_id.encode()) in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, delivery_id: str) -> None:
        """Remember an id (the caller has validated it: no newline); written, not fsynced."""
        if delivery_id not in self:
            self.confirm([delivery_id], self.write([delivery_id]))

    def write(self, delivery_ids: Sequence[str]) -> int:
        """Append the ids in one write; the log's length before it (for :meth:`rollback`).

        Raises OSError (after cutting the log back) if the write fails.
        """
        start = self._size
        if not delivery_ids:
            return start
        data = "\n".join(delivery_ids).encode() + b"\n"
        try:
            if os.write(self._fd, data) != len(data):
                raise OSError(5, "short write to the delivery-id log")
        except OSError:
            self.rollback(start)
            raise
        self._size += len(data)
        return start

    def confirm(self, delivery_ids: Sequence[str], start: int) -> None:
        """The ids written from ``start`` are durable: remember them."""
        del start
        for delivery_id in delivery_ids:
            self._ids.add(_key(delivery_id.encode()))
        self._lines += len(delivery_ids)
        if self._lines > 2 * self.limit:
            self._rewrite()

    def rollback(self, start: int) -> None:
        """Cut the log back to ``start`` after a write or its fsync failed."""
        try:
            os.ftruncate(self._fd, start)
            self._size = start
        except OSError:
            _log.exception("the delivery-id log could not be cut back after a failed write")

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _open(self) -> None:
        self.close()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _rewrite(self) -> None:
        """Keep in the file just the ids still remembered, in the order they came.

        The remembered ids' lines are in the log in that order, so one pass that takes
        each next one as it comes finds them all; if one is missing (the file was
        changed under us), a second pass takes the newest line of each id instead.
        """
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("wb") as out:
            keys = iter(self._ids)
            want = next(keys, None)
            kept = 0
            for line in self._complete_lines() if want is not None else ():
                if _key(line[:-1]) == want:
                    out.write(line)
                    kept += 1
                    want = next(keys, None)
                    if want is None:
                        break
            if want is not None:
                _log.warning("the delivery-id log lacks remembered ids; keeping the newest lines")
                out.seek(0)
                out.truncate()
                kept = self._write_newest(out)
            size = out.tell()
            # Durable before it replaces the log: a power loss must leave one whole log.
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self._lines = kept
        self._size = size
        self._open()

    def _write_newest(self, out: BinaryIO) -> int:
        """Write the newest line of each remembered id, in the file's order; how many."""
        ids = self._ids
        newest_map, newest = _zeros(ids.capacity, "Q")  # by ring position: its line's number
        try:
            for number, line in enumerate(self._complete_lines(), 1):
                pos = ids.position(_key(line[:-1]))
                if pos >= 0:
                    newest[pos] = number
            kept = 0
            for number, line in enumerate(self._complete_lines(), 1):
                pos = ids.position(_key(line[:-1]))
                if pos >= 0 and newest[pos] == number:
                    out.write(line)
                    kept += 1
            return kept
        finally:
            newest.release()
            newest_map.close()

    def _complete_lines(self) -> Iterator[bytes]:
        """The log's non-empty lines that end in a newline."""
        try:
            with self.path.open("rb") as f:
                for line in f:
                    if len(line) > 1 and line.endswith(b"\n"):
                        yield line
        except FileNotFoundError:
            return


def _key(delivery_id: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(delivery_id, digest_size=8).digest(), "big")
