"""The accepted deliveries: one sqlite table in WAL mode, on a thread of its own.

A delivery is inserted (``accepted``, with its JSON) and committed before the server
answers 202; its id is unique, so a second copy inserts nothing and is answered as a
duplicate. Once handled its state becomes ``handled`` or ``failed`` and its JSON is
dropped; the row stays, so that a redelivery is still recognised, until it is older
than ``keep_s``. At start the rows still ``accepted`` (left by a crash, or by a drain
that ran out of time) are handed back, oldest first, to be handled again.

Durability: with ``synchronous=NORMAL`` each commit is written to the WAL file before
the call returns, so a committed delivery survives the process being killed (kill -9);
a power loss may roll back the latest commits, never corrupt the database.
``durable=True`` (``synchronous=FULL``) fsyncs the WAL at each commit: it then survives
a power loss too.

Every call runs on the store's one thread: a commit's write, a checkpoint's fsync and a
compaction never hold the event loop that acknowledges deliveries.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from scaffold.errors import StoreError, StoreLocked

T = TypeVar("T")
KEEP_S = 7 * 24 * 3600.0  # GitHub redelivers on request for 3 days
COMPACT_EVERY_S = 3600.0
LOCK_WAIT_S = 1.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    event TEXT NOT NULL,
    received_at REAL NOT NULL,
    urgent INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'accepted' CHECK (state IN ('accepted', 'handled', 'failed')),
    payload BLOB
)
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

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    async def open(self) -> list[Accepted]:
        """Open (or create) the database, drop what is older than ``keep_s``, and return
        the deliveries left unhandled, oldest first. A locked or unreadable database
        raises :class:`StoreError`."""
        return await self._call(self._open)

    async def add(self, accepted: Accepted, raw: bytes) -> bool:
        """Insert and commit a delivery; False if its id is already there."""
        return await self._call(self._add, accepted, raw)

    async def payload(self, delivery_id: str) -> bytes | None:
        return await self._call(self._payload, delivery_id)

    async def finish(self, delivery_id: str, state: Literal["handled", "failed"]) -> None:
        await self._call(self._finish, delivery_id, state)

    async def compact(self, before: float) -> int:
        """Forget the handled deliveries received before ``before``; how many."""
        return await self._call(self._compact, before)

    async def close(self) -> None:
        await self._call(self._close)
        self._thread.shutdown()

    # -- on the store's thread ---------------------------------------------------------------

    def _open(self) -> list[Accepted]:
        try:
            db = self._db = sqlite3.connect(self.path, timeout=LOCK_WAIT_S, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
            (check,) = db.execute("PRAGMA quick_check").fetchone()
            if check != "ok":
                raise sqlite3.DatabaseError(f"damaged: {check}")
            db.execute(SCHEMA)
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

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(self.path, "the delivery database is not open")
        return self._db

    def _add(self, a: Accepted, raw: bytes) -> bool:
        cursor = self._conn().execute(
            "INSERT INTO deliveries (id, event, received_at, urgent, payload)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (a.id, a.event, a.received_at, a.urgent, raw),
        )
        return cursor.rowcount == 1

    def _payload(self, delivery_id: str) -> bytes | None:
        row = (
            self._conn()
            .execute("SELECT payload FROM deliveries WHERE id = ?", (delivery_id,))
            .fetchone()
        )
        return None if row is None else row[0]

    def _finish(self, delivery_id: str, state: str) -> None:
        self._conn().execute(
            "UPDATE deliveries SET state = ?, payload = NULL WHERE id = ?", (state, delivery_id)
        )
        now = time.time()
        if now - self._compacted_at >= COMPACT_EVERY_S:
            self._compact(now - self.keep_s)

    def _compact(self, before: float) -> int:
        self._compacted_at = time.time()
        cursor = self._conn().execute(
            "DELETE FROM deliveries WHERE state != 'accepted' AND received_at < ?", (before,)
        )
        return cursor.rowcount

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
