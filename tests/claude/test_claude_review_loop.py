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

The other tests take the loop through what people do around a round, with the same
real claude: a writer's commit pushed to the task branch just before her review (claude
reads it, it reaches ``main``, the round is answered even while the App was still
re-publishing the pull request when the review came); a commit and a second review while the round's claude waits on
the model (the fix is pushed with the commit merged in, a second round answers the
review); the round bound (``review.max_rounds``) and ``/scaffold retry``; and ``kill -9``
of the App while the round's claude waits on the model (the next App finishes the round
exactly once).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from messages_server import (
    SIGNAL_TOOL,
    MessagesServer,
    Request,
    ToolResult,
    ToolUse,
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

from app_harness import AppProcess, app_process, repo_files, wait_for  # noqa: E402
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

LATER = "Also add a trailing exclamation mark."
ALICE = "notes/alice.txt"
ALICE_TEXT = "alice was here before the round\n"
DURING = "notes/during.txt"
DURING_TEXT = "alice pushed this while the round ran\n"

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


CODEWEAVER = When(role="codeweaver", step="TASK-1")


def _building() -> list[Turn]:
    """From the issue to the PR: requirements, the plan (one task), and Codeweaver writing
    the greeting (``hello`` and ``world``, one a line)."""
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
            when=CODEWEAVER.but(text=FRESH),
            name="build",
        ),
    ]


def _validators() -> list[Turn]:
    return [
        *_complete("siegemaster", "edge cases hold"),
        *_complete("lawbringer", "Reviewed: small and clear."),
    ]


def _edit(old: str, new: str) -> ToolUse:
    """Claude's Edit of the greeting."""
    return tool("Edit", {"file_path": GREETING, "old_string": old, "new_string": new})


def _round(
    name: str, text: str, *steps: ToolUse, summary: str, hold_until: Path | None = None
) -> list[Turn]:
    """Codeweaver's turns for a review round whose prompt holds ``text``: ``steps``, then
    ``complete``. ``hold_until``: the round's first request waits for that file."""
    turns = chain(
        *steps,
        signal_back("complete", summary=summary),
        when=CODEWEAVER.but(text=text),
        name=name,
    )
    turns[0].hold_until = hold_until
    return turns


def _script() -> list[Turn]:
    spiritmender = When(role="spiritmender", step="TASK-1")
    return [
        *_building(),
        *_round(
            "review-fix",
            REVIEW_FIX,
            tool("Read", {"file_path": GREETING}),
            _edit("hello\nworld\n", "Hello\nWorld\n"),
            summary="capitalised both lines",
        ),
        *chain(
            tool("Read", {"file_path": GREETING}),
            _edit("World\n", "World!\n"),
            signal_back("complete", summary="added the exclamation mark the check wants"),
            when=spiritmender.but(text=CI_FIX),
            name="ci-fix",
        ),
        *_validators(),
    ]


def _first(server: MessagesServer, role: str, heading: str) -> Request:
    """The first request of ``role`` on TASK-1 whose newest prompt has ``heading``."""
    for r in server.requests:
        if r.role == role and r.step == "TASK-1" and heading in r.user_text:
            return r
    seen = "\n".join(r.summary() for r in server.requests)
    raise AssertionError(f"no {role} request with {heading!r}; requests:\n{seen}")


def _answered_by(server: MessagesServer, turn: str) -> list[Request]:
    """The requests the script's ``turn`` answered (or is answering, when it holds one)."""
    return [r for r in server.requests if r.turn == turn]


def _read_of(server: MessagesServer, path: str) -> ToolResult:
    """What claude's Read of ``path`` returned to the model (the tool_result it sent)."""
    for r in server.requests:
        result = r.tool_result
        if (
            result is not None
            and result.name == "Read"
            and (result.input or {}).get("file_path") == path
        ):
            return result
    raise AssertionError(f"no tool_result of a Read of {path}")


def _tool_errors(server: MessagesServer) -> list[str]:
    """Tool calls of the script that came back as errors (a Write or Edit refused)."""
    out = []
    for r in server.requests:
        result = r.tool_result
        if result is not None and result.is_error:
            out.append(f"{r.turn}: {result.name}: {result.text[:300]}")
    return out


