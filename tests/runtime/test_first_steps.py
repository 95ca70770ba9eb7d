"""What a new user hits first: setup mistakes, retries, a stopped run, what the log says.

Each test goes through the real CLI (in-process through click's runner where no agent
runs, for speed), real git and the scripted agent.
"""

from __future__ import annotations

import asyncio
import io
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from repo_builder import MakeProject, codeweaver_done

from harness import git
from scaffold.cli.main import cli
from scaffold.config import load_config
from scaffold.core import quest_flow as qf
from scaffold.core.events import Event, signal_event
from scaffold.core.lifecycle import Limits
from scaffold.core.states import EventName, Lifecycle
from scaffold.github.comments import render_status
from scaffold.quest.model import AgentRun, PullRequest, Quest, QuestPhase, TaskRecord
from scaffold.roles import Role
from scaffold.runtime.preflight import scaffold_command
from scaffold.runtime.session import BACKLOG_QUEST, open_or_create_quest, quest_store, run_quest
from scaffold.runtime.view import Reporter, slot_rows, transition_detail
from scaffold.signals import parse_signal


def _invoke(repo: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "--repo", str(repo)], env=env)


def _initialised(path: Path, *, commit: bool = True) -> Path:
    git(path.parent, "init", "-q", "-b", "main", str(path))
    assert _invoke(path, "init").exit_code == 0
    if commit:
        git(path, "add", "-A")
        git(path, "commit", "-qm", "i")
    return path


# ------------------------------------------------- a retry after a failed worktree


def test_retry_after_a_failed_worktree_runs_the_agent_only_in_its_worktree(
    make_project: MakeProject,
) -> None:
    project = make_project(["First"], [codeweaver_done("TASK-1")])
    repo = project.repo
    git(repo, "update-ref", "-d", "refs/heads/main")  # as if never committed

    blocked = project.run()

    assert blocked.exit_code == 1
    assert project.task("TASK-1").state is Lifecycle.BLOCKED
    assert project.invocations() == []
    project.git("commit", "-qm", "i")
    assert _invoke(repo, "retry", "TASK-1").exit_code == 0

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.invocations(step="TASK-1")[0]["role"] == "codeweaver"
    assert project.task("TASK-1").outcome == "merged"
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1 done\n"
    # Nothing the agent wrote landed in the person's checkout outside the merge.
    assert project.git("status", "--porcelain", "--untracked-files=all") == ""
    assert "agent_failed" not in project.events("TASK-1")


# ------------------------------------- an agent program missing or unable to start


def test_a_missing_agent_program_is_refused_before_anything_starts(tmp_path: Path) -> None:
    repo = _initialised(tmp_path / "r")
    no_claude = {"PATH": "/usr/bin:/bin"}  # git, but no claude

    started = _invoke(repo, "quest", "add a login page", env=no_claude)

    assert started.exit_code == 2, started.output
    assert "'claude'" in started.output
    assert "agent.command" in started.output
    assert "npm install -g @anthropic-ai/claude-code" in started.output
    assert not (repo / ".scaffold" / "quests").exists() or not list(quest_store(repo).list_ids())
    config = repo / ".github" / "scaffold.yml"
    config.write_text("agent:\n  command: [no-such-agent-binary]\n", encoding="utf-8")
    run = _invoke(repo, "run")
    assert run.exit_code == 2, run.output
    assert "'no-such-agent-binary'" in run.output
    assert "agent.command" in run.output


