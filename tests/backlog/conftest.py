"""Fixtures for the Backlog.md adapter tests: the real CLI and the recorded fixture files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


class BacklogCLI:
    """Runs the real CLI inside one repository, with an isolated HOME."""

    def __init__(self, binary: str, repo: Path, home: Path) -> None:
        self.binary = binary
        self.repo = repo
        self.env = {**os.environ, "HOME": str(home), "NO_COLOR": "1", "CI": "1"}
        self.env.pop("BACKLOG_CWD", None)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, *args],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"backlog {' '.join(args)} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def init(self, name: str = "Demo") -> None:
        subprocess.run(["git", "init", "-q", str(self.repo)], check=True, timeout=30)
        self.run("init", name, "--defaults")
        assert (self.repo / "backlog" / "config.yml").is_file()

    def create(self, title: str, *args: str) -> str:
        """Create a task; returns its id as listed by the CLI."""
        out = self.run("task", "create", title, *args, "--plain").stdout
        for line in out.splitlines():
            if line.startswith("Task "):
                return line.split()[1]
        raise AssertionError(f"no task id in output: {out}")

    def list_json(self) -> list[dict[str, Any]]:
        data = json.loads(self.run("task", "list", "--json").stdout)
        assert data["schemaVersion"] == 1
        tasks: list[dict[str, Any]] = data["tasks"]
        return tasks

    def view_json(self, task_id: str) -> dict[str, Any]:
        task: dict[str, Any] = json.loads(self.run("task", "view", task_id, "--json").stdout)["task"]
        return task

    def view_plain(self, task_id: str) -> str:
        return self.run("task", "view", task_id, "--plain").stdout


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
