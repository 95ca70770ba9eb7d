"""An agent runs only once its start is journaled: a journal that fails runs none."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_builder import MakeProject, codeweaver_done

from scaffold.errors import StoreError
from scaffold.runtime.agent_jobs import AgentJobs


def test_a_journal_that_cannot_be_synced_lets_no_agent_run(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsync of the second agent's start fails: it never runs; the job fails with
    the store's error, no process left."""
    project = make_project(
        ["Add the notes"], [codeweaver_done("TASK-1")], {"sandbox": {"mode": "bwrap"}}
    )
    starts: list[str] = []
    real_start = AgentJobs._mark_started

    def started(self: AgentJobs, key: str, *args: Any) -> None:
        starts.append(key)
        real_start(self, key, *args)
        if len(starts) > 1:
            raise StoreError(Path("journal.jsonl"), "fsync failed: Input/output error")

    monkeypatch.setattr(AgentJobs, "_mark_started", started)

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
