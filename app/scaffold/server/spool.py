"""The journal of accepted deliveries, so that a crash loses none of them.

Accepted deliveries are appended to the current segment file before the server
answers 202, many at once: :meth:`Spool.write` puts a whole batch (and the done
marks buffered since the last batch) in one ``os.writev``, and the caller makes it
durable (fsync) before it confirms the batch and answers, or rolls it back
(truncating the segment) if that fails. When a delivery has been handled a done mark
is buffered and written with the next batch. A segment is deleted once it is full
and all its deliveries are done. On start, every delivery without a done mark is
handed back for handling (at-least-once).

Records::

    A <id> <event> <received_at> <length>\\n<length bytes of JSON>\\n
    D <id>\\n

A written batch is in the page cache: it survives the process being killed (kill -9)
even before its fsync; the fsync, where the caller does one, makes it survive a power
loss. A torn record at the end of a segment (only possible if the process or the
machine died mid-write) ends the reading of that segment. A lost done mark only
means the delivery is handled again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
from collections.abc import Sequence
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


@dataclass(frozen=True, slots=True)
class SpoolBatch:
    """A batch written to segment ``segment`` between ``start`` and ``end``, not yet confirmed."""

    fd: int
    segment: int
    start: int
    end: int
    refs: list[SpoolRef]
    marks: bytes


Record = tuple[str, str, float, bytes]  # id, event, received_at, the JSON bytes


class Spool:
    def __init__(self, directory: Path, *, segment_records: int = SEGMENT_RECORDS) -> None:
        self.directory = directory
        self.segment_records = segment_records
        self._fds: dict[int, int] = {}
        self._pending: dict[int, int] = {}
        self._where: dict[str, int] = {}
        self._marks: dict[int, list[bytes]] = {}
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
        """Write and confirm one record (no fsync): :meth:`write` and :meth:`confirm`."""
        batch = self.write([(delivery_id, event, received_at, raw)])
        self.confirm(batch)
        return batch.refs[0]

    def write(self, records: Sequence[Record]) -> SpoolBatch:
        """Append ``records`` and the buffered done marks of the current segment in one write.

        Nothing else may be written until the batch is confirmed or rolled back. Raises
        OSError (after undoing what it wrote) if the write fails.
        """
        self._write_sealed_marks()
        if records and (self._records >= self.segment_records or self._offset >= SEGMENT_BYTES):
            self._seal()
        number = self._current
        start = offset = self._offset
        marks = b"".join(self._marks.pop(number, ()))
        parts: list[bytes] = [marks] if marks else []
        offset += len(marks)
        refs: list[SpoolRef] = []
        for delivery_id, event, received_at, raw in records:
            head = f"A {delivery_id} {event} {received_at!r} {len(raw)}\n".encode()
            parts += (head, raw, b"\n")
            refs.append(
                SpoolRef(delivery_id, event, received_at, number, offset + len(head), len(raw))
            )
            offset += len(head) + len(raw) + 1
        batch = SpoolBatch(self._fds[number], number, start, offset, refs, marks)
        if parts:
            try:
                if os.writev(batch.fd, parts) != offset - start:
                    raise OSError(errno.EIO, "short write to the spool")
            except OSError:
                self.rollback(batch)
                raise
        return batch

    def confirm(self, batch: SpoolBatch) -> None:
        """The batch is durable: its deliveries are pending until done."""
        number = batch.segment
        if number == self._current:
            self._offset = batch.end
            self._records += len(batch.refs)
        self._pending[number] += len(batch.refs)
        for ref in batch.refs:
            self._where[ref.id] = number

    def rollback(self, batch: SpoolBatch) -> None:
        """Undo a batch that failed: cut the segment back, keep its done marks for later."""
        try:
            os.ftruncate(batch.fd, batch.start)
        except OSError:
            _log.exception("the spool could not be cut back after a failed write")
            # what was written may come back at the next start: handled at least once
            self._offset = batch.end
        if batch.marks:
            self._marks.setdefault(batch.segment, []).insert(0, batch.marks)

    @property
    def has_marks(self) -> bool:
        return bool(self._marks)

    def flush_marks(self) -> None:
        """Write the buffered done marks (no fsync: a lost mark means handling again)."""
        if self._marks:
            self.confirm(self.write(()))

    def read(self, ref: SpoolRef) -> bytes:
        return os.pread(self._fds[ref.segment], ref.length, ref.offset)

    def done(self, delivery_id: str) -> None:
        """Mark a delivery handled; the mark is written with the next batch or flush."""
        number = self._where.pop(delivery_id, None)
        if number is None:
            return
        self._pending[number] -= 1
        if number != self._current and self._pending[number] == 0:
            self._drop(number)
        else:
            self._marks.setdefault(number, []).append(f"D {delivery_id}\n".encode())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.flush_marks()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _write_sealed_marks(self) -> None:
        for number in [n for n in self._marks if n != self._current]:
            os.write(self._fds[number], b"".join(self._marks.pop(number)))

    def _seal(self) -> None:
        sealed = self._current
        self._start_segment(sealed + 1)
        if self._pending[sealed] == 0:
            self._drop(sealed)

    def _drop(self, number: int) -> None:
        self._marks.pop(number, None)
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
