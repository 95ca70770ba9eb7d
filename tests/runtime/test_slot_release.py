"""A slot is an agent at work: a task gives its slot back once its agents are done.

DiagramCheck, the pull request, the merge and the cleanup are scaffold's own work; the
next Ready task starts meanwhile. A task that goes back to its agents from a state
that holds no slot (a merge conflict, a diagram fix) still never makes more than
``slots`` agents run at once: the orchestrator's agent permits hold it back.
"""

from __future__ import annotations

import asyncio
import io

from repo_builder import MakeProject, codeweaver_done

from scaffold.config import load_config
from scaffold.core.states import HOLDS_SLOT, Lifecycle
from scaffold.ids import PLAN_KEY
from scaffold.quest.model import AgentRun
from scaffold.roles import Role
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.session import open_or_create_quest
from scaffold.runtime.view import Reporter


def test_only_the_states_with_agents_at_work_hold_a_slot() -> None:
    holding = {Lifecycle.ALLOCATING, Lifecycle.PROCESSING, Lifecycle.TEST_VALIDATION}
    assert holding == HOLDS_SLOT


def test_the_next_task_starts_while_the_first_is_checked_merged_and_cleaned(
    make_project: MakeProject,
) -> None:
    project = make_project(
        ["First", "Second"],
        [codeweaver_done("TASK-1"), codeweaver_done("TASK-2")],
        {"slots": 1},
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == project.task("TASK-2").outcome == "merged"
    transitions = [
        (e.task_id, e.event) for e in project.history() if e.kind == "transition" and e.task_id
    ]
    first = next(tid for tid, event in transitions if event == "task_selected")
    second = "TASK-2" if first == "TASK-1" else "TASK-1"
    # The second task takes the slot when the first one's review is complete: it
    # starts while the first task's DiagramCheck, pull request and merge go on.
    assert transitions.index((first, "review_complete")) < transitions.index(
        (second, "task_selected")
    )
    assert transitions.index((second, "task_selected")) < transitions.index(
        (first, "merge_complete")
    )
    # One slot: the second task's agents started only after the first one's were done.
    roles = [(i["step"], i["role"]) for i in project.invocations()]
    assert roles == [
        (first, "codeweaver"),
        (first, "siegemaster"),
        (first, "lawbringer"),
        (second, "codeweaver"),
        (second, "siegemaster"),
        (second, "lawbringer"),
    ]
    assert project.merges_of(1) == project.merges_of(2) == 1


def test_agent_permits_keep_the_agents_at_work_at_slots(make_project: MakeProject) -> None:
    project = make_project(["First", "Second", "Third"], [], {"slots": 2})
    config = load_config(project.repo)
    writer = open_or_create_quest(project.repo, None)
    orchestrator = Orchestrator(project.repo, config, writer, Reporter(io.StringIO()))
    running: set[str] = set()
    most = {"tasks": 0}
    order: list[str] = []

    async def fake_run(key: str, run: AgentRun) -> None:
        running.add(key)
        order.append(f"start {key}")
        tasks_at_work = len(running - {PLAN_KEY})
        most["tasks"] = max(most["tasks"], tasks_at_work)
        await asyncio.sleep(0.01)
        running.discard(key)
        order.append(f"end {key}")
        orchestrator.agents.release_leases()  # as the main loop's next tick does

    orchestrator.agents._run_agent_now = fake_run  # type: ignore[method-assign]
    run = AgentRun(role=Role.CODEWEAVER, kind="conflict_fix")

    async def main() -> None:
        await asyncio.gather(
            orchestrator.agents.run_agent("TASK-1", run),
            orchestrator.agents.run_agent("TASK-2", run),
            orchestrator.agents.run_agent("TASK-3", run),
            orchestrator.agents.run_agent(PLAN_KEY, run),
        )

    try:
        asyncio.run(main())
    finally:
        writer.close()
    assert most["tasks"] == 2
    # The third task's agent waited for one of the first two to end; planning never waits.
    assert order.index("start TASK-3") > min(order.index("end TASK-1"), order.index("end TASK-2"))
    assert order.index(f"start {PLAN_KEY}") < order.index("end TASK-1")
    assert sorted(e for e in order if e.startswith("end")) == [
        "end TASK-1",
        "end TASK-2",
        "end TASK-3",
        f"end {PLAN_KEY}",
    ]
