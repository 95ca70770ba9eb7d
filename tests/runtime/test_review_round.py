"""The review loop with the local forge: `scaffold review` sends a task back to work on
the same branch, a person's own commit there survives, and the round is on record."""

from __future__ import annotations

from pathlib import Path

from repo_builder import MakeProject, complete, write

from harness import git
from scaffold.core.states import Lifecycle

REVIEW = "Greet the whole world, not just hello"
INLINE = "say world here"


def _runs() -> list[dict[str, object]]:
    return [
        {
            "role": "codeweaver",
            "step": "TASK-1",
            "attempt": 1,
            "actions": [write("notes/greeting.txt", "hello\n"), complete("greeting added")],
        },
        {
            # The round: the same session, the review and its inline comment as data,
            # on the branch as the person left it (their commit is in the worktree).
            "role": "codeweaver",
            "step": "TASK-1",
            "attempt": 2,
            "expect_resumed": True,
            "actions": [
                {"expect_prompt_contains": REVIEW},
                {"expect_prompt_contains": INLINE},
                {"expect_prompt_contains": "notes/greeting.txt, line 1"},
                {"expect_prompt_contains": "+hello"},
                {"run": ["test", "-f", "notes/person.txt"]},
                write("notes/greeting.txt", "hello world\n"),
                complete("the greeting says world"),
            ],
        },
    ]


def test_changes_requested_locally_come_back_as_a_commit_on_the_same_branch(
    make_project: MakeProject,
) -> None:
    project = make_project(["Add the greeting"], _runs(), {"approval": "manual"})
    first = project.run()
    assert first.exit_code == 3, first.output  # waiting for approval
    task = project.task("TASK-1")
    assert task.state is Lifecycle.PR_CREATED
    assert task.pr is not None
    worktree = task.worktree
    assert worktree is not None

    # Bad input is refused with a clear error and changes nothing.
    for args, says in (
        (("review", "TASK-1"), "say what to change"),
        (("review", "TASK-1", "--comment", "nope"), "PATH:LINE:TEXT"),
        (("review", "TASK-1", "--comment", "README.md:1:x"), "not a line the pull request"),
        (("review", "TASK-9", "--request-changes", "x"), "TASK-9"),
        (("review", "TASK-1", "--request-changes", "x", "--file", "README.md"), "not both"),
    ):
        proc = project.cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert says in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not list((project.repo / ".scaffold" / "inbox").glob("*.json"))

    # A person commits on the task's branch (its worktree) before the round.
    (Path(worktree) / "notes" / "person.txt").write_text("mine\n")
    git(Path(worktree), "add", "notes/person.txt")
    git(Path(worktree), "commit", "-q", "-m", "a person's fix")
    person_head = project.git("rev-parse", "scaffold/task-1").strip()

    proc = project.cli(
        "review",
        "TASK-1",
        "--request-changes",
        REVIEW,
        "--comment",
        f"notes/greeting.txt:1:{INLINE}",
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 inline comment" in proc.stdout

    second = project.run()
    assert second.exit_code == 3, second.output
    task = project.task("TASK-1")
    assert task.state is Lifecycle.PR_CREATED
    assert task.review_rounds == 1
    assert len(task.rounds) == 1
    done = task.rounds[0]
    head = project.git("rev-parse", "scaffold/task-1").strip()
    assert done.commit == head
    assert done.answered_at is not None
    assert project.git("merge-base", "--is-ancestor", person_head, head) == ""
    assert project.git("show", f"{head}:notes/greeting.txt") == "hello world\n"
    [comment] = done.feedback[0].comments
    assert comment.path == "notes/greeting.txt"
    assert comment.line == 1
    assert "+hello" in comment.diff_hunk
    assert "round 1" in second.output
    assert "fixed in" in second.output

    status = project.status_json()
    [entry] = [t for t in status["tasks"] if t["id"] == "TASK-1"]
    assert entry["review"]["round"].startswith("changes requested by @")
    assert "round 1 of 5, fixed in" in entry["review"]["round"]
    story = project.cli("quest", "show", "backlog")
    assert story.returncode == 0, story.stderr
    assert "round 1 (review)" in story.stdout
    assert INLINE in story.stdout

    # The same round is not run twice: a second run with nothing new waits again.
    again = project.run()
    assert again.exit_code == 3
    assert len(project.invocations(step="TASK-1", role="codeweaver")) == 2

    assert project.cli("approve", "TASK-1").returncode == 0
    last = project.run()
    assert last.exit_code == 0, last.output
    assert project.git("show", "main:notes/greeting.txt") == "hello world\n"
    assert project.git("show", "main:notes/person.txt") == "mine\n"
