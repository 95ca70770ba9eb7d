"""In-place edits: only the changed lines and sections move; everything else survives byte for byte."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

from scaffold.backlog import read_task, update_task, writer
from scaffold.errors import BacklogError

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
STAMP = "updated_date: '2026-12-01 09:30'\n"


def task_file(repo: Path, prefix: str) -> Path:
    (path,) = (repo / "backlog" / "tasks").glob(f"{prefix} - *.md")
    return path


def expected_status_rewrite(old: str, status: str) -> str:
    """The old text with only the status and updated_date lines changed (or inserted)."""
    lines = old.splitlines(keepends=True)
    out: list[str] = []
    has_updated = any(line.startswith("updated_date:") for line in lines)
    for line in lines:
        if line.startswith("status:"):
            out.append(f"status: {status}\n")
        elif line.startswith("updated_date:"):
            out.append(STAMP)
        else:
            out.append(line)
            if line.startswith("created_date:") and not has_updated:
                out.append(STAMP)
    return "".join(out)


@pytest.mark.parametrize("prefix", ["task-1", "task-2", "task-2.1", "task-3"])
def test_status_changes_only_status_and_updated_date(fixture_backlog: Path, prefix: str) -> None:
    path = task_file(fixture_backlog, prefix)
    old = path.read_text(encoding="utf-8")
    task = update_task(path, status="in progress", now=NOW)  # the configured spelling is written
    new = path.read_text(encoding="utf-8")
    assert new == expected_status_rewrite(old, "In Progress")
    assert task.status == "In Progress"
    assert task.raw == new


def test_status_refuses_unknown_status(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-3")
    old = path.read_bytes()
    with pytest.raises(BacklogError, match="unknown status 'Blocked'"):
        update_task(path, status="Blocked")
    assert path.read_bytes() == old


def test_edit_keeps_permissions_and_leaves_no_temp_files(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-2")
    path.chmod(0o640)
    update_task(path, status="Done", now=NOW)
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_append_notes_to_existing_marked_notes(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-1")
    old = path.read_text(encoding="utf-8")
    task = update_task(path, notes="  Indexes added.\n", now=NOW)
    new = path.read_text(encoding="utf-8")
    assert new == expected_status_rewrite(old, "Done").replace(
        "Orders FK added.\n<!-- SECTION:NOTES:END -->",
        "Orders FK added.\n\nIndexes added.\n<!-- SECTION:NOTES:END -->",
    )
    assert (
        task.implementation_notes
        == "Started with users table.\n\nOrders FK added.\n\nIndexes added."
    )
    assert task.final_summary == "Schema created; 2 tables."


def test_append_notes_creates_section_after_acceptance_criteria(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-2")
    old = path.read_text(encoding="utf-8")
    update_task(path, notes="Started.", now=NOW)
    new = path.read_text(encoding="utf-8")
    assert new == expected_status_rewrite(old, "In Progress") + (
        "\n## Implementation Notes\n\n<!-- SECTION:NOTES:BEGIN -->\nStarted.\n"
        "<!-- SECTION:NOTES:END -->\n"
    )


def test_append_notes_to_empty_body(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-3")
    old = path.read_text(encoding="utf-8")
    task = update_task(path, notes="a\nb", now=NOW)
    head = expected_status_rewrite(old, "To Do").removesuffix("\n\n")
    assert path.read_text(encoding="utf-8") == head + (
        "\n## Implementation Notes\n\n<!-- SECTION:NOTES:BEGIN -->\na\nb\n<!-- SECTION:NOTES:END -->\n"
    )
    assert task.implementation_notes == "a\nb"


def test_final_summary_replaced_in_place(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-1")
    old = path.read_text(encoding="utf-8")
    task = update_task(path, summary="Rewritten summary.", now=NOW)
    assert path.read_text(encoding="utf-8") == expected_status_rewrite(old, "Done").replace(
        "Schema created; 2 tables.", "Rewritten summary."
    )
    assert task.final_summary == "Rewritten summary."


def test_final_summary_inserted_after_notes(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-2.1")
    old = path.read_text(encoding="utf-8")
    update_task(path, summary="All green.", now=NOW)
    assert path.read_text(encoding="utf-8") == expected_status_rewrite(old, "In Progress") + (
        "\n## Final Summary\n\n<!-- SECTION:FINAL_SUMMARY:BEGIN -->\nAll green.\n"
        "<!-- SECTION:FINAL_SUMMARY:END -->\n"
    )


@pytest.mark.parametrize("prefix", ["task-1", "task-2", "task-2.1", "task-3"])
def test_update_task_is_the_three_edits_in_one_write(
    fixture_backlog: Path, tmp_path: Path, prefix: str
) -> None:
    path = task_file(fixture_backlog, prefix)
    twin = tmp_path / "backlog" / "tasks" / path.name
    twin.parent.mkdir(parents=True)
    (tmp_path / "backlog" / "config.yml").write_bytes(
        (fixture_backlog / "backlog" / "config.yml").read_bytes()
    )
    twin.write_bytes(path.read_bytes())
    update_task(twin, status="done", now=NOW)
    update_task(twin, notes="Built it.\nTwo lines.", now=NOW)
    update_task(twin, summary="Shipped.", now=NOW)
    task = update_task(
        path, status="done", notes="Built it.\nTwo lines.", summary="Shipped.", now=NOW
    )
    assert path.read_bytes() == twin.read_bytes()
    assert (task.status, task.final_summary) == ("Done", "Shipped.")


def test_update_task_checks_everything_before_writing(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-2")
    before = path.read_bytes()
    with pytest.raises(BacklogError, match="implementation notes is empty"):
        update_task(path, status="Done", notes="  \n ", now=NOW)
    with pytest.raises(BacklogError, match="unknown status"):
        update_task(path, status="Shipped", summary="fine", now=NOW)
    assert path.read_bytes() == before


HAND_WRITTEN = """\
---
id: TASK-7
title: "Hand written"   # a comment the tool would drop
status: To Do
created_date: 2026-01-02 03:04
scaffold_meta:
  owner: me
  tries: [1, 2]
