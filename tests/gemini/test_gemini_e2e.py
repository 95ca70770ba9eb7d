"""End to end: scaffold's orchestrator drives the real ``gemini`` CLI against the scripted
Gemini API, from a request (or a backlog) to merged work, in the bubblewrap sandbox.

Each test builds a repository whose agents are on ``agent.backend: gemini`` with the real
binary as ``agent.command``, scripts what the model answers (`gemini_server`), runs
scaffold and checks both sides: what scaffold recorded (quest, history, cost, Backlog.md,
git) and what the CLI sent (prompts, resumed conversations, tool results). A gemini run
costs a few seconds, so the scenarios share runs where that stays readable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_project import ARCHITECTURE, E2EProject, alive, scaffold_config, step_pids
from gemini_server import (
    REQUIREMENTS_TOOL,
    SIGNAL_TOOL,
    TASKS_TOOL,
    GeminiServer,
    Request,
    Text,
    Turn,
    Usage,
    When,
    chain,
    gemini_env,
    signal_back,
    tool,
)

from harness import GIT_IDENTITY, isolate_git, served_tools
from sandboxing import listening
from scaffold.agent.backend import RunRequest
from scaffold.agent.choice import BACKENDS
from scaffold.agent.prices import SHIPPED
from scaffold.agent.stream import Event, ResultEvent, SystemInit
from scaffold.quest.model import QuestPhase
from scaffold.roles import Role
from scaffold.runtime.agent_runs import MODEL_KEYS, write_run_files
from scaffold.runtime.session import BACKLOG_QUEST
from scaffold.signal_back.records import Binding, latest_signal

pytestmark = pytest.mark.interop

# The headings scaffold's prompt starts with, per kind of run (runtime/prompts.py).
FRESH = "Start the step"
ANSWERED = "The person answered your question"
RETRY = "Your previous run failed"
FOLLOWUP = "Another role handed you this step"
RESUMED = "The role you asked for has finished"
EDGE_CASES = "Test the implementation's edge cases"
REVIEW = "Review the change"

MODEL = "gemini-2.5-flash"  # the backend's default, passed with -m
# Each answered request's tokens; the dollars follow from the shipped price.
USAGE = Usage(prompt_tokens=10_000, output_tokens=200, cached_tokens=4_000)

# Variables of a developer's own setup that would take gemini elsewhere.
_FOREIGN = ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_MODEL", "GEMINI_CLI_HOME")


@pytest.fixture
def server() -> Iterator[GeminiServer]:
    with GeminiServer() as srv:
        yield srv


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: GeminiServer
) -> Iterator[E2EProject]:
    """A project whose agents reach ``server``; no agent may outlive the test."""
    proj = E2EProject(tmp_path)
    isolate_git(tmp_path, monkeypatch, also_unset=_FOREIGN)
    for name, value in gemini_env(server.base_url, proj.home).items():
        monkeypatch.setenv(name, value)
    yield proj
    left = proj.live_agents()
    for pid in left:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the test: {left}"


def _config(gemini_bin: str, **overrides: Any) -> dict[str, Any]:
    agent = {"backend": "gemini", **overrides.pop("agent", {})}
    return scaffold_config(gemini_bin, agent=agent, sandbox={"mode": "bwrap"}, **overrides)


def _complete(role: str, summary: str, step: str | None = None, **when: Any) -> list[Turn]:
    return chain(
        signal_back("complete", summary=summary),
        when=When(role=role, step=step, **when),
        name=f"{role}-{step or 'any'}-{summary[:12]}",
        usage=USAGE,
    )


def _first(server: GeminiServer, role: str, heading: str, step: str | None = None) -> Request:
    """The first request of ``role`` (on ``step``) whose newest prompt has ``heading``."""
    for r in server.requests:
        if r.role == role and (step is None or r.step == step) and heading in r.user_text:
            return r
    seen = "\n".join(r.summary() for r in server.requests)
    raise AssertionError(f"no {role} request with {heading!r}; requests:\n{seen}")


def _calls(request: Request, name: str) -> list[dict[str, Any]]:
    return [c for c in request.calls() if c.get("name") == name]


def _answered(request: Request, call: dict[str, Any]) -> bool:
    return any(r.get("id") == call.get("id") for r in request.responses())


def _dollars_per_request() -> float:
    """What one answered request (``USAGE``) costs at the default model's shipped price."""
    price = SHIPPED[MODEL]
    assert price.cached_input_per_mtok is not None
    fresh = USAGE.prompt_tokens - USAGE.cached_tokens
    return (
        fresh * price.input_per_mtok
        + USAGE.cached_tokens * price.cached_input_per_mtok
        + USAGE.output_tokens * price.output_per_mtok
    ) / 1_000_000


