"""The review loop on GitHub: requested changes, `/scaffold fix` and failing CI go back to the
task's agent and come back as commits on the same pull request; people's own commits on
the branch survive; only writers steer it; rounds are bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    agent_env,
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
            wait_for("a reply in the thread", lambda c=comment_id: _replies(sim, c) or None)
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
        assert head is not None
        assert head != first_head
        pulls = [p for p in sim.repo(REPO).pulls.values() if p.head == "scaffold/task-1"]
        assert [p.number for p in pulls] == [number]  # the same pull request, never a second
        assert "alice" in list(sim.repo(REPO).pulls[number].requested_reviewers)

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


def test_a_failing_check_goes_to_spiritmender_and_the_fix_lands_on_the_same_pr(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim, {"ci": {"max_fixes": 1}})
    ci = sim.add_app("acme-ci")
    sim.protect_branch(REPO, "main", required_checks=["scaffold/diagram-check", "test (3.12)"])
    write_script(
        tmp_path,
        [
            *_planning(),
            _weave(1, [{"write": "notes/greeting.txt", "content": "hello\n"}, complete("ok")]),
            {
                "role": "spiritmender",
                "step": "TASK-1",
                "actions": [
                    {"expect_prompt_contains": "`test (3.12)` concluded failure"},
                    {"expect_prompt_contains": "tests/test_greet.py:3: failure"},
                    {"expect_prompt_contains": "assert 'hello' == 'Hello'"},
                    {"write": "notes/greeting.txt", "content": "Hello\n"},
                    complete("the greeting is capitalised, as the test wants"),
                ],
            },
            *VALIDATORS,
        ],
    )
    with app_process(sim, tmp_path) as app:
        issue = sim.open_issue(REPO, "Greeting", "Write a greeting.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        pr = wait_for("the PR of task-1", lambda: _pr(sim))
        number, head = pr.number, pr.head_sha
        # CI that is not a failure changes nothing: cancelled, neutral, skipped.
        for conclusion in ("cancelled", "neutral", "skipped"):
            sim.add_check_run(REPO, head, "lint", app_id=ci, conclusion=conclusion)
        # A failure of a check that does not block the merge (not required) neither.
        sim.add_check_run(REPO, head, "docs", app_id=ci, conclusion="failure")
        settle(sim, app, REPO, issue)
        assert _invocations(tmp_path, "spiritmender") == []

        run_id = sim.add_check_run(
            REPO,
            head,
            "test (3.12)",
            app_id=ci,
            conclusion="failure",
            title="1 test failed",
            summary="tests/test_greet.py::test_greeting failed",
            annotations=[
                {
                    "path": "tests/test_greet.py",
                    "start_line": 3,
                    "end_line": 3,
                    "annotation_level": "failure",
                    "message": "assert 'hello' == 'Hello'",
                }
            ],
        )

        def fixed() -> bool:
            return sim.repo(REPO).file_at("scaffold/task-1", "notes/greeting.txt") == b"Hello\n"

        wait_for("the fix pushed", fixed)
        new_head = sim.repo(REPO).branch_sha("scaffold/task-1")
        assert new_head is not None
        assert new_head != head
        wait_for(
            "the round answered",
            lambda: any(
                "round 1" in c.body and "test (3.12)" in c.body
                for c in sim.repo(REPO).comments.values()
                if c.issue_number == number
            ),
        )
        # The same failure delivered again is not fixed twice for one head.
        sim.rerequest_check_run(REPO, run_id, by="alice")
        settle(sim, app, REPO, issue)
        assert len(_invocations(tmp_path, "spiritmender")) == 1
        # Green on the new head, approved: merged.
        sim.add_check_run(REPO, str(new_head), "test (3.12)", app_id=ci, conclusion="success")
        sim.submit_review(REPO, number, "APPROVED", by="alice")
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged)
    assert sim.repo(REPO).file_at("main", "notes/greeting.txt") == b"Hello\n"


def test_rounds_are_bounded_and_a_retry_starts_again(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim, {"review": {"max_rounds": 1}})
    write_script(
        tmp_path,
        [
            *_planning(),
            _weave(1, [{"write": "notes/a.txt", "content": "a\n"}, complete("a")]),
            _weave(
                2,
                [
                    {"expect_prompt_contains": "use b"},
                    {"write": "notes/a.txt", "content": "b\n"},
                    complete("b"),
                ],
            ),
            _weave(
                3,
                [
                    {"expect_prompt_contains": "use c"},
                    {"write": "notes/a.txt", "content": "c\n"},
                    complete("c"),
                ],
            ),
            *VALIDATORS,
        ],
    )
    # A slow GitHub: the pull request is open while scaffold still posts its review, and
    # the `/scaffold fix` below comes in then. It waits until the pull request is on record
    # (without that wait the round ran on a task with no pull request recorded, and the
    # retry further down was no round).
    sim.inject("POST", r"/pulls/\d+/reviews$", status=0, delay_s=4)
    with app_process(sim, tmp_path) as app:
        issue = sim.open_issue(REPO, "Letters", "Write a letter.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        pr = wait_for("the PR of task-1", lambda: _pr(sim))
        number = pr.number
        # `/scaffold fix` on the pull request by a writer is a round like a review.
        sim.comment(REPO, number, "/scaffold fix use b", by="alice")
        wait_for(
            "round 1 pushed",
            lambda: sim.repo(REPO).file_at("scaffold/task-1", "notes/a.txt") == b"b\n",
        )
        wait_for(
            "round 1 answered",
            lambda: any("round 1" in c.body for c in sim.repo(REPO).comments.values()),
        )
        # Past review.max_rounds: Blocked, said on the issue.
        sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="alice", body="use c")

        def blocked() -> Any:
            return next(
                (
                    c
                    for c in sim.repo(REPO).comments.values()
                    if c.issue_number == issue and "is blocked" in c.body
                ),
                None,
            )

        note = wait_for("the blocked comment", blocked)
        assert "review.max_rounds is 1" in note.body
        settle(sim, app, REPO, issue)
        assert len(_invocations(tmp_path)) == 2
        # A writer's retry starts the round with the feedback that was over the bound.
        sim.comment(REPO, issue, "/scaffold retry task-1", by="alice")
        wait_for(
            "round 2 pushed",
            lambda: sim.repo(REPO).file_at("scaffold/task-1", "notes/a.txt") == b"c\n",
        )
        # A `/scaffold` command with a problem on the PR is answered there, as on the issue.
        sim.comment(REPO, number, "/scaffold fix", by="alice")
        wait_for(
            "the usage answer on the PR",
            lambda: any(
                c.issue_number == number and "say what to fix" in c.body
                for c in sim.repo(REPO).comments.values()
            ),
        )
        sim.submit_review(REPO, number, "APPROVED", by="alice")
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged)
        # Every line of the quest's story names its repository (one server, many).
        quest_lines = [r for r in app.log_records() if r.get("quest") == "issue-1"]
        assert quest_lines
        assert {r.get("repo") for r in quest_lines} == {REPO}
    assert sim.repo(REPO).file_at("main", "notes/a.txt") == b"c\n"


def test_kill_9_in_the_middle_of_a_round_repeats_nothing(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    started = tmp_path / "agent-state" / "round-started"
    fix = [{"expect_prompt_contains": REVIEW}, {"expect_prompt_contains": FIRST}]
    write_script(
        tmp_path,
        [
            *_planning(),
            _weave(1, [{"write": "notes/greeting.txt", "content": "hello\n"}, complete("written")]),
            # The round's run that is going when the server dies.
            _weave(2, [*fix, {"run": ["touch", str(started)]}, _gate(tmp_path, "never")]),
            # The same round, run again by the next server.
            _weave(
                3,
                [*fix, {"write": "notes/greeting.txt", "content": "Hello\n"}, complete("Hello")],
            ),
            *VALIDATORS,
        ],
    )
    state = tmp_path / "state"
    env = agent_env(tmp_path)
    with app_process(sim, tmp_path / "first", state=state, extra_env=env) as app:
        issue = sim.open_issue(REPO, "Greeting", "Write a greeting.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        pr = wait_for("the PR of task-1", lambda: _pr(sim))
        review = sim.submit_review(
            REPO,
            pr.number,
            "CHANGES_REQUESTED",
            by="alice",
            body=REVIEW,
            comments=[{"path": "notes/greeting.txt", "line": 1, "side": "RIGHT", "body": FIRST}],
        )
        [comment_id] = sim.review_comments_of(REPO, review)
        wait_for("the round's agent", started.exists)
        app.proc.kill()  # kill -9: no shutdown of any kind
        app.proc.wait()
    with app_process(sim, tmp_path / "second", state=state, extra_env=env):
        # The review's delivery comes again (a redelivery from the App's settings page).
        sim.redeliver(sim.deliveries_of("pull_request_review", "submitted")[-1].delivery_id)
        wait_for("the reply", lambda: _replies(sim, comment_id) or None)
        sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[pr.number].merged)
    assert len(_replies(sim, comment_id)) == 1  # no second reply
    rounds = [
        c
        for c in sim.repo(REPO).comments.values()
        if c.issue_number == pr.number and "scaffold:round" in c.body
    ]
    assert len(rounds) == 1
    log = sim.repo(REPO).git("log", "--format=%s", "main")
    assert log.count("codeweaver: Hello") == 1  # one fix commit for the review
    assert len(_invocations(tmp_path)) == 3
    assert sim.repo(REPO).file_at("main", "notes/greeting.txt") == b"Hello\n"
