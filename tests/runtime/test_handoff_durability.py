"""The hand-off's journal lines share fsyncs, yet none is pending when an effect starts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from repo_builder import MakeProject, codeweaver_done

import scaffold.quest.store as store_mod
from scaffold.core.states import Lifecycle
from scaffold.quest.store import QuestWriter


def test_no_agent_starts_while_a_journal_line_waits_for_its_fsync(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    writers: list[QuestWriter] = []
    real_init = QuestWriter.__init__

    def remember(self: QuestWriter, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        writers.append(self)

    monkeypatch.setattr(QuestWriter, "__init__", remember)
    spawns: list[bool] = []
    real_exec = asyncio.base_events.BaseEventLoop.subprocess_exec

    async def spawn(self: Any, *args: Any, **kwargs: Any) -> Any:
        spawns.append(any(w._unsynced for w in writers))
        return await real_exec(self, *args, **kwargs)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "subprocess_exec", spawn)
    deferred: list[int] = []
    real_commit = QuestWriter.commit

    def commit(self: QuestWriter, *args: Any, sync: bool = True, **kwargs: Any) -> Any:
        if not sync:
            deferred.append(1)
        return real_commit(self, *args, sync=sync, **kwargs)

    monkeypatch.setattr(QuestWriter, "commit", commit)
    syncs: list[int] = []
    real_sync = store_mod._sync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real_sync(fd)

    monkeypatch.setattr(store_mod, "_sync", counting)

    project = make_project(["Add the notes"], [codeweaver_done("TASK-1")])
    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == "merged"
    assert project.task("TASK-1").state is Lifecycle.IDLE
    assert len(spawns) >= 3  # the three roles (and Ward, if any)
    assert not any(spawns)
    assert deferred  # the hand-offs did defer their lines
    assert writers
    assert not any(w._unsynced for w in writers)
