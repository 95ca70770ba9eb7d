"""The delivery store behind the ingest: duplicates, replay after a restart (in the right
lane), compaction by age, and a clear error when the database cannot be used."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from webhook_support import Recorder, eventually, example, signed_headers

from scaffold.errors import StoreError, StoreLocked
from scaffold.server import deliveries
from scaffold.server.deliveries import Accepted, DeliveryStore
from scaffold.server.delivery import Delivery
from scaffold.server.ingest import Ingest
from scaffold.server.settings import ServerSettings

BOT = {"login": "scaffold-app[bot]", "type": "Bot"}


def _db(settings: ServerSettings) -> Path:
    return settings.state_dir / "webhooks" / "deliveries.sqlite"


async def test_a_duplicate_id_is_stored_once(tmp_path: Path) -> None:
    store = DeliveryStore(tmp_path / "d.sqlite")
    assert await store.open() == []
    first = Accepted("d-1", "issues", 1.0, False)
    assert await store.add(first, b'{"n": 1}')
    assert not await store.add(dataclasses.replace(first, event="push"), b'{"n": 2}')
    assert await store.payload("d-1") == b'{"n": 1}'
    store.finish("d-1", "handled")
    assert not await store.add(first, b'{"n": 1}')  # handled: still recognised
    await store.close()


async def test_a_restart_hands_back_the_unfinished_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    store = DeliveryStore(path)
    await store.open()
    rows = [Accepted(f"d-{i}", "issues", float(i), i == 2) for i in range(4)]
    for row in rows:
        assert await store.add(row, b"{}")
    store.finish("d-1", "handled")
    store.finish("d-3", "failed")
    await store.close()

    again = DeliveryStore(path)
    assert await again.open() == [rows[0], rows[2]]
    assert await again.payload("d-2") == b"{}"
    assert await again.payload("d-1") is None  # a handled delivery's JSON is dropped
    await again.close()


async def test_handled_deliveries_give_their_pages_back(tmp_path: Path) -> None:
    """A handled delivery's JSON (15 KB here, GitHub's are often larger) is deleted, and its
    pages serve the next ones: the file stays the size of a burst, not of the week of rows
    kept for redeliveries (cleared in place, each kept about 4 KB)."""
    path = tmp_path / "d.sqlite"
    store = DeliveryStore(path)
    await store.open()
    body = b"x" * 15_000
    for burst in range(20):
        rows = [Accepted(f"d-{burst}-{i}", "issues", time.time(), False) for i in range(50)]
        await asyncio.gather(*(store.add(row, body) for row in rows))
        for row in rows:
            store.finish(row.id, "handled")
    assert await store.payload("d-0-0") is None
    await store.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (pages,) = db.execute("PRAGMA page_count").fetchone()
    (free,) = db.execute("PRAGMA freelist_count").fetchone()
    db.close()
    in_use = (pages - free) * 4096
    assert in_use < 1000 * 400, f"{in_use} bytes in use for 1,000 handled deliveries"
    assert pages * 4096 < 60 * 15_000 * 2  # about two bursts' JSON, not twenty


async def test_the_wal_starts_again_after_a_checkpoint_beside_the_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits go on while a checkpoint beside them copies the WAL, so it never copies all
    of it, and the WAL only starts again from its beginning after a checkpoint that did.
    The store's thread copies what came meanwhile, and the next commit starts the WAL again
    (the checkpoint sequence number in its header counts the restarts). Before, the WAL
    only grew under steady load (2 GB after 60,000 deliveries)."""
    monkeypatch.setattr(deliveries, "CHECKPOINT_EVERY", 4)
    copied = threading.Event()
    release = threading.Event()
    checkpoint = DeliveryStore._checkpoint

    def slow_beside(self: DeliveryStore, *args: bool) -> None:
        checkpoint(self, *args)
        if not args:  # the checkpoint thread's: it has copied; commits go on meanwhile
            copied.set()
            release.wait(10)

    monkeypatch.setattr(DeliveryStore, "_checkpoint", slow_beside)
    path = tmp_path / "d.sqlite"
    store = DeliveryStore(path)
    await store.open()
    body = b"x" * 15_000

    async def deliver(n: int) -> None:
        assert await store.add(Accepted(f"d-{n}", "issues", time.time(), False), body)

    def restarts() -> int:
        header = path.with_name(path.name + "-wal").read_bytes()[:16]
        return int.from_bytes(header[12:16], "big")

    await deliver(0)
    before = restarts()
    await deliver(1)
    await deliver(2)
    # A reader's snapshot keeps the checkpoint from copying what is committed after it:
    # standing in for commits that come while a checkpoint copies.
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM deliveries").fetchone()
    await deliver(3)  # the fourth call starts the checkpoint beside the commits
    assert await asyncio.to_thread(copied.wait, 10)
    for n in range(4, 6):
        await deliver(n)
    reader.execute("COMMIT")
    reader.close()
    release.set()
    assert store._checkpointing is not None
    await store._checkpointing
    await deliver(6)  # after this commit, the store's thread copies the rest
    await deliver(7)  # this commit starts the WAL again
    after = restarts()
    await store.close()
    assert after == before + 1


