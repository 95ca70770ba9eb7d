"""The journal of accepted deliveries, so that a crash loses none of them.

Each accepted delivery is appended to the current segment file before the server
answers 202; when it has been handled a done mark is appended to the same segment.
A segment is deleted once it is full and all its deliveries are done. On start,
every delivery without a done mark is handed back for handling (at-least-once).

Records::

    A <id> <event> <received_at> <length>\\n<length bytes of JSON>\\n
    D <id>\\n

Writes are single ``os.write``/``os.writev`` calls without fsync: they survive the
process being killed, not a power loss. A torn record at the end of a segment (only
possible if the process died mid-write) ends the reading of that segment.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)
_SEGMENT = re.compile(r"^seg-(\d{10})\.log$")
SEGMENT_RECORDS = 1024
SEGMENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SpoolRef:
    """Where an accepted delivery's JSON lies in the spool."""

    id: str
    event: str
    received_at: float
    segment: int
    offset: int
    length: int


class Spool:
    def __init__(self, directory: Path, *, segment_records: int = SEGMENT_RECORDS) -> None:
        self.directory = directory
        self.segment_records = segment_records
        self._fds: dict[int, int] = {}
        self._pending: dict[int, int] = {}
        self._where: dict[str, int] = {}
        self._current = 0
        self._records = 0
        self._offset = 0

    @property
    def pending(self) -> int:
        return len(self._where)

    def open(self) -> list[SpoolRef]:
        """The deliveries left unhandled by earlier runs, oldest first; then start a segment."""
        self.directory.mkdir(parents=True, exist_ok=True)
        numbers = sorted(
            int(m.group(1)) for p in self.directory.iterdir() if (m := _SEGMENT.match(p.name))
        )
        left: list[SpoolRef] = []
        for number in numbers:
            refs = self._recover(number)
            if refs:
                self._fds[number] = self._open_fd(number)
                self._pending[number] = len(refs)
                for ref in refs:
                    self._where[ref.id] = number
                left.extend(refs)
            else:
                self._path(number).unlink()
        self._start_segment((numbers[-1] if numbers else 0) + 1)
        return left

    def append(self, delivery_id: str, event: str, received_at: float, raw: bytes) -> SpoolRef:
        if self._records >= self.segment_records or self._offset >= SEGMENT_BYTES:
            self._seal()
        head = f"A {delivery_id} {event} {received_at!r} {len(raw)}\n".encode()
        os.writev(self._fds[self._current], (head, raw, b"\n"))
        ref = SpoolRef(
            delivery_id, event, received_at, self._current, self._offset + len(head), len(raw)
        )
        self._offset += len(head) + len(raw) + 1
        self._records += 1
        self._pending[self._current] += 1
        self._where[delivery_id] = self._current
        return ref

    def read(self, ref: SpoolRef) -> bytes:
        return os.pread(self._fds[ref.segment], ref.length, ref.offset)

    def done(self, delivery_id: str) -> None:
        number = self._where.pop(delivery_id, None)
        if number is None:
            return
        mark = f"D {delivery_id}\n".encode()
        os.write(self._fds[number], mark)
        self._pending[number] -= 1
        if number == self._current:
            self._offset += len(mark)  # the file is O_APPEND: marks move its end too
        elif self._pending[number] == 0:
            self._drop(number)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _seal(self) -> None:
        sealed = self._current
        self._start_segment(sealed + 1)
        if self._pending[sealed] == 0:
            self._drop(sealed)

    def _drop(self, number: int) -> None:
        os.close(self._fds.pop(number))
        del self._pending[number]
        self._path(number).unlink(missing_ok=True)

    def _start_segment(self, number: int) -> None:
        self._current = number
        self._fds[number] = self._open_fd(number)
        self._pending[number] = 0
        self._records = 0
        self._offset = 0

    def _path(self, number: int) -> Path:
        return self.directory / f"seg-{number:010d}.log"

    def _open_fd(self, number: int) -> int:
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        return os.open(self._path(number), flags, 0o600)

    def _recover(self, number: int) -> list[SpoolRef]:
        path = self._path(number)
        data = path.read_bytes()
        accepted: dict[str, SpoolRef] = {}
        pos = 0
        while pos < len(data):
            end = data.find(b"\n", pos)
            if end < 0:
                break
            fields = data[pos:end].split(b" ")
            if fields[0] == b"D" and len(fields) == 2:
                accepted.pop(fields[1].decode(), None)
                pos = end + 1
                continue
            ref = _parse_accept(fields, number, end + 1)
            if ref is None or data[ref.offset + ref.length : ref.offset + ref.length + 1] != b"\n":
                _log.warning("spool segment %s ends with a torn record at byte %d", path, pos)
                break
            accepted[ref.id] = ref
            pos = ref.offset + ref.length + 1
        return list(accepted.values())


def _parse_accept(fields: list[bytes], segment: int, offset: int) -> SpoolRef | None:
    if len(fields) != 5 or fields[0] != b"A":
        return None
    try:
        return SpoolRef(
            id=fields[1].decode(),
            event=fields[2].decode(),
            received_at=float(fields[3]),
            segment=segment,
            offset=offset,
            length=int(fields[4]),
        )
    except (UnicodeDecodeError, ValueError):
        return None