def _agents(base_url: str, but: Iterable[int] = ()) -> list[int]:
    """Live processes (not zombies) whose environment points at this test's model server:
    claude, its sandbox and bridge. ``but``: the Apps themselves, which have it too."""
    marker = f"ANTHROPIC_BASE_URL={base_url}".encode()
    skip = {*but, os.getpid()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
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


@contextlib.contextmanager
def _no_agent_outlives(server: MessagesServer) -> Iterator[list[int]]:
    """Around a test's Apps: afterwards, no claude, sandbox or bridge of the test is left
    alive. The test adds the pid of each App it starts to the list (they have the
    model server's address in their environment too)."""
    apps: list[int] = []
    try:
        yield apps
    finally:
        left = _agents(server.base_url, but=apps)
        for pid in left:  # a failed test must not leak processes into the next one
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the App: {left}"


def _setup(sim: GitHubSimulator, claude_bin: str, **config: Any) -> None:
    """``acme/widgets`` whose agent is the real claude; alice may write, mallory read."""
    agent = {"command": [claude_bin], "stuck_timeout_s": 60, "max_attempts": 2}
    for login in ("alice", "mallory"):
        sim.add_user(login)
    sim.create_repo("acme", "widgets", repo_files({"agent": agent, **config}))
    sim.set_permission(REPO, "alice", "write")
    sim.set_permission(REPO, "mallory", "read")
    sim.install("acme", ["widgets"])


def _env(server: MessagesServer, tmp_path: Path) -> dict[str, str]:
    """The App keeps its own HOME and PATH; the agents get their private HOME in the
    sandbox."""
    return {
        k: v
        for k, v in claude_env(server.base_url, tmp_path / "unused-home").items()
        if k not in ("HOME", "PATH")
    }


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


def _to_pr(sim: GitHubSimulator, app: AppProcess) -> tuple[int, int]:
    """alice's labelled issue and the number of the task's PR, once the PR is open."""
    issue = sim.open_issue(REPO, "Greeting", "Write a greeting.", by="alice")
    sim.label_issue(REPO, issue, "scaffold", by="alice")
    pr = wait_for("the PR of task-1", lambda: _pr(sim), timeout=DEADLINE)
    return issue, pr.number


def _logged(app: AppProcess, text: str) -> bool:
    return any(text in str(r.get("msg")) for r in app.log_records())


# The product bug test_a_writers_commit_pushed_before_a_round_survives shows.


def test_review_and_ci_rounds_with_claude_land_on_the_same_pr(
    claude_bin: str,
    server: MessagesServer,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    sim = github_sim
    _setup(sim, claude_bin)
    ci = sim.add_app("acme-ci")
    sim.protect_branch(REPO, "main", required_checks=["scaffold/diagram-check", CHECK])
    server.add(*_script())

    with (
        _no_agent_outlives(server) as apps,
        app_process(sim, tmp_path / "app", extra_env=_env(server, tmp_path)) as app,
    ):
        apps.append(app.proc.pid)
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
                lambda c=comment_id: _replies(sim, c) or None,
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


def test_a_writers_commit_pushed_before_a_round_survives(
    claude_bin: str,
    server: MessagesServer,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    """alice pushes to the task branch, then requests changes at once: the round's claude
    reads her file in its worktree, and her commit and the fix both reach ``main``; the
    round is answered on the PR.

    Her review lands while the App is still taking her commit in (the quest run her push
    starts publishes the PR's branch again): made deterministic here by holding the App's
    lookup of the PR (``GET /pulls`` answers 503, which the App retries) until the round
    has started. The round waits for that publishing job, and what it answered is not
    taken for the round's answer (before, round 1's replies were lost this way)."""
    sim = github_sim
    _setup(sim, claude_bin)
    server.add(
        *_building(),
        *_round(
            "round-1",
            REVIEW,
            tool("Read", {"file_path": ALICE}),
            _edit("hello\nworld\n", "Hello\nWorld\n"),
            summary="capitalised both lines",
        ),
        *_validators(),
    )

    with (
        _no_agent_outlives(server) as apps,
        app_process(sim, tmp_path / "app", extra_env=_env(server, tmp_path)) as app,
    ):
        apps.append(app.proc.pid)
        _, number = _to_pr(sim, app)
        build = _first(server, "codeweaver", FRESH)

        sim.inject("GET", rf"^/repos/{REPO}/pulls$", status=503, times=50)
        before = sim.push_files(REPO, BRANCH, {ALICE: ALICE_TEXT}, by="alice", message="a note")
        wait_for("the App republishing the branch", lambda: sim.injected_hits > 0, DEADLINE)
        review = sim.submit_review(
            REPO,
            number,
            "CHANGES_REQUESTED",
            by="alice",
            body=REVIEW,
            comments=[{"path": GREETING, "line": 1, "side": "RIGHT", "body": FIRST}],
        )
        [thread] = sim.review_comments_of(REPO, review)
        wait_for(
            "the round started",
            lambda: _logged(app, "PR_Created -> Processing (changes_requested)"),
            timeout=DEADLINE,
        )
        with sim.lock:
            sim.faults.clear()

        wait_for("the fix pushed", lambda: _on_branch(sim, b"Hello\nWorld\n"), DEADLINE)
        sim.submit_review(REPO, number, "APPROVED", by="alice")
        # The merge comes after the App is through with the fix's push and its answers.
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged, DEADLINE)
        print(sim.timeline_text(REPO, number))

    server.check()
    assert _tool_errors(server) == []
    assert [t.name for t in server.script if t.fired == 0] == []
    repo = sim.repo(REPO)
    # The round ran in Codeweaver's session, in a worktree with alice's commit.
    [fix] = _answered_by(server, "round-1.0")
    assert fix.session_id == build.session_id
    assert REVIEW in fix.user_text
    assert FIRST in fix.user_text
    assert ALICE_TEXT.strip() in _read_of(server, ALICE).text
    # Her commit and the fix are on main.
    assert repo.file_at("main", GREETING) == b"Hello\nWorld\n"
    assert repo.file_at("main", ALICE) == ALICE_TEXT.encode()
    assert repo.git("merge-base", "--is-ancestor", before, "main") == ""
    # The round is answered on the PR (this is what the race loses).
    assert len(_replies(sim, thread)) == 1
    assert _round_comment(sim, number, "Round 1", "@alice requested changes") is not None


def test_a_writers_commit_and_a_review_during_a_round_are_kept(
    claude_bin: str,
    server: MessagesServer,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    """While the round's claude waits on the model, alice pushes to the task branch and
    submits a second review: the round's fix is pushed with her commit merged in (never
    over it), and a second round, in the same Codeweaver session, answers the second
    review; its claude reads her file."""
    sim = github_sim
    _setup(sim, claude_bin)
    release = tmp_path / "release-round-1"
    server.add(
        *_building(),
        # Round 2's prompt holds LATER (tried first: round 1's turns match on REVIEW).
        *_round(
            "round-2",
            LATER,
            tool("Read", {"file_path": DURING}),
            _edit("World\n", "World!\n"),
            summary="added the exclamation mark",
        ),
        *_round(
            "round-1",
            REVIEW,
            _edit("hello\nworld\n", "Hello\nWorld\n"),
            summary="capitalised both lines",
            hold_until=release,
        ),
        *_validators(),
    )

    with (
        _no_agent_outlives(server) as apps,
        app_process(sim, tmp_path / "app", extra_env=_env(server, tmp_path)) as app,
    ):
        apps.append(app.proc.pid)
        _, number = _to_pr(sim, app)
        build = _first(server, "codeweaver", FRESH)
        review = sim.submit_review(
            REPO,
            number,
            "CHANGES_REQUESTED",
            by="alice",
            body=REVIEW,
            comments=[{"path": GREETING, "line": 1, "side": "RIGHT", "body": FIRST}],
        )
        [thread] = sim.review_comments_of(REPO, review)

        # While the round's claude waits on the model: a commit and another review.
        wait_for(
            "round 1's claude at the model",
            lambda: _answered_by(server, "round-1.0") or None,
            timeout=DEADLINE,
        )
        during = sim.push_files(REPO, BRANCH, {DURING: DURING_TEXT}, by="alice", message="more")
        sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="alice", body=LATER)
        release.touch()

        [reply] = wait_for(
            "round 1's reply in the thread", lambda: _replies(sim, thread) or None, DEADLINE
        )
        wait_for(
            "round 1's comment",
            lambda: _round_comment(sim, number, "Round 1", "@alice requested changes"),
            timeout=DEADLINE,
        )
        wait_for("round 2's fix pushed", lambda: _on_branch(sim, b"Hello\nWorld!\n"), DEADLINE)
        second = wait_for(
            "round 2's comment",
            lambda: _round_comment(sim, number, "Round 2", "@alice requested changes"),
            timeout=DEADLINE,
        )
        server.check()
        sim.submit_review(REPO, number, "APPROVED", by="alice")
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged, DEADLINE)
        print(sim.timeline_text(REPO, number))

    server.check()
    assert _tool_errors(server) == []
    assert [t.name for t in server.script if t.fired == 0] == []
    repo = sim.repo(REPO)
    [first] = _answered_by(server, "round-1.0")
    assert first.session_id == build.session_id
    assert REVIEW in first.user_text
    assert LATER not in first.user_text  # the second review waits for its own round

    # Round 1's fix was pushed with alice's commit merged in, not over it.
    fixed = reply.body.split("Addressed in ", 1)[1][:12]
    assert repo.file_at(fixed, GREETING) == b"Hello\nWorld\n"
    assert repo.git("merge-base", "--is-ancestor", during, fixed) == ""
    # Round 2: Codeweaver's session resumed again, with the second review, in a worktree
    # with alice's commit.
    [again] = _answered_by(server, "round-2.0")
    assert again.session_id == build.session_id
    assert LATER in again.user_text
    assert REVIEW not in again.user_text
    assert DURING_TEXT.strip() in _read_of(server, DURING).text
    assert "Addressed in" in second.body
    assert [p.number for p in repo.pulls.values() if p.head == BRANCH] == [number]

    # Her commit and both fixes are on main.
    assert repo.file_at("main", GREETING) == b"Hello\nWorld!\n"
    assert repo.file_at("main", DURING) == DURING_TEXT.encode()
    for sha in (during, fixed):
        assert repo.git("merge-base", "--is-ancestor", sha, "main") == ""


def test_the_round_bound_blocks_and_a_retry_runs_the_round(
    claude_bin: str,
    server: MessagesServer,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``review.max_rounds: 1``: a second review after round 1 blocks the task (said on
    the issue, no model request); ``/scaffold retry`` runs the round with that review."""
    sim = github_sim
    _setup(sim, claude_bin, review={"max_rounds": 1})
    server.add(
        *_building(),
        *_round(
            "round-2",
            LATER,
            _edit("World\n", "World!\n"),
            summary="added the exclamation mark",
        ),
        *_round(
            "round-1",
            REVIEW,
            _edit("hello\nworld\n", "Hello\nWorld\n"),
            summary="capitalised both lines",
        ),
        *_validators(),
    )

    with (
        _no_agent_outlives(server) as apps,
        app_process(sim, tmp_path / "app", extra_env=_env(server, tmp_path)) as app,
    ):
        apps.append(app.proc.pid)
        issue, number = _to_pr(sim, app)
        build = _first(server, "codeweaver", FRESH)
        sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="alice", body=REVIEW)
        wait_for(
            "round 1's comment",
            lambda: _round_comment(sim, number, "Round 1", "@alice requested changes"),
            timeout=DEADLINE,
        )
        assert _on_branch(sim, b"Hello\nWorld\n")

        # Past the bound: Blocked, said on the issue; the review is kept.
        sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="alice", body=LATER)

        def blocked() -> Any | None:
            return next(
                (
                    c
                    for c in sim.repo(REPO).comments.values()
                    if c.issue_number == issue and "is blocked" in c.body
                ),
                None,
            )

        note = wait_for("the blocked comment", blocked, timeout=DEADLINE)
        assert "review.max_rounds is 1" in note.body
        assert "@alice" in note.body
        settle(sim, app, REPO, issue)
        assert _answered_by(server, "round-2.0") == []  # no model request for it

        # A writer's retry runs the round with the review that was over the bound.
        sim.comment(REPO, issue, "/scaffold retry TASK-1", by="alice")
        wait_for(
            "the retried round's fix pushed",
            lambda: _on_branch(sim, b"Hello\nWorld!\n"),
            timeout=DEADLINE,
        )
        wait_for(
            "the retried round's comment",
            lambda: _round_comment(sim, number, "Round 2", "@alice requested changes"),
            timeout=DEADLINE,
        )
        server.check()
        sim.submit_review(REPO, number, "APPROVED", by="alice")
        wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged, DEADLINE)

    server.check()
    assert _tool_errors(server) == []
    assert [t.name for t in server.script if t.fired == 0] == []
    [retried] = _answered_by(server, "round-2.0")
    assert retried.session_id == build.session_id  # Codeweaver resumed, not started over
    assert LATER in retried.user_text
    assert sim.repo(REPO).file_at("main", GREETING) == b"Hello\nWorld!\n"


def test_kill_9_of_the_app_in_the_middle_of_a_round_finishes_it_once(
    claude_bin: str,
    server: MessagesServer,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The App is killed (SIGKILL) while the round's claude waits on the model; the next
    App on the same state finishes the round exactly once: one reply per thread, one
    round comment, one fix commit; and no agent process outlives either App."""
    sim = github_sim
    _setup(sim, claude_bin)
    server.add(
        *_building(),
        # The round's first run: the model never answers; the App dies meanwhile.
        Turn(
            when=CODEWEAVER.but(text=REVIEW, tool_result=False),
            stall=math.inf,
            times=1,
            name="killed",
        ),
        *_round(
            "round-1",
            REVIEW,
            _edit("hello\nworld\n", "Hello\nWorld\n"),
            summary="capitalised both lines",
        ),
        *_validators(),
    )
    state = tmp_path / "state"
    env = _env(server, tmp_path)

    with _no_agent_outlives(server) as apps:
        with app_process(sim, tmp_path / "first", state=state, extra_env=env) as app:
            apps.append(app.proc.pid)
            _, number = _to_pr(sim, app)
            build = _first(server, "codeweaver", FRESH)
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
            threads = sim.review_comments_of(REPO, review)
            wait_for(
                "the round's claude at the model",
                lambda: _answered_by(server, "killed") or None,
                timeout=DEADLINE,
            )
            app.proc.kill()  # kill -9: no shutdown of any kind
            app.proc.wait()
        # The sandbox dies with the App (bwrap --die-with-parent): nothing left running.
        wait_for(
            "the killed round's agents gone",
            lambda: _agents(server.base_url, but=apps) == [],
            timeout=DEADLINE,
        )

        with app_process(sim, tmp_path / "second", state=state, extra_env=env) as app:
            apps.append(app.proc.pid)
            # The review's delivery comes again (a redelivery from the App's settings page).
            sim.redeliver(sim.deliveries_of("pull_request_review", "submitted")[-1].delivery_id)
            for thread in threads:
                wait_for(
                    "a reply in the thread",
                    lambda t=thread: _replies(sim, t) or None,
                    timeout=DEADLINE,
                )
            wait_for(
                "the round's comment",
                lambda: _round_comment(sim, number, "Round 1", "@alice requested changes"),
                timeout=DEADLINE,
            )
            assert _on_branch(sim, b"Hello\nWorld\n")
            server.check()
            sim.submit_review(REPO, number, "APPROVED", by="alice")
            wait_for("the PR merged", lambda: sim.repo(REPO).pulls[number].merged, DEADLINE)
            print(sim.timeline_text(REPO, number))

    server.check()
    assert _tool_errors(server) == []
    assert [t.name for t in server.script if t.fired == 0] == []
    repo = sim.repo(REPO)
    for thread in threads:
        assert len(_replies(sim, thread)) == 1  # no second reply
    rounds = [
        c for c in repo.comments.values() if c.issue_number == number and "scaffold:round" in c.body
    ]
    assert len(rounds) == 1
    # The round ran once more, in Codeweaver's session, and fixed once.
    [killed] = _answered_by(server, "killed")
    [finished] = _answered_by(server, "round-1.0")
    assert killed.session_id == finished.session_id == build.session_id
    # One fix commit for the review on main, and the fix is what merged.
    subjects = repo.git("log", "--format=%s", "main").splitlines()
    assert subjects.count("TASK-1 codeweaver: capitalised both lines") == 1, subjects
    assert repo.file_at("main", GREETING) == b"Hello\nWorld\n"
