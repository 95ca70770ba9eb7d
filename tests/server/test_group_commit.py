"""The group commit of the ingest: one write (and one fsync) for the deliveries that came
together, nothing acknowledged before it is stored, none acknowledged if storing fails."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from webhook_support import Recorder, eventually, signed_headers

from scaffold.server import spool as spool_module
from scaffold.server.ingest import Ingest
from scaffold.server.settings import ServerSettings


class GatedSync:
    """An fsync stand-in that holds each call until ``gate`` is set, records what had
    been acknowledged when it was called, and fails while ``fail`` is set."""

    def __init__(self, acked: list[str]) -> None:
        self.gate = threading.Event()
        self.fail = threading.Event()
        self.entered = threading.Semaphore(0)
        self.acked = acked
        self.calls: list[list[str]] = []  # the ids acknowledged when each call began
        self.fds: list[tuple[int, ...]] = []

    def __call__(self, fds: Sequence[int]) -> None:
        self.calls.append(list(self.acked))
        self.fds.append(tuple(fds))
        self.entered.release()
        self.gate.wait(30)
        if self.fail.is_set():
            raise OSError(5, "fsync failed (test)")

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.acquire, True, 30)


def spool_text(settings: ServerSettings) -> bytes:
    return b"".join(
        p.read_bytes() for p in sorted((settings.state_dir / "webhooks/spool").iterdir())
    )


def ids_log(settings: ServerSettings) -> list[str]:
    return (settings.state_dir / "webhooks/delivery-ids.log").read_text().splitlines()


async def _post(ingest: Ingest, body: bytes, delivery: str, acked: list[str]) -> tuple[int, str]:
    reply = await ingest.accept(signed_headers(body, delivery=delivery), body)
    if reply.status == 202:
        acked.append(delivery)
    return reply.status, reply.outcome


@contextlib.asynccontextmanager
async def gated_ingest(
    settings: ServerSettings,
) -> AsyncIterator[tuple[Ingest, GatedSync, Recorder, list[str]]]:
    """A started Ingest whose fsyncs wait on ``sync.gate``; its recorder, and the ids
    it acknowledged. The gate is opened before it stops."""
    acked: list[str] = []
    sync = GatedSync(acked)
    rec = Recorder()
    ingest = Ingest(settings, rec, sync=sync)
    await ingest.start()
    try:
        yield ingest, sync, rec, acked
    finally:
        sync.gate.set()
        await ingest.stop()


async def test_deliveries_that_come_during_an_fsync_are_stored_together_then_acknowledged(
    settings, labeled
) -> None:
    async with gated_ingest(settings) as (ingest, sync, rec, acked):
        first = asyncio.create_task(_post(ingest, labeled, "d-0", acked))
        await sync.wait_entered()  # d-0's fsync is under way
        assert b"A d-0 issues" in spool_text(settings)  # written before the fsync
        rest = [asyncio.create_task(_post(ingest, labeled, f"d-{i}", acked)) for i in range(1, 6)]
        await asyncio.sleep(0.05)
        assert not first.done()
        assert not any(t.done() for t in rest)
        assert acked == []
        assert rec.seen == []
        sync.gate.set()
        assert await asyncio.gather(first, *rest) == [(202, "queued")] * 6
        # Two fsyncs: d-0's, then one for the five that came while it ran; when the
        # second began none of those five had been answered.
        assert len(sync.calls) == 2
        assert sync.calls[0] == []
        assert set(sync.calls[1]) <= {"d-0"}
        assert sorted(acked[1:]) == [f"d-{i}" for i in range(1, 6)]
        assert len(sync.fds[1]) == 2  # the spool segment and the dedupe log
        assert ids_log(settings) == [f"d-{i}" for i in range(6)]
        await rec.wait(6)


async def test_a_failing_fsync_fails_the_whole_batch_and_acknowledges_none(
    settings, labeled
) -> None:
    async with gated_ingest(settings) as (ingest, sync, rec, acked):
        sync.gate.set()
        assert await _post(ingest, labeled, "ok-1", acked) == (202, "queued")
        before = spool_text(settings)
        sync.gate.clear()
        sync.fail.set()
        batch = [asyncio.create_task(_post(ingest, labeled, f"bad-{i}", acked)) for i in range(4)]
        await sync.wait_entered()
        sync.gate.set()
        assert await asyncio.gather(*batch) == [(503, "unavailable")] * 4
        assert acked == ["ok-1"]
        # Cut back: neither the spool nor the dedupe log keeps what was not acknowledged.
        after = spool_text(settings)
        assert after.startswith(before)
        assert b"bad-" not in after
        assert ids_log(settings) == ["ok-1"]
        assert all(f"bad-{i}" not in ingest.seen for i in range(4))
        await rec.wait(1)
        await asyncio.sleep(0.05)
        assert [d.id for d in rec.seen] == ["ok-1"]
        # GitHub delivers them again once the disk is back: taken, and handled once.
        sync.fail.clear()
        again = await asyncio.gather(*(_post(ingest, labeled, f"bad-{i}", acked) for i in range(4)))
        assert again == [(202, "queued")] * 4
        await rec.wait(5)
        assert sorted(d.id for d in rec.seen) == ["bad-0", "bad-1", "bad-2", "bad-3", "ok-1"]
        assert ids_log(settings) == ["ok-1", "bad-0", "bad-1", "bad-2", "bad-3"]


async def test_copies_of_a_delivery_being_stored_are_written_once(settings, labeled) -> None:
    async with gated_ingest(settings) as (ingest, sync, rec, acked):
        copies = [asyncio.create_task(_post(ingest, labeled, "same", acked)) for _ in range(3)]
        await sync.wait_entered()
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in copies)  # the copies wait for the first one too
        sync.gate.set()
        assert sorted(await asyncio.gather(*copies)) == [
            (200, "duplicate"),
            (200, "duplicate"),
            (202, "queued"),
        ]
        assert spool_text(settings).count(b"A same issues") == 1
        assert ids_log(settings) == ["same"]
        await rec.wait(1)
        await asyncio.sleep(0.05)
        assert [d.id for d in rec.seen] == ["same"]
        assert len(sync.calls) == 1


async def test_copies_of_a_delivery_whose_store_failed_are_refused_too(settings, labeled) -> None:
    async with gated_ingest(settings) as (ingest, sync, _, acked):
        sync.fail.set()
        copies = [asyncio.create_task(_post(ingest, labeled, "twice", acked)) for _ in range(2)]
        await sync.wait_entered()
        await asyncio.sleep(0.02)
        sync.gate.set()
        assert await asyncio.gather(*copies) == [(503, "unavailable")] * 2
        assert "twice" not in ingest.seen


async def test_without_fsync_deliveries_of_one_loop_turn_share_one_write(
    settings, labeled, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real_writev = os.writev

    def counting_writev(fd: int, parts: Sequence[bytes]) -> int:
        writes.append(sum(1 for p in parts if p.startswith(b"A ")))
        return real_writev(fd, parts)

    monkeypatch.setattr(spool_module.os, "writev", counting_writev)
    rec = Recorder()
    ingest = Ingest(settings, rec)  # settings.fsync is False: written, not fsynced
    await ingest.start()
    try:
        replies = await asyncio.gather(
            *(ingest.accept(signed_headers(labeled, delivery=f"t-{i}"), labeled) for i in range(8))
        )
        assert [r.status for r in replies] == [202] * 8
        assert writes[0] == 8  # one writev for the eight records
        await rec.wait(8)
        await eventually(lambda: ingest.queue.in_flight == 0)
    finally:
        await ingest.stop()
    # The done marks went to the spool after them: a restart finds nothing to redo.
    again = Ingest(settings, Recorder())
    await again.start()
    try:
        assert again.spool.pending == 0
        assert all(f"t-{i}" in again.seen for i in range(8))
    finally:
        await again.stop()


async def test_fsync_setting_fsyncs_the_spool_and_the_dedupe_log(
    settings, labeled, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from scaffold.server import ingest as ingest_module

    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(ingest_module.os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    rec = Recorder()
    ingest = Ingest(dataclasses.replace(settings, fsync=True), rec)
    await ingest.start()
    try:
        reply = await ingest.accept(signed_headers(labeled, delivery="durable"), labeled)
        assert reply.status == 202
        assert len(synced) == 2
        names = {Path(os.readlink(f"/proc/self/fd/{fd}")).name for fd in synced}
        assert names == {"delivery-ids.log", "seg-0000000001.log"}
        await rec.wait(1)
    finally:
        await ingest.stop()
