"""``scaffold status --json`` on a backlog the real Backlog.md CLI wrote, defects included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from repo_builder import PYTHON

from backlog_cli import BacklogCLI
from harness import require_tool
from scaffold import backlog as bl

TESTS = Path(__file__).resolve().parents[1]
UNICODE_TITLE = "Größe prüfen — 日本語のタイトル ✓"


@pytest.fixture
def backlog_cli(tmp_path: Path) -> Any:
    """The real ``backlog`` CLI in a fresh repository, found as tests/backlog finds it."""
    found = require_tool("backlog", "SCAFFOLD_BACKLOG_BIN")
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    cli = BacklogCLI(found, repo, home)
    cli.init("Status")
    return cli


def _task_file(task_id: str, title: str, deps: list[str]) -> str:
    dep_lines = "".join(f"  - {d}\n" for d in deps)
    return (
        f"---\nid: {task_id}\ntitle: {title}\nstatus: To Do\nassignee: []\n"
        f"created_date: '2026-11-22 01:41'\nlabels: []\ndependencies:\n{dep_lines}---\n\n"
        "## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\nHand written.\n"
        "<!-- SECTION:DESCRIPTION:END -->\n"
    )


def test_status_json_on_a_backlog_written_by_the_real_cli(backlog_cli: Any) -> None:
    assert backlog_cli.create("Set up the database") == "TASK-1"
    assert backlog_cli.create("Build the API", "--dep", "task-1") == "TASK-2"
    assert backlog_cli.create("Write the API tests", "-p", "task-2") == "TASK-2.1"
    assert backlog_cli.create(UNICODE_TITLE, "--dep", "1,2") == "TASK-3"
    repo: Path = backlog_cli.repo
    tasks = repo / "backlog" / "tasks"
    (tasks / "task-4 - Chicken.md").write_text(_task_file("TASK-4", "Chicken", ["TASK-5"]))
    (tasks / "task-5 - Egg.md").write_text(_task_file("TASK-5", "Egg", ["TASK-4"]))
    (tasks / "task-6 - Orphan.md").write_text(_task_file("TASK-6", "Orphan", ["TASK-99"]))
    broken = tasks / "task-7 - Broken.md"
    broken.write_text("---\nid: TASK-7\ntitle: [unclosed\nstatus: To Do\n---\n\nBody.\n")

    proc = subprocess.run(
        [PYTHON, "-m", "scaffold", "status", "--json"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    by_id = {t["id"]: t for t in report["tasks"]}
    assert set(by_id) >= {"TASK-1", "TASK-2", "TASK-2.1", "TASK-3", "TASK-4", "TASK-5", "TASK-6"}
    for task in report["tasks"]:
        for key in ("id", "title", "status", "dependencies", "ready", "state"):
            assert key in task, (key, task)
        assert task["state"] == "Idle"
        assert task["status"] == "To Do"
    assert by_id["TASK-1"]["ready"] is True
    assert by_id["TASK-2"]["dependencies"] == ["TASK-1"]
    assert by_id["TASK-2"]["ready"] is False
    assert by_id["TASK-2.1"]["parent"] == "TASK-2"
    assert by_id["TASK-3"]["title"] == UNICODE_TITLE
    assert by_id["TASK-3"]["dependencies"] == ["TASK-1", "TASK-2"]
    assert by_id["TASK-4"]["ready"] is False
    assert by_id["TASK-5"]["ready"] is False
    assert by_id["TASK-6"]["ready"] is False

    errors = report["errors"]
    assert all(e["path"] and e["reason"] for e in errors)
    [cycle] = [e for e in errors if e.get("kind") == bl.CYCLE]
    assert "TASK-4" in cycle["reason"]
    assert "TASK-5" in cycle["reason"]
    [missing] = [e for e in errors if e.get("kind") == bl.MISSING_DEPENDENCY]
    assert missing["task"] == "TASK-6"
    assert "TASK-99" in missing["reason"]
    assert "task-6 - Orphan.md" in missing["path"]
    [malformed] = [e for e in errors if "task-7 - Broken.md" in e["path"]]
    assert malformed["kind"] == bl.MALFORMED
    assert "TASK-7" not in by_id
