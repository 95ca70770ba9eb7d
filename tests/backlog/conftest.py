"""Fixtures for the Backlog.md adapter tests: the real CLI and the recorded fixture files."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from backlog_cli import BacklogCLI
from harness import find_tool, require_tool

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "backlog"


def find_backlog_bin() -> str | None:
    return find_tool("backlog", "SCAFFOLD_BACKLOG_BIN")


@pytest.fixture(scope="session")
def backlog_bin() -> str:
    """Path of the real ``backlog`` CLI; fails (never skips) when it is missing."""
    return require_tool("backlog", "SCAFFOLD_BACKLOG_BIN")


@pytest.fixture
def make_cli(backlog_bin: str, tmp_path: Path) -> Callable[[str], BacklogCLI]:
    """Factory: ``make_cli("a")`` gives a CLI bound to a fresh initialised repo ``tmp_path/a``."""

    def make(name: str) -> BacklogCLI:
        repo = tmp_path / name
        home = tmp_path / f"{name}-home"
        repo.mkdir()
        home.mkdir()
        cli = BacklogCLI(backlog_bin, repo, home)
        cli.init()
        return cli

    return make


@pytest.fixture
def fixture_backlog(tmp_path: Path) -> Path:
    """A repository whose backlog/tasks holds copies of the recorded task files."""
    repo = tmp_path / "fixture-repo"
    tasks = repo / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    shutil.copy(FIXTURES / "config.yml", repo / "backlog" / "config.yml")
    for path in FIXTURES.glob("task-*.md"):
        shutil.copy(path, tasks / path.name)
    for path in tasks.iterdir():
        path.chmod(0o644)
    (repo / "backlog" / "config.yml").chmod(0o644)
    return repo
