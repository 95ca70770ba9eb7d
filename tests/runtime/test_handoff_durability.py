"""The hand-off's journal lines share fsyncs, yet none is pending when an effect starts."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_builder import MakeProject, codeweaver_done

import scaffold.quest.store as store_mod
from scaffold.core.states import Lifecycle
from scaffold.errors import StoreError
from scaffold.quest.store import QuestWriter
from scaffold.runtime.agent_jobs import AgentJobs
from scaffold.runtime.orchestrator import Orchestrator


@pytest.mark.parametrize("sandbox", ["bwrap", "off"])
def test_no_agent_starts_while_a_journal_line_waits_for_its_fsync(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """An agent is spawned only once every line before it is durable."""
    writers: list[QuestWriter] = []
    real_init = QuestWriter.__init__

    def remember(self: QuestWriter, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        writers.append(self)

    monkeypatch.setattr(QuestWriter, "__init__", remember)
    spawns: list[bool] = []  # lines waiting, at each agent's spawn
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
    real_sync = store_mod.sync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real_sync(fd)

    monkeypatch.setattr(store_mod, "sync", counting)

    project = make_project(
        ["Add the notes"], [codeweaver_done("TASK-1")], {"sandbox": {"mode": sandbox}}
    )
    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == "merged"
    assert project.task("TASK-1").state is Lifecycle.IDLE
    assert len(spawns) >= 3  # the three roles (and Ward, if any)
    assert not any(spawns)
    assert deferred  # the hand-offs did defer their lines
    assert writers
    assert not any(w._unsynced for w in writers)


def test_a_journal_that_cannot_be_synced_lets_no_agent_run(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsync before the second agent fails: it never runs; the job fails with the
    store's error, no process left."""
    project = make_project(
        ["Add the notes"], [codeweaver_done("TASK-1")], {"sandbox": {"mode": "bwrap"}}
    )
    starts: list[str] = []
    real_start = AgentJobs._mark_started

    def started(self: AgentJobs, key: str, *args: Any) -> None:
        starts.append(key)
        real_start(self, key, *args)

    real_durable = Orchestrator.durable

    async def durable(self: Orchestrator) -> None:
        await real_durable(self)
        if len(starts) > 1 and asyncio.current_task() in self._running:
            raise StoreError(Path("journal.jsonl"), "fsync failed: Input/output error")

    monkeypatch.setattr(AgentJobs, "_mark_started", started)
    monkeypatch.setattr(Orchestrator, "durable", durable)

    result = project.run()

    assert [i["role"] for i in project.invocations()] == ["codeweaver"]
    assert "StoreError" in result.output
    assert project.task("TASK-1").outcome is None
    assert project.live_agents() == []
    # No process transport is left for the garbage collector.
    leftovers: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", leftovers.append)
    gc.collect()
    assert leftovers == []
