"""Drive the real Backlog.md CLI from tests (kept out of conftest so tests can import it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any


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
        task: dict[str, Any] = json.loads(self.run("task", "view", task_id, "--json").stdout)[
            "task"
        ]
        return task

    def view_plain(self, task_id: str) -> str:
        return self.run("task", "view", task_id, "--plain").stdout
