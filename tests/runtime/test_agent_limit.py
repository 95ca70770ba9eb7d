"""The server-wide cap on agents: never above it, shared fairly, nothing preempted."""

from __future__ import annotations

import asyncio
import io

import pytest
from repo_builder import MakeProject, codeweaver_done

from scaffold.config import load_config
from scaffold.runtime.agent_limit import AgentLimit, RepoAgents, describe_max_agents
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.session import open_or_create_quest
from scaffold.runtime.view import Reporter


async def _granted(limit: AgentLimit, repo: str, quest: str, into: list[str]) -> None:
    await limit.acquire(repo, quest)
    into.append(f"{repo}/{quest}")


async def test_never_more_than_the_limit_and_a_free_permit_goes_to_the_poorest_repo() -> None:
    limit = AgentLimit(3)
    got: list[str] = []
    # a busy repository takes every permit while it is alone
    for q in ("q1", "q1", "q2"):
        await limit.acquire("big", q)
    assert limit.running == 3
    assert limit.running_in("big") == 3
    waiting = [
        asyncio.create_task(_granted(limit, "big", "q3", got)),  # came first
        asyncio.create_task(_granted(limit, "small", "q1", got)),
        asyncio.create_task(_granted(limit, "other", "q1", got)),
    ]
    await asyncio.sleep(0)
    assert got == []
    assert limit.waiting == 3
    limit.release("big", "q1")
    await asyncio.sleep(0)
    assert got == ["small/q1"]  # the repository with none, though it came later
    limit.release("big", "q1")
    await asyncio.sleep(0)
    assert got == ["small/q1", "other/q1"]
    limit.release("big", "q2")
    await asyncio.sleep(0)
    assert got == ["small/q1", "other/q1", "big/q3"]
    assert limit.running == 3
    await asyncio.gather(*waiting)


async def test_within_a_repository_the_quest_with_fewest_goes_first() -> None:
    limit = AgentLimit(2)
    got: list[str] = []
    await limit.acquire("r", "a")
    await limit.acquire("r", "a")
    waiting = [
        asyncio.create_task(_granted(limit, "r", "a", got)),
        asyncio.create_task(_granted(limit, "r", "b", got)),
    ]
    await asyncio.sleep(0)
    limit.release("r", "a")
    await asyncio.sleep(0)
    assert got == ["r/b"]
    limit.release("r", "a")
    await asyncio.gather(*waiting)
    assert got == ["r/b", "r/a"]


async def test_a_waiter_cancelled_takes_nothing() -> None:
    limit = AgentLimit(1)
    await limit.acquire("r", "a")
    waiter = asyncio.create_task(limit.acquire("r", "b"))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limit.waiting == 0
    limit.release("r", "a")
    assert limit.running == 0


async def test_a_permit_granted_as_its_waiter_is_cancelled_is_given_back() -> None:
    limit = AgentLimit(1)
    await limit.acquire("r", "a")
    waiter = asyncio.create_task(limit.acquire("r", "b"))
    await asyncio.sleep(0)
    limit.release("r", "a")  # granted to b ...
    waiter.cancel()  # ... which is cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limit.running == 0


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError):
        AgentLimit(0)


def test_doctor_describes_the_setting() -> None:
    ok, text = describe_max_agents({})
    assert ok
    assert "two per core" in text
    assert describe_max_agents({"SCAFFOLD_MAX_AGENTS": "6"}) == (
        True,
        "6 at once across repositories (SCAFFOLD_MAX_AGENTS)",
    )
    ok, text = describe_max_agents({"SCAFFOLD_MAX_AGENTS": "zero"})
    assert not ok
    assert "'zero'" in text
    assert not describe_max_agents({"SCAFFOLD_MAX_AGENTS": "0"})[0]


class _Counting(AgentLimit):
    """The limit, noting the most agents it ever let run at once and how many it let."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.most = 0
        self.grants = 0

    def _grant(self) -> None:
        before = self.running
        super()._grant()
        self.grants += max(0, self.running - before)
        self.most = max(self.most, self.running)


def test_a_quest_with_slots_to_spare_runs_one_agent_at_a_time_under_a_limit_of_one(
    make_project: MakeProject,
) -> None:
    project = make_project(
        ["First", "Second", "Third"],
        [codeweaver_done(f"TASK-{n}") for n in (1, 2, 3)],
        {"slots": 3},
    )
    limit = _Counting(1)
    writer = open_or_create_quest(project.repo, None)
    orchestrator = Orchestrator(
        project.repo,
        load_config(project.repo),
        writer,
        Reporter(io.StringIO(), color=False),
        agent_limit=RepoAgents(limit, "acme/widgets"),
    )
    try:
        report = asyncio.run(orchestrator.run())
    finally:
        writer.close()
    assert report.exit_code == 0
    assert {project.task(f"TASK-{n}").outcome for n in (1, 2, 3)} == {"merged"}
    assert limit.most == 1
    assert limit.grants == len(project.invocations()) == 9  # every agent took a permit
    assert limit.running == 0  # and gave it back
