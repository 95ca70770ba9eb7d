"""The delivery ids already accepted, kept across restarts.

An append-only log, one id per line. Ids are written many at once: :meth:`SeenIds.write`
appends a batch in one ``os.write``, the caller makes it durable (fsync) and then
:meth:`SeenIds.confirm` remembers the ids, or :meth:`SeenIds.rollback` cuts the log
back. A written line is in the kernel's page cache, so it survives the process being
killed (even ``kill -9``); the fsync makes it survive a power loss too. The set holds
the newest ``limit`` ids; the file is rewritten with just those once it has grown to
twice that (a rare, short synchronous rewrite).

In memory each id is a 64-bit BLAKE2b digest (a false duplicate among 200,000 ids has
odds of about 1 in 10^9) kept in two flat arrays: an open-addressing hash table and
a ring of the ids in the order they came, about 24 bytes an id where a ``set`` and a
``deque`` of ints take about 90.
"""

from __future__ import annotations

import hashlib
import logging
import os
from array import array
from collections.abc import Sequence
from pathlib import Path

DEFAULT_LIMIT = 200_000
_log = logging.getLogger(__name__)


class KeySet:
    """A set of 64-bit keys (digests: already uniform) in a linear-probing table.

    Zero marks an empty slot, so a key of zero is stored as one.
    """

    def __init__(self) -> None:
        self._table = array("Q", [0]) * 16
        self._mask = 15
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def _probe(self, key: int) -> int:
        """The slot holding ``key`` (already made non-zero), or the empty slot ending
        its run, where it would go."""
        table, mask = self._table, self._mask
        i = key & mask
        while True:
            slot = table[i]
            if slot in (key, 0):
                return i
            i = (i + 1) & mask

    def __contains__(self, key: int) -> bool:
        key = key or 1
        return self._table[self._probe(key)] == key

    def add(self, key: int) -> bool:
        """Add ``key``; False if it was there already."""
        key = key or 1
        i = self._probe(key)
        if self._table[i] == key:
            return False
        self._table[i] = key
        self._len += 1
        if 3 * self._len > 2 * (self._mask + 1):
            self._grow()
        return True

    def discard(self, key: int) -> None:
        key = key or 1
        i = self._probe(key)
        table, mask = self._table, self._mask
        if table[i] == 0:
            return
        self._len -= 1
        # Backward-shift deletion: move up any later key of the run that may fill the hole.
        j = i
        while True:
            j = (j + 1) & mask
            slot = table[j]
            if slot == 0:
                break
            home = slot & mask
            if (j - home) & mask >= (j - i) & mask:
                table[i] = slot
                i = j
        table[i] = 0

    def _grow(self) -> None:
        old = self._table
        size = 2 * len(old)
        self._table = array("Q", [0]) * size  # no temporary bytes of the same size
        self._mask = size - 1
        self._len = 0
        for key in old:
            if key:
                self.add(key)


class SeenIds:
    def __init__(self, path: Path, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError("limit must be positive")
        self.path = path
        self.limit = limit
        self._ids = KeySet()
        self._ring = array("Q")  # the keys in order, oldest at _head once it is full
        self._head = 0
        self._lines = 0
        self._size = 0
        self._fd = -1

    def load(self) -> None:
        """Read the log (keeping the newest ``limit`` ids) and open it for appending."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        lines = data.split(b"\n")
        torn = lines.pop() != b""  # the text after the last newline: empty unless torn
        for line in lines:
            if line:
                self._remember(_key(line))
        self._lines = len(lines)
        self._size = len(data)
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
            self._remember(_key(delivery_id.encode()))
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

    def _remember(self, key: int) -> None:
        if not self._ids.add(key):
            return
        ring = self._ring
        if len(ring) < self.limit:
            ring.append(key)
            return
        self._ids.discard(ring[self._head])
        ring[self._head] = key
        self._head = (self._head + 1) % self.limit

    def _order(self) -> list[int]:
        return list(self._ring[self._head :]) + list(self._ring[: self._head])

    def _open(self) -> None:
        self.close()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _rewrite(self) -> None:
        """Keep in the file just the ids still remembered (newest occurrence of each)."""
        try:
            lines = self.path.read_bytes().split(b"\n")
        except FileNotFoundError:
            lines = []
        kept: dict[int, bytes] = {}
        for line in reversed(lines):
            key = _key(line) if line else None
            if key is not None and key in self._ids and key not in kept:
                kept[key] = line
        data = b"".join(kept[k] + b"\n" for k in self._order() if k in kept)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)
        self._lines = len(self._ring)
        self._size = len(data)
        self._open()


def _key(delivery_id: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(delivery_id, digest_size=8).digest(), "big")