def test_an_agent_program_that_cannot_start_is_a_failure_not_a_loop(
    make_project: MakeProject, tmp_path: Path
) -> None:
    """Past the CLI's check (the program vanished, or the orchestrator is driven by the
    App): a start that fails is an agent failure, retried and then Blocked, never an
    endless restart of the same job."""
    gone = str(tmp_path / "gone" / "agent")
    project = make_project(
        ["First"], [], {"agent": {"command": [gone]}, "sandbox": {"mode": "off"}}
    )

    result = project.run()

    assert result.exit_code == 1, result.output
    task = project.task("TASK-1")
    assert task.state is Lifecycle.BLOCKED
    assert "could not start the agent" in (task.blocked_reason or "")
    assert project.events("TASK-1").count("agent_failed") == 3  # max_attempts 2: 1 + 2

    # The same for a quest's planning, which used to restart ChaosWhisperer for ever.
    writer = open_or_create_quest(project.repo, None, request="add a login page")
    quest_id = writer.quest.id
    out = io.StringIO()
    config = load_config(project.repo)
    report = asyncio.run(run_quest(project.repo, config, writer, Reporter(out, color=False)))

    assert report.exit_code == 1, out.getvalue()
    assert project.quest(quest_id).phase is QuestPhase.FAILED
    assert out.getvalue().count("could not start the agent") <= 3


# ---------------------------------------------------------- a retry of a done task


def _store_with(repo: Path, task: TaskRecord) -> None:
    quest = Quest(id=BACKLOG_QUEST, phase=QuestPhase.EXECUTING, tasks={task.id: task})
    quest_store(repo).create(quest).close()


MERGED_PR = PullRequest(branch="scaffold/task-1", base="main", state="merged", merge_sha="abc")


def test_retry_of_a_done_task_is_refused(tmp_path: Path) -> None:
    repo = _initialised(tmp_path / "r")
    _store_with(repo, TaskRecord(id="TASK-1", outcome="merged", pr=MERGED_PR))

    result = _invoke(repo, "retry", "TASK-1")

    assert result.exit_code == 2
    assert "TASK-1 is Done" in result.output
    assert not list((repo / ".scaffold" / "inbox").glob("*.json"))


def test_a_store_holding_a_retried_done_task_recovers(make_project: MakeProject) -> None:
    """What an accepted retry of a Done task left behind: Idle, no outcome, merged PR."""
    project = make_project(["First"], [])
    path = next((project.repo / "backlog" / "tasks").glob("task-1 *"))
    path.write_text(path.read_text("utf-8").replace("status: To Do", "status: Done"), "utf-8")
    _store_with(project.repo, TaskRecord(id="TASK-1", pr=MERGED_PR))

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == "merged"
    assert project.invocations() == []


# --------------------------------------------------- the consecutive-failure limit


def test_after_the_failure_limit_scheduling_stops_once(make_project: MakeProject) -> None:
    project = make_project(
        ["Crashes", "Waits"],
        [{"role": "codeweaver", "step": "TASK-1", "actions": [{"crash": 1}]}],
        {"slots": 1, "safety": {"max_consecutive_failures": 1}},
    )

    result = project.run()

    assert result.exit_code == 4, result.output
    assert project.events("TASK-2").count("deps_resolved") == 1
    # Stopped once: while Ready (safety_limit_hit), or, made ready ahead of its slot
    # (worktree, "In Progress") and never started, put back (abort_signal).
    events = project.events("TASK-2")
    assert events.count("safety_limit_hit") + events.count("abort_signal") == 1
    assert project.backlog_task("TASK-2").status == "To Do", result.output
    assert project.task("TASK-2").state is Lifecycle.IDLE
    assert result.output.count("stopping new work") == 1
    # The log line of the crash says why, not only "agent_failed".
    assert "TASK-1: agent_failed (stays Processing): exited with code 1" in result.output
    assert project.invocations(step="TASK-2") == []


# ---------------------------------------------------- a repository without commits


def test_a_repository_without_commits_is_told_to_commit_first(tmp_path: Path) -> None:
    repo = _initialised(tmp_path / "r", commit=False)

    doctor = _invoke(repo, "doctor")
    run = _invoke(repo, "run")

    assert doctor.exit_code == 1
    assert "BAD  repository" in doctor.output
    assert "commit first" in doctor.output
    assert run.exit_code == 2
    assert "no commits yet: commit first" in run.output
    assert "rev-parse" not in run.output


