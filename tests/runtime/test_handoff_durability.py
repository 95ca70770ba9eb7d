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
from scaffold.runtime.run_channel import RunChannel


@pytest.mark.parametrize("sandbox", ["bwrap", "off"])
def test_no_agent_starts_while_a_journal_line_waits_for_its_fsync(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """An agent runs once every line before it is durable: spawned then, or (in the
    sandbox, while the last agent's work is committed) let through its start gate then."""
    writers: list[QuestWriter] = []
    real_init = QuestWriter.__init__

    def remember(self: QuestWriter, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        writers.append(self)

    monkeypatch.setattr(QuestWriter, "__init__", remember)
    spawns: list[bool] = []  # lines waiting, at each ungated spawn and each gate opened
    gated: list[int] = []
    real_exec = asyncio.base_events.BaseEventLoop.subprocess_exec

    async def spawn(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "--gate" in args:
            gated.append(1)  # made now; it runs when its gate opens
        else:
            spawns.append(any(w._unsynced for w in writers))
        return await real_exec(self, *args, **kwargs)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "subprocess_exec", spawn)
    real_open = RunChannel.open_gate

    def open_gate(self: RunChannel) -> None:
        if self.gated:
            spawns.append(any(w._unsynced for w in writers))
        real_open(self)

    monkeypatch.setattr(RunChannel, "open_gate", open_gate)
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
    # In the sandbox every agent waited at its gate: the first for its slot, the second
    # and third for the last agent's commit.
    assert len(gated) == (3 if sandbox == "bwrap" else 0)
    assert deferred  # the hand-offs did defer their lines
    assert writers
    assert not any(w._unsynced for w in writers)


def test_a_journal_that_cannot_be_synced_lets_no_gated_agent_run(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsync before the second agent fails: its sandbox was made beside the last
    commit, but it never runs; the job fails with the store's error, no process left."""
    project = make_project(
        ["Add the notes"], [codeweaver_done("TASK-1")], {"sandbox": {"mode": "bwrap"}}
    )
    real_ready = AgentJobs._ready_to_run
    calls: list[str] = []

    async def ready(self: AgentJobs, key: str) -> None:
        calls.append(key)
        await real_ready(self, key)
        if len(calls) > 1:
            raise StoreError(Path("journal.jsonl"), "fsync failed: Input/output error")

    gated: list[int] = []
    real_exec = asyncio.base_events.BaseEventLoop.subprocess_exec

    async def spawn(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "--gate" in args:
            gated.append(1)
        return await real_exec(self, *args, **kwargs)

    monkeypatch.setattr(AgentJobs, "_ready_to_run", ready)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "subprocess_exec", spawn)

    result = project.run()

    assert gated == [1, 1]  # Codeweaver's and Siegemaster's sandboxes were made ...
    assert [i["role"] for i in project.invocations()] == ["codeweaver"]  # ... never run
    assert "StoreError" in result.output
    assert project.task("TASK-1").outcome is None
    assert project.live_agents() == []
    # The withdrawn sandbox's pipes were closed before the run ended (its gate got EOF):
    # no process transport is left for the garbage collector.
    leftovers: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", leftovers.append)
    gc.collect()
    assert leftovers == []
