"""The durable quest store: a snapshot plus an append-only journal per quest.

Layout, under a root the caller chooses (``<repo>/.scaffold/quests`` by default)::

    <root>/<quest-id>/quest.json     snapshot: the Quest at some seq, no history
    <root>/<quest-id>/journal.jsonl  one JSON line per committed transition
    <root>/<quest-id>/writer.lock    flock'ed by the one writer; holds its pid

The quest must survive ``kill -9`` at any instant and may run for days, so a commit
costs the same with 10 or 100,000 history entries (``bench/bench_store.py``):

* **A commit appends one line** to ``journal.jsonl`` (one ``os.write`` on an
  ``O_APPEND`` descriptor, then ``fdatasync``): its HistoryEntry records, seq numbers
  assigned here, and a patch of the Quest fields and TaskRecords that changed (the
  models are frozen, so an untouched task is the same object in the old and new quest).

* **Every ``snapshot_every`` commits**, and when a writer closes, ``quest.json`` is
  rewritten atomically with the ``seq`` it folds in and the journal offset and line
  count right after it: loading replays only the journal's tail after that offset.

* **Crash recovery needs no special path.** The journal is fsync'ed before any
  snapshot that points into it. The only damage a crash can leave is a torn *last*
  line (never acknowledged): readers ignore it, a writer truncates it when it opens. A
  bad line anywhere else, or a snapshot that disagrees with the journal, means the
  files were changed behind the store's back: a :class:`StoreError` naming the file
  and line, never a record skipped silently.

* **One writer, many readers.** ``open_writer`` takes ``flock(LOCK_EX|LOCK_NB)`` on
  ``writer.lock`` and writes its pid there (a second writer gets :class:`StoreLocked`);
  the kernel drops the lock when the process dies. ``read`` takes no lock: snapshot +
  complete tail lines is always a state some commit produced. Within a process,
  commits are serialized by a ``threading.Lock``.

``quest.json`` alone may lag ``snapshot_every`` commits: read quests through this store.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from pydantic_core import PydanticSerializationError

from scaffold.errors import InvalidIdError, StoreError, StoreLocked
from scaffold.fsutil import fsync_dir, leftover_temps, write_file
from scaffold.ids import validate_quest_id
from scaffold.quest.journal import (
    JOURNAL_NAME,
    SNAPSHOT_FORMAT,
    SNAPSHOT_NAME,
    dumps,
    history_entries,
    load,
    read_snapshot,
    sync,
    write_all,
)
from scaffold.quest.model import HistoryEntry, Quest, utcnow

__all__ = [
    "JOURNAL_NAME",
    "LOCK_NAME",
    "SNAPSHOT_NAME",
    "QuestStore",
    "QuestWriter",
    "draft",
]

LOCK_NAME = "writer.lock"

# Top-level Quest fields diffed with `is` then `==`; tasks are diffed per record
# and seq is owned by the store.
_QUEST_FIELDS = tuple(name for name in Quest.model_fields if name not in ("tasks", "seq"))

_log = logging.getLogger(__name__)


def draft(
    kind: Literal["transition", "quest", "note"],
    event: str,
    *,
    task_id: str | None = None,
    detail: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> HistoryEntry:
    """A HistoryEntry to pass to :meth:`QuestWriter.commit`; its seq (0) is replaced there."""
    return HistoryEntry(
        seq=0, at=at or utcnow(), kind=kind, task_id=task_id, event=event, detail=detail or {}
    )


# ------------------------------------------------------------------------- writer


def _acquire_lock(qdir: Path) -> int:
    path = qdir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(path, f"cannot open the writer lock: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raw = os.pread(fd, 32, 0).strip()
        os.close(fd)
        holder = int(raw) if raw.isdigit() else None
        raise StoreLocked(path, holder) from None
    except OSError as exc:
        os.close(fd)
        raise StoreError(path, f"cannot lock: {exc}") from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class QuestWriter:
    """The one writer of a quest: holds the lock, commits transitions. A context manager."""

    def __init__(
        self,
        store: QuestStore,
        qdir: Path,
        quest: Quest,
        fds: Sequence[int],
        *,
        offset: int = 0,
        lines: int = 0,
        since_snapshot: int = 0,
    ) -> None:
        # Built by QuestStore.create / open_writer: ``fds`` are the lock's and the journal's.
        self.path = qdir
        self._journal = qdir / JOURNAL_NAME
        self._quest = quest
        self._lock_fd, self._journal_fd = fds
        self._offset = offset
        self._lines = lines
        self._since_snapshot = since_snapshot
        self._store = store
        self._mutex = threading.Lock()
        self._closed = False
        self._broken: str | None = None
        self._observers: list[Callable[[Quest, Sequence[HistoryEntry]], None]] = []

    @property
    def quest(self) -> Quest:
        """The current state: the last committed quest."""
        return self._quest

    def observe(self, fn: Callable[[Quest, Sequence[HistoryEntry]], None]) -> None:
        """Call ``fn(quest, entries)`` after every commit (under the commit lock; keep it
        quick): the entries carry their seq. The state branch's publisher listens here."""
        self._observers.append(fn)

    def commit(self, new: Quest, entries: Sequence[HistoryEntry] = ()) -> Quest:
        """Persist ``new`` with ``entries`` (their seq is assigned here); return ``new`` with its seq.

        Returns after the journal line is on disk. ``new`` is stored as given, so
        derive it from :attr:`quest`. Raises StoreError when the line could not be
        written (nothing is committed) or synced (the writer then refuses further
        commits: reopen).
        """
        with self._mutex:
            return self._commit(new, entries)

    def close(self) -> None:
        """Bring the snapshot up to date (best effort) and release the lock."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            try:
                if self._since_snapshot and self._broken is None:
                    self._try_snapshot()
            finally:
                os.close(self._journal_fd)
                os.close(self._lock_fd)  # releases the flock

    def __enter__(self) -> QuestWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals (called with self._mutex held)

    def _commit(self, new: Quest, entries: Sequence[HistoryEntry]) -> Quest:
        if self._closed:
            raise StoreError(self._journal, "writer is closed")
        if self._broken is not None:
            raise StoreError(self._journal, f"writer unusable after an I/O error: {self._broken}")
        old = self._quest
        if new.id != old.id:
            raise StoreError(self._journal, f"cannot commit quest {new.id!r} into {old.id!r}")
        seq = old.seq
        stamped_entries: list[HistoryEntry] = []
        try:
            dumped = []
            for entry in entries:
                seq += 1
                stamped = entry if entry.seq == seq else entry.model_copy(update={"seq": seq})
                stamped_entries.append(stamped)
                dumped.append(stamped.model_dump(mode="json"))
            record: dict[str, Any] = {"seq": seq, "entries": dumped}
            changed = [
                name
                for name in _QUEST_FIELDS
                if (a := getattr(old, name)) is not (b := getattr(new, name)) and a != b
            ]
            if changed:
                record["quest"] = new.model_dump(mode="json", include=set(changed))
            old_tasks, new_tasks = old.tasks, new.tasks
            if old_tasks is not new_tasks:
                patch = {}
                for task_id, task in new_tasks.items():
                    before = old_tasks.get(task_id)
                    if before is task or (before is not None and before == task):
                        continue
                    patch[task_id] = task.model_dump(mode="json")
                if patch:
                    record["tasks"] = patch
                if len(old_tasks) != len(new_tasks) or list(old_tasks) != list(new_tasks):
                    record["order"] = list(new_tasks)
            line = dumps(record) + b"\n"
        except PydanticSerializationError as exc:
            raise StoreError(self._journal, f"cannot serialize the commit: {exc}") from exc
        result = new if new.seq == seq else new.model_copy(update={"seq": seq})
        if len(record) == 2 and not dumped:
            self._quest = result  # nothing to record
            return result
        self._append(line)
        self._offset += len(line)
        self._lines += 1
        self._quest = result
        self._since_snapshot += 1
        if self._since_snapshot >= self._store.snapshot_every:
            self._try_snapshot()
        for observer in self._observers:
            observer(result, stamped_entries)
        return result

    def _append(self, line: bytes) -> None:
        try:
            write_all(self._journal_fd, line)
        except OSError as exc:
            try:  # take back a partial line so the next commit starts on a clean line
                os.ftruncate(self._journal_fd, self._offset)
            except OSError as exc2:
                self._broken = f"append failed ({exc}) and truncation failed ({exc2})"
            raise StoreError(self._journal, f"cannot append; nothing committed: {exc}") from exc
        if not self._store.durable:
            return
        try:
            sync(self._journal_fd)
        except OSError as exc:
            # After a failed fsync the page cache state is unknown: stop writing.
            self._broken = f"fsync failed: {exc}"
            raise StoreError(
                self._journal,
                f"fsync failed, the commit may not be durable; reopen the store: {exc}",
            ) from exc

    def _write_snapshot(self) -> None:
        quest = self._quest
        doc = {
            "format": SNAPSHOT_FORMAT,
            "seq": quest.seq,
            "journal_offset": self._offset,
            "journal_lines": self._lines,
            "quest": quest.model_dump(mode="json"),
        }
        # Indented: the snapshot is rewritten rarely and is meant to diff well in git.
        data = dumps(doc, indent=2) + b"\n"
        write_file(self.path / SNAPSHOT_NAME, data, sync=self._store.durable)
        self._since_snapshot = 0

    def _try_snapshot(self) -> None:
        # The journal already holds the commit, so a failed snapshot loses nothing:
        # the next commit tries again and loads keep replaying a longer tail meanwhile.
        try:
            self._write_snapshot()
        except OSError as exc:
            _log.warning("quest snapshot %s not rewritten: %s", self.path / SNAPSHOT_NAME, exc)


# -------------------------------------------------------------------------- store


class QuestStore:
    """All quests under one root folder; see the module docstring for the format."""

    def __init__(self, root: Path, *, snapshot_every: int = 256, durable: bool = True) -> None:
        """``durable=False`` skips every fsync: for benchmarks and tests only."""
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be >= 1")
        self.root = Path(root)
        self.snapshot_every = snapshot_every
        self.durable = durable

    def _dir(self, quest_id: str) -> Path:
        return self.root / validate_quest_id(quest_id)

    def list_ids(self) -> list[str]:
        ids = []
        for snapshot in self.root.glob(f"*/{SNAPSHOT_NAME}"):
            if snapshot.is_file():
                with contextlib.suppress(InvalidIdError):
                    ids.append(validate_quest_id(snapshot.parent.name))
        return sorted(ids)

    def exists(self, quest_id: str) -> bool:
        return (self._dir(quest_id) / SNAPSHOT_NAME).is_file()

    def create(self, quest: Quest) -> QuestWriter:
        """Store a new quest (its snapshot and an empty journal); return its writer."""
        qdir = self._dir(quest.id)
        try:
            root_is_new = not self.root.exists()
            self.root.mkdir(parents=True, exist_ok=True)
            qdir_is_new = not qdir.exists()
            qdir.mkdir(exist_ok=True)
            if self.durable and qdir_is_new:
                fsync_dir(self.root)
                if root_is_new:
                    fsync_dir(self.root.parent)
        except OSError as exc:
            raise StoreError(qdir, f"cannot create the quest folder: {exc}") from exc
        with self._opening(qdir, "create") as fds:
            if (qdir / SNAPSHOT_NAME).exists():
                raise StoreError(qdir, "quest already exists")
            journal = qdir / JOURNAL_NAME
            if journal.exists() and journal.stat().st_size > 0:
                # An interrupted create leaves an empty journal; this one has history.
                raise StoreError(journal, "journal without a snapshot; refusing to overwrite it")
            # The snapshot is written last: until it exists the quest does not, so
            # a create interrupted before it is simply redone.
            fds.append(os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644))
            if self.durable:
                os.fsync(fds[1])
            writer = QuestWriter(self, qdir, quest, fds)
            writer._write_snapshot()
        return writer

    @contextlib.contextmanager
    def _opening(self, qdir: Path, what: str) -> Iterator[list[int]]:
        """The writer lock taken, and the descriptors the block adds: closed if it fails."""
        fds = [_acquire_lock(qdir)]
        try:
            yield fds
        except BaseException as exc:
            for fd in reversed(fds):
                os.close(fd)
            if isinstance(exc, OSError):
                raise StoreError(qdir, f"cannot {what} the quest: {exc}") from exc
            raise

    def restore(self, quest: Quest) -> Literal["created", "replaced", "kept"]:
        """Take ``quest`` (rebuilt from the state branch) as this store's copy of it.

        Absent here: created at the quest's seq with an empty journal. Present with a
        seq at least as high: kept (it is newer: the branch lags the journal by design).
        Present but older: the old folder is moved aside to ``.replaced/<id>-<n>``
        (nothing is deleted) and the quest created anew. A quest whose writer lock is
        held (a live run) raises StoreLocked."""
        qdir = self._dir(quest.id)
        if not (qdir / SNAPSHOT_NAME).is_file():
            self.create(quest).close()
            return "created"
        lock_fd = _acquire_lock(qdir)
        try:
            local = load(qdir).quest
            if local.seq >= quest.seq:
                return "kept"
            aside = self.root / ".replaced"
            aside.mkdir(exist_ok=True)
            n = 1
            while (aside / f"{quest.id}-{n}").exists():
                n += 1
            os.rename(qdir, aside / f"{quest.id}-{n}")
        except OSError as exc:
            raise StoreError(qdir, f"cannot replace the quest: {exc}") from exc
        finally:
            os.close(lock_fd)
        self.create(quest).close()
        return "replaced"

    def open_writer(self, quest_id: str) -> QuestWriter:
        """Take the writer lock (or raise StoreLocked), load, drop a torn last line."""
        qdir = self._dir(quest_id)
        if not (qdir / SNAPSHOT_NAME).is_file():
            raise StoreError(qdir, "no such quest")
        with self._opening(qdir, "open") as fds:
            for leftover in leftover_temps(qdir / SNAPSHOT_NAME):  # a crash mid-snapshot
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
            loaded = load(qdir)
            fds.append(os.open(qdir / JOURNAL_NAME, os.O_WRONLY | os.O_APPEND))
            if loaded.size > loaded.end:
                _log.warning(
                    "quest journal %s: dropping a torn last line (%d bytes)",
                    qdir / JOURNAL_NAME,
                    loaded.size - loaded.end,
                )
                os.ftruncate(fds[1], loaded.end)
                if self.durable:
                    os.fsync(fds[1])
            return QuestWriter(
                self,
                qdir,
                loaded.quest,
                fds,
                offset=loaded.end,
                lines=loaded.lines,
                since_snapshot=loaded.tail,
            )

    def read(self, quest_id: str) -> Quest:
        """The current quest without taking the lock (a torn last line is ignored)."""
        qdir = self._dir(quest_id)
        if not (qdir / SNAPSHOT_NAME).is_file():
            raise StoreError(qdir, "no such quest")
        # A writer that opens while we read may truncate a torn tail under us and
        # append in its place; that race can show a garbled line once, so retry.
        for _ in range(2):
            with contextlib.suppress(StoreError):
                return load(qdir).quest
        return load(qdir).quest

    def history(self, quest_id: str, since_seq: int = 0) -> Iterator[HistoryEntry]:
        """Stream the history entries with seq > ``since_seq``, oldest first."""
        qdir = self._dir(quest_id)
        snap = read_snapshot(qdir / SNAPSHOT_NAME)
        # Entries up to the snapshot's seq all lie before its offset: skip them.
        start = (snap.offset, snap.lines) if since_seq >= snap.seq else (0, 0)
        return history_entries(qdir / JOURNAL_NAME, since_seq, *start)