# ---------------------------------------------- what the log and the live view say


def _processing(**fields: object) -> TaskRecord:
    return TaskRecord(
        id="TASK-1",
        state=Lifecycle.PROCESSING,
        role=Role.CODEWEAVER,
        worktree="/wt/task-1",
        pending_run=AgentRun(role=Role.CODEWEAVER),
        agent_running=True,
        **fields,  # type: ignore[arg-type]
    )


def _log_line(task: TaskRecord, event: Event) -> str:
    quest = Quest(id="q", phase=QuestPhase.EXECUTING, tasks={task.id: task})
    step = qf.apply_task_event(quest, task.id, event, Limits(), NOW)
    out = io.StringIO()
    entry = step.entries[0]
    Reporter(out, color=False).transition(
        "TASK-1", entry.source, entry.target, entry.event, transition_detail(entry)
    )
    return out.getvalue()


NOW = datetime(2025, 1, 2, tzinfo=UTC)


def test_the_log_says_why_an_agent_failed_and_where_a_followup_went() -> None:
    crash = "exited with code 1 without an accepted signal-back stderr: Traceback | boom"
    failed = Event(EventName.AGENT_FAILED, at=NOW, role=Role.CODEWEAVER, detail=crash)
    assert f"agent_failed (stays Processing): {crash}" in _log_line(_processing(), failed)
    followup = parse_signal(
        {
            "signal": "needs-role-followup",
            "stepId": "TASK-1",
            "targetRole": "pathseeker",
            "reason": "the task is two tasks",
            "context": "split it",
            "resume": False,
        },
        role=Role.CODEWEAVER,
    )
    event = signal_event(_processing(), followup, session_id="s-1", at=NOW)
    assert "to pathseeker: the task is two tasks" in _log_line(_processing(), event)


def test_the_live_view_lists_idle_tasks_and_a_question_being_waited_on() -> None:
    waiting = _processing(question_id="q-1-1").model_copy(update={"agent_running": False})
    tasks = [
        waiting,
        TaskRecord(id="TASK-2", dependencies=("TASK-1",)),
        TaskRecord(id="TASK-3", outcome="merged"),
    ]

    rows = {r.step: r.state for r in slot_rows(tasks, NOW)}

    assert rows == {
        "TASK-1": "Processing, waiting for the answer to q-1-1",
        "TASK-2": "Idle (waiting for its dependencies)",
    }


def test_a_quest_whose_tasks_all_merged_is_shown_done() -> None:
    merged = TaskRecord(id="TASK-1", outcome="merged", pr=MERGED_PR)
    quest = Quest(id="quest-1", phase=QuestPhase.EXECUTING, tasks={"TASK-1": merged})

    assert qf.shown_phase(quest) == "done"
    comment = render_status(quest, now=NOW, max_cost_usd=5, max_hours=4, slots=3)
    assert "· quest-1 · done" in comment
    running = quest.model_copy(update={"tasks": {"TASK-1": _processing()}})
    assert qf.shown_phase(running) == "executing"


# --------------------------------------------------------------- init's next steps


def test_init_prints_next_steps_a_new_user_can_type(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    bare_path = {"PATH": "/usr/bin:/bin"}  # no scaffold, claude or backlog on it

    result = _invoke(repo, "init", env=bare_path)

    assert result.exit_code == 0, result.output
    steps = result.output.split("next steps:", 1)[1]
    assert "git commit" in steps  # nothing committed yet
    assert "npm install -g @anthropic-ai/claude-code" in steps
    assert "npm install -g backlog.md" in steps
    installed = str(Path(sys.executable).parent / "scaffold")
    assert f"{installed} run" in steps  # not a bare `scaffold` that is not on PATH
    assert f"{installed} status" in steps


def test_the_command_to_show_is_scaffold_only_when_it_is_on_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert scaffold_command() == str(Path(sys.executable).parent / "scaffold")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
    assert scaffold_command() == "scaffold"