def _dollars(server: GeminiServer) -> float:
    """What the answered requests cost at the default model's shipped price."""
    by_name = {t.name: t for t in server.script}
    answered = [r for r in server.requests if r.turn and by_name[r.turn].http_status is None]
    return _dollars_per_request() * len(answered)


def _sessions(project: E2EProject, step: str) -> list[str]:
    """The sessions the CLI stored in the step's private HOME (their ids' first 8
    characters, from ``session-<date>-<id8>.jsonl``)."""
    home = project.repo / ".scaffold" / "sandbox"
    files = home.glob(f"*/{step}/home/.gemini/tmp/*/chats/session-*.jsonl")
    return sorted(p.stem.rsplit("-", 1)[1] for p in files)


# --------------------------------------------------------------------------- a whole quest

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
        *chain(ask, final="Waiting.", when=chaos.but(text=FRESH), name="ask", usage=USAGE),
        *chain(
            tool(REQUIREMENTS_TOOL, REQUIREMENTS),
            signal_back("complete", summary="requirements: 1 context"),
            when=chaos.but(text=ANSWERED),
            name="requirements",
            usage=USAGE,
        ),
        *chain(
            tool(TASKS_TOOL, PLAN),
            signal_back("complete", summary="planned 1 task"),
            when=When(role="pathseeker", step="PLAN"),
            name="plan",
            usage=USAGE,
        ),
        # Codeweaver's first run meets a broken API: gemini exits (500 & 255 = 244).
        Turn(when=codeweaver.but(text=FRESH), http_status=500, error_message="scripted outage"),
        *chain(
            tool("read_file", {"file_path": ARCHITECTURE}),
            tool(
                "replace",
                {
                    "file_path": ARCHITECTURE,
                    "old_string": "    main\n",
                    "new_string": "    main\n    main --> greet\n",
                    "instruction": "add greet to the architecture",
                },
            ),
            tool("write_file", {"file_path": "greet.py", "content": GREET}),
            signal_back("complete", summary="greet.py added, architecture updated"),
            when=codeweaver.but(text=RETRY),
            name="implement",
            usage=USAGE,
        ),
        *_complete("siegemaster", "edge cases hold"),
        *_complete("lawbringer", "reviewed: fine"),
    ]


