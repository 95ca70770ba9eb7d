"""Interop with the real Backlog.md CLI: it and scaffold must read and write the same files."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from backlog_cli import BacklogCLI
from scaffold.backlog import (
    CYCLE,
    MALFORMED,
    MISSING_DEPENDENCY,
    UNKNOWN_STATUS,
    create_task,
    load_backlog,
    update_task,
)

pytestmark = pytest.mark.interop

MakeCLI = Callable[[str], BacklogCLI]
NOW = dt.datetime(2026, 5, 6, 7, 8, tzinfo=dt.UTC)
UNICODE = "Ünïcödé ✓ tâche"
LONG = "Refactor the scheduler so that ready tasks are dispatched in dependency order and fairly"


def task_path(cli: BacklogCLI, task_id: str) -> Path:
    number = task_id.split("-", 1)[1]
    (path,) = (cli.repo / "backlog" / "tasks").glob(f"task-{number} - *.md")
    return path


def without_dates(text: str) -> str:
    return re.sub(r"^(created_date|updated_date): .*$", r"\1: <date>", text, flags=re.M)


def test_backlog_made_by_the_cli_reads_like_the_cli(make_cli: MakeCLI) -> None:
    cli = make_cli("made-by-cli")
    assert (
        cli.create(
            "Set up DB",
            "-d",
            "Schema\nfor users",
            "--ac",
            "Users",
            "--ac",
            "Orders",
            "--priority",
            "high",
            "-s",
            "Done",
        )
        == "TASK-1"
    )
    assert cli.create(UNICODE, "--dep", "1", "--priority", "low", "--ac", "ü works") == "TASK-2"
    assert cli.create("Sub task", "-p", "1") == "TASK-1.1"
    assert (
        cli.create("Needs both", "--dep", "task-1,TASK-2", "-l", "a,b", "--priority", "medium")
        == "TASK-3"
    )
    assert (
        cli.create("Emoji 🚀 and: colon", "--dep", "3", "-a", "@bob", "-s", "In Progress")
        == "TASK-4"
    )
    assert cli.create(LONG, "--dep", "1.1") == "TASK-5"
    cli.run("task", "create", "Drafty", "--draft")

    listed = {t["id"]: t for t in cli.list_json()}
    snap = load_backlog(cli.repo)
    assert snap.problems == []
    assert [d.title for d in snap.drafts] == ["Drafty"]
    ours = {t.id: t for t in snap.tasks}
    assert (
        set(ours) == set(listed) == {"TASK-1", "TASK-1.1", "TASK-2", "TASK-3", "TASK-4", "TASK-5"}
    )
    for tid, theirs in listed.items():
        task = ours[tid]
        assert task.title == theirs["title"]
        assert task.status == theirs["status"]
        assert task.parent_task_id == theirs["parentTaskId"]
        assert task.priority == theirs["priority"]
        assert task.labels == theirs["labels"]
        assert task.assignee == theirs["assignees"]
        assert task.ordinal == theirs["ordinal"]
        assert len(task.acceptance_criteria) == theirs["acceptanceCriteriaCount"]
        assert (
            sum(c.checked for c in task.acceptance_criteria)
            == theirs["acceptanceCriteriaCompleted"]
        )
        if task.status == "To Do":  # for waiting tasks our rule and the tool's agree
            assert snap.readiness[tid].ready == theirs["isReady"], tid
    assert [tid for tid, r in snap.readiness.items() if r.ready] == ["TASK-1.1", "TASK-2"]

    for tid in ("TASK-3", "TASK-1"):
        view = cli.view_json(tid)
        task = ours[tid]
        assert task.dependencies == view["dependencies"]
        assert task.description == view["description"]
        assert [(c.index, c.checked, c.text) for c in task.acceptance_criteria] == [
            (c["index"], c["checked"], c["text"]) for c in view["acceptanceCriteria"]
        ]


def test_scaffold_writes_show_up_in_the_cli(make_cli: MakeCLI) -> None:
    cli = make_cli("scaffold-writes")
    cli.create("Write the parser", "--ac", "Reads markers", "--ac", "Reads plain sections")
    cli.create("Ship it", "--dep", "1")
    first = task_path(cli, "TASK-1")

    update_task(first, status="In Progress")
    update_task(first, notes="Parsed the fixtures.")
    update_task(first, notes="Added CRLF support.\nSecond line.")
    update_task(first, summary="Parser done; **all** sections read.")
    update_task(first, status="Done")

    statuses = {t["id"]: (t["status"], t["isReady"]) for t in cli.list_json()}
    assert statuses == {"TASK-1": ("Done", False), "TASK-2": ("To Do", True)}
    plain = cli.view_plain("1")
    assert "Parsed the fixtures.\n\nAdded CRLF support.\nSecond line." in plain
    assert "Parser done; **all** sections read." in plain
    view = cli.view_json("TASK-1")
    assert (
        view["implementationNotes"] == "Parsed the fixtures.\n\nAdded CRLF support.\nSecond line."
    )
    assert view["finalSummary"] == "Parser done; **all** sections read."
    assert [c["checked"] for c in view["acceptanceCriteria"]] == [False, False]
    assert view["updatedAt"] is not None
    assert [tid for tid, r in load_backlog(cli.repo).readiness.items() if r.ready] == ["TASK-2"]


def test_tasks_created_by_scaffold_are_listed_by_the_cli(make_cli: MakeCLI) -> None:
    cli = make_cli("scaffold-creates")
    root = cli.repo
    one = create_task(
        root,
        "Design the API",
        "Endpoints and errors",
        priority="high",
        acceptance_criteria=["Doc", "Review"],
    )
    two = create_task(root, UNICODE, dependencies=[one.id], acceptance_criteria=["ü"])
    sub = create_task(root, "Sub of one", parent="1", priority="low")
    three = create_task(root, LONG, dependencies=["TASK-2", "1.1"], labels=["api"])
    assert [one.id, two.id, sub.id, three.id] == ["TASK-1", "TASK-2", "TASK-1.1", "TASK-3"]

    listed = {t["id"]: t for t in cli.list_json()}
    assert {tid: t["title"] for tid, t in listed.items()} == {
        "TASK-1": "Design the API",
        "TASK-2": UNICODE,
        "TASK-1.1": "Sub of one",
        "TASK-3": LONG,
    }
    assert listed["TASK-1"]["acceptanceCriteriaCount"] == 2
    assert listed["TASK-2"]["acceptanceCriteriaCount"] == 1
    assert listed["TASK-1"]["priority"] == "high"
    assert listed["TASK-1.1"]["parentTaskId"] == "TASK-1"
    assert listed["TASK-3"]["labels"] == ["api"]
    assert [listed[t]["isReady"] for t in ("TASK-1", "TASK-2", "TASK-3")] == [True, False, False]
    view = cli.view_json("3")
    assert view["dependencies"] == ["TASK-2", "TASK-1.1"]
    assert view["path"] == f"backlog/tasks/{three.path.name}"
    # The CLI can keep working on a file scaffold made.
    cli.run("task", "edit", "2", "--check-ac", "1", "--append-notes", "by the CLI")
    view = cli.view_json("2")
    assert view["acceptanceCriteria"][0]["checked"] is True
    assert view["implementationNotes"] == "by the CLI"


def test_create_and_edits_match_the_cli_byte_for_byte(make_cli: MakeCLI) -> None:
    theirs = make_cli("theirs")
    ours = theirs.repo.parent / "ours"
    (ours / "backlog").mkdir(parents=True)
    shutil.copy(theirs.repo / "backlog" / "config.yml", ours / "backlog" / "config.yml")
    specs: list[tuple[tuple[str, ...], dict[str, object]]] = [
        (
            (
                "Set up DB",
                "-d",
                "  Schema  \n\nfor users\n",
                "--ac",
                " Users ",
                "--ac",
                "Orders",
                "--priority",
                "High",
            ),
            {
                "title": "Set up DB",
                "description": "  Schema  \n\nfor users\n",
                "acceptance_criteria": [" Users ", "Orders"],
                "priority": "High",
            },
        ),
        (
            (UNICODE, "--dep", "1", "-l", "ui"),
            {"title": UNICODE, "dependencies": ["1"], "labels": ["ui"]},
        ),
        (
            ("Sub: with 'quotes' & more?", "-p", "1"),
            {"title": "Sub: with 'quotes' & more?", "parent": "1"},
        ),
        (
            (LONG, "--dep", "1,2", "-d", "x"),
            {"title": LONG, "dependencies": ["1", "2"], "description": "x"},
        ),
        (("yes",), {"title": "yes"}),
    ]
    for args, kwargs in specs:
        theirs.create(*args)
        create_task(ours, **kwargs)  # type: ignore[arg-type]

    def files(repo: Path) -> dict[str, str]:
        tasks = repo / "backlog" / "tasks"
        return {
            p.name: without_dates(p.read_text(encoding="utf-8")) for p in sorted(tasks.iterdir())
        }

    assert files(ours) == files(theirs.repo)
    assert len(files(ours)) == 5

    def mine(task_id: str) -> Path:
        return ours / "backlog" / "tasks" / task_path(theirs, task_id).name

    theirs.run("task", "edit", "1", "-s", "In Progress", "--append-notes", "first note")
    update_task(mine("TASK-1"), status="In Progress", now=NOW)
    update_task(mine("TASK-1"), notes="first note", now=NOW)
    theirs.run("task", "edit", "1", "--append-notes", "second\nnote")
    update_task(mine("TASK-1"), notes="second\nnote", now=NOW)
    theirs.run("task", "edit", "2", "--final-summary", "done it")
    update_task(mine("TASK-2"), summary="done it", now=NOW)
    theirs.run("task", "edit", "1.1", "--append-notes", "empty body before")
    update_task(mine("TASK-1.1"), notes="empty body before", now=NOW)
    # A task's end: status, notes and summary in one command, and in one edit of scaffold's.
    theirs.run(
        "task", "edit", "2", "-s", "Done", "--append-notes", "all\nthree", "--final-summary", "end"
    )
    update_task(mine("TASK-2"), status="Done", notes="all\nthree", summary="end", now=NOW)
    assert files(ours) == files(theirs.repo)


def test_hand_written_defects_are_reported_where_the_cli_drops_them(make_cli: MakeCLI) -> None:
    cli = make_cli("defects")
    cli.create("Fine")
    tasks = cli.repo / "backlog" / "tasks"

    def hand(name: str, *lines: str) -> None:
        (tasks / name).write_text("\n".join(lines) + "\n", encoding="utf-8")

    hand(
        "task-2 - Cycle-a.md",
        "---",
        "id: TASK-2",
        "title: Cycle a",
        "status: To Do",
        "dependencies: [TASK-3]",
        "---",
    )
    hand(
        "task-3 - Cycle-b.md",
        "---",
        "id: TASK-3",
        "title: Cycle b",
        "status: To Do",
        "dependencies: [TASK-2]",
        "---",
    )
    hand(
        "task-4 - Missing.md",
        "---",
        "id: TASK-4",
        "title: Missing",
        "status: To Do",
        "dependencies: [TASK-77]",
        "---",
    )
    hand("task-5 - Weird.md", "---", "id: TASK-5", "title: Weird", "status: Blocked", "---")
    hand("task-6 - Broken.md", "---", "id: TASK-6", "title: 'unterminated", "status: To Do", "---")

    listed = {t["id"]: t for t in cli.list_json()}
    assert "TASK-6" not in listed  # the tool drops the malformed file silently
    assert not listed["TASK-2"]["isReady"]
    assert not listed["TASK-4"]["isReady"]

    problems = {(p.kind, p.path): p for p in load_backlog(cli.repo).problems}
    assert set(problems) == {
        (CYCLE, "backlog/tasks/task-2 - Cycle-a.md"),
        (MISSING_DEPENDENCY, "backlog/tasks/task-4 - Missing.md"),
        (UNKNOWN_STATUS, "backlog/tasks/task-5 - Weird.md"),
        (MALFORMED, "backlog/tasks/task-6 - Broken.md"),
    }
    assert (
        "TASK-2 -> TASK-3 -> TASK-2" in problems[CYCLE, "backlog/tasks/task-2 - Cycle-a.md"].reason
    )
    assert "TASK-77" in problems[MISSING_DEPENDENCY, "backlog/tasks/task-4 - Missing.md"].reason
    assert "'Blocked'" in problems[UNKNOWN_STATUS, "backlog/tasks/task-5 - Weird.md"].reason
    assert "not valid YAML" in problems[MALFORMED, "backlog/tasks/task-6 - Broken.md"].reason
