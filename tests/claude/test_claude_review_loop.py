"""End to end: the review loop on GitHub with the real ``claude`` CLI.

``scaffold serve`` runs as a child process (the GitHub App, ``app_harness.app_process``)
against the GitHub simulator; the repository's ``agent.command`` is the real Claude Code
binary, which the App runs in its sandbox (bubblewrap, as in production) and which talks
to the scripted Messages API (`messages_server`) through the sandbox's egress route for
``ANTHROPIC_BASE_URL``. One quest goes the whole way:

1. a labelled issue: ChaosWhisperer writes requirements, PathSeeker plans one task,
   Codeweaver writes ``notes/greeting.txt``, the validators pass, the PR opens;
2. a read-only user's review and ``/scaffold fix`` change nothing (no model request);
3. a writer requests changes with two inline comments: Codeweaver's session is resumed
   with the review as data, the fix goes through the validators again and lands on the
   same PR, both threads get a reply and the review is requested again;
4. a required check of another App fails with an annotation: Spiritmender fixes it and
   the fix lands on the same PR; green and approved, the PR merges.

What the CLI sent (sessions, resumed conversations, prompts) is checked on the scripted
server; what happened on GitHub on the simulator.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from messages_server import (
    SIGNAL_TOOL,
    MessagesServer,
    Request,
    Turn,
    When,
    chain,
    claude_env,
    signal_back,
    tool,
)

from ghsim import GitHubSimulator
from ghsim.fixture import github_sim  # noqa: F401
from harness import plan, requirements
from scaffold.agent.claude import REQUIREMENTS_TOOL, TASKS_TOOL

# The App's test harness lives with the App's tests (tests/github_app).
_GITHUB_APP_TESTS = str(Path(__file__).resolve().parents[1] / "github_app")
if _GITHUB_APP_TESTS not in sys.path:
    sys.path.append(_GITHUB_APP_TESTS)

from app_harness import app_process, repo_files, wait_for  # noqa: E402
from app_settle import settle  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

REPO = "acme/widgets"
BRANCH = "scaffold/task-1"
GREETING = "notes/greeting.txt"
CHECK = "test (3.12)"

# The headings scaffold's prompt starts with, per kind of run (runtime/prompts.py).
FRESH = "Start the step"
REVIEW_FIX = "A reviewer asked for changes on the pull request"
CI_FIX = "A check that blocks the merge failed on the pull request"

REVIEW = "Capitalise the greeting, please."
FIRST = "Say Hello, not hello."
SECOND = "And World with a capital W."
FRENCH = "Make it French"
ANNOTATION = "the greeting must end with an exclamation mark"

# Generous deadlines for a hung test only: a claude run takes a few seconds, a busy
# machine may take much longer.
DEADLINE = 300.0


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as srv:
        yield srv


def _complete(role: str, summary: str) -> list[Turn]:
    """Any run of ``role`` only reports ``complete``."""
    return chain(
        signal_back("complete", summary=summary), when=When(role=role), name=f"{role}-complete"
    )


def _script() -> list[Turn]:
    codeweaver = When(role="codeweaver", step="TASK-1")
    spiritmender = When(role="spiritmender", step="TASK-1")
    return [
        *chain(
            tool(REQUIREMENTS_TOOL, requirements("Greeting")),
            signal_back("complete", summary="requirements: 1 context"),
            when=When(role="chaoswhisperer", step="PLAN"),
            name="requirements",
        ),
        *chain(
            tool(TASKS_TOOL, plan(("greeting", "Write the greeting", []))),
            signal_back("complete", summary="planned 1 task"),
            when=When(role="pathseeker", step="PLAN"),
            name="plan",
        ),
        *chain(
            tool("Write", {"file_path": GREETING, "content": "hello\nworld\n"}),
            signal_back("complete", summary="greeting written"),
            when=codeweaver.but(text=FRESH),
            name="build",
        ),
        *chain(
            tool("Read", {"file_path": GREETING}),
            tool(
                "Edit",
                {
                    "file_path": GREETING,
                    "old_string": "hello\nworld\n",
                    "new_string": "Hello\nWorld\n",
                },
            ),
            signal_back("complete", summary="capitalised both lines"),
            when=codeweaver.but(text=REVIEW_FIX),
            name="review-fix",
        ),
        *chain(
            tool("Read", {"file_path": GREETING}),
            tool(
                "Edit",
                {"file_path": GREETING, "old_string": "World\n", "new_string": "World!\n"},
            ),
            signal_back("complete", summary="added the exclamation mark the check wants"),
            when=spiritmender.but(text=CI_FIX),
            name="ci-fix",
        ),
        *_complete("siegemaster", "edge cases hold"),
        *_complete("lawbringer", "Reviewed: small and clear."),
    ]


def _first(server: MessagesServer, role: str, heading: str) -> Request:
    """The first request of ``role`` on TASK-1 whose newest prompt has ``heading``."""
    for r in server.requests:
        if r.role == role and r.step == "TASK-1" and heading in r.user_text:
            return r
    seen = "\n".join(r.summary() for r in server.requests)
    raise AssertionError(f"no {role} request with {heading!r}; requests:\n{seen}")


def _tool_errors(server: MessagesServer) -> list[str]:
    """Tool calls of the script that came back as errors (a Write or Edit refused)."""
    out = []
    for r in server.requests:
        result = r.tool_result
        if result is not None and result.is_error:
            out.append(f"{r.turn}: {result.name}: {result.text[:300]}")
    return out


def _agents(base_url: str, but: int | None = None) -> list[int]:
    """Live processes (not zombies) whose environment points at this test's model server:
    claude, its sandbox and bridge. ``but``: the App itself, which has it too."""
    marker = f"ANTHROPIC_BASE_URL={base_url}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (but, os.getpid()):
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] in (b"Z", b"X"):
            continue
        if marker in environ:
            found.append(int(entry.name))
    return found


def _transcripts(state: Path, session_id: str) -> list[Path]:
    """Claude Code's transcript of a session in the private HOME of a step's sandbox
    (``.scaffold/sandbox/<quest>/<step>/home`` of the App's clone)."""
    clone = state / "repos" / REPO
    return list(clone.glob(f".scaffold/sandbox/*/*/home/.claude/projects/*/{session_id}.jsonl"))


def _pr(sim: GitHubSimulator) -> Any | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == BRANCH), None)