def test_a_quest_from_request_to_merged(
    gemini_bin: str, server: GeminiServer, project: E2EProject
) -> None:
    project.build(_config(gemini_bin, ward=[[sys.executable, "-c", WARD]]))
    server.add(*_quest_script())

    # ChaosWhisperer asks: the run stops, waiting for a person.
    first = project.run(request=REQUEST)
    server.check()
    assert first.exit_code == 3, first.output
    quest = project.quest("quest-1")
    [question] = quest.pending_questions()
    assert (question.question, question.task_id) == (QUESTION, None)
    session = quest.planning.sessions["chaoswhisperer"]
    asked = _first(server, "chaoswhisperer", FRESH)
    assert REQUEST in asked.prompt
    assert asked.model == MODEL
    assert SIGNAL_TOOL in asked.tools
    assert REQUIREMENTS_TOOL in asked.tools
    # Planning roles get no shell, edits or web.
    assert {"run_shell_command", "write_file", "replace", "web_fetch"}.isdisjoint(asked.tools)
    assert _sessions(project, "PLAN") == [session[:8]]

    # The answer comes in; the next run resumes the same session, history and all.
    project.answer("quest-1", question.id, ANSWER)
    second = project.run()
    server.check()
    assert second.exit_code == 0, second.output
    assert f"resuming session {session[:8]}" in second.output
    resumed = _first(server, "chaoswhisperer", ANSWERED)
    assert resumed.prompt == asked.prompt  # the conversation opens as before
    [ask] = _calls(resumed, SIGNAL_TOOL)
    assert ask["args"]["question"] == QUESTION
    assert _answered(resumed, ask)
    assert ANSWER in resumed.user_text
    quest = project.quest("quest-1")
    assert quest.planning.sessions["chaoswhisperer"] == session
    assert _sessions(project, "PLAN").count(session[:8]) == 1  # no second session

    assert quest.phase is QuestPhase.DONE
    assert [c.id for c in quest.requirements.contexts] == ["C1"]
    assert quest.planning.file_map == ("greet.py", ARCHITECTURE)
    pathseeker = _first(server, "pathseeker", FRESH)
    assert TASKS_TOOL in pathseeker.tools

    # The broken API: a failure with its status in the history, then a resumed retry.
    task = quest.tasks["TASK-1"]
    assert task.outcome == "merged"
    failed = [e for e in project.history("quest-1") if e.event == "agent_failed"]
    assert len(failed) == 1
    reason = str(failed[0].detail.get("reason"))
    assert "exited with code 244 without an accepted signal-back" in reason, reason
    assert "API status 500" in reason, reason
    # Gemini keeps no resumable session when the first request failed: the retry is a
    # new session, with the role's instructions again.
    retry = _first(server, "codeweaver", RETRY, "TASK-1")
    assert "# You are Codeweaver" in retry.prompt
    assert retry.calls() == []
    assert {"run_shell_command", "write_file", "replace"} <= set(retry.tools)
    assert "web_fetch" not in retry.tools
    assert "google_web_search" not in retry.tools

    # The work is merged with its diagram; the backlog says Done.
    assert project.git("show", "main:greet.py") == GREET
    assert "main --> greet" in project.git("show", f"main:{ARCHITECTURE}")
    assert project.backlog_status("TASK-1") == "Done"
    assert len(project.merge_subjects()) == 1
    assert server.unused() == []

    # Gemini reports tokens only: the dollars are its tokens at the shipped price (the
    # cached ones at the cached rate). A run stopped in the grace after its signal never
    # prints its result, and its tokens are not known: so a whole number of requests, at
    # most all of them.
    requests = quest.cost_by_backend["gemini"] / _dollars_per_request()
    assert requests == pytest.approx(round(requests), abs=1e-6)
    assert 1 <= round(requests) <= _dollars(server) / _dollars_per_request() + 1e-6
    assert set(quest.cost_by_backend) == {"gemini"}
    assert quest.cost_by_role["codeweaver"] > 0


# --------------------------------------------------------------------------- follow-up and hang

# gemini prints its init event 1-3 s after its start (2 s of CPU); on a loaded machine
# (CI's two cores, three workers) that stretched past 10 s.
STUCK_TIMEOUT_S = 20


