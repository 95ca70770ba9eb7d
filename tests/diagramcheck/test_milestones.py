"""Backlog.md milestones -> the roadmap diagram."""

from __future__ import annotations

from pathlib import Path

from dcrepo import ROADMAP, Repo, kinds, mermaid_doc

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "backlog" / "config.yml"


def _task(n: int, status: str, milestone: str | None) -> str:
    ms = f"milestone: {milestone}\n" if milestone else ""
    return (
        f"---\nid: TASK-{n}\ntitle: Task {n}\nstatus: {status}\nassignee: []\n"
        f"created_date: '2026-01-01 10:00'\nlabels: []\n{ms}dependencies: []\n---\n\n"
        f"## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\nWork {n}\n"
        "<!-- SECTION:DESCRIPTION:END -->\n"
    )


def _milestone(mid: str, title: str, status: str | None = None) -> str:
    st = f"status: {status}\n" if status else ""
    return f'---\nid: {mid}\ntitle: "{title}"\n{st}---\n\n## Description\n\nMilestone: {title}\n'


def _setup(repo: Repo) -> str:
    repo.write("backlog/config.yml", FIXTURE.read_text(encoding="utf-8"))
    repo.write("backlog/milestones/m-1 - core-runtime.md", _milestone("m-1", "Core runtime"))
    repo.write("backlog/tasks/task-1 - Task-1.md", _task(1, "Done", "m-1"))
    repo.write("backlog/tasks/task-2 - Task-2.md", _task(2, "In Progress", "m-1"))
    repo.write("backlog/tasks/task-3 - Task-3.md", _task(3, "To Do", "Other"))
    return repo.commit("backlog")


def test_all_tasks_of_a_milestone_done_needs_the_roadmap(repo: Repo) -> None:
    base = _setup(repo)
    repo.write("backlog/tasks/task-2 - Task-2.md", _task(2, "Done", "m-1"))
    repo.commit("task 2 done")
    report = repo.check(base)
    assert kinds(report) == [("milestone-completed", "Core runtime")]
    [finding] = report.failures
    assert finding.diagram == ROADMAP
    assert "all 2 task(s) are Done" in finding.message

    repo.write(ROADMAP, mermaid_doc('flowchart LR\n    m0[Start] --> m1["Core runtime ✓"]'))
    repo.commit("roadmap")
    assert not repo.check(base).blocking


def test_a_task_done_while_others_remain_needs_nothing(repo: Repo) -> None:
    base = _setup(repo)
    repo.write("backlog/tasks/task-3 - Task-3.md", _task(3, "Done", "Other"))
    repo.write("backlog/tasks/task-4 - Task-4.md", _task(4, "To Do", "Other"))
    repo.commit("task 3 done")
    assert repo.check(base).findings == ()


def test_milestone_file_done_or_archived(repo: Repo) -> None:
    base = _setup(repo)
    repo.write(
        "backlog/milestones/m-1 - core-runtime.md", _milestone("m-1", "Core runtime", "Done")
    )
    repo.commit("done")
    assert kinds(repo.check(base)) == [("milestone-completed", "Core runtime")]

    base = repo.head()
    repo.move(
        "backlog/milestones/m-1 - core-runtime.md",
        "backlog/archive/milestones/m-1 - core-runtime.md",
    )
    repo.commit("archive")
    assert kinds(repo.check(base)) == [("milestone-completed", "Core runtime")]


def test_new_milestone_needs_the_roadmap(repo: Repo) -> None:
    base = _setup(repo)
    repo.write("backlog/milestones/m-2 - github-app.md", _milestone("m-2", "GitHub App"))
    repo.write(ROADMAP, mermaid_doc('flowchart LR\n    m0[Start] --> m2["GitHub App"]'))
    repo.commit("m-2")
    assert not repo.check(base).blocking
