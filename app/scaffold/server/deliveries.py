"""The accepted deliveries: sqlite in WAL mode, a row per delivery and its JSON apart.

A delivery is inserted (``accepted``, its JSON in ``payloads``) and committed before the
server answers 202; its id is unique, so a second copy inserts nothing and is answered
as a duplicate. Once handled its state becomes ``handled`` or ``failed`` and its JSON is
deleted; the row stays, so that a redelivery is still recognised, until it is older
than ``keep_s``. The JSON has a table of its own so that deleting it frees whole pages
for the next deliveries. At start the rows still ``accepted`` (left by a crash, or by a
drain that ran out of time) are handed back, oldest first, to be handled again.

Durability: with ``synchronous=NORMAL`` each commit is written to the WAL file before
the call returns, so a committed delivery survives the process being killed (kill -9);
a power loss may roll back the latest commits, never corrupt the database.
``durable=True`` (``synchronous=FULL``) fsyncs the WAL at each commit: it then survives
a power loss too.

Every call runs on the store's thread, never on the event loop that acknowledges
deliveries: a commit writes (with ``durable``, fsyncs) and may wait for a lock. The
calls made while a transaction commits are committed together in the next one (a group
commit): one trip to the thread, one write of each page touched and one fsync for a
burst of deliveries instead of one each. Checkpoints (which copy the WAL into the
database and fsync it) run on a second thread with a connection of their own: a commit
never waits for one. Such a checkpoint never finds a moment with nothing appended behind
it, and the WAL starts again from its beginning only after one did: once it is done, the
store's thread copies what came meanwhile (a few batches, between two commits), so the
next commit starts the WAL again and the file stays under :data:`WAL_LIMIT` (without
that step it grew without end under steady load: 2 GB after 60,000 deliveries of 15 KB).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar, cast

from scaffold.errors import StoreError, StoreLocked

T = TypeVar("T")
_log = logging.getLogger(__name__)
KEEP_S = 7 * 24 * 3600.0  # GitHub redelivers on request for 3 days
COMPACT_EVERY_S = 3600.0
LOCK_WAIT_S = 1.0
CHECKPOINT_EVERY = 2048  # calls: some 20 MB of WAL; each checkpoint copies a reused page once
WAL_LIMIT = 32 * 1024 * 1024  # bytes the WAL file is cut back to when it starts again
SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    event TEXT NOT NULL,
    received_at REAL NOT NULL,
    urgent INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'accepted' CHECK (state IN ('accepted', 'handled', 'failed'))
);
CREATE TABLE IF NOT EXISTS payloads (seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Accepted:
    """An accepted delivery not yet handled, without its JSON (read when it is handled)."""

    id: str
    event: str
    received_at: float
    urgent: bool


class DeliveryStore:
    def __init__(self, path: Path, *, durable: bool = False, keep_s: float = KEEP_S) -> None:
        self.path = path
        self.keep_s = keep_s
        self._durable = durable
        self._db: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="scaffold-deliveries")
        self._compacted_at = 0.0
        self._ops: list[tuple[Callable[[], object], asyncio.Future[object] | None]] = []
        self._committing: asyncio.Task[None] | None = None
        self._checkpoints = ThreadPoolExecutor(1, thread_name_prefix="scaffold-checkpoints")
        self._checkpointer: sqlite3.Connection | None = None
        self._checkpointing: asyncio.Future[None] | None = None
        self._since_checkpoint = 0

    async def open(self) -> list[Accepted]:
        """Open (or create) the database, drop what is older than ``keep_s``, and return
        the deliveries left unhandled, oldest first. A locked or unreadable database
        raises :class:`StoreError`."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._open)

    async def add(self, accepted: Accepted, raw: bytes) -> bool:
        """Insert and commit a delivery; False if its id is already there."""
        return await self._call(partial(self._add, accepted, raw))

    async def payload(self, delivery_id: str) -> bytes | None:
        return await self._call(partial(self._payload, delivery_id))

    def finish(self, delivery_id: str, state: Literal["handled", "failed"]) -> None:
        """Mark a delivery handled, in the next transaction. Not waited for: a mark that is
        lost (the process is killed before it is written) means handling it again."""
        self._ops.append((partial(self._finish, delivery_id, state), None))
        self._commit_soon()

    async def compact(self, before: float) -> int:
        """Forget the handled deliveries received before ``before``; how many."""
        return await self._call(partial(self._compact, before))

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for pending in (self._committing, self._checkpointing):
            if pending is not None:
                await asyncio.gather(pending, return_exceptions=True)
        await loop.run_in_executor(self._checkpoints, self._close_checkpointer)
        await loop.run_in_executor(self._thread, self._close)
        self._thread.shutdown()
        self._checkpoints.shutdown()

    async def _call(self, op: Callable[[], T]) -> T:
        """Run ``op`` in the next transaction: the calls made while one commits are
        committed together (one write and, with ``durable``, one fsync), and fail together."""
        done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._ops.append((op, done))
        self._commit_soon()
        return cast(T, await done)

    def _commit_soon(self) -> None:
        if self._committing is None or self._committing.done():
            self._committing = asyncio.get_running_loop().create_task(self._commit_all())

    async def _commit_all(self) -> None:
        loop = asyncio.get_running_loop()
        while self._ops:
            batch, self._ops = self._ops, []
            ops = [op for op, _ in batch]
            try:
                results = await loop.run_in_executor(self._thread, self._transaction, ops)
            except Exception as exc:
                _log.error("delivery database transaction failed", extra={"error": str(exc)})
                for _, done in batch:
                    if done is not None and not done.done():
                        done.set_exception(exc)
                continue
            for (_, done), result in zip(batch, results, strict=True):
                if done is not None and not done.done():
                    done.set_result(result)
            self._since_checkpoint += len(ops)
            idle = self._checkpointing is None or self._checkpointing.done()
            if idle and self._checkpointing is not None:
                self._checkpointing = None
                await loop.run_in_executor(self._thread, self._checkpoint, True)
            if self._since_checkpoint >= CHECKPOINT_EVERY and idle:
                self._since_checkpoint = 0
                self._checkpointing = loop.run_in_executor(self._checkpoints, self._checkpoint)

    # -- on the store's thread ---------------------------------------------------------------

    def _open(self) -> list[Accepted]:
        try:
            db = self._db = sqlite3.connect(self.path, timeout=LOCK_WAIT_S, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
            db.execute("PRAGMA wal_autocheckpoint=0")  # see _checkpoint
            db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
            (check,) = db.execute("PRAGMA quick_check").fetchone()
            if check != "ok":
                raise sqlite3.DatabaseError(f"damaged: {check}")
            db.executescript(SCHEMA)
            self._move_payloads_out()
            self._compact(time.time() - self.keep_s)
            rows = db.execute(
                "SELECT id, event, received_at, urgent FROM deliveries"
                " WHERE state = 'accepted' ORDER BY seq"
            ).fetchall()
        except sqlite3.Error as exc:
            self._close()
            if getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED"):
                raise StoreLocked(self.path, None) from exc
            raise StoreError(self.path, f"cannot open the delivery database: {exc}") from exc
        return [Accepted(i, e, r, bool(u)) for i, e, r, u in rows]

    def _checkpoint(self, here: bool = False) -> None:
        """Copy the WAL into the database (PASSIVE). On the checkpoint thread, with its own
        connection: beside the commits, never blocking them. ``here``, on the store's thread
        after one: what was committed meanwhile (nothing is appended during it), so that the
        next commit restarts the WAL. A failure is logged; the next one catches up."""
        try:
            if here:
                db = self._conn()
            else:
                if self._checkpointer is None:
                    self._checkpointer = sqlite3.connect(self.path, isolation_level=None)
                db = self._checkpointer
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            _log.warning("delivery database checkpoint failed", extra={"error": str(exc)})

    def _close_checkpointer(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None

    def _transaction(self, ops: list[Callable[[], object]]) -> list[object]:
        db = self._conn()
        db.execute("BEGIN")
        try:
            results = [op() for op in ops]
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # sqlite ends some failed transactions by itself
                db.execute("ROLLBACK")
            raise
        return results

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(self.path, "the delivery database is not open")
        return self._db

    def _add(self, a: Accepted, raw: bytes) -> bool:
        # No RETURNING here or in _finish: fetching a returned row steps the statement
        # once more, another release and take of the GIL the event loop is holding.
        db = self._conn()
        inserted = db.execute(
            "INSERT INTO deliveries (id, event, received_at, urgent)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (a.id, a.event, a.received_at, a.urgent),
        )
        if not inserted.rowcount:
            return False
        db.execute("INSERT INTO payloads (seq, body) VALUES (?, ?)", (inserted.lastrowid, raw))
        return True

    def _payload(self, delivery_id: str) -> bytes | None:
        row = (
            self._conn()
            .execute(
                "SELECT body FROM payloads WHERE seq = (SELECT seq FROM deliveries WHERE id = ?)",
                (delivery_id,),
            )
            .fetchone()
        )
        return None if row is None else row[0]

    def _finish(self, delivery_id: str, state: str) -> None:
        db = self._conn()
        db.execute("UPDATE deliveries SET state = ? WHERE id = ?", (state, delivery_id))
        db.execute(
            "DELETE FROM payloads WHERE seq = (SELECT seq FROM deliveries WHERE id = ?)",
            (delivery_id,),
        )
        now = time.time()
        if now - self._compacted_at >= COMPACT_EVERY_S:
            self._compact(now - self.keep_s)

    def _compact(self, before: float) -> int:
        """Rows come in the order they were received: read the old ones from the start (not
        the whole table, which would hold up the commits behind it), then delete them."""
        self._compacted_at = time.time()
        db = self._conn()
        last = None
        for seq, received_at in db.execute("SELECT seq, received_at FROM deliveries ORDER BY seq"):
            if received_at >= before:
                break
            last = seq
        if last is None:
            return 0
        cursor = db.execute(
            "DELETE FROM deliveries WHERE seq <= ? AND state != 'accepted'", (last,)
        )
        return cursor.rowcount

    def _move_payloads_out(self) -> None:
        """A database written before the JSON had a table of its own keeps it in a
        ``payload`` column of ``deliveries``: moved to ``payloads`` and the column
        dropped, once."""
        db = self._conn()
        if "payload" not in {row[1] for row in db.execute("PRAGMA table_info(deliveries)")}:
            return
        self._transaction(
            [
                lambda: db.execute(
                    "INSERT OR IGNORE INTO payloads (seq, body)"
                    " SELECT seq, payload FROM deliveries WHERE payload IS NOT NULL"
                ),
                lambda: db.execute("ALTER TABLE deliveries DROP COLUMN payload"),
            ]
        )

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
