"""End to end: scaffold's orchestrator drives the real ``claude`` CLI against the scripted
Messages API, from a request (or a backlog) to merged work.

Each test builds a repository whose ``agent.command`` is the real binary, scripts what the
model answers (`messages_server`), runs scaffold and then checks both sides: what
scaffold recorded (quest, history, Backlog.md, git) and what the CLI sent (sessions,
resumed conversations, prompts). A claude run costs a few seconds, so the scenarios share
runs where that stays readable.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_project import (
    ARCHITECTURE,
    E2EProject,
    alive,
    scaffold_config,
    step_pids,
    wait_until,
)
from messages_server import (
    SIGNAL_TOOL,
    MessagesServer,
    Request,
    ToolUse,
    Turn,
    When,
    chain,
    claude_env,
    signal_back,
    tool,
)

from harness import isolate_git
from scaffold.agent.claude import REQUIREMENTS_TOOL, TASKS_TOOL
from scaffold.errors import StoreError
from scaffold.quest.model import QuestPhase
from scaffold.runtime.session import BACKLOG_QUEST

pytestmark = pytest.mark.interop

# The headings scaffold's prompt starts with, per kind of run (runtime/prompts.py).
FRESH = "Start the step"
ANSWERED = "The person answered your question"
RETRY = "Your previous run failed"
CONTINUE = "Continue where the previous run of your role stopped"
FOLLOWUP = "Another role handed you this step"
RESUMED = "The role you asked for has finished"

# Variables of the developer's own setup that would take claude elsewhere.
_FOREIGN = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer() as srv:
        yield srv


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: MessagesServer
) -> Iterator[E2EProject]:
    """A project whose agents reach ``server``: the claude environment is scaffold's own.

    At teardown no agent or MCP server of the project may be left running.
    """
    proj = E2EProject(tmp_path)
    isolate_git(tmp_path, monkeypatch, also_unset=_FOREIGN)
    for name, value in claude_env(server.base_url, proj.home).items():
        monkeypatch.setenv(name, value)
    yield proj
    left = proj.live_agents()
    for pid in left:  # a failed test must not leak processes into the next one
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the test: {left}"


def _complete(role: str, summary: str, step: str | None = None, **when: Any) -> list[Turn]:
    """A run that only reports ``complete``."""
    return chain(
        signal_back("complete", summary=summary),
        when=When(role=role, step=step, **when),
        name=f"{role}-{step or 'any'}",
    )


def _uses(request: Request, name: str) -> list[dict[str, Any]]:
    return [u for u in request.tool_uses() if u.get("name") == name]


def _answered(request: Request, use: dict[str, Any]) -> bool:
    return any(r.get("tool_use_id") == use["id"] for r in request.tool_results())


def _first(server: MessagesServer, role: str, heading: str, step: str | None = None) -> Request:
    """The first request of ``role`` (on ``step``) whose newest prompt has ``heading``."""
    for r in server.requests:
        if r.role == role and (step is None or r.step == step) and heading in r.user_text:
            return r
    seen = "\n".join(r.summary() for r in server.requests)
    raise AssertionError(f"no {role} request with {heading!r}; requests:\n{seen}")


# --------------------------------------------------------------------------- 1 and 5

REQUEST = "Add a greet module: greet(name) says hello to that name."
QUESTION = "Should the greeting end with an exclamation mark?"
ANSWER = "Yes, greet('Ada') returns 'Hello, Ada!'."
REQUIREMENTS = {
    "contexts": [
        {
            "id": "C1",
            "description": "Given a name, when greet(name) is called",
            "observables": [{"id": "O1", "description": "it returns 'Hello, <name>!'"}],
        }
    ]
}
PLAN = {
    "fileMap": ["greet.py", ARCHITECTURE],
    "tasks": [
        {
            "key": "greet",
            "title": "Add the greet module",
            "description": "greet(name) returns 'Hello, <name>!'.",
            "acceptanceCriteria": ["greet('Ada') == 'Hello, Ada!'"],
        }
    ],
}
GREET = 'def greet(name: str) -> str:\n    return f"Hello, {name}!"\n'
WARD = "import greet, sys; sys.exit(greet.greet('Ward') != 'Hello, Ward!')"


def _quest_script() -> list[Turn]:
    chaos = When(role="chaoswhisperer", step="PLAN")
    codeweaver = When(role="codeweaver", step="TASK-1")
    ask = signal_back("needs-user-input", question=QUESTION, context="The request is silent.")
    return [
        *chain(ask, final="Waiting for the answer.", when=chaos.but(text=FRESH), name="ask"),
        *chain(
            tool(REQUIREMENTS_TOOL, REQUIREMENTS),
            signal_back("complete", summary="requirements: 1 context"),
            when=chaos.but(text=ANSWERED),
            name="requirements",
        ),
        *chain(
            tool(TASKS_TOOL, PLAN),
            signal_back("complete", summary="planned 1 task"),
            when=When(role="pathseeker", step="PLAN"),
            name="plan",
        ),
        # Codeweaver's first run meets a broken API (every request, CLI retries included).
        Turn(when=codeweaver.but(text=FRESH), http_status=500, error_message="scripted outage"),
        *chain(
            tool("Read", {"file_path": ARCHITECTURE}),
            tool(
                "Edit",
                {
                    "file_path": ARCHITECTURE,
                    "old_string": "    main\n",
                    "new_string": "    main\n    main --> greet\n",
                },
            ),
            tool("Write", {"file_path": "greet.py", "content": GREET}),
            signal_back("complete", summary="greet.py added, architecture updated"),
            when=codeweaver.but(text=RETRY),
            name="implement",
        ),
        *_complete("siegemaster", "edge cases hold"),
        *_complete("lawbringer", "reviewed: fine"),
    ]


def test_a_quest_from_request_to_merged(
    claude_bin: str, server: MessagesServer, project: E2EProject
) -> None:
    ward = [[sys.executable, "-c", WARD]]
    project.build(scaffold_config(claude_bin, ward=ward))
    server.add(*_quest_script())

    # ChaosWhisperer asks: the run stops, waiting for a person.
    first = project.run(request=REQUEST)
    server.check()
    assert first.exit_code == 3, first.output
    quest = project.quest("quest-1")
    [question] = quest.pending_questions()
    assert (question.question, question.task_id) == (QUESTION, None)
    asked = _first(server, "chaoswhisperer", FRESH)
    session = quest.planning.sessions["chaoswhisperer"]
    assert asked.session_id == session
    assert REQUEST in asked.prompt

    # The answer comes in as `scaffold answer` posts it; the next run resumes the session.
    project.answer("quest-1", question.id, ANSWER)
    second = project.run()
    server.check()
    assert second.exit_code == 0, second.output

    resumed = _first(server, "chaoswhisperer", ANSWERED)
    assert resumed.session_id == session
    assert f"resuming session {session[:8]}" in second.output
    [ask] = _uses(resumed, SIGNAL_TOOL)
    assert ask["input"]["question"] == QUESTION
    assert _answered(resumed, ask)
    assert REQUEST in resumed.prompt  # the first prompt is still the opening one
    assert ANSWER in resumed.user_text

    quest = project.quest("quest-1")
    assert quest.phase is QuestPhase.DONE
    assert [c.id for c in quest.requirements.contexts] == ["C1"]
    assert quest.requirements.locked
    assert quest.planning.file_map == ("greet.py", ARCHITECTURE)
    assert quest.questions[question.id].answer == ANSWER

    # The broken API: an agent failure with the status in the history, then a retry.
    task = quest.tasks["TASK-1"]
    assert task.outcome == "merged"
    assert "agent_failed" in project.events("quest-1", "TASK-1")
    notes = project.notes("quest-1", "TASK-1")
    assert any("API status 500" in n for n in notes), notes
    failed = [e for e in project.history("quest-1") if e.event == "agent_failed"]
    assert "API status 500" in str(failed[0].detail.get("reason"))
    retried = _first(server, "codeweaver", RETRY, "TASK-1")
    broken = _first(server, "codeweaver", FRESH, "TASK-1")
    assert retried.session_id == broken.session_id == task.sessions.get("codeweaver")

    # The work is merged, with the diagram the new module needs; the backlog says Done.
    assert project.git("show", "main:greet.py") == GREET
    assert "main --> greet" in project.git("show", f"main:{ARCHITECTURE}")
    assert project.backlog_status("TASK-1") == "Done"
    assert len(project.merge_subjects()) == 1
    assert project.live_agents() == []
    assert [t.name for t in server.script if t.fired == 0] == []


# --------------------------------------------------------------------------- 2, 3 and 4

EDGE_CASES = "Test the implementation's edge cases"
CONTINUATION = "write notes/part-2.txt, then report complete"
STUCK_TIMEOUT_S = 10  # claude prints its init event within 1-2 s (5 s on a busy machine)


def _write(path: str, content: str) -> ToolUse:
    return tool("Write", {"file_path": path, "content": content})


def test_partial_work_role_followup_and_a_stalled_model(
    claude_bin: str, server: MessagesServer, project: E2EProject
) -> None:
    """TASK-1: Codeweaver stops half-way and a resumed session continues; then the model
    stalls on Siegemaster, the stuck timeout kills claude and its MCP server, and the
    retry resumes. TASK-2: Siegemaster hands over to Codeweaver and is resumed after."""
    config = scaffold_config(claude_bin, agent={"stuck_timeout_s": STUCK_TIMEOUT_S})
    project.build(config, tasks=["Two-part notes", "Notes with an empty case"])
    stalled: list[int] = []  # the processes of the stalled run, while it stalls
    survivors: list[int] = []  # those still alive when the retry's first request comes

    def stalling(request: Request) -> bool:
        stalled.extend(step_pids(project.repo, "TASK-1", "siegemaster"))
        return True

    def retrying(request: Request) -> bool:
        if request.tool_result is None:
            survivors.extend(p for p in stalled if alive(p))
        return True

    cw1, sm1 = When(role="codeweaver", step="TASK-1"), When(role="siegemaster", step="TASK-1")
    cw2, sm2 = When(role="codeweaver", step="TASK-2"), When(role="siegemaster", step="TASK-2")
    handoff = signal_back(
        "needs-role-followup",
        targetRole="codeweaver",
        reason="the empty case is not written down",
        context="add notes/task-2-empty.txt",
        resume=True,
    )
    partial = signal_back(
        "partially-complete", progress="part one written", continuationPoint=CONTINUATION
    )
    server.add(
        # TASK-1
        *chain(
            _write("notes/part-1.txt", "part one\n"),
            partial,
            final="Stopping here.",
            when=cw1.but(text=FRESH),
            name="part-1",
        ),
        *chain(
            _write("notes/part-2.txt", "part two\n"),
            signal_back("complete", summary="both parts written"),
            when=cw1.but(text=CONTINUE),
            name="part-2",
        ),
        Turn(when=sm1.but(text=EDGE_CASES, match=stalling), stall=math.inf, name="stall"),
        *_complete("siegemaster", "edge cases hold", "TASK-1", text=RETRY, match=retrying),
        # TASK-2
        *chain(
            _write("notes/task-2.txt", "task two\n"),
            signal_back("complete", summary="task 2 written"),
            when=cw2.but(text=FRESH),
            name="task-2",
        ),
        *chain(handoff, final="Handing over.", when=sm2.but(text=EDGE_CASES), name="handoff"),
        *chain(
            _write("notes/task-2-empty.txt", "empty: nothing to say\n"),
            signal_back("complete", summary="empty case written"),
            when=cw2.but(text=FOLLOWUP),
            name="followup",
        ),
        *_complete("siegemaster", "edge cases hold now", "TASK-2", text=RESUMED),
        *_complete("lawbringer", "reviewed: fine"),
    )

    result = project.run()
    server.check()
    assert result.exit_code == 0, result.output
    quest = project.quest(BACKLOG_QUEST)

    # 2: the continuation resumes Codeweaver's session, with the continuation point.
    first = _first(server, "codeweaver", FRESH, "TASK-1")
    cont = _first(server, "codeweaver", CONTINUE, "TASK-1")
    assert cont.session_id == first.session_id
    assert first.session_id is not None
    started = f"TASK-1: agent codeweaver started (continue, resuming session {first.session_id[:8]}"
    assert started in result.output
    assert CONTINUATION in cont.user_text
    [sent] = _uses(cont, SIGNAL_TOOL)
    assert sent["input"]["continuationPoint"] == CONTINUATION
    assert _answered(cont, sent)
    assert first.prompt == cont.prompt  # the same conversation, continued

    # 4: the stalled run was killed, claude and its MCP server, before the retry started.
    assert len(stalled) >= 2, stalled  # claude and the processes of its run
    assert survivors == []
    failed = [e for e in project.history(BACKLOG_QUEST) if e.event == "agent_failed" and e.task_id]
    assert [(e.task_id, e.detail.get("role")) for e in failed] == [("TASK-1", "siegemaster")]
    assert "stuck" in str(failed[0].detail.get("reason"))
    stuck = _first(server, "siegemaster", EDGE_CASES, "TASK-1")
    retry = _first(server, "siegemaster", RETRY, "TASK-1")
    assert retry.session_id == stuck.session_id

    # 3: Siegemaster -> Codeweaver (a new session) -> Siegemaster resumed in its own.
    asked = _first(server, "siegemaster", EDGE_CASES, "TASK-2")
    helped = _first(server, "codeweaver", FOLLOWUP, "TASK-2")
    back = _first(server, "siegemaster", RESUMED, "TASK-2")
    built = _first(server, "codeweaver", FRESH, "TASK-2")
    assert back.session_id == asked.session_id
    assert helped.session_id not in (asked.session_id, built.session_id)
    assert "the empty case is not written down" in helped.user_text
    [handed] = _uses(back, SIGNAL_TOOL)
    assert handed["input"]["targetRole"] == "codeweaver"
    assert _answered(back, handed)
    assert "empty case written" in back.user_text  # what the follow-up role reported
    assert quest.tasks["TASK-2"].role_stack == ()

    # Both tasks merged with all their files; the backlog says Done.
    for task_id in ("TASK-1", "TASK-2"):
        assert quest.tasks[task_id].outcome == "merged", result.output
        assert project.backlog_status(task_id) == "Done"
    for path in ("part-1", "part-2", "task-2", "task-2-empty"):
        assert project.git("show", f"main:notes/{path}.txt")
    assert len(project.merge_subjects()) == 2
    assert [t.name for t in server.script if t.fired == 0] == []


# --------------------------------------------------------------------------- 6


def test_scaffold_killed_mid_run_resumes_the_session(
    claude_bin: str, server: MessagesServer, project: E2EProject
) -> None:
    """``kill -9`` of ``scaffold run`` while the model is thinking; the next run kills the
    orphaned claude and resumes its session instead of starting over."""
    project.build(scaffold_config(claude_bin), tasks=["Hello file"])
    codeweaver = When(role="codeweaver", step="TASK-1")
    server.add(
        # The first turn never comes back: the session exists, the run is mid-flight.
        Turn(when=codeweaver.but(text=FRESH), stall=math.inf, times=1, name="stall"),
        *chain(
            _write("hello.txt", "hello\n"),
            signal_back("complete", summary="hello.txt written"),
            when=codeweaver,
            name="implement",
        ),
        *_complete("siegemaster", "edge cases hold"),
        *_complete("lawbringer", "reviewed: fine"),
    )

    def session_saved() -> bool:
        """Scaffold recorded the session id, and claude its transcript (which it writes
        just after sending the request: a kill before that leaves nothing to resume)."""
        try:
            task = project.quest(BACKLOG_QUEST).tasks.get("TASK-1")
        except (StoreError, OSError):
            return False  # not created yet, or being replaced
        session = task.sessions.get("codeweaver") if task is not None else None
        return session is not None and bool(project.transcripts(session))

    run = project.cli_popen("run")
    try:
        [stalled] = server.wait_for_requests(1, timeout=60)
        wait_until(session_saved, what="Codeweaver's session in the quest and in HOME")
    finally:
        run.send_signal(signal.SIGKILL)
        output, _ = run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL, output
    session = project.quest(BACKLOG_QUEST).tasks["TASK-1"].sessions["codeweaver"]
    assert stalled.session_id == session
    # The sandbox dies with scaffold (bwrap --die-with-parent, and its PID namespace
    # takes claude and its MCP server along): nothing is left for the next run to kill.
    wait_until(
        lambda: project.live_agents(BACKLOG_QUEST) == [],
        what="the killed run's agents to be gone with their sandbox",
    )

    again = project.cli("run")
    server.check()
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"agent codeweaver started (fresh, resuming session {session[:8]}" in again.stdout
    resumed = next(r for r in server.requests if r.turn == "implement.0")
    assert resumed.session_id == session
    assert resumed.prompt == stalled.prompt  # the conversation of the killed run goes on
    assert len(resumed.user_texts()) > len(stalled.user_texts())

    task = project.quest(BACKLOG_QUEST).tasks["TASK-1"]
    assert task.outcome == "merged"
    assert "agent_failed" not in project.events(BACKLOG_QUEST, "TASK-1")  # not the agent's fault
    assert project.git("show", "main:hello.txt") == "hello\n"
    assert project.backlog_status("TASK-1") == "Done"
    assert [t.name for t in server.script if t.fired == 0] == []
