"""The orchestrator's main loop wakes on events, never waiting out its timer.

``poll_s`` is only how often the inbox is looked at. With it set to an hour, a quest
still runs to the end straight away: every hand-off (a job's event, a job that ends,
the last job of the run) wakes the loop. The deadline only keeps a regression from
hanging the suite; nothing is timed.
"""

from __future__ import annotations

import asyncio
import io

from repo_builder import MakeProject, codeweaver_done

from scaffold.config import load_config
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.report import RunReport
from scaffold.runtime.session import open_or_create_quest
from scaffold.runtime.view import Reporter

HANG_GUARD_S = 300.0


def test_a_quest_runs_to_the_end_with_an_hour_long_poll_interval(
    make_project: MakeProject,
) -> None:
    project = make_project(
        ["Add the notes", "Add more notes"],
        [codeweaver_done("TASK-1"), codeweaver_done("TASK-2")],
    )
    writer = open_or_create_quest(project.repo, None)
    orchestrator = Orchestrator(
        project.repo,
        load_config(project.repo),
        writer,
        Reporter(io.StringIO(), color=False),
        poll_s=3600.0,
    )

    async def main() -> RunReport:
        return await asyncio.wait_for(orchestrator.run(), HANG_GUARD_S)

    try:
        report = asyncio.run(main())
    finally:
        writer.close()

    assert report.exit_code == 0
    for task_id in ("TASK-1", "TASK-2"):
        assert project.task(task_id).outcome == "merged"
    roles = sorted(i["role"] for i in project.invocations())
    assert roles == sorted(["codeweaver", "siegemaster", "lawbringer"] * 2)
