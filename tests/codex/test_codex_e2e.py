"""End to end: scaffold's orchestrator drives the real ``codex`` CLI against the scripted
Responses API, in its sandbox (bubblewrap, ``sandbox.mode: auto``), from a request (or a
backlog) to merged work.

Each test builds a repository whose agents run on ``agent.backend: codex`` with the real
binary, scripts what the model answers (`responses_server`), runs scaffold and checks
both sides: what scaffold recorded (quest, history, cost, git) and what the CLI sent
(threads, resumed conversations, the environment its commands saw). Anything the CLI
sends elsewhere than its model host reaches the scripted server as its proxy and fails
the test. A codex run costs a second or two, so the scenarios share runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from responses_server import (
    Request,
    ResponsesServer,
    Text,
    Turn,
    Usage,
    When,
    chain,
    codex_env,
    mcp_tool,
    shell,
    signal_back,
)

from claude.e2e_project import E2EProject, alive, step_pids
from harness import isolate_git
from scaffold.agent.choice import BACKENDS
from scaffold.agent.prices import SHIPPED, cost_usd
from scaffold.agent.stream import Usage as Tokens
from scaffold.quest.model import QuestPhase
from scaffold.runtime.session import BACKLOG_QUEST

pytestmark = pytest.mark.interop

# The headings scaffold's prompt starts with, per kind of run (runtime/prompts.py).
FRESH = "Start the step"
ANSWERED = "The person answered your question"
RETRY = "Your previous run failed"
FOLLOWUP = "Another role handed you this step"
RESUMED = "The role you asked for has finished"
EDGE_CASES = "Test the implementation's edge cases"  # Siegemaster's fresh run

# Credentials of scaffold's own environment that no codex run may see.
PLANTED = {
    "GITHUB_TOKEN": "ghs_planted_github",
    "ANTHROPIC_API_KEY": "sk-ant-planted",
    "GEMINI_API_KEY": "planted-gemini",
}
# Variables of the developer's own setup that would take codex elsewhere.
_FOREIGN = ("CODEX_HOME", "CODEX_API_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")


def codex_config(codex_bin: str, **overrides: Any) -> dict[str, Any]:
    """``.github/scaffold.yml``: every role on codex, local forge, auto approval."""
    agent: dict[str, Any] = {
        "backend": "codex",
        "command": [codex_bin],
        "stuck_timeout_s": 60,
        "max_attempts": 2,
    }
    agent.update(overrides.pop("agent", {}))
    return {"slots": 2, "agent": agent, "approval": "auto", **overrides}


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    with ResponsesServer() as srv:
        yield srv


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ResponsesServer
) -> Iterator[E2EProject]:
    """A project whose codex agents reach ``server``; no agent outlives the test."""
    proj = E2EProject(tmp_path)
    isolate_git(tmp_path, monkeypatch, also_unset=_FOREIGN)
    monkeypatch.setenv("HOME", str(proj.home))
    for name, value in {**codex_env(server.base_url, server.proxy_url), **PLANTED}.items():
        monkeypatch.setenv(name, value)
    yield proj
    left = proj.live_agents()
    for pid in left:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the test: {left}"


def _complete(role: str, summary: str, step: str | None = None, **when: Any) -> list[Turn]:
    return chain(
        signal_back("complete", summary=summary),
        when=When(role=role, step=step, **when),
        name=f"{role}-{step or 'any'}",
    )


def _first(server: ResponsesServer, role: str, heading: str, step: str | None = None) -> Request:
    """The first request of ``role`` (on ``step``) whose newest prompt has ``heading``."""
    for r in server.requests:
        if r.role == role and (step is None or r.step == step) and heading in r.user_text:
            return r
    seen = "\n".join(r.summary() for r in server.requests)
    raise AssertionError(f"no {role} request with {heading!r}; requests:\n{seen}")


def _write(path: str, text: str) -> Any:
    folder = os.path.dirname(path) or "."
    return shell(f"mkdir -p {folder} && printf '%s\\n' '{text}' > {path}")


def _priced(requests: int, usage: Usage) -> float:
    """What ``requests`` answered requests of ``usage`` cost at the default model's price."""
    tokens = Tokens(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
    return requests * cost_usd(tokens, SHIPPED[BACKENDS["codex"].default_model])


# --------------------------------------------------------------------------- a quest

REQUEST = "Add a greeting note: it says hello to Ada."
QUESTION = "Should the greeting end with an exclamation mark?"
ANSWER = "Yes: 'Hello, Ada!'."
REQUIREMENTS = {
    "contexts": [
        {
            "id": "C1",
            "description": "Given the notes, when one reads notes/greet.txt",
            "observables": [{"id": "O1", "description": "it says 'Hello, Ada!'"}],
        }
    ]
}
PLAN = {
    "fileMap": ["notes/greet.txt"],
    "tasks": [
        {
            "key": "greet",
            "title": "Add the greeting note",
            "description": "notes/greet.txt says 'Hello, Ada!'.",
            "acceptanceCriteria": ["notes/greet.txt says 'Hello, Ada!'"],
        }
    ],
}
ENV_PROBE = 'env | sort; ls -d "$HOME"'


def test_a_quest_on_codex_from_request_to_merged(
    codex_bin: str, server: ResponsesServer, project: E2EProject
) -> None:
    """Every role on codex, in the sandbox: a question answered in the same thread, a
    model outage and a run without a signal retried, the work merged; cost from tokens, resumed runs counted once;
    no credential but the model key, no traffic but the model host and the signal."""
    project.build(codex_config(codex_bin))
    chaos = When(role="chaoswhisperer", step="PLAN")
    codeweaver = When(role="codeweaver", step="TASK-1")
    ask = signal_back("needs-user-input", question=QUESTION, context="The request is silent.")
    seen_env: list[bytes] = []

    def codex_running(request: Request) -> bool:
        for pid in step_pids(project.repo, "TASK-1", "codeweaver"):
            with contextlib.suppress(OSError):
                seen_env.append(Path(f"/proc/{pid}/environ").read_bytes())
        return True

    server.add(
        *chain(ask, final="Waiting for the answer.", when=chaos.but(text=FRESH), name="ask"),
        *chain(
            mcp_tool("write-requirements", REQUIREMENTS),
            signal_back("complete", summary="requirements: 1 context"),
            when=chaos.but(text=ANSWERED),
            name="requirements",
        ),
        *chain(
            mcp_tool("create-tasks", PLAN),
            signal_back("complete", summary="planned 1 task"),
            when=When(role="pathseeker", step="PLAN"),
            name="plan",
        ),
        # Codeweaver's first run meets a broken model API (every request, retries too).
        Turn(when=codeweaver.but(text=FRESH), http_status=500, error_message="scripted outage"),
        *chain(
            shell(ENV_PROBE),
            _write("notes/greet.txt", "Hello, Ada!"),
            signal_back("complete", summary="notes/greet.txt written"),
            when=codeweaver.but(text=RETRY, match=codex_running),
            name="implement",
        ),
        # Siegemaster's first run ends without a signal: codex exits 0, a crash all the same.
        Turn(When(role="siegemaster", text=EDGE_CASES), [Text("Looks fine.")], name="silent"),
        *_complete("siegemaster", "edge cases hold", text=RETRY),
        *_complete("lawbringer", "reviewed: fine"),
    )

    # ChaosWhisperer asks: the run stops, waiting for a person.
    first = project.run(request=REQUEST)
    server.check()
    assert first.exit_code == 3, first.output
    quest = project.quest("quest-1")
    [question] = quest.pending_questions()
    assert question.question == QUESTION
    thread = quest.planning.sessions["chaoswhisperer"]
    asked = _first(server, "chaoswhisperer", FRESH)
    assert asked.session_id == thread
    assert REQUEST in asked.prompt
    # The role's instructions are codex's developer instructions, not the prompt.
    assert "# You are ChaosWhisperer" in asked.instructions
    assert "# You are" not in asked.prompt

    # The answer comes in; the next run resumes the same codex thread.
    project.answer("quest-1", question.id, ANSWER)
    second = project.run()
    server.check()
    assert second.exit_code == 0, second.output
    resumed = _first(server, "chaoswhisperer", ANSWERED)
    assert resumed.session_id == thread
    assert f"resuming session {thread[:8]}" in second.output
    assert [s.get("question") for s in resumed.signal_calls()] == [QUESTION]
    [call] = [c for c in resumed.calls() if c.get("name") == "signal_back"]
    assert "signal received" in (resumed.output_of(call["call_id"]) or "")
    assert REQUEST in resumed.prompt  # the conversation's first prompt is still there
    assert ANSWER in resumed.user_text

    quest = project.quest("quest-1")
    assert quest.phase is QuestPhase.DONE
    assert quest.requirements.locked
    assert [c.id for c in quest.requirements.contexts] == ["C1"]
    assert quest.planning.file_map == ("notes/greet.txt",)

    # The outage: a failed run (codex's own retries bounded), then a retry in its thread.
    task = quest.tasks["TASK-1"]
    assert task.outcome == "merged", second.output
    failed = [e for e in project.history("quest-1") if e.event == "agent_failed"]
    assert [(e.task_id, e.detail.get("role")) for e in failed] == [
        ("TASK-1", "codeweaver"),
        ("TASK-1", "siegemaster"),
    ]
    assert "exited with code 1 without an accepted signal-back" in str(
        failed[0].detail.get("reason")
    )
    assert "exited with code 0 without an accepted signal-back" in str(
        failed[1].detail.get("reason")
    )
    broken = [r for r in server.requests if r.turn and r.turn.startswith("turn-")]
    assert 1 <= len(broken) <= 9  # 1 + 2 retries, each of up to 3 stream attempts
    retried = _first(server, "codeweaver", RETRY, "TASK-1")
    assert retried.session_id == broken[0].session_id == task.sessions["codeweaver"]

    # The sandbox: the commands codex ran saw the private HOME and no credential, and
    # the codex process itself had only its model key.
    probe = next(r for r in server.requests if r.turn == "implement.1")
    [env_out] = [
        probe.output_of(c["call_id"]) or ""
        for c in probe.calls()
        if c.get("name") == "exec_command"
    ]
    assert "Process exited with code 0" in env_out, env_out
    assert f"HOME={project.repo}/.scaffold/sandbox/quest-1/TASK-1/home" in env_out
    for name, value in {**PLANTED, "OPENAI_API_KEY": "sk-test-codex"}.items():
        assert value not in env_out, f"{name} reached codex's commands"
    assert seen_env, "the codex process was not found while it ran"
    process_env = set(b"\n".join(seen_env).replace(b"\0", b"\n").split(b"\n"))
    assert b"OPENAI_API_KEY=sk-test-codex" in process_env
    for name, value in PLANTED.items():
        assert f"{name}={value}".encode() not in process_env, name

    # Cost: the tokens of every answered request once, at gpt-5.5's price (the resumed
    # ChaosWhisperer run counts only its own requests, though codex reports the thread's).
    answered = [r for r in server.requests if r.turn and not r.turn.startswith("turn-")]
    expected = _priced(len(answered), Usage())
    assert quest.cost_by_backend == {"codex": pytest.approx(expected, abs=1e-6)}
    assert quest.cost_usd == pytest.approx(expected, abs=1e-6)
    assert set(quest.cost_by_role) == {
        "chaoswhisperer",
        "pathseeker",
        "codeweaver",
        "siegemaster",
        "lawbringer",
    }

    assert project.git("show", "main:notes/greet.txt") == "Hello, Ada!\n"
    assert project.backlog_status("TASK-1") == "Done"
    assert server.unused() == []
    assert server.problems == []  # nothing went anywhere but the model host


# --------------------------------------------------------------------------- the rest

STUCK_TIMEOUT_S = 10  # codex prints its first line within 1-2 s (4 s on a busy machine)


def test_followup_hang_and_turn_limit(
    codex_bin: str, server: ResponsesServer, project: E2EProject
) -> None:
    """TASK-1: the model stalls on Codeweaver, the stuck timeout kills codex and the retry
    resumes its thread; Siegemaster hands over to Codeweaver and is resumed after.
    TASK-2: Codeweaver loops past ``agent.max_turns``, is stopped, and the retry ends."""
    config = codex_config(codex_bin, agent={"stuck_timeout_s": STUCK_TIMEOUT_S, "max_turns": 3})
    project.build(config, tasks=["Notes with an empty case", "Looping notes"])
    stalled: list[int] = []
    survivors: list[int] = []

    def stalling(request: Request) -> bool:
        stalled.extend(step_pids(project.repo, "TASK-1", "codeweaver"))
        return True

    def retrying(request: Request) -> bool:
        survivors.extend(p for p in stalled if alive(p))
        return True

    cw1, sm1 = When(role="codeweaver", step="TASK-1"), When(role="siegemaster", step="TASK-1")
    cw2 = When(role="codeweaver", step="TASK-2")
    handoff = signal_back(
        "needs-role-followup",
        targetRole="codeweaver",
        reason="the empty case is not written down",
        context="add notes/empty.txt",
        resume=True,
    )
    loop = [shell("true") for _ in range(4)]
    server.add(
        # TASK-1
        Turn(when=cw1.but(text=FRESH, match=stalling), stall=math.inf, name="stall"),
        *chain(
            _write("notes/task-1.txt", "task one"),
            signal_back("complete", summary="task 1 written"),
            when=cw1.but(text=RETRY, match=retrying),
            name="task-1",
        ),
        *chain(handoff, final="Handing over.", when=sm1.but(text=EDGE_CASES), name="handoff"),
        *chain(
            _write("notes/empty.txt", "empty: nothing to say"),
            signal_back("complete", summary="empty case written"),
            when=cw1.but(text=FOLLOWUP),
            name="followup",
        ),
        *_complete("siegemaster", "edge cases hold now", "TASK-1", text=RESUMED),
        # TASK-2: one shell command per turn, never done; the retry signals at once.
        *chain(*loop, final=None, when=cw2.but(text=FRESH), name="loop"),
        *chain(
            _write("notes/task-2.txt", "task two"),
            signal_back("complete", summary="task 2 written"),
            when=cw2.but(text=RETRY),
            name="task-2",
        ),
        *_complete("siegemaster", "edge cases hold"),
        *_complete("lawbringer", "reviewed: fine"),
    )

    result = project.run()
    server.check()
    assert result.exit_code == 0, result.output
    quest = project.quest(BACKLOG_QUEST)
    failed = [e for e in project.history(BACKLOG_QUEST) if e.event == "agent_failed"]
    assert sorted((e.task_id, e.detail.get("role")) for e in failed) == [
        ("TASK-1", "codeweaver"),
        ("TASK-2", "codeweaver"),
    ]
    reasons = {e.task_id: str(e.detail.get("reason")) for e in failed}

    # The hang: codex and its processes were killed before the retry, which resumed.
    assert "stuck" in reasons["TASK-1"]
    assert stalled, "the stalled codex was not found"
    assert survivors == []
    stuck = _first(server, "codeweaver", FRESH, "TASK-1")
    assert _first(server, "codeweaver", RETRY, "TASK-1").session_id == stuck.session_id

    # The follow-up: Siegemaster -> Codeweaver (a thread of its own) -> Siegemaster resumed.
    asked = _first(server, "siegemaster", EDGE_CASES, "TASK-1")
    helped = _first(server, "codeweaver", FOLLOWUP, "TASK-1")
    back = _first(server, "siegemaster", RESUMED, "TASK-1")
    assert back.session_id == asked.session_id
    assert helped.session_id not in (asked.session_id, stuck.session_id)
    assert "the empty case is not written down" in helped.user_text
    assert [s["targetRole"] for s in back.signal_calls()] == ["codeweaver"]
    assert "empty case written" in back.user_text

    # The turn limit: three turns, then scaffold stopped codex (no fourth command ran).
    looped = [r for r in server.requests if r.turn and r.turn.startswith("loop.")]
    assert len(looped) in (3, 4), [r.turn for r in looped]  # the 4th may be on its way
    notes = project.notes(BACKLOG_QUEST, "TASK-2")
    assert any("max-turns after 3 turns" in n for n in notes), notes
    retry = _first(server, "codeweaver", RETRY, "TASK-2")
    assert len([c for c in retry.calls() if c.get("name") == "exec_command"]) in (3, 4)

    for task_id in ("TASK-1", "TASK-2"):
        assert quest.tasks[task_id].outcome == "merged", result.output
    for path in ("task-1", "empty", "task-2"):
        assert project.git("show", f"main:notes/{path}.txt")
    assert set(server.unused()) <= {"loop.3"}  # asked for only if on its way at the stop


def test_without_scaffolds_sandbox_codex_sandboxes_itself_and_the_budget_holds(
    codex_bin: str, server: ResponsesServer, project: E2EProject
) -> None:
    """``sandbox.mode: off``: Codeweaver's commands run in codex's own ``workspace-write``
    sandbox (its worktree writable, no network). Its tokens, priced by ``agent.prices``,
    pass ``safety.max_cost_usd``: the quest stops after that run."""
    prices = {"gpt-5.5": {"input_per_mtok": 10.0, "output_per_mtok": 100.0}}
    config = codex_config(
        codex_bin,
        agent={"prices": prices},
        safety={"max_cost_usd": 0.5},
        sandbox={"mode": "off"},
        slots=1,
    )
    project.build(config, tasks=["Expensive notes", "Never started"])
    port = urlsplit(server.base_url).port
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5)"
    costly = Usage(input_tokens=20_000, output_tokens=1_000)  # $0.30 a request
    server.add(
        *chain(
            _write("notes/costly.txt", "costly"),
            shell(f'python3 -c "{connect}"'),
            signal_back("complete", summary="costly.txt written"),
            when=When(role="codeweaver", step="TASK-1"),
            name="costly",
            usage=costly,
        ),
    )

    result = project.run()
    server.check()
    assert result.exit_code != 0, result.output
    quest = project.quest(BACKLOG_QUEST)

    # Codex's own sandbox: the worktree was writable, the network (even loopback) was not.
    escape = next(r for r in server.requests if r.turn == "costly.2")
    output = escape.tool_result.text if escape.tool_result else ""
    assert "Process exited with code 1" in output, output
    assert "Operation not permitted" in output, output  # its seccomp filter: no socket
    branch = quest.tasks["TASK-1"].branch
    assert project.git("show", f"{branch}:notes/costly.txt") == "costly\n", branch

    # The budget: four requests at $0.30, then nothing more started.
    spent = 4 * (20_000 * 10.0 + 1_000 * 100.0) / 1_000_000
    assert quest.cost_by_backend == {"codex": pytest.approx(spent)}
    assert quest.cost_by_role == {"codeweaver": pytest.approx(spent)}
    assert "cost budget reached" in (quest.stop_reason or ""), result.output
    assert [r.step for r in server.requests] == ["TASK-1"] * 4
