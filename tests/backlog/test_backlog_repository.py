"""Loading a whole backlog: tasks, completed, drafts, config, and every problem reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaffold.backlog import (
    CONFIG,
    CYCLE,
    DUPLICATE_ID,
    MALFORMED,
    MISSING_DEPENDENCY,
    UNKNOWN_STATUS,
    BacklogProblem,
    load_backlog,
)
from scaffold.errors import BacklogError, UnknownTask


def write(repo: Path, rel: str, *lines: str) -> None:
    path = repo / "backlog" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def fm(tid: str, status: str = "To Do", deps: str = "[]", *extra: str) -> list[str]:
    return [
        "---",
        f"id: {tid}",
        f"title: Title of {tid}",
        f"status: {status}",
        f"dependencies: {deps}",
        *extra,
        "---",
    ]


def test_recorded_files_load_cleanly(fixture_backlog: Path) -> None:
    snap = load_backlog(fixture_backlog)
    assert snap.problems == []
    assert [t.id for t in snap.tasks] == ["TASK-1", "TASK-2", "TASK-2.1", "TASK-3"]
    assert snap.config.statuses == ("To Do", "In Progress", "Done")
    assert snap.task("task-2.1").parent_task_id == "TASK-2"
    assert snap.get("3") is snap.tasks[3]
    assert snap.get("not an id") is None
    with pytest.raises(UnknownTask):
        snap.task("TASK-9")
    # TASK-3 waits for TASK-2 (In Progress); nothing else is in To Do.
    assert not any(r.ready for r in snap.readiness.values())
    assert snap.readiness["TASK-3"].reasons == ["waits for TASK-2 (In Progress)"]


def test_every_problem_is_reported_with_path_and_reason(tmp_path: Path) -> None:
    repo = tmp_path
    write(repo, "config.yml", 'statuses: ["To Do", "In Progress", "Done"]', 'task_prefix: "task"')
    write(repo, "tasks/task-1 - Cycle-a.md", *fm("TASK-1", deps="[TASK-2]"))
    write(repo, "tasks/task-2 - Cycle-b.md", *fm("TASK-2", deps="[TASK-3]"))
    write(repo, "tasks/task-3 - Cycle-c.md", *fm("TASK-3", deps="[TASK-1]"))
    write(repo, "tasks/task-4 - Missing-dep.md", *fm("TASK-4", deps="[TASK-404, TASK-5]"))
    write(repo, "tasks/task-5 - Unknown-status.md", *fm("TASK-5", status="Blocked"))
    write(repo, "tasks/task-6 - Bad-yaml.md", "---", "id: TASK-6", "title: [unclosed", "---")
    write(repo, "tasks/task-7 - Deps-not-list.md", *fm("TASK-7", deps="TASK-1"))
    write(repo, "tasks/task-8 - No-title.md", "---", "id: TASK-8", "status: To Do", "---")
    write(repo, "tasks/task-9 - Ready.md", *fm("TASK-9", deps="[TASK-10]"))
    write(repo, "completed/task-10 - Done-long-ago.md", *fm("TASK-10", status="Done"))
    write(repo, "completed/task-9 - Same-id.md", *fm("TASK-9", status="Done"))
    write(repo, "tasks/task-11 - On-draft.md", *fm("TASK-11", deps="[DRAFT-1]"))
    write(repo, "tasks/task-12 - On-archived.md", *fm("TASK-12", deps="[TASK-20]"))
    write(repo, "archive/tasks/task-20 - Archived.md", *fm("TASK-20"))
    write(repo, "drafts/draft-1 - A-draft.md", *fm("DRAFT-1", status="Draft"))
    write(repo, "tasks/README.md", "# not a task")

    snap = load_backlog(repo)
    by_file = {(p.path.rsplit("/", 1)[-1], p.kind): p for p in snap.problems}

    assert by_file["task-1 - Cycle-a.md", CYCLE] == BacklogProblem(
        "backlog/tasks/task-1 - Cycle-a.md",
        "dependency cycle TASK-1 -> TASK-2 -> TASK-3 -> TASK-1 (members: TASK-1, TASK-2, TASK-3)",
        "TASK-1",
        CYCLE,
    )
    assert [p.kind for p in snap.problems].count(CYCLE) == 1
    assert by_file["task-4 - Missing-dep.md", MISSING_DEPENDENCY].reason == (
        "depends on TASK-404, which does not exist"
    )
    assert by_file["task-5 - Unknown-status.md", UNKNOWN_STATUS].reason == (
        "unknown status 'Blocked' (config statuses: 'To Do', 'In Progress', 'Done')"
    )
    bad_yaml = by_file["task-6 - Bad-yaml.md", MALFORMED]
    assert bad_yaml.path == "backlog/tasks/task-6 - Bad-yaml.md"
    assert bad_yaml.reason.startswith("frontmatter is not valid YAML")
    assert "must be a list" in by_file["task-7 - Deps-not-list.md", MALFORMED].reason
    assert by_file["task-8 - No-title.md", MALFORMED].reason == "'title' is missing or empty"
    assert by_file["task-9 - Same-id.md", DUPLICATE_ID].reason == (
        "id TASK-9 is also used by backlog/tasks/task-9 - Ready.md"
    )
    assert by_file["task-11 - On-draft.md", MISSING_DEPENDENCY].reason == (
        "depends on DRAFT-1, which is a draft"
    )
    assert by_file["task-12 - On-archived.md", MISSING_DEPENDENCY].reason == (
        "depends on TASK-20, which is archived"
    )
    assert "Backlog.md ignores it" in by_file["README.md", MALFORMED].reason
    assert len(snap.problems) == 10

    assert [t.id for t in snap.tasks] == [
        "TASK-1", "TASK-2", "TASK-3", "TASK-4", "TASK-5", "TASK-9", "TASK-9", "TASK-10", "TASK-11", "TASK-12",
    ]  # fmt: skip
    assert [t.id for t in snap.drafts] == ["DRAFT-1"]
    assert snap.task("TASK-9").folder == "tasks"
    assert snap.readiness["TASK-10"].reasons[0] == "already done"
    # Nothing is ready: cycles, a missing/unknown dependency, a duplicated id everywhere.
    assert not any(r.ready for r in snap.readiness.values())
    assert "id TASK-9 is used by more than one file" in snap.readiness["TASK-9"].reasons
    assert next(p.kind for p in snap.problems if p.task_id == "TASK-4") == MISSING_DEPENDENCY


def test_ready_tasks_and_completed_folder(tmp_path: Path) -> None:
    write(tmp_path, "tasks/task-2 - b.md", *fm("TASK-2", deps="[TASK-1]"))
    write(tmp_path, "tasks/task-3 - c.md", *fm("TASK-3", deps="[TASK-2]"))
    write(tmp_path, "completed/task-1 - a.md", *fm("TASK-1", status="Done"))
    snap = load_backlog(tmp_path)
    assert snap.problems == []
    assert [tid for tid, r in snap.readiness.items() if r.ready] == ["TASK-2"]


def test_config_defaults_and_problems(tmp_path: Path) -> None:
    write(tmp_path, "tasks/task-1 - a.md", *fm("TASK-1"))
    snap = load_backlog(tmp_path)  # no config.yml: the tool's defaults
    assert snap.config.statuses == ("To Do", "In Progress", "Done")
    assert snap.problems == []
    write(tmp_path, "config.yml", "statuses: [unclosed")
    snap = load_backlog(tmp_path)
    assert [(p.kind, p.path) for p in snap.problems] == [(CONFIG, "backlog/config.yml")]
    assert "using the defaults" in snap.problems[0].reason
    write(tmp_path, "config.yml", "statuses: []", "default_status: Nope", "task_prefix: 'x-1'")
    reasons = [p.reason for p in load_backlog(tmp_path).problems]
    assert len(reasons) == 3


def test_custom_prefix_and_statuses(tmp_path: Path) -> None:
    write(
        tmp_path,
        "config.yml",
        'statuses: ["Backlog", "Doing", "Shipped"]',
        'default_status: "Backlog"',
        'task_prefix: "job"',
    )
    write(tmp_path, "tasks/job-1 - a.md", *fm("JOB-1", status="Shipped"))
    write(tmp_path, "tasks/job-2 - b.md", *fm("JOB-2", status="Backlog", deps="[1]"))
    snap = load_backlog(tmp_path)
    assert snap.problems == []
    assert snap.task("2").dependencies == ["JOB-1"]
    assert [tid for tid, r in snap.readiness.items() if r.ready] == ["JOB-2"]


def test_no_backlog_folder(tmp_path: Path) -> None:
    with pytest.raises(BacklogError, match=r"no Backlog\.md folder"):
        load_backlog(tmp_path)


def test_root_config_names_the_backlog_folder(tmp_path: Path) -> None:
    (tmp_path / "backlog.config.yml").write_text(
        'statuses: ["Todo", "Done"]\nbacklog_directory: ".tasks"\n', encoding="utf-8"
    )
    tasks = tmp_path / ".tasks" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "task-1 - a.md").write_text("\n".join(fm("TASK-1", status="Todo")) + "\n")
    snap = load_backlog(tmp_path)
    assert snap.backlog_dir == (tmp_path / ".tasks").resolve()
    assert snap.config.statuses == ("Todo", "Done")
    assert [tid for tid, r in snap.readiness.items() if r.ready] == ["TASK-1"]
    (tmp_path / "backlog.config.yml").write_text('backlog_directory: "../elsewhere"\n')
    with pytest.raises(BacklogError, match="outside the repository"):
        load_backlog(tmp_path)