weird_list:
- a
- b
dependencies: []
---

Intro text before any section.

## Description

Plain description.

## Context

Unknown section kept as is.

## Acceptance Criteria

- [ ] First
- [ ] Second

## Implementation Notes

legacy notes

## Appendix

Trailing unknown section.
"""


def test_unknown_keys_comments_and_sections_survive(tmp_path: Path) -> None:
    tasks = tmp_path / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    path = tasks / "task-7 - Hand-written.md"
    path.write_text(HAND_WRITTEN, encoding="utf-8")

    update_task(path, status="In Progress", now=NOW)
    task = update_task(path, notes="new notes", now=NOW)
    text = path.read_text(encoding="utf-8")

    expected = (
        HAND_WRITTEN.replace("status: To Do\n", "status: In Progress\n")
        .replace("created_date: 2026-01-02 03:04\n", "created_date: 2026-01-02 03:04\n" + STAMP)
        .replace(
            "## Implementation Notes\n\nlegacy notes",
            "## Implementation Notes\n\n<!-- SECTION:NOTES:BEGIN -->\nlegacy notes\n\nnew notes\n"
            "<!-- SECTION:NOTES:END -->",
        )
    )
    assert text == expected
    assert task.implementation_notes == "legacy notes\n\nnew notes"
    assert task.acceptance_criteria == [(1, False, "First"), (2, False, "Second")]


def test_crlf_line_endings_are_kept(tmp_path: Path) -> None:
    tasks = tmp_path / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    path = tasks / "task-7 - Hand-written.md"
    crlf = HAND_WRITTEN.replace("\n", "\r\n").encode()
    path.write_bytes(crlf)
    update_task(path, status="Done", now=NOW)
    data = path.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert data == crlf.replace(b"status: To Do\r\n", b"status: Done\r\n").replace(
        b"created_date: 2026-01-02 03:04\r\n",
        b"created_date: 2026-01-02 03:04\r\n" + STAMP.replace("\n", "\r\n").encode(),
    )


def test_multiline_status_value_is_replaced_whole(tmp_path: Path) -> None:
    tasks = tmp_path / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    path = tasks / "task-1 - x.md"
    path.write_text("---\nid: TASK-1\ntitle: x\nstatus: >-\n  To\n  Do\nlabels: []\n---\n")
    task = update_task(path, status="Done", now=NOW)
    assert path.read_text() == (
        "---\nid: TASK-1\ntitle: x\nstatus: Done\n" + STAMP + "labels: []\n---\n"
    )
    assert task.status == "Done"


def test_malformed_file_is_not_touched(tmp_path: Path) -> None:
    tasks = tmp_path / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    path = tasks / "task-1 - x.md"
    path.write_text("---\nid: TASK-1\ntitle: [oops\nstatus: To Do\n---\n")
    before = os.stat(path).st_mtime_ns, path.read_bytes()
    with pytest.raises(BacklogError, match="not valid YAML"):
        update_task(path, status="Done")
    with pytest.raises(BacklogError, match="not valid YAML"):
        update_task(path, notes="x")
    assert (os.stat(path).st_mtime_ns, path.read_bytes()) == before


def test_empty_text_refused(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-2")
    with pytest.raises(BacklogError, match="implementation notes is empty"):
        update_task(path, notes="  \n ")
    with pytest.raises(BacklogError, match="final summary is empty"):
        update_task(path, summary="")


def test_read_back_equals_written(fixture_backlog: Path) -> None:
    path = task_file(fixture_backlog, "task-2.1")
    written = update_task(path, status="Done", now=NOW)
    assert read_task(path) == written


def test_concurrent_change_is_not_clobbered(
    fixture_backlog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = task_file(fixture_backlog, "task-3")
    theirs = path.read_text(encoding="utf-8").replace("title: Deploy", "title: Deploy now")
    edit_section = writer._edit_section

    def someone_writes_meanwhile(body: str, *args: Any, **kwargs: Any) -> str:
        path.write_text(theirs, encoding="utf-8")
        return edit_section(body, *args, **kwargs)

    monkeypatch.setattr(writer, "_edit_section", someone_writes_meanwhile)
    with pytest.raises(BacklogError, match="changed while scaffold was editing"):
        update_task(path, notes="mine", now=NOW)
    assert path.read_text(encoding="utf-8") == theirs
