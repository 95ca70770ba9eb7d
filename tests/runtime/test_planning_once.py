"""An agent run whose end has come in is never started again.

The main loop waits for events with a timeout (its inbox timer). When the timeout and
a finished job's event come in the same instant, the job is already gone from the
running jobs while its event still waits in the queue; a tick that looked at the state
then would start that run again (planning ran twice, PathSeeker's tasks were created
twice, under load). Here every wait times out, whatever is queued: the loop must still
apply each event before it ticks, so each planning role runs once.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable
from typing import Any

import pytest
from repo_builder import MakeProject, codeweaver_done, complete

from harness import plan, relay_call, requirements
from scaffold.config import load_config
from scaffold.runtime import orchestrator as orchestrator_module
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.session import open_or_create_quest
from scaffold.runtime.view import Reporter

HANG_GUARD_S = 300.0
REQUIREMENTS_WRITTEN = {
    "role": "chaoswhisperer",
    "actions": [
        relay_call("write-requirements", requirements("A greeting")),
        complete("requirements written"),
    ],
}


async def _always_times_out(aw: Awaitable[Any], timeout: float | None = None) -> Any:
    """``asyncio.wait_for`` as it behaves when its timer wins every race: the awaited
    ``queue.get()`` never delivers (its item stays queued), TimeoutError instead."""
    coro = aw
    if asyncio.iscoroutine(coro):
        coro.close()  # never started: nothing taken from the queue
    await asyncio.sleep(min(timeout or 0.0, 0.02))
    raise TimeoutError


def test_a_run_whose_end_is_queued_is_not_started_again(
    make_project: MakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(
        [],
        [
            REQUIREMENTS_WRITTEN,
            {
                "role": "pathseeker",
                "actions": [
                    relay_call("create-tasks", plan(("a", "Write the greeting", []))),
                    complete("one task"),
                ],
            },
            codeweaver_done("TASK-1"),
        ],
    )
    monkeypatch.setattr(orchestrator_module.asyncio, "wait_for", _always_times_out)
    writer = open_or_create_quest(project.repo, None, request="Add a greeting")
    orchestrator = Orchestrator(
        project.repo,
        load_config(project.repo),
        writer,
        Reporter(io.StringIO(), color=False),
        poll_s=0.05,
    )

    async def main() -> Any:
        # The guard is real asyncio's (the module attribute patched is the same module).
        return await asyncio.tasks.wait_for(orchestrator.run(), HANG_GUARD_S)

    try:
        report = asyncio.run(main())
    finally:
        writer.close()

    assert report.exit_code == 0
    roles = [i["role"] for i in project.invocations()]
    assert roles.count("chaoswhisperer") == 1
    assert roles.count("pathseeker") == 1
    assert roles.count("codeweaver") == 1
    quest = project.quest(writer.quest.id)
    assert sorted(quest.tasks) == ["TASK-1"]
    assert quest.tasks["TASK-1"].outcome == "merged"


def test_a_pathseeker_that_plans_nothing_is_a_failed_run_retried_with_the_reason(
    make_project: MakeProject,
) -> None:
    """Its create-tasks refused (a dependency cycle) and a complete signal anyway: never a
    quest that executes no task, run again on every poke; the retry is told why."""
    project = make_project(
        [],
        [
            REQUIREMENTS_WRITTEN,
            {
                "role": "pathseeker",
                "attempt": 1,
                "actions": [
                    relay_call(
                        "create-tasks",
                        plan(("a", "Write the greeting", ["b"]), ("b", "Say it", ["a"])),
                    ),
                    complete("planned (so it says)"),
                ],
            },
            {
                "role": "pathseeker",
                "attempt": 2,
                "actions": [
                    {"expect_prompt_contains": "planned no task"},
                    relay_call("create-tasks", plan(("a", "Write the greeting", []))),
                    complete("one task"),
                ],
            },
            codeweaver_done("TASK-1"),
        ],
        {"agent": {"max_attempts": 2}},
    )
    writer = open_or_create_quest(project.repo, None, request="Add a greeting")
    orchestrator = Orchestrator(
        project.repo, load_config(project.repo), writer, Reporter(io.StringIO(), color=False)
    )
    try:
        report = asyncio.run(asyncio.wait_for(orchestrator.run(), HANG_GUARD_S))
    finally:
        writer.close()

    assert report.exit_code == 0
    roles = [i["role"] for i in project.invocations()]
    assert roles.count("pathseeker") == 2
    quest = project.quest(writer.quest.id)
    assert sorted(quest.tasks) == ["TASK-1"]
    assert quest.tasks["TASK-1"].outcome == "merged"


def test_a_pathseeker_that_never_plans_fails_the_quest(make_project: MakeProject) -> None:
    project = make_project(
        [],
        [
            REQUIREMENTS_WRITTEN,
            {"role": "pathseeker", "actions": [complete("nothing to do, I think")]},
        ],
        {"agent": {"max_attempts": 2}},
    )
    writer = open_or_create_quest(project.repo, None, request="Add a greeting")
    orchestrator = Orchestrator(
        project.repo, load_config(project.repo), writer, Reporter(io.StringIO(), color=False)
    )
    try:
        asyncio.run(asyncio.wait_for(orchestrator.run(), HANG_GUARD_S))
    finally:
        writer.close()

    quest = project.quest(writer.quest.id)
    assert quest.phase.value == "failed"
    assert quest.tasks == {}
    # its first run and max_attempts retries, then the quest fails: it is not run again
    assert [i["role"] for i in project.invocations()].count("pathseeker") == 3
