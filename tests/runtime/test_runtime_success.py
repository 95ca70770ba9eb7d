"""A task goes To Do -> merged through the real orchestrator and scripted agents."""

from __future__ import annotations

from repo_builder import MakeProject, codeweaver_done

from scaffold.core.states import Lifecycle


def test_one_task_is_merged_and_done(make_project: MakeProject) -> None:
    # Codeweaver signals through the real MCP server; the validators use signal_action.
    project = make_project(["Add the notes"], [codeweaver_done("TASK-1")])

    result = project.run()

    assert result.exit_code == 0, result.output
    task = project.task("TASK-1")
    assert task.state is Lifecycle.IDLE
    assert task.outcome == "merged"
    bt = project.backlog_task("TASK-1")
    assert bt.status == "Done"
    assert bt.implementation_notes
    assert "Merged scaffold/task-1" in bt.implementation_notes
    assert bt.final_summary == "TASK-1 implemented"
    assert not (project.repo / ".scaffold" / "worktrees" / "task-1").exists()
    assert project.worktrees() == [str(project.repo)]
    assert project.scaffold_branches() == []
    assert project.merges_of(1) == 1
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1 done\n"
    # the person's checkout of main moved with it, and is clean
    assert (project.repo / "notes" / "task-1.txt").read_text() == "TASK-1 done\n"
    assert project.git("status", "--porcelain") == ""
    roles = [i["role"] for i in project.invocations()]
    assert roles == ["codeweaver", "siegemaster", "lawbringer"]
