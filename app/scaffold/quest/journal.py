"""A quest's files on disk: the snapshot ``quest.json`` and the journal ``journal.jsonl``.

The reading side of :mod:`scaffold.quest.store` (which says why the files have this
shape), and the byte-level helpers its writer appends with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

from pydantic import ValidationError

from scaffold.errors import StoreError
from scaffold.quest.model import HistoryEntry, Quest

SNAPSHOT_NAME = "quest.json"
JOURNAL_NAME = "journal.jsonl"
SNAPSHOT_FORMAT = 1

# --------------------------------------------------------------------------- files


def dumps(obj: Any, indent: int | None = None) -> bytes:
    seps = (",", ": ") if indent else (",", ":")
    try:
        return json.dumps(obj, ensure_ascii=False, indent=indent, separators=seps).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (e.g. undecodable agent output) is not UTF-8: escape it
        # as \udcxx, which json.loads turns back into the same string.
        return json.dumps(obj, ensure_ascii=True, indent=indent, separators=seps).encode("ascii")


# fdatasync flushes the data and the size (what an append needs) but not mtime.
sync = getattr(os, "fdatasync", os.fsync)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# ------------------------------------------------------------------------ records


@dataclass(frozen=True)
class Snapshot:
    seq: int
    offset: int
    lines: int
    quest: dict[str, Any]


@dataclass(frozen=True)
class Line:
    lineno: int  # 1-based line number in the journal
    end: int  # byte offset just after this line's newline
    record: dict[str, Any]


@dataclass(frozen=True)
class Loaded:
    quest: Quest
    end: int  # offset after the last complete line
    lines: int  # number of complete lines
    tail: int  # lines replayed after the snapshot
    size: int  # journal size on disk (> end: a torn last line)


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_record(raw: bytes) -> dict[str, Any] | None:
    """The journal record on one line, or None when the line is not one."""
    try:
        rec = json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    if not isinstance(rec, dict):
        return None
    if not is_int(rec.get("seq")) or not isinstance(rec.get("entries"), list):
        return None
    if not isinstance(rec.get("quest", {}), dict) or not isinstance(rec.get("tasks", {}), dict):
        return None
    order = rec.get("order")
    if order is not None and not (
        isinstance(order, list) and all(isinstance(k, str) for k in order)
    ):
        return None
    return rec


def read_snapshot(path: Path) -> Snapshot:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise StoreError(path, "no such quest (snapshot missing)") from None
    except OSError as exc:
        raise StoreError(path, f"cannot read snapshot: {exc}") from exc
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise StoreError(path, f"snapshot is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != SNAPSHOT_FORMAT:
        raise StoreError(path, f"not a quest snapshot of format {SNAPSHOT_FORMAT}")
    seq, offset, lines, quest = (
        doc.get(k) for k in ("seq", "journal_offset", "journal_lines", "quest")
    )
    if not (is_int(seq) and is_int(offset) and is_int(lines) and isinstance(quest, dict)):
        raise StoreError(path, "snapshot lacks seq, journal_offset, journal_lines or quest")
    if offset < 0 or lines < 0 or quest.get("seq") != seq:
        raise StoreError(path, "snapshot header disagrees with the quest it holds")
    return Snapshot(seq=seq, offset=offset, lines=lines, quest=quest)


def scan(path: Path, f: BinaryIO, offset: int, lineno: int) -> Iterator[Line]:
    """Complete journal lines from ``offset``; stops quietly before a torn last line.

    A line without its newline can only be the last one (an interrupted append);
    an unparsable line is torn when nothing follows it and corrupt otherwise.
    """
    f.seek(offset)
    pending = f.readline()
    while pending:
        raw = pending
        pending = f.readline()  # one line of lookahead: is `raw` the last line?
        lineno += 1
        if not raw.endswith(b"\n"):
            return
        record = parse_record(raw)
        if record is None:
            if not pending:
                return
            raise StoreError(path, f"line {lineno}: corrupt journal record (not a torn tail)")
        offset += len(raw)
        yield Line(lineno=lineno, end=offset, record=record)


def line_ending_at(f: BinaryIO, end: int) -> bytes:
    """The journal line whose newline is the byte before ``end`` (read backwards)."""
    chunk = 4096
    buf = b""
    pos = end
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        buf = f.read(pos - start) + buf
        pos = start
        cut = buf.rfind(b"\n", 0, len(buf) - 1)
        if cut >= 0:
            return buf[cut + 1 :]
        chunk *= 2
    return buf


def apply_line(path: Path, state: dict[str, Any], line: Line, seq: int) -> int:
    """Fold one journal record into the JSON form of the quest; return the new seq."""
    rec = line.record
    entries = rec["entries"]
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or entry.get("seq") != seq + i:
            raise StoreError(
                path, f"line {line.lineno}: history entry {i} should have seq {seq + i}"
            )
    new_seq = seq + len(entries)
    if rec["seq"] != new_seq:
        raise StoreError(path, f"line {line.lineno}: seq {rec['seq']} should be {new_seq}")
    fields = rec.get("quest")
    if fields:
        state.update(fields)
    tasks: dict[str, Any] = state.setdefault("tasks", {})
    changed = rec.get("tasks")
    if changed:
        tasks.update(changed)
    order = rec.get("order")
    if order is not None:
        try:
            state["tasks"] = {task_id: tasks[task_id] for task_id in order}
        except KeyError as exc:
            raise StoreError(path, f"line {line.lineno}: order names unknown task {exc}") from None
    state["seq"] = new_seq
    return new_seq


def load(qdir: Path) -> Loaded:
    """Snapshot + replay of the complete journal lines after it."""
    snap_path = qdir / SNAPSHOT_NAME
    journal = qdir / JOURNAL_NAME
    snap = read_snapshot(snap_path)
    try:
        f = journal.open("rb")
    except FileNotFoundError:
        raise StoreError(journal, "journal missing (the snapshot exists)") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if snap.offset > size:
            raise StoreError(
                snap_path,
                f"snapshot is ahead of the journal (seq {snap.seq} at byte {snap.offset}, "
                f"journal has {size} bytes): files changed outside the store",
            )
        if snap.offset > 0:
            anchor = line_ending_at(f, snap.offset)
            rec = parse_record(anchor) if anchor.endswith(b"\n") else None
            if rec is None or rec["seq"] != snap.seq:
                raise StoreError(
                    snap_path,
                    f"snapshot (seq {snap.seq}) does not match journal line {snap.lines}: "
                    "files changed outside the store",
                )
        state = snap.quest
        seq, end, lines, tail = snap.seq, snap.offset, snap.lines, 0
        for line in scan(journal, f, snap.offset, snap.lines):
            seq = apply_line(journal, state, line, seq)
            end, lines, tail = line.end, line.lineno, tail + 1
    try:
        quest = Quest.model_validate(state)
    except ValidationError as exc:
        raise StoreError(journal, f"replayed quest is invalid: {exc}") from exc
    return Loaded(quest=quest, end=end, lines=lines, tail=tail, size=size)


def history_entries(
    journal: Path, since_seq: int, offset: int, lineno: int
) -> Iterator[HistoryEntry]:
    with journal.open("rb") as f:
        for line in scan(journal, f, offset, lineno):
            for raw in line.record["entries"]:
                if isinstance(raw, dict) and is_int(raw.get("seq")) and raw["seq"] <= since_seq:
                    continue
                try:
                    yield HistoryEntry.model_validate(raw)
                except ValidationError as exc:
                    raise StoreError(
                        journal, f"line {line.lineno}: bad history entry: {exc}"
                    ) from exc
