"""RepoOps.write_backlog_status: a task's end is one edit of its Backlog.md file, committed."""

from __future__ import annotations

from datetime import UTC, datetime

from repo_builder import MakeProject

from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.runtime.repo_ops import RepoOps


def ops_for(make_project: MakeProject) -> tuple[RepoOps, list[str]]:
    project = make_project(["Add the notes"], [])
    warnings: list[str] = []
    repo = project.repo
    ops = RepoOps(repo, load_config(repo), lambda: datetime.now(UTC), warnings.append)
    return ops, warnings


def test_done_with_notes_and_summary_is_one_commit(make_project: MakeProject) -> None:
    ops, warnings = ops_for(make_project)
    ops.write_backlog_status("TASK-1", "Done", "Wrote the notes.", "Notes are in.")
    task = bl.load_backlog(ops.repo).get("TASK-1")
    assert task is not None
    assert (task.status, task.implementation_notes, task.final_summary) == (
        "Done",
        "Wrote the notes.",
        "Notes are in.",
    )
    log = ops.workspace._git(["log", "--format=%s", "-2", "main"]).stdout.splitlines()
    assert log == ["scaffold: TASK-1 Done", "initial backlog"]
    assert warnings == []


def test_blank_notes_and_summary_do_not_stop_the_status(make_project: MakeProject) -> None:
    """An agent's summary of only spaces is left out; the status still changes."""
    ops, _ = ops_for(make_project)
    ops.write_backlog_status("TASK-1", "Done", "  \n ", "\t")
    task = bl.load_backlog(ops.repo).get("TASK-1")
    assert task is not None
    assert (task.status, task.implementation_notes, task.final_summary) == ("Done", None, None)


def test_every_quest_of_a_repository_takes_one_default_branch_lock(
    make_project: MakeProject,
) -> None:
    """`scaffold run` drives each open quest with its own RepoOps; their merges and status
    commits all move the one checkout's index, so they must share one lock (two at once
    met in `.git/index.lock` and a task stopped at Merging)."""
    first, _ = ops_for(make_project)
    repo = first.repo
    second = RepoOps(repo, first.cfg, first.clock, first.warn)
    via_link = RepoOps(repo / "." / "backlog" / "..", first.cfg, first.clock, first.warn)
    assert first.default_branch_lock is second.default_branch_lock is via_link.default_branch_lock