def test_role_followup_and_a_stalled_model(
    gemini_bin: str, server: GeminiServer, project: E2EProject
) -> None:
    """Siegemaster hands the step to Codeweaver and is resumed after; then the model
    stalls on Lawbringer, the stuck timeout kills gemini, and the retry resumes."""
    project.build(_config(gemini_bin, agent={"stuck_timeout_s": STUCK_TIMEOUT_S}), tasks=["Notes"])
    stalled: list[int] = []  # the stalled run's processes, while it stalls
    survivors: list[int] = []  # those alive when the retry's first request comes

    def stalling(request: Request) -> bool:
        stalled.extend(step_pids(project.repo, "TASK-1", "lawbringer"))
        return True

    def retrying(request: Request) -> bool:
        if request.tool_result is None:
            survivors.extend(p for p in stalled if alive(p))
        return True

    cw, sm = When(role="codeweaver", step="TASK-1"), When(role="siegemaster", step="TASK-1")
    handoff = signal_back(
        "needs-role-followup",
        targetRole="codeweaver",
        reason="the empty case is not written down",
        context="add notes/empty.txt",
        resume=True,
    )
    write = tool("write_file", {"file_path": "notes/main.txt", "content": "notes\n"})
    server.add(
        *chain(write, signal_back("complete", summary="notes written"), when=cw.but(text=FRESH)),
        *chain(handoff, final="Handing over.", when=sm.but(text=EDGE_CASES), name="handoff"),
        *chain(
            tool("write_file", {"file_path": "notes/empty.txt", "content": "empty\n"}),
            signal_back("complete", summary="empty case written"),
            when=cw.but(text=FOLLOWUP),
            name="followup",
        ),
        *_complete("siegemaster", "edge cases hold now", "TASK-1", text=RESUMED),
        # Lawbringer reads a file, then the model goes silent; the retry resumes.
        *chain(
            tool("read_file", {"file_path": "README.md"}),
            final=None,
            when=When(role="lawbringer", text=REVIEW),
            name="review",
        ),
        Turn(when=When(after="review.0", match=stalling), stall=math.inf, times=1, name="stall"),
        *_complete("lawbringer", "reviewed: fine", "TASK-1", text=RETRY, match=retrying),
    )

    result = project.run()
    server.check()
    assert result.exit_code == 0, result.output
    quest = project.quest(BACKLOG_QUEST)

    # Siegemaster -> Codeweaver (a new session) -> Siegemaster resumed in its own.
    asked = _first(server, "siegemaster", EDGE_CASES)
    helped = _first(server, "codeweaver", FOLLOWUP)
    back = _first(server, "siegemaster", RESUMED)
    assert "the empty case is not written down" in helped.user_text
    assert helped.prompt != _first(server, "codeweaver", FRESH).prompt  # a new session
    assert back.prompt == asked.prompt  # the same session, continued
    [handed] = _calls(back, SIGNAL_TOOL)
    assert handed["args"]["targetRole"] == "codeweaver"
    assert _answered(back, handed)
    assert "empty case written" in back.user_text  # what the follow-up role reported
    sessions = quest.tasks["TASK-1"].sessions
    assert f"resuming session {sessions['siegemaster'][:8]}" in result.output
    assert quest.tasks["TASK-1"].role_stack == ()

    # The stalled run was killed (gemini and its sandbox) before the retry started.
    assert stalled, "no process of the stalled run was seen"
    assert survivors == []
    failed = [e for e in project.history(BACKLOG_QUEST) if e.event == "agent_failed"]
    assert [(e.task_id, e.detail.get("role")) for e in failed] == [("TASK-1", "lawbringer")]
    assert "stuck" in str(failed[0].detail.get("reason"))
    stuck = _first(server, "lawbringer", REVIEW)
    retry = _first(server, "lawbringer", RETRY)
    assert retry.prompt == stuck.prompt  # the retry resumed the stalled session
    [read] = _calls(retry, "read_file")
    assert _answered(retry, read)

    assert quest.tasks["TASK-1"].outcome == "merged", result.output
    for path in ("main", "empty"):
        assert project.git("show", f"main:notes/{path}.txt")
    assert server.unused() == []


# --------------------------------------------------------------------------- the sandbox

# Credentials in scaffold's environment that no gemini run may see.
PLANTED = {
    "GITHUB_TOKEN": "ghs_planted_github_token",
    "ANTHROPIC_API_KEY": "sk-ant-planted",
    "OPENAI_API_KEY": "sk-openai-planted",
}


def _foreign() -> dict[str, str]:
    """The planted credentials no gemini run may see: GitHub's, and every model key
    but Gemini's own."""
    own = set(BACKENDS["gemini"].credentials)
    foreign = (MODEL_KEYS - own) | {"GITHUB_TOKEN"}
    assert set(PLANTED) <= foreign
    return PLANTED


