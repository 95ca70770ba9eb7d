"""The delivery ids already accepted, kept across restarts.

An append-only log, one id per line, written with ``os.write`` and no fsync: a line
is in the kernel's page cache when ``add`` returns, so it survives the process
being killed (even ``kill -9``) but not a power loss or a kernel crash. The set
holds the newest ``limit`` ids; the file is rewritten with just those once it has
grown to twice that (a rare, short synchronous rewrite). In memory each id is kept
as a 64-bit BLAKE2b digest (about 70 bytes an id instead of 130; a false duplicate
among 200,000 ids has odds of about 1 in 10^9).
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from pathlib import Path

DEFAULT_LIMIT = 200_000


class SeenIds:
    def __init__(self, path: Path, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError("limit must be positive")
        self.path = path
        self.limit = limit
        self._order: deque[int] = deque()
        self._ids: set[int] = set()
        self._lines = 0
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
        if torn or self._lines > 2 * self.limit:
            self._rewrite()
        else:
            self._open()

    def __contains__(self, delivery_id: object) -> bool:
        return isinstance(delivery_id, str) and _key(delivery_id.encode()) in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, delivery_id: str) -> None:
        """Remember an id (the caller has validated it: no newline)."""
        raw = delivery_id.encode()
        key = _key(raw)
        if key in self._ids:
            return
        self._remember(key)
        os.write(self._fd, raw + b"\n")
        self._lines += 1
        if self._lines > 2 * self.limit:
            self._rewrite()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _remember(self, key: int) -> None:
        if key in self._ids:
            return
        self._ids.add(key)
        self._order.append(key)
        if len(self._order) > self.limit:
            self._ids.discard(self._order.popleft())

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
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(kept[k] + b"\n" for k in self._order if k in kept))
        os.replace(tmp, self.path)
        self._lines = len(self._order)
        self._open()


def _key(delivery_id: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(delivery_id, digest_size=8).digest(), "big")
