"""What a new user hits first (issue 12): setup mistakes, retries, a stopped run.

Each test reproduces one numbered item of the issue with the real CLI (in-process
through click's runner where no agent runs, for speed), real git and the scripted agent.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner, Result
from repo_builder import MakeProject, codeweaver_done

from scaffold.cli.main import cli
from scaffold.core.states import Lifecycle
from scaffold.quest.model import PullRequest, Quest, QuestPhase, TaskRecord
from scaffold.runtime.session import BACKLOG_QUEST, quest_store


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return proc.stdout


def _invoke(repo: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "--repo", str(repo)], env=env)


def _initialised(path: Path, *, commit: bool = True) -> Path:
    _git(path.parent, "init", "-q", "-b", "main", str(path))
    assert _invoke(path, "init").exit_code == 0
    if commit:
        _git(path, "add", "-A")
        _git(path, "-c", "user.name=T", "-c", "user.email=t@localhost", "commit", "-qm", "i")
    return path


# --------------------------------------------------------------------------- item 1


def test_retry_after_a_failed_worktree_runs_the_agent_only_in_its_worktree(
    make_project: MakeProject,
) -> None:
    project = make_project(["First"], [codeweaver_done("TASK-1", quick=True)])
    repo = project.repo
    _git(repo, "update-ref", "-d", "refs/heads/main")  # as if never committed

    blocked = project.run()

    assert blocked.exit_code == 1
    assert project.task("TASK-1").state is Lifecycle.BLOCKED
    assert project.invocations() == []
    project.git("-c", "user.name=T", "-c", "user.email=t@localhost", "commit", "-qm", "i")
    assert _invoke(repo, "retry", "TASK-1").exit_code == 0

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.invocations(step="TASK-1")[0]["role"] == "codeweaver"
    assert project.task("TASK-1").outcome == "merged"
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1 done\n"
    # Nothing the agent wrote landed in the person's checkout outside the merge.
    assert project.git("status", "--porcelain", "--untracked-files=all") == ""
    assert "agent_failed" not in project.events("TASK-1")


# --------------------------------------------------------------------------- item 2


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


# --------------------------------------------------------------------------- item 3


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


# --------------------------------------------------------------------------- item 4


def test_after_the_failure_limit_scheduling_stops_once(make_project: MakeProject) -> None:
    project = make_project(
        ["Crashes", "Waits"],
        [{"role": "codeweaver", "step": "TASK-1", "actions": [{"crash": 1}]}],
        {"slots": 1, "safety": {"max_consecutive_failures": 1}},
    )

    result = project.run()

    assert result.exit_code == 4, result.output
    assert project.events("TASK-2").count("deps_resolved") == 1
    assert project.events("TASK-2").count("safety_limit_hit") == 1
    assert result.output.count("stopping new work") == 1
    assert project.invocations(step="TASK-2") == []


# --------------------------------------------------------------------------- item 5


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
