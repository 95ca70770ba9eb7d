"""``commit(sync=False)`` and ``sync()``: the lines of one hand-off share one fsync."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import scaffold.quest.store as store_mod
from scaffold.errors import StoreError
from scaffold.quest.model import Quest, TaskRecord
from scaffold.quest.store import JOURNAL_NAME, QuestStore, QuestWriter, draft

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def quest() -> Quest:
    tasks = {f"TASK-{i}": TaskRecord(id=f"TASK-{i}", title=f"t{i}") for i in (1, 2)}
    return Quest(id="q-1", request="r", tasks=tasks, started_at=T0)


def bumped(q: Quest, n: int) -> Quest:
    task = q.tasks["TASK-1"].model_copy(update={"attempts": n})
    return q.model_copy(update={"tasks": {**q.tasks, "TASK-1": task}})


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = store_mod.sync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(store_mod, "sync", counting)
    return calls


def test_unsynced_lines_are_written_at_once_and_synced_together(
    tmp_path: Path, syncs: list[int]
) -> None:
    store = QuestStore(tmp_path / "quests")
    with store.create(quest()) as w:
        syncs.clear()
        for n in (1, 2, 3):
            w.commit(bumped(w.quest, n), [draft("note", f"n{n}")], sync=False)
        assert syncs == []
        # Written (a killed process loses nothing): another reader sees all three.
        assert store.read("q-1").tasks["TASK-1"].attempts == 3
        w.sync()
        assert len(syncs) == 1
        w.sync()  # nothing waits: no fsync
        assert len(syncs) == 1
        w.commit(bumped(w.quest, 4), sync=False)
        w.commit(bumped(w.quest, 5))  # a synced commit covers the line before it
        assert len(syncs) == 2
        w.sync()
        assert len(syncs) == 2
    assert store.read("q-1").tasks["TASK-1"].attempts == 5


def test_close_and_snapshot_sync_what_waits(tmp_path: Path, syncs: list[int]) -> None:
    store = QuestStore(tmp_path / "quests", snapshot_every=2)
    w = store.create(quest())
    syncs.clear()
    w.commit(bumped(w.quest, 1), sync=False)
    w.commit(bumped(w.quest, 2), sync=False)  # the snapshot is due: journal synced first
    journal = (w.path / JOURNAL_NAME).stat().st_size
    assert syncs  # the journal's fd, before the snapshot names its offset
    w.commit(bumped(w.quest, 3), sync=False)
    before = len(syncs)
    w.close()
    assert len(syncs) > before
    assert (w.path / JOURNAL_NAME).stat().st_size > journal
    assert store.read("q-1").tasks["TASK-1"].attempts == 3


def test_a_failed_group_fsync_breaks_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = QuestStore(tmp_path / "quests")
    w = store.create(quest())
    w.commit(bumped(w.quest, 1), sync=False)

    def failing(fd: int, *_: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store_mod, "sync", failing)
    with pytest.raises(StoreError, match="fsync failed"):
        w.sync()
    with pytest.raises(StoreError, match="unusable"):
        w.commit(bumped(w.quest, 2))
    w.close()


def test_not_durable_store_never_syncs(tmp_path: Path, syncs: list[int]) -> None:
    store = QuestStore(tmp_path / "quests", durable=False)
    with store.create(quest()) as w:
        w.commit(bumped(w.quest, 1), sync=False)
        w.sync()
    assert syncs == []


def sync_held_in_a_thread(
    w: QuestWriter, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Thread, threading.Event]:
    """``w.sync()`` running in a thread, its fdatasync held (a slow disk) until the
    returned event is set."""
    started, release = threading.Event(), threading.Event()
    real = store_mod.sync

    def slow(fd: int) -> None:
        started.set()
        assert release.wait(10), "the test never released the sync"
        real(fd)

    monkeypatch.setattr(store_mod, "sync", slow)
    syncing = threading.Thread(target=w.sync)
    syncing.start()
    assert started.wait(10)
    return syncing, release


def test_commits_go_on_while_another_thread_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = QuestStore(tmp_path / "quests")
    with store.create(quest()) as w:
        w.commit(bumped(w.quest, 1), sync=False)
        syncing, release = sync_held_in_a_thread(w, monkeypatch)
        # The fdatasync runs without the commit lock: this commit does not wait for it.
        w.commit(bumped(w.quest, 2), sync=False)
        assert syncing.is_alive()
        assert w.unsynced
        release.set()
        syncing.join(10)
        # The line written during the sync is not covered by it: it still waits.
        assert w.unsynced
        w.sync()
        assert not w.unsynced
    assert store.read("q-1").tasks["TASK-1"].attempts == 2


def test_close_waits_for_a_sync_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = QuestStore(tmp_path / "quests")
    w = store.create(quest())
    w.commit(bumped(w.quest, 1), sync=False)
    syncing, release = sync_held_in_a_thread(w, monkeypatch)
    closing = threading.Thread(target=w.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive()  # the journal stays open under the running fdatasync
    release.set()
    syncing.join(10)
    closing.join(10)
    assert not closing.is_alive()
    with pytest.raises(StoreError, match="closed"):
        w.commit(w.quest)
    assert store.read("q-1").tasks["TASK-1"].attempts == 1
