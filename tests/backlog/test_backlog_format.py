"""Parsing task files: the recorded files the real tool wrote, and hand-written variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaffold.backlog import BacklogTask, ChecklistItem, parse_task, read_task
from scaffold.errors import BacklogError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "backlog"


def fixture_task(name: str) -> BacklogTask:
    (path,) = FIXTURES.glob(f"{name} - *.md")
    return read_task(path)


def test_task_1_every_section() -> None:
    task = fixture_task("task-1")
    assert task.id == "TASK-1"
    assert task.title == "Set up database schema"
    assert task.status == "Done"
    assert task.priority == "high"
    assert task.dependencies == []
    assert task.parent_task_id is None
    assert task.labels == ["backend", "db"]
    assert task.assignee == ["@alice"]
    assert task.ordinal == 1000
    assert task.created_date == "2026-11-22 01:41"
    assert task.description == "Create the initial Postgres schema for users and orders."
    assert task.acceptance_criteria == [
        (1, True, "Users table exists"),
        (2, True, "Orders table has FK to users"),
    ]
    assert task.acceptance_criteria[0] == ChecklistItem(1, True, "Users table exists")
    assert task.acceptance_criteria[1].text == "Orders table has FK to users"
    assert task.implementation_notes == "Started with users table.\n\nOrders FK added."
    assert task.final_summary == "Schema created; 2 tables."
    assert task.folder == "tasks"
    assert task.path.name == "task-1 - Set-up-database-schema.md"
    assert task.raw == task.path.read_text(encoding="utf-8")


def test_task_2_dependencies_and_references() -> None:
    task = fixture_task("task-2")
    assert (task.id, task.title, task.status) == ("TASK-2", "Implement REST API", "In Progress")
    assert task.dependencies == ["TASK-1"]
    assert task.priority == "medium"
    assert task.labels == ["backend", "api"]
    assert task.assignee == ["@bob"]
    assert task.ordinal == 2000
    assert task.description == "Expose CRUD endpoints.\nSecond line."
    assert task.acceptance_criteria == [(1, False, "GET /users works")]
    assert task.implementation_notes is None
    assert task.final_summary is None


def test_task_2_1_subtask() -> None:
    task = fixture_task("task-2.1")
    assert task.id == "TASK-2.1"
    assert task.title == "Write API tests"
    assert task.parent_task_id == "TASK-2"
    assert task.status == "In Progress"
    assert task.priority == "low"
    assert task.assignee == ["@mcp-agent"]
    assert task.labels == ["testing"]
    assert task.description is None
    assert task.acceptance_criteria == [(1, False, "Coverage > 80%")]
    assert task.implementation_notes == "edited via MCP"


def test_task_3_empty_body_and_extra_keys() -> None:
    task = fixture_task("task-3")
    assert (task.id, task.title, task.status) == ("TASK-3", "Deploy", "To Do")
    assert task.dependencies == ["TASK-2", "TASK-1"]
    assert task.assignee == []
    assert task.labels == []
    assert task.priority is None
    assert task.ordinal == 5000
    assert task.description is None
    assert task.acceptance_criteria == []


def test_titles_written_by_the_tool_read_back() -> None:
    titles = {read_task(p).title for p in (FIXTURES / "titles").glob("*.md")}
    assert "Ünïcödé ✓ tâche" in titles
    assert "Emoji 🚀 title" in titles
    assert "tab\tin" in titles
    assert "yes" in titles
    assert "0o17" in titles  # js-yaml keeps it a string; so must we
    assert "123" in titles
    assert "word " * 19 + "word" in titles  # folded with >- by the tool


HAND_WRITTEN = """\
---
id: task-7
title: Hand written
status: To Do
custom_key: keep me
dependencies: [2, task-3, TASK-3]
assignee: '@solo'
---

## Description

Plain description here.
Second line.

## Context

Unknown section, shown inside the description as the tool does.

## Acceptance Criteria

- [ ] First
- [x] Second

## Implementation Notes

legacy notes
"""


def test_plain_sections_without_markers() -> None:
    task = parse_task(HAND_WRITTEN, Path("task-7 - Hand.md"))
    assert task.id == "TASK-7"
    assert task.dependencies == ["TASK-2", "TASK-3"]
    assert task.assignee == ["@solo"]
    assert task.description == (
        "Plain description here.\nSecond line.\n\n## Context\n\n"
        "Unknown section, shown inside the description as the tool does."
    )
    assert task.acceptance_criteria == [(1, False, "First"), (2, True, "Second")]
    assert task.implementation_notes == "legacy notes"
    assert task.final_summary is None


def test_marker_text_inside_another_section_is_not_a_section() -> None:
    text = (
        "---\nid: TASK-1\ntitle: t\nstatus: To Do\n---\n\n## Description\n\n"
        "<!-- SECTION:DESCRIPTION:BEGIN -->\nSee:\n## Implementation Notes\nnot notes\n"
        "<!-- SECTION:DESCRIPTION:END -->\n"
    )
    task = parse_task(text, Path("task-1 - t.md"))
    assert task.implementation_notes is None
    assert task.description == "See:\n## Implementation Notes\nnot notes"


def test_crlf_file() -> None:
    text = HAND_WRITTEN.replace("\n", "\r\n")
    task = parse_task(text, Path("task-7 - Hand.md"))
    assert task.implementation_notes == "legacy notes"
    assert task.acceptance_criteria[1] == (2, True, "Second")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no frontmatter\n", "no frontmatter"),
        ("---\nid: TASK-1\ntitle: t\n", "not closed"),
        ("---\nid: TASK-1\ntitle: [unclosed\nstatus: To Do\n---\n", "not valid YAML"),
        ("---\n- a\n- b\n---\n", "not a mapping"),
        ("---\ntitle: t\nstatus: To Do\n---\n", "'id' is missing"),
        ("---\nid: nope nope\ntitle: t\nstatus: To Do\n---\n", "'id' is not a task id"),
        ("---\nid: TASK-1\nstatus: To Do\n---\n", "'title' is missing"),
        ("---\nid: TASK-1\ntitle: [a, b]\nstatus: To Do\n---\n", "'title' must be text"),
        ("---\nid: TASK-1\ntitle: t\n---\n", "'status' is missing"),
        ("---\nid: TASK-1\ntitle: t\nstatus: To Do\ndependencies: TASK-2\n---\n", "must be a list"),
        ("---\nid: TASK-1\ntitle: t\nstatus: x\ndependencies: [foo bar]\n---\n", "not a task id"),
        ("---\nid: TASK-1\ntitle: t\nstatus: x\nordinal: soon\n---\n", "'ordinal' must be"),
        ("---\nid: TASK-1\nid: TASK-2\ntitle: t\nstatus: x\n---\n", "not valid YAML"),
    ],
)
def test_malformed_files_raise_with_path_and_reason(text: str, reason: str) -> None:
    with pytest.raises(BacklogError) as info:
        parse_task(text, Path("backlog/tasks/task-1 - t.md"))
    assert reason in info.value.reason
    assert info.value.path == "backlog/tasks/task-1 - t.md"


def test_unreadable_bytes(tmp_path: Path) -> None:
    path = tmp_path / "task-1 - t.md"
    path.write_bytes(b"---\nid: TASK-1\ntitle: \xff\n---\n")
    with pytest.raises(BacklogError, match="not UTF-8"):
        read_task(path)
