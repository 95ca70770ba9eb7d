"""Every commit is on disk (fdatasync'ed) before it returns; a failed fsync stops the writer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import scaffold.quest.store as store_mod
from scaffold.errors import StoreError
from scaffold.quest.model import Quest, TaskRecord
from scaffold.quest.store import QuestStore, draft

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


def test_each_commit_is_synced_before_it_returns(tmp_path: Path, syncs: list[int]) -> None:
    store = QuestStore(tmp_path / "quests")
    with store.create(quest()) as w:
        syncs.clear()
        for n in (1, 2, 3):
            w.commit(bumped(w.quest, n), [draft("note", f"n{n}")])
            assert len(syncs) == n
    assert store.read("q-1").tasks["TASK-1"].attempts == 3


def test_a_failed_fsync_breaks_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = QuestStore(tmp_path / "quests")
    w = store.create(quest())

    def failing(fd: int, *_: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store_mod, "sync", failing)
    with pytest.raises(StoreError, match="fsync failed"):
        w.commit(bumped(w.quest, 1))
    with pytest.raises(StoreError, match="unusable"):
        w.commit(bumped(w.quest, 2))
    w.close()


def test_not_durable_store_never_syncs(tmp_path: Path, syncs: list[int]) -> None:
    store = QuestStore(tmp_path / "quests", durable=False)
    with store.create(quest()) as w:
        w.commit(bumped(w.quest, 1))
    assert syncs == []
