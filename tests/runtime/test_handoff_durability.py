"""A gated agent whose wait before its start fails never runs."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_builder import MakeProject, codeweaver_done

from scaffold.errors import StoreError
from scaffold.runtime.agent_jobs import AgentJobs


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