def _replies(sim: GitHubSimulator, comment_id: int) -> list[Any]:
    return [c for c in sim.repo(REPO).review_comments.values() if c.in_reply_to_id == comment_id]


def _round_comment(sim: GitHubSimulator, number: int, *words: str) -> Any | None:
    return next(
        (
            c
            for c in sim.repo(REPO).comments.values()
            if c.issue_number == number and all(w in c.body for w in words)
        ),
        None,
    )


def _on_branch(sim: GitHubSimulator, content: bytes) -> bool:
    return sim.repo(REPO).file_at(BRANCH, GREETING) == content


def test_review_and_ci_rounds_with_claude_land_on_the_same_pr(
    claude_bin: str,
    server: MessagesServer,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    sim = github_sim
    config = {"agent": {"command": [claude_bin], "stuck_timeout_s": 60, "max_attempts": 2}}
    for login in ("alice", "mallory"):
        sim.add_user(login)
    sim.create_repo("acme", "widgets", repo_files(config))
    sim.set_permission(REPO, "alice", "write")
    sim.set_permission(REPO, "mallory", "read")
    sim.install("acme", ["widgets"])
    ci = sim.add_app("acme-ci")
    sim.protect_branch(REPO, "main", required_checks=["scaffold/diagram-check", CHECK])
    server.add(*_script())
    # The App keeps its own HOME and PATH; the agents get their private HOME in the sandbox.
    env = {
        k: v
        for k, v in claude_env(server.base_url, tmp_path / "unused-home").items()
        if k not in ("HOME", "PATH")
    }

    app_pid: int | None = None
    try:
        with app_process(sim, tmp_path / "app", extra_env=env) as app:
            app_pid = app.proc.pid
            issue = sim.open_issue(REPO, "Greeting", "Write a greeting.", by="alice")
            sim.label_issue(REPO, issue, "scaffold", by="alice")

            # 1. From the issue to the pull request.
            pr = wait_for("the PR of task-1", lambda: _pr(sim), timeout=DEADLINE)
            number, first_head = pr.number, pr.head_sha
            server.check()
            assert _on_branch(sim, b"hello\nworld\n")
            build = _first(server, "codeweaver", FRESH)
            assert build.session_id is not None
            # claude ran in the sandbox, with the task's private HOME (which --resume needs).
            assert 'scaffold_sandbox_repositories{mode="bwrap"} 1.0' in app.get("/metrics")
            assert _transcripts(app.state, build.session_id), "no transcript in the private HOME"

            # 2. A reader steers nothing: no model request for their review or command.
            before = len(server.requests)
            sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="mallory", body=FRENCH)
            sim.comment(REPO, number, f"/scaffold fix {FRENCH}", by="mallory")
            settle(sim, app, REPO, issue)
            assert len(server.requests) == before
            assert sim.repo(REPO).branch_sha(BRANCH) == first_head

            # 3. A writer requests changes with two inline comments.
            review = sim.submit_review(
                REPO,
                number,
                "CHANGES_REQUESTED",
                by="alice",
                body=REVIEW,
                comments=[
                    {"path": GREETING, "line": 1, "side": "RIGHT", "body": FIRST},
                    {"path": GREETING, "line": 2, "side": "RIGHT", "body": SECOND},
                ],
            )
            first_comment, second_comment = sim.review_comments_of(REPO, review)
            wait_for(
                "the review fix pushed",
                lambda: _on_branch(sim, b"Hello\nWorld\n"),
                timeout=DEADLINE,
            )
            for comment_id in (first_comment, second_comment):
                wait_for(
                    "a reply in the thread",
                    lambda c=comment_id: _replies(sim, c),
                    timeout=DEADLINE,
                )
            wait_for(
                "the round's comment",
                lambda: _round_comment(sim, number, "Round 1", "@alice requested changes"),
                timeout=DEADLINE,
            )
            wait_for(
                "alice asked to review again",
                lambda: "alice" in sim.repo(REPO).pulls[number].requested_reviewers,
                timeout=DEADLINE,
            )
            server.check()
            review_head = sim.repo(REPO).branch_sha(BRANCH)
            assert review_head is not None
            assert review_head != first_head

            # The round resumed Codeweaver's session: the whole first run, then the review.
            fix = _first(server, "codeweaver", REVIEW_FIX)
            assert fix.session_id == build.session_id
            assert fix.prompt == build.prompt  # the conversation that opened the session
            [written] = [u for u in fix.tool_uses() if u.get("name") == "Write"]
            assert written["input"]["file_path"] == GREETING
            assert any(r.get("tool_use_id") == written["id"] for r in fix.tool_results())
            [signalled] = [u for u in fix.tool_uses() if u.get("name") == SIGNAL_TOOL]
            assert signalled["input"]["summary"] == "greeting written"
            for text in (
                REVIEW,
                FIRST,
                SECOND,
                "@alice asks for changes",
                f"{GREETING}, line 1 (new side)",
                f"{GREETING}, line 2 (new side)",
                "+hello",
                "+world",
                "@@",
            ):
                assert text in fix.user_text, text
            assert FRENCH not in fix.user_text
            # The validators ran again on the fix, after it.
            later = [r for r in server.requests if r.received_at > fix.received_at]
            assert {"siegemaster", "lawbringer"} <= {r.role for r in later}

            # 4. A required check of another App fails on the new head, with an annotation.
            sim.add_check_run(
                REPO,
                review_head,
                CHECK,
                app_id=ci,
                conclusion="failure",
                title="1 test failed",
                summary="tests/test_greeting.py::test_exclaims failed",
                annotations=[
                    {
                        "path": GREETING,
                        "start_line": 2,
                        "end_line": 2,
                        "annotation_level": "failure",
                        "message": ANNOTATION,
                    }
                ],
            )
            wait_for(
                "the CI fix pushed",
                lambda: _on_branch(sim, b"Hello\nWorld!\n"),
                timeout=DEADLINE,
            )
            wait_for(
                "the CI round's comment",
                lambda: _round_comment(sim, number, "Round 2", f"`{CHECK}`"),
                timeout=DEADLINE,
            )
            server.check()
            mend = _first(server, "spiritmender", CI_FIX)
            for text in (
                f"The check `{CHECK}` concluded failure on commit {review_head}",
                "1 test failed",
                "tests/test_greeting.py::test_exclaims failed",
                f"{GREETING}:2: failure:",
                ANNOTATION,
            ):
                assert text in mend.user_text, text
            ci_head = sim.repo(REPO).branch_sha(BRANCH)
            assert ci_head is not None
            assert ci_head != review_head

            # Green on the newest head and approved: merged.
            sim.add_check_run(REPO, ci_head, CHECK, app_id=ci, conclusion="success")
            sim.submit_review(REPO, number, "APPROVED", by="alice")
            wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged, DEADLINE)
            print(sim.timeline_text(REPO, number))
    finally:
        left = _agents(server.base_url, but=app_pid)
        for pid in left:  # a failed test must not leak processes into the next one
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the App: {left}"

    server.check()
    assert _tool_errors(server) == []
    assert [t.name for t in server.script if t.fired == 0] == []
    repo = sim.repo(REPO)
    assert repo.file_at("main", GREETING) == b"Hello\nWorld!\n"
    # One pull request for the task, however many rounds.
    assert [p.number for p in repo.pulls.values() if p.head == BRANCH] == [number]
    bot = sim.bot_login
    for comment_id in (first_comment, second_comment):
        [reply] = _replies(sim, comment_id)
        assert reply.user == bot
        assert f"Addressed in {review_head[:12]}" in reply.body
    # A reader's words never reached a model, in any request.
    assert not any(FRENCH in str(r.body) for r in server.requests)
    # Each builder run was its own claude process: one fresh session for Codeweaver,
    # resumed once; Spiritmender started fresh.
    sessions = {r.session_id for r in server.requests if r.role == "codeweaver"}
    assert sessions == {build.session_id}