def test_in_the_sandbox_gemini_sees_only_its_key_and_its_hosts(
    gemini_bin: str,
    server: GeminiServer,
    project: E2EProject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Codeweaver prints its environment and tries the host's loopback: its model key is
    there, no other credential is, and nothing but the model API and scaffold's signal
    endpoint answers."""
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    project.build(_config(gemini_bin), tasks=["Look around"])
    # The repository's own Gemini settings are not the run's: this would take the signal
    # tool away and stop the run after one turn.
    hostile = {"mcpServers": {"scaffold": {"httpUrl": "http://127.0.0.1:9/mcp"}}}
    hostile["model"] = {"maxSessionTurns": 1}
    (project.repo / ".gemini").mkdir()
    (project.repo / ".gemini" / "settings.json").write_text(json.dumps(hostile))
    project.git("add", "-A")
    project.git(*GIT_IDENTITY, "commit", "-q", "-m", "the repository's gemini settings")
    environs: list[dict[str, str]] = []  # the run's processes, seen from the host

    def looking(request: Request) -> bool:
        for pid in step_pids(project.repo, "TASK-1", "codeweaver"):
            with contextlib.suppress(OSError):
                raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                environs.append(dict(v.decode().partition("=")[::2] for v in raw if v))
        return True

    with listening() as listener:
        probe = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {listener.port}), timeout=3)\n"
            "    print('PROBE: connected')\n"
            "except OSError as exc:\n"
            "    print('PROBE: refused', exc)\n"
        )
        server.add(
            *chain(
                tool("run_shell_command", {"command": "env; echo END-OF-ENV"}),
                tool("run_shell_command", {"command": f"python3 -c {_quote(probe)}"}),
                signal_back("complete", summary="looked around"),
                when=When(role="codeweaver", text=FRESH, match=looking),
                name="look",
            ),
            *_complete("siegemaster", "edge cases hold"),
            *_complete("lawbringer", "reviewed: fine"),
        )
        result = project.run()
        heard = list(listener.heard)
    server.check()
    assert result.exit_code == 0, result.output

    shell = next(r for r in server.requests if r.turn == "look.1").tool_result
    probed = next(r for r in server.requests if r.turn == "look.2").tool_result
    assert shell is not None
    assert probed is not None
    assert "END-OF-ENV" in shell.output, shell.output
    assert "PROBE: refused" in probed.output, probed.output
    assert heard == []

    # The processes of the run (gemini and what it started), and what its shell saw.
    assert environs, "no process of the run was seen"
    seen = [*environs, {"shell": shell.output}]
    for name, value in _foreign().items():
        leaks = [e for e in seen if name in e or any(value in v for v in e.values())]
        assert leaks == [], f"{name} reached the gemini run"
    gemini = [e for e in environs if e.get("GEMINI_CLI_HOME")]
    assert gemini, environs
    for env in gemini:
        assert env["GEMINI_API_KEY"] == "test-gemini-key"
        assert env["HOME"] == env["GEMINI_CLI_HOME"]  # the step's private folder
        assert env["GOOGLE_GEMINI_BASE_URL"] == server.base_url
    assert project.quest(BACKLOG_QUEST).tasks["TASK-1"].outcome == "merged"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


# --------------------------------------------------------------------------- the CLI alone


def _direct(
    gemini_bin: str, req: RunRequest, cwd: Path, env: dict[str, str]
) -> tuple[int, list[Event], str]:
    """One run of the adapter's invocation, as scaffold would start it (no sandbox)."""
    backend = BACKENDS["gemini"]
    inv = backend.invocation([gemini_bin], req)
    write_run_files(inv.files)
    proc = subprocess.run(
        inv.argv,
        cwd=cwd,
        env={**env, **inv.env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    parse = backend.parser(req)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(b"{")]
    return (
        proc.returncode,
        [parse(line, n) for n, line in enumerate(lines, 1)],
        proc.stderr.decode(),
    )


def test_the_turn_limit_a_lost_session_and_an_unreachable_signal_server(
    gemini_bin: str, server: GeminiServer, tmp_path: Path
) -> None:
    """``max_turns`` is the CLI's own limit (exit 53, ``error_max_turns``); a resume of an
    unknown session is recognised as lost; a signal server the CLI cannot reach leaves
    the run going, without the tool (so scaffold cannot rely on the init event)."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home)}
    env.update(gemini_env(server.base_url, home))
    signal_dir = tmp_path / "signals"
    signal_dir.mkdir()
    binding = Binding(signal_dir, "TASK-7", Role.CODEWEAVER, "quest-1", work)
    server.add(
        *chain(
            tool("read_file", {"file_path": "README.md"}),
            tool("list_directory", {"dir_path": "."}),
            when=When(text="Use two tools"),
            name="turns",
        ),
        Turn(when=When(text="Nobody listens"), reply=[Text("No tool to call.")], name="alone"),
    )
    (work / "README.md").write_text("# work\n", encoding="utf-8")
    with served_tools(binding) as config:
        entry = config["mcpServers"]["scaffold"]
        secret = entry["headers"]["Authorization"].removeprefix("Bearer ")
        base = RunRequest(
            role=Role.CODEWEAVER,
            prompt="Use two tools.",
            instructions="",
            whole_prompt="Use two tools.",
            model=MODEL,
            max_turns=1,
            resume_session=None,
            signal_url=entry["url"],
            signal_secret=secret,
            mcp_config_path=tmp_path / "unused.json",
            home=home,
            env=env,
        )
        code, events, _ = _direct(gemini_bin, base, work, env)
    assert code == 53
    [result] = [e for e in events if isinstance(e, ResultEvent)]
    assert (result.subtype, result.is_error) == ("error_max_turns", True)
    inits = [e for e in events if isinstance(e, SystemInit)]
    session = inits[-1].session_id
    assert session is not None  # the model answered: the session is reported

    unknown = dataclasses.replace(base, resume_session="0" * 8 + session[8:], max_turns=None)
    code, events, stderr = _direct(gemini_bin, unknown, work, env)
    assert code == 42
    assert BACKENDS["gemini"].resume_lost(stderr), stderr

    # The signal endpoint is gone (served_tools closed it): the CLI goes on without it.
    alone = dataclasses.replace(base, whole_prompt="Nobody listens.", max_turns=None)
    code, events, _ = _direct(gemini_bin, alone, work, env)
    assert code == 0
    asked = next(r for r in server.requests if r.turn == "alone")
    assert SIGNAL_TOOL not in asked.tools
    assert latest_signal(signal_dir) is None
    server.check()


# --------------------------------------------------------------------------- the budget


def test_the_budget_holds_for_gemini_tokens(
    gemini_bin: str, server: GeminiServer, project: E2EProject
) -> None:
    """Gemini reports tokens only: a model without a price does not start, and the
    dollars of its tokens stop a quest at ``safety.max_cost_usd``."""
    one_run = 2 * _dollars_per_request()  # Codeweaver: signal-back, then its last word
    config = _config(gemini_bin, slots=1, safety={"max_cost_usd": one_run * 0.9})
    config["agent"]["model"] = "gemini-9-unpriced"
    project.build(config, tasks=["First notes", "Second notes"])
    refused = project.cli("run")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "agent.prices.gemini-9-unpriced" in refused.stderr + refused.stdout
    assert server.requests == []

    del config["agent"]["model"]  # the default model, priced
    (project.repo / ".github" / "scaffold.yml").write_text(json.dumps(config))
    project.git("add", "-A")
    project.git(*GIT_IDENTITY, "commit", "-q", "-m", "the default model")
    server.add(*_complete("codeweaver", "notes written"))
    result = project.run()
    server.check()
    assert result.exit_code == 4, result.output
    assert "cost budget reached" in result.output, result.output
    quest = project.quest(BACKLOG_QUEST)
    assert quest.cost_by_backend["gemini"] == pytest.approx(one_run)
    assert {r.step for r in server.requests} == {"TASK-1"}  # nothing started after it
