"""Fixtures for the Backlog.md adapter tests: the real CLI and the recorded fixture files."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from backlog_cli import BacklogCLI

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "backlog"


def find_backlog_bin() -> str | None:
    """SCAFFOLD_BACKLOG_BIN, else ``backlog`` on .tools, SCAFFOLD_TEST_BIN_DIR, /tmp/npmtools, PATH."""
    explicit = os.environ.get("SCAFFOLD_BACKLOG_BIN")
    if explicit:
        return explicit
    dirs = [str(REPO / ".tools" / "node_modules" / ".bin")]
    if os.environ.get("SCAFFOLD_TEST_BIN_DIR"):
        dirs.append(os.environ["SCAFFOLD_TEST_BIN_DIR"])
    dirs += ["/tmp/npmtools/node_modules/.bin", os.environ.get("PATH", "")]
    return shutil.which("backlog", path=os.pathsep.join(dirs))


@pytest.fixture(scope="session")
def backlog_bin() -> str:
    """Path of the real ``backlog`` CLI; fails (never skips) when it is missing."""
    found = find_backlog_bin()
    if not found or not os.access(found, os.X_OK):
        pytest.fail(
            "the Backlog.md CLI was not found: set SCAFFOLD_BACKLOG_BIN, or run "
            "`npm install --prefix .tools backlog.md@1.52.0` in the repository "
            f"(looked for {found or 'backlog'} in .tools/node_modules/.bin, "
            "SCAFFOLD_TEST_BIN_DIR, /tmp/npmtools/node_modules/.bin and PATH)",
            pytrace=False,
        )
    return found


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
