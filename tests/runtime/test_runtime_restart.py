"""``kill -9`` of ``scaffold run`` mid-work, then a second run finishes without duplicates."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from repo_builder import MakeProject, complete, wait_until, write

from scaffold.errors import StoreError
from scaffold.runtime.session import quest_store
from scaffold.signal_back.records import read_signals


def _codeweaver(step: str, before: float, after: float = 0.0) -> dict[str, Any]:
    return {
        "role": "codeweaver",
        "step": step,
        "attempt": 1,
        "actions": [
            {"sleep": before},
            write(f"notes/{step.lower()}.txt", f"{step}\n"),
            complete(f"{step} implemented"),
            {"sleep": after},
        ],
    }


@pytest.mark.parametrize("sandbox", ["bwrap", "off"])
def test_kill_9_mid_work_then_run_again(make_project: MakeProject, sandbox: str) -> None:
    """Unsandboxed, the agents outlive a killed scaffold and the next run kills them; in
    the sandbox they die with it (bwrap --die-with-parent and their PID namespace)."""
    project = make_project(
        ["One", "Two", "Three"],
        [
            # TASK-1 signals at once, then dawdles: killed with its signal on disk.
            _codeweaver("TASK-1", 0.0, after=30.0),
            # TASK-2 and TASK-3 are still working when scaffold dies.
            _codeweaver("TASK-2", 10.0),
            _codeweaver("TASK-3", 10.0),
            # Their second runs (after the restart) just finish.
            _codeweaver("TASK-2", 0.0) | {"attempt": 2},
            _codeweaver("TASK-3", 0.0) | {"attempt": 2},
        ],
        # The default limit: a restart must not count as three agent failures.
        {"slots": 3, "safety": {"max_consecutive_failures": 3}, "sandbox": {"mode": sandbox}},
    )
    store = quest_store(project.repo)
    runs_dir = project.repo / ".scaffold" / "runs" / "backlog"

    def task_1_signalled_and_others_working() -> bool:
        try:
            quest = store.read("backlog")
        except (StoreError, OSError):
            return False  # not created yet
        # Working: running with their sessions known (the agent connects its MCP server
        # before it says its session, as Claude Code does with alwaysLoad).
        working = [t.id for t in quest.tasks.values() if t.agent_running and t.sessions]
        signalled = any(read_signals(d / "signals") for d in runs_dir.glob("TASK-1/*"))
        return signalled and len(working) == 3 and len(project.invocations()) == 3

    run = project.cli_popen("run")
    try:
        wait_until(task_1_signalled_and_others_working, what="TASK-1's signal")
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL
    if sandbox == "off":
        assert project.live_agents()  # the agents outlived their orchestrator
    else:
        wait_until(lambda: project.live_agents() == [], 30, "the sandboxes to die with scaffold")

    result = project.run()

    assert result.exit_code == 0, result.output
    if sandbox == "off":
        assert "orphan agent" in result.output
    for n in (1, 2, 3):
        assert project.merges_of(n) == 1, project.merge_subjects()
        assert project.backlog_task(f"TASK-{n}").status == "Done"
        assert project.task(f"TASK-{n}").outcome == "merged"
        assert project.git("show", f"main:notes/task-{n}.txt") == f"TASK-{n}\n"
    assert len(project.merge_subjects()) == 3
    assert project.worktrees() == [str(project.repo)]
    assert project.scaffold_branches() == []
    assert project.live_agents() == []
    # The signal TASK-1's agent had delivered was used, not thrown away.
    assert len(project.invocations(step="TASK-1", role="codeweaver")) == 1
    # The interrupted runs ran again; an interruption is not an agent failure.
    for step in ("TASK-2", "TASK-3"):
        first, again = project.invocations(step=step, role="codeweaver")
        assert again["resumed"] is True
        assert again["session_id"] == first["session_id"]
        assert "agent_failed" not in project.events(step)
    assert project.quest().stop_reason is None


def test_a_session_lost_in_a_restart_starts_afresh_without_counting(
    make_project: MakeProject,
) -> None:
    """scaffold killed before the agent saved its session (Claude Code writes its
    transcript a moment after its first request): the resumed run is told "No
    conversation found", and scaffold starts a new session without spending an attempt."""
    project = make_project(
        ["Fragile"],
        [
            _codeweaver("TASK-1", 30.0),
            # After the restart the resume of the lost session is refused (strict
            # resume, like Claude Code); the fresh run finishes.
            _codeweaver("TASK-1", 0.0) | {"attempt": 2, "resumed": False},
        ],
        {"agent": {"max_attempts": 1}},
    )
    script = json.loads(project.script.read_text(encoding="utf-8"))
    project.script.write_text(json.dumps({**script, "strict_resume": True}), encoding="utf-8")

    run = project.cli_popen("run")
    try:
        wait_until(lambda: len(project.live_agents()) >= 1, what="the agent")
        wait_until(lambda: bool(project.task("TASK-1").sessions), what="the session id")
        lost = project.task("TASK-1").sessions["codeweaver"]
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    # The agent never saved its session: forget it, as Claude Code would not know it.
    (project.state / "invocations.jsonl").unlink()

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == "merged"
    assert "agent_failed" not in project.events("TASK-1")
    assert f"resuming session {lost[:8]}" in result.output  # refused: unknown session
    [fresh] = project.invocations(step="TASK-1", role="codeweaver")  # the log was wiped
    assert fresh["resumed"] is False
    assert fresh["session_id"] != lost
