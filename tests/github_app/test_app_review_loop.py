"""The review loop on GitHub: requested changes, `/scaffold fix` and failing CI go back to the
task's agent and come back as commits on the same pull request; people's own commits on
the branch survive; only writers steer it; rounds are bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    app_process,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    wait_for,
    write_script,
)
from app_settle import settle

from ghsim import GitHubSimulator

REPO = "acme/widgets"
REVIEW = "Capitalise the greeting, please."
FIRST = "Say Hello, not hello."
SECOND = "And World with a capital W."
LATER = "Also add a trailing exclamation mark."


def _setup(sim: GitHubSimulator, config: dict[str, Any] | None = None) -> None:
    for login in ("alice", "mallory"):
        sim.add_user(login)
    sim.create_repo("acme", "widgets", repo_files(config))
    sim.set_permission(REPO, "alice", "write")
    sim.set_permission(REPO, "mallory", "read")
    sim.install("acme", ["widgets"])


def _planning() -> list[dict[str, Any]]:
    return [
        {
            "role": "chaoswhisperer",
            "actions": [planning_tool("requirements", requirements("Greeting")), complete("ok")],
        },
        {
            "role": "pathseeker",
            "actions": [
                planning_tool("tasks", plan(("a", "Write the greeting", []))),
                complete("ok"),
            ],
        },
    ]


def _weave(attempt: int, actions: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    return {"role": "codeweaver", "step": "TASK-1", "attempt": attempt, **run, "actions": actions}


def _pr(sim: GitHubSimulator) -> Any | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == "scaffold/task-1"), None)


def _invocations(root: Path, role: str = "codeweaver") -> list[dict[str, Any]]:
    path = root / "agent-state" / "invocations.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["role"] == role and r["step"] == "TASK-1"]


def _replies(sim: GitHubSimulator, comment_id: int) -> list[Any]:
    return [c for c in sim.repo(REPO).review_comments.values() if c.in_reply_to_id == comment_id]


def _gate(root: Path, name: str) -> dict[str, Any]:
    """An action that waits until the test creates ``agent-state/<name>``."""
    flag = root / "agent-state" / name
    return {"run": ["sh", "-c", f"while [ ! -e '{flag}' ]; do sleep 0.05; done"]}


def test_changes_requested_come_back_on_the_same_pr_and_people_keep_their_commits(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    started = tmp_path / "agent-state" / "round-1-started"
    write_script(
        tmp_path,
        [
            *_planning(),
            _weave(
                1,
                [
                    {"write": "notes/greeting.txt", "content": "hello\nworld\n"},
                    complete("greeting written"),
                ],
            ),
            _weave(
                2,
                [
                    # The review and both inline comments reach the same session, as data.
                    {"expect_prompt_contains": REVIEW},
                    {"expect_prompt_contains": FIRST},
                    {"expect_prompt_contains": SECOND},
                    {"expect_prompt_contains": "notes/greeting.txt, line 1"},
                    {"expect_prompt_contains": "+hello"},
                    # alice's commit pushed before the round is in the worktree.
                    {"run": ["test", "-f", "notes/before.txt"]},
                    {"run": ["touch", str(started)]},
                    _gate(tmp_path, "go-1"),
                    {"write": "notes/greeting.txt", "content": "Hello\nWorld\n"},
                    complete("capitalised the greeting"),
                ],
                expect_resumed=True,
            ),
            _weave(
                3,
                [
                    {"expect_prompt_contains": LATER},
                    {"run": ["test", "-f", "notes/during.txt"]},
                    {"write": "notes/greeting.txt", "content": "Hello\nWorld!\n"},
                    complete("added the exclamation mark"),
                ],
                expect_resumed=True,
            ),
            *VALIDATORS,
        ],
    )
    with app_process(sim, tmp_path) as app:
        issue = sim.open_issue(REPO, "Greeting", "Write a greeting.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        pr = wait_for("the PR of task-1", lambda: _pr(sim))
        number = pr.number
        first_head = pr.head_sha

        # Nobody without write access steers the task: a reader's review and `/scaffold fix`.
        sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="mallory", body="Make it French")
        sim.comment(REPO, number, "/scaffold fix make it French", by="mallory")
        settle(sim, app, REPO, issue)
        assert len(_invocations(tmp_path)) == 1

        # A writer pushes a small fix to the bot's branch, then requests changes.
        before = sim.push_files(
            REPO, "scaffold/task-1", {"notes/before.txt": "alice\n"}, by="alice", message="mine"
        )
        review = sim.submit_review(
            REPO,
            number,
            "CHANGES_REQUESTED",
            by="alice",
            body=REVIEW,
            comments=[
                {"path": "notes/greeting.txt", "line": 1, "side": "RIGHT", "body": FIRST},
                {"path": "notes/greeting.txt", "line": 2, "side": "RIGHT", "body": SECOND},
            ],
        )
        first_comment, second_comment = sim.review_comments_of(REPO, review)
        wait_for("the round to start", started.exists)

        # While the round runs: another commit of alice's, and another review (kept for
        # the next round, never interrupting this one).
        sim.push_files(
            REPO,
            "scaffold/task-1",
            {"notes/during.txt": "alice again\n"},
            by="alice",
            message="more",
        )
        sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="alice", body=LATER)
        (tmp_path / "agent-state" / "go-1").touch()

        # Round 1 answered: a reply in both threads, the review re-requested.
        for comment_id in (first_comment, second_comment):
            wait_for("a reply in the thread", lambda c=comment_id: _replies(sim, c))
        # Round 2 (the review that came during round 1) runs, and is answered too.
        wait_for("round 2", lambda: len(_invocations(tmp_path)) >= 3)

        def round_two_pushed() -> bool:
            text = sim.repo(REPO).file_at("scaffold/task-1", "notes/greeting.txt") or b""
            answered = [
                c
                for c in sim.repo(REPO).comments.values()
                if c.issue_number == number and "round 2" in c.body
            ]
            return text == b"Hello\nWorld!\n" and bool(answered)

        wait_for("round 2 pushed and answered", round_two_pushed)
        head = sim.repo(REPO).branch_sha("scaffold/task-1")
        assert head is not None and head != first_head
        pulls = [p for p in sim.repo(REPO).pulls.values() if p.head == "scaffold/task-1"]
        assert [p.number for p in pulls] == [number]  # the same pull request, never a second
        assert "alice" in [r for r in sim.repo(REPO).pulls[number].requested_reviewers]

        # The new head needs a fresh approval: then it merges.
        sim.submit_review(REPO, number, "APPROVED", by="alice")
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged)
        print(sim.timeline_text(REPO, number))

    repo = sim.repo(REPO)
    assert repo.file_at("main", "notes/greeting.txt") == b"Hello\nWorld!\n"
    assert repo.file_at("main", "notes/before.txt") == b"alice\n"  # a person's commits survive
    assert repo.file_at("main", "notes/during.txt") == b"alice again\n"
    assert repo.git("merge-base", "--is-ancestor", before, "main") == ""
    # Exactly one reply per thread, naming the fix commit.
    for comment_id in (first_comment, second_comment):
        [reply] = _replies(sim, comment_id)
        assert "Addressed in" in reply.body
    invocations = (tmp_path / "agent-state" / "invocations.jsonl").read_text()
    assert "French" not in invocations  # a reader's words never reach an agent
    calls = _invocations(tmp_path)
    assert [c["attempt"] for c in calls] == [1, 2, 3]
    assert calls[1]["session_id"] == calls[0]["session_id"]  # the builder's session resumed
