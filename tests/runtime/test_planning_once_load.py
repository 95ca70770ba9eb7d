"""Planning runs once per quest under load: the race as it happened, nothing forced.

On a server running many quests in one event loop, planning agent runs were started
twice and PathSeeker's tasks created twice. Each orchestrator's main loop waits for
events with a timeout (its inbox timer, ``poll_s``). When the timer won the race
against a planning job's end (the ``queue.get()`` cancelled, the job's event left in
the queue, the job already gone from the running jobs), a loop that went on after the
TimeoutError without applying what was queued ticked on the old state and started the
finished run again.

:mod:`test_planning_once` makes every wait time out. Here nothing is patched: several
quests (one repository and one orchestrator each) run at once in one event loop, with
an inbox timer of a millisecond, beside a task that keeps the loop busy (it blocks a
few milliseconds, then yields). A timer is then due on almost every turn of the loop,
and a job often ends right after one. Each quest plans (ChaosWhisperer writes the
requirements, PathSeeker creates two tasks) and then stops on its cost limit
(PathSeeker's run costs more than the limit), so no task agent runs. In every quest,
ChaosWhisperer and PathSeeker must each have run once and the two tasks been created
once. The whole is repeated for several rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from repo_builder import Project, agent_pids, complete

from harness import plan, relay_call, requirements
from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.demo.scripted import agent_env
from scaffold.quest.store import QuestWriter
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.report import RunReport
from scaffold.runtime.session import open_or_create_quest
from scaffold.runtime.view import Reporter

QUESTS = 10
# Rounds of the same ten quests. Two: each round is ~30 s of the suite, and the race it
# looks for shows within a round (ten quests, one busy loop); bench/bench_load.py drives
# the same path at twenty repositories for longer.
ROUNDS = 2
POLL_S = 0.001  # the inbox timer: due on almost every turn of the busy loop
BUSY_S = 0.003  # how long the busy task blocks the loop each time before it yields
HANG_GUARD_S = 100.0  # only stops a hung round: nothing here is timed

# PathSeeker's run alone goes over the cost limit: the quest stops once it is planned,
# before any task's agent starts (a stopped run readies nothing).
MAX_COST_USD = 0.5
CONFIG: dict[str, Any] = {
    "safety": {"max_cost_usd": MAX_COST_USD},
    # The race is the event loop's: no bubblewrap to set up for each of the agents.
    "sandbox": {"mode": "off"},
}
SCRIPT: dict[str, Any] = {
    "runs": [
        {
            "role": "chaoswhisperer",
            "actions": [
                relay_call("write-requirements", requirements("A greeting")),
                complete("requirements written"),
            ],
        },
        {
            "role": "pathseeker",
            "cost_usd": 2 * MAX_COST_USD,
            "actions": [
                relay_call(
                    "create-tasks",
                    plan(("a", "Write the greeting", []), ("b", "Print the greeting", ["a"])),
                ),
                complete("two tasks"),
            ],
        },
    ]
}
PLANNED_TASKS = 2


@dataclass(frozen=True)
class QuestRun:
    """One quest of a round: its repository, its journal writer, its orchestrator."""

    project: Project
    writer: QuestWriter
    orchestrator: Orchestrator

    @property
    def repo(self) -> Path:
        return self.project.repo

    @property
    def quest_id(self) -> str:
        return self.writer.quest.id


def _make_quests(root: Path) -> list[QuestRun]:
    quests: list[QuestRun] = []
    for n in range(QUESTS):
        project = Project(root / f"quest{n}").build([], [], CONFIG, validators=())
        writer = open_or_create_quest(project.repo, None, request=f"Add greeting {n}")
        orchestrator = Orchestrator(
            project.repo,
            load_config(project.repo),
            writer,
            Reporter(io.StringIO(), color=False),
            poll_s=POLL_S,
        )
        quests.append(QuestRun(project, writer, orchestrator))
    return quests


async def _busy_loop(stop: asyncio.Event) -> None:
    """Another tenant of the event loop, which blocks it for a while on every turn."""
    while not stop.is_set():
        time.sleep(BUSY_S)
        await asyncio.sleep(0)


async def _run_all(quests: list[QuestRun]) -> list[RunReport]:
    stop = asyncio.Event()
    busy = asyncio.create_task(_busy_loop(stop))
    try:
        runs = asyncio.gather(*(q.orchestrator.run() for q in quests))
        return await asyncio.wait_for(runs, HANG_GUARD_S)
    finally:
        stop.set()
        await busy


def _planned_more_than_once(quest: QuestRun, invocations: list[dict[str, Any]]) -> str | None:
    """What one quest's planning did, when it is not one run per role and one plan."""
    repo = quest.repo.resolve()
    roles = [
        i["role"]
        for i in invocations
        if i["quest_id"] == quest.quest_id and Path(i["cwd"]).resolve() == repo
    ]
    record = quest.project.quest(quest.quest_id)
    plan_runs = quest.repo / ".scaffold" / "runs" / quest.quest_id / "PLAN"
    run_dirs = sorted(p.name for p in plan_runs.iterdir())
    task_files = sorted(p.name for p in (quest.repo / "backlog" / "tasks").glob("*.md"))
    backlog_ids = sorted(t.id for t in bl.load_backlog(quest.repo).tasks)
    once = (
        roles == ["chaoswhisperer", "pathseeker"]
        and record.planning.agent_runs == 2
        and [d.split("-", 1)[1] for d in run_dirs] == ["chaoswhisperer", "pathseeker"]
        and len(task_files) == len(backlog_ids) == PLANNED_TASKS
        and sorted(record.tasks) == backlog_ids
    )
    if once:
        return None
    return (
        f"{quest.repo.parent.name}: agents {roles}, run folders {run_dirs}, "
        f"backlog tasks {backlog_ids}, quest tasks {sorted(record.tasks)}"
    )


def _kill_leftovers(quests: list[QuestRun]) -> list[int]:
    """Agent processes still alive (killed, so a failed round leaks none)."""
    left: list[int] = []
    for quest in quests:
        for pid in agent_pids(quest.quest_id, quest.repo):
            left.append(pid)
            with contextlib.suppress(OSError):
                if os.getpgid(pid) != os.getpgid(0):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
    return left


@pytest.mark.parametrize("round_", range(1, ROUNDS + 1))
def test_quests_in_one_busy_loop_plan_once(
    round_: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One script and one state for every quest's agents (their cwd tells them apart).
    script = tmp_path / "agent-script.json"
    state = tmp_path / "agent-state"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    for key, value in agent_env(script, state).items():
        monkeypatch.setenv(key, value)

    quests = _make_quests(tmp_path)
    try:
        reports = asyncio.run(_run_all(quests))
    finally:
        for quest in quests:
            quest.writer.close()
        left = _kill_leftovers(quests)
    assert left == [], f"agent processes outlived the run: {left}"

    log = (state / "invocations.jsonl").read_text("utf-8")
    invocations = [json.loads(line) for line in log.splitlines() if line.strip()]
    again = [p for q in quests if (p := _planned_more_than_once(q, invocations))]
    assert not again, (
        f"round {round_}: planning ran again in {len(again)} of {QUESTS} quests:\n"
        + "\n".join(again)
    )
    for quest, report in zip(quests, reports, strict=True):
        # Stopped by the cost limit once planned, as meant (not failed some other way).
        stop = quest.project.quest(quest.quest_id).stop_reason
        assert "cost" in (stop or ""), (quest.repo, stop, report)