async def test_a_database_with_the_json_in_its_rows_is_moved_over_once(tmp_path: Path) -> None:
    """The layout written before ``payloads`` (the JSON in a column of ``deliveries``): its
    unhandled deliveries come back with their JSON, and redeliveries are still known."""
    path = tmp_path / "d.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE deliveries (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
        " event TEXT NOT NULL, received_at REAL NOT NULL, urgent INTEGER NOT NULL,"
        " state TEXT NOT NULL DEFAULT 'accepted', payload BLOB)"
    )
    now = time.time()
    old.execute("INSERT INTO deliveries VALUES (1, 'd-1', 'issues', ?, 0, 'handled', NULL)", (now,))
    old.execute(
        "INSERT INTO deliveries VALUES (2, 'd-2', 'push', ?, 1, 'accepted', ?)", (now, b"{}")
    )
    old.commit()
    old.close()
    for _ in range(2):  # the second open finds the new layout
        store = DeliveryStore(path)
        assert await store.open() == [Accepted("d-2", "push", now, True)]
        assert await store.payload("d-2") == b"{}"
        assert not await store.add(Accepted("d-1", "issues", now, False), b"{}")
        await store.close()


async def test_compaction_forgets_old_handled_deliveries_only(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite"
    store = DeliveryStore(path, keep_s=3600)
    await store.open()
    now = time.time()
    old_done, old_open, new_done = (
        Accepted("old-done", "issues", now - 7200, False),
        Accepted("old-open", "issues", now - 7200, False),
        Accepted("new-done", "issues", now - 60, False),
    )
    for row in (old_done, old_open, new_done):
        await store.add(row, b"{}")
    store.finish("old-done", "handled")
    store.finish("new-done", "handled")
    assert await store.compact(now - 3600) == 1
    assert await store.add(old_done, b"{}")  # forgotten: taken again
    assert not await store.add(new_done, b"{}")
    assert not await store.add(old_open, b"{}")  # not handled yet: never forgotten
    store.finish("old-done", "handled")
    await store.close()

    # Opening compacts too, by keep_s: with none, every handled delivery is forgotten.
    again = DeliveryStore(path, keep_s=0)
    assert await again.open() == [old_open]
    assert await again.add(new_done, b"{}")
    await again.close()


async def test_a_corrupt_database_is_a_clear_error_at_start(settings: ServerSettings) -> None:
    _db(settings).parent.mkdir(parents=True)
    _db(settings).write_bytes(b"this is not a database, and it is long enough to tell " * 40)
    ingest = Ingest(settings, Recorder())
    with pytest.raises(
        StoreError,
        match=r"deliveries\.sqlite: cannot open the delivery database: file is not a database",
    ):
        await ingest.start()
    await ingest.stop()


async def test_a_locked_database_is_a_clear_error_at_start(settings: ServerSettings) -> None:
    _db(settings).parent.mkdir(parents=True)
    holder = sqlite3.connect(_db(settings), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        ingest = Ingest(settings, Recorder())
        with pytest.raises(StoreLocked, match=r"deliveries\.sqlite: locked"):
            await ingest.start()
        await ingest.stop()
    finally:
        holder.close()
    ingest = Ingest(settings, Recorder())
    await ingest.start()  # free again
    await ingest.stop()


async def test_a_delivery_that_cannot_be_stored_is_503_and_taken_when_redelivered(
    settings: ServerSettings, labeled: bytes
) -> None:
    """Someone else holds the database's write lock: the insert fails, and nothing is
    acknowledged or handled until it is stored."""
    rec = Recorder()
    ingest = Ingest(settings, rec)
    await ingest.start()
    try:
        holder = sqlite3.connect(_db(settings), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        headers = signed_headers(labeled, delivery="blocked")
        reply = await ingest.accept(headers, labeled)
        assert (reply.status, json.loads(reply.body)["status"]) == (503, "unavailable")
        holder.close()
        await asyncio.sleep(0.05)
        assert rec.seen == []
        reply = await ingest.accept(headers, labeled)  # GitHub delivers it again
        assert (reply.status, json.loads(reply.body)["status"]) == (202, "queued")
        await rec.wait(1)
        assert [d.id for d in rec.seen] == ["blocked"]
    finally:
        await ingest.stop()


def _echo(i: int) -> bytes:
    return json.dumps({"action": "requested", "check_suite": {"id": i}, "sender": BOT}).encode()


async def test_a_restart_replays_a_persons_delivery_in_the_urgent_lane(
    settings: ServerSettings,
) -> None:
    gate = asyncio.Event()
    got: list[str] = []

    async def stuck(delivery: Delivery) -> None:
        got.append(delivery.id)
        await gate.wait()

    one_worker = dataclasses.replace(settings, workers=1)
    ingest = Ingest(one_worker, stuck)
    await ingest.start()
    review = example("pull_request_review/submitted.0.json")
    try:
        for i in range(4):
            body = _echo(i)
            reply = await ingest.accept(signed_headers(body, "check_suite", f"echo-{i}"), body)
            assert reply.status == 202
        await eventually(lambda: got == ["echo-0"])
        headers = signed_headers(review, "pull_request_review", "person")
        assert (await ingest.accept(headers, review)).status == 202
    finally:
        await ingest.stop()  # killed mid-handling: nothing was marked handled

    rec = Recorder()
    again = Ingest(one_worker, rec)
    await again.start()
    try:
        await rec.wait(5)
        assert [d.id for d in rec.seen] == ["person", "echo-0", "echo-1", "echo-2", "echo-3"]
        assert rec.seen[0].payload == json.loads(review)
    finally:
        await again.stop()
