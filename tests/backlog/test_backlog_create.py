"""Creating tasks: same bytes, names and ids as the real tool (checked against its recorded files)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from scaffold.backlog import (
    BacklogConfig,
    create_task,
    load_backlog,
    next_task_id,
    read_task,
    render_task,
    sanitize_filename,
)
from scaffold.backlog.create import task_filename
from scaffold.backlog.jsyaml import dump_key_value, dump_string
from scaffold.errors import BacklogError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "backlog"
NOON = dt.datetime(2026, 3, 4, 12, 5, tzinfo=dt.UTC)

TITLE_FILES = sorted((FIXTURES / "titles").glob("*.md"))


@pytest.mark.parametrize("path", TITLE_FILES, ids=[p.name[:40] for p in TITLE_FILES])
def test_render_matches_the_tool_byte_for_byte(path: Path) -> None:
    task = read_task(path)
    assert task.created_date is not None
    rendered = render_task(
        task_id=task.id,
        title=task.title,
        status=task.status,
        created_date=task.created_date,
        ordinal=task.ordinal,
    )
    assert rendered.encode() == path.read_bytes()
    assert task_filename(task.id, task.title) == path.name


def test_render_with_every_field_matches_recorded_layout() -> None:
    text = render_task(
        task_id="TASK-3",
        title="Both",
        status="To Do",
        created_date="2026-11-22 02:41",
        description="  d  \n",
        dependencies=["TASK-1", "TASK-2"],
        labels=["a", "b"],
        parent="TASK-1",
        priority="medium",
        ordinal=3000,
        acceptance_criteria=["  a  ", "", "b"],
    )
    assert text == (
        "---\nid: TASK-3\ntitle: Both\nstatus: To Do\nassignee: []\n"
        "created_date: '2026-11-22 02:41'\nlabels:\n  - a\n  - b\n"
        "dependencies:\n  - TASK-1\n  - TASK-2\nparent_task_id: TASK-1\n"
        "priority: medium\nordinal: 3000\n---\n\n"
        "## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\nd\n<!-- SECTION:DESCRIPTION:END -->\n\n"
        "## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 a\n- [ ] #2 b\n<!-- AC:END -->\n"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "''"),
        ("In Progress", "In Progress"),
        ("@alice", "'@alice'"),
        ("it's", "it's"),
        ("'quoted'", "'''quoted'''"),
        ("a: b", "'a: b'"),
        ("on", "'on'"),
        ("1:30", "'1:30'"),
        ("a\nb", "|-\n  a\n  b"),
        ("\u0085x", '"\\Nx"'),
    ],
)
def test_dump_string(value: str, expected: str) -> None:
    assert dump_string(value) == expected


def test_dump_key_value_lists_and_numbers() -> None:
    assert dump_key_value("labels", []) == "labels: []\n"
    assert dump_key_value("labels", ["x", "@y"]) == "labels:\n  - x\n  - '@y'\n"
    assert dump_key_value("ordinal", 2500.0) == "ordinal: 2500\n"
    assert dump_key_value("ordinal", 2500.5) == "ordinal: 2500.5\n"


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("Sub: thing/with 'quotes' & stuff?", "Sub-thing-with-quotes-stuff"),
        ("Ünïcödé ✓ tâche", "Ünïcödé-✓-tâche"),
        ("  --a  b--  ", "a-b"),
        ("!!!", "untitled"),
        ("tab\tand\u00a0nbsp", "tab-and-nbsp"),
    ],
)
def test_sanitize_filename(title: str, name: str) -> None:
    assert sanitize_filename(title) == name


def test_next_task_id_rules() -> None:
    config = BacklogConfig()
    used = {"TASK-1", "TASK-3", "TASK-3.1", "TASK-3.4", "DRAFT-9", "TASK-2.7"}
    assert next_task_id(set(), config) == "TASK-1"
    assert next_task_id(used, config) == "TASK-4"
    assert next_task_id(used, config, "TASK-3") == "TASK-3.5"
    assert next_task_id(used, config, "TASK-1") == "TASK-1.1"
    padded = BacklogConfig(zero_padded_ids=3, task_prefix="job")
    assert next_task_id({"JOB-007"}, padded) == "JOB-008"
    assert next_task_id({"JOB-007"}, padded, "JOB-007") == "JOB-007.01"


def test_create_task_next_to_recorded_files(fixture_backlog: Path) -> None:
    task = create_task(
        fixture_backlog,
        "  Ship it: now!  ",
        "First line\nSecond line",
        dependencies=["3", "task-1", "TASK-1"],
        priority=" HIGH ",
        acceptance_criteria=["It ships", "  "],
        labels=["ops", "ops", " "],
        now=NOON,
    )
    assert task.id == "TASK-4"
    assert task.title == "Ship it: now!"
    assert task.status == "To Do"
    assert task.dependencies == ["TASK-3", "TASK-1"]
    assert task.priority == "high"
    assert task.labels == ["ops"]
    assert task.ordinal == 6000
    assert task.created_date == "2026-03-04 12:05"
    assert task.acceptance_criteria == [(1, False, "It ships")]
    assert task.description == "First line\nSecond line"
    assert task.path == fixture_backlog / "backlog" / "tasks" / "task-4 - Ship-it-now.md"
    assert task.path.read_text(encoding="utf-8") == task.raw
    assert "title: 'Ship it: now!'\n" in task.raw
    assert oct(task.path.stat().st_mode & 0o777) != oct(0o600)  # not the temp file's mode
    assert [p.name for p in task.path.parent.iterdir() if p.name.startswith(".")] == []

    sub = create_task(fixture_backlog, "Sub of two", parent="task-2", now=NOON)
    assert sub.id == "TASK-2.2"
    assert sub.parent_task_id == "TASK-2"
    assert sub.ordinal == 7000
    snapshot = load_backlog(fixture_backlog)
    assert [t.id for t in snapshot.tasks] == [
        "TASK-1",
        "TASK-2",
        "TASK-2.1",
        "TASK-2.2",
        "TASK-3",
        "TASK-4",
    ]
    assert snapshot.problems == []


def test_create_task_never_reuses_archived_or_draft_ids(fixture_backlog: Path) -> None:
    backlog = fixture_backlog / "backlog"
    (backlog / "archive" / "tasks").mkdir(parents=True)
    (backlog / "archive" / "tasks" / "task-7 - Old.md").write_text("---\nid: TASK-7\n---\n")
    (backlog / "drafts").mkdir()
    (backlog / "drafts" / "draft-12 - New style draft.md").write_text("---\nid: DRAFT-12\n---\n")
    assert create_task(fixture_backlog, "After archive", now=NOON).id == "TASK-8"
    (backlog / "drafts" / "task-9 - Legacy draft.md").write_text("---\nid: TASK-9\n---\n")
    assert create_task(fixture_backlog, "After draft", now=NOON).id == "TASK-10"


def test_create_task_in_empty_backlog(tmp_path: Path) -> None:
    (tmp_path / "backlog").mkdir()
    task = create_task(tmp_path, "First", now=NOON)
    assert (task.id, task.ordinal) == ("TASK-1", 1000)
    assert task.raw == (
        "---\nid: TASK-1\ntitle: First\nstatus: To Do\nassignee: []\n"
        "created_date: '2026-03-04 12:05'\nlabels: []\ndependencies: []\nordinal: 1000\n---\n\n\n"
    )


def test_no_ordinal_when_existing_tasks_have_none(tmp_path: Path) -> None:
    tasks = tmp_path / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "task-1 - a.md").write_text("---\nid: TASK-1\ntitle: a\nstatus: To Do\n---\n")
    assert create_task(tmp_path, "b", now=NOON).ordinal is None


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"title": "   "}, "needs a title"),
        ({"title": "two\nlines"}, "one line"),
        ({"title": "t", "dependencies": ["TASK-99"]}, "dependency TASK-99 does not exist"),
        ({"title": "t", "dependencies": ["not an id"]}, "is not a task id"),
        ({"title": "t", "parent": "TASK-42"}, "parent task TASK-42 does not exist"),
        ({"title": "t", "priority": "urgent"}, "unknown priority"),
        ({"title": "x" * 300}, "too long"),
    ],
)
def test_create_task_refusals(fixture_backlog: Path, kwargs: dict[str, str], reason: str) -> None:
    with pytest.raises(BacklogError, match=reason):
        create_task(fixture_backlog, **kwargs)  # type: ignore[arg-type]
    names = sorted(p.name for p in (fixture_backlog / "backlog" / "tasks").iterdir())
    assert len(names) == 4
