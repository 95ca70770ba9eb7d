"""Fixtures for the runtime integration tests: isolated git, and projects to run."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from repo_builder import VALIDATORS, MakeProject, Project, TaskSpec, agent_pids

from harness import isolate_git
from scaffold.runtime.session import BACKLOG_QUEST


@pytest.fixture(autouse=True)
def isolated_git_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No git identity (scaffold's commits bring their own) and no agent script leaks."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    isolate_git(
        home,
        monkeypatch,
        also_unset=(
            "SCAFFOLD_AGENT_SCRIPT",
            "SCAFFOLD_AGENT_STATE",
            "SCAFFOLD_SANDBOX_READABLE",
            "SCAFFOLD_SANDBOX_WRITABLE",
        ),
    )


@pytest.fixture
def make_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeProject]:
    """``make_project(tasks, runs, config)``: a built project whose agent env is set.

    One project per test (the scripted agent's script is named by the environment).
    At teardown no agent process of the project may be left running.
    """
    made: list[Project] = []

    def make(
        tasks: Sequence[str | TaskSpec],
        runs: Sequence[Mapping[str, Any]],
        config: Mapping[str, Any] | None = None,
        *,
        validators: Sequence[Mapping[str, Any]] = VALIDATORS,
    ) -> Project:
        assert not made, "one project per test"
        project = Project(tmp_path).build(tasks, runs, config, validators=validators)
        for key, value in project.agent_env.items():
            monkeypatch.setenv(key, value)
        made.append(project)
        return project

    yield make
    for project in made:
        left = agent_pids(BACKLOG_QUEST, project.repo)
        for pid in left:  # do not let a failed test leak processes into the next one
            with contextlib.suppress(OSError):
                if os.getpgid(pid) != os.getpgid(0):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
        assert left == [], f"agent processes outlived the test: {left}"
