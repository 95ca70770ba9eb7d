"""The scripted Messages API: its DSL on its own, then playing conversations to the real CLI.

The interop tests run the real ``claude`` binary offline (``claude_bin`` fails when it is
missing), with scaffold's real MCP signal server, in a temporary git work tree.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
    text,
    tool,
    write_mcp_config,
)

from harness import served_tools
from scaffold.agent.stream import Event, ResultEvent, SystemInit, UserMessage, parse_line
from scaffold.roles import Role
from scaffold.signal_back.records import Binding, latest_signal
from scaffold.signals import Complete, NeedsUserInput

ALLOWED = "Write Edit Bash mcp__scaffold__signal-back"
PROMPT = "Implement TASK-3: create hello.txt, then report back."

# --------------------------------------------------------------------------- helpers


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        url + "/v1/messages?beta=true",
        data=data,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _body(*messages: dict[str, Any], stream: bool = False, step: str = "TASK-3") -> dict[str, Any]:
    """A request shaped like Claude Code's, with the scaffold tool bound to ``step``."""
    description = (
        f"Report the outcome of step {step!r} to the scaffold orchestrator, then stop working.\n"
        "As Lawbringer you may send: complete, needs-role-followup."
    )
    return {
        "model": "claude-opus-4-8",
        "stream": stream,
        "system": [{"type": "text", "text": "You are a Claude agent."}],
        "tools": [{"name": "Write"}, {"name": SIGNAL_TOOL, "description": description}],
        "messages": list(messages),
    }


def _user(*texts: str) -> dict[str, Any]:
    blocks = [{"type": "text", "text": "<system-reminder>\nctx\n</system-reminder>"}]
    return {"role": "user", "content": blocks + [{"type": "text", "text": t} for t in texts]}


def _frames(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    frames = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        event_line, data_line = chunk.split("\n")
        assert event_line.startswith("event: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == event_line.removeprefix("event: ")
        frames.append((data["type"], data))
    return frames


@dataclass
class Workspace:
    root: Path
    work: Path
    home: Path
    signals: Path
    mcp: Path


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    work, home, signals = tmp_path / "work", tmp_path / "home", tmp_path / "signals"
    work.mkdir()
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    with served_tools(Binding(signals, "TASK-3", Role.CODEWEAVER, "q-1")) as config:
        mcp = write_mcp_config(tmp_path / "mcp.json", config)
        yield Workspace(tmp_path, work, home, signals, mcp)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[Event]:
        return [parse_line(line.encode()) for line in self.stdout.splitlines() if line.strip()]

    @property
    def init(self) -> SystemInit:
        return next(e for e in self.events if isinstance(e, SystemInit))

    @property
    def result(self) -> ResultEvent:
        found = [e for e in self.events if isinstance(e, ResultEvent)]
        assert found, f"no result event; stderr: {self.stderr[-2000:]}"
        return found[-1]


def _argv(
    claude_bin: str, ws: Workspace, prompt: str, allowed: str, resume: str | None
) -> list[str]:
    argv = [claude_bin, "-p", prompt, "--output-format", "stream-json", "--verbose"]
    argv += ["--mcp-config", str(ws.mcp), "--strict-mcp-config", "--allowedTools", allowed]
    return argv + (["--resume", resume] if resume else [])


def run_claude(
    claude_bin: str,
    srv: MessagesServer,
    ws: Workspace,
    prompt: str = PROMPT,
    *,
    allowed: str = ALLOWED,
    resume: str | None = None,
) -> Run:
    done = subprocess.run(
        _argv(claude_bin, ws, prompt, allowed, resume),
        cwd=ws.work,
        env=claude_env(srv.base_url, ws.home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _roles(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


# --------------------------------------------------------------------------- the DSL alone


def test_request_views_skip_reminders_and_system_entries() -> None:
    write_use = {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"a": 1}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done", "is_error": True}
    body = _body(
        _user("first prompt"),
        {"role": "system", "content": "Available agent types ..."},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}, write_use]},
        {"role": "user", "content": [result]},
        {"role": "system", "content": "a mid-conversation note"},
    )
    req = Request("POST", "/v1/messages", {"beta": "true"}, {}, body, 0.0)
    assert _roles(req.messages) == ["user", "assistant", "user"]
    assert req.prompt == "first prompt"
    assert req.user_text == "first prompt"
    assert (req.role, req.step) == ("lawbringer", "TASK-3")
    assert req.tool_result is not None
    assert (req.tool_result.name, req.tool_result.is_error) == ("Write", True)
    assert req.tool_result.text == "done"
    assert When(tool="Write", is_error=True, role="Lawbringer").matches(req, {})
    assert not When(tool_result=False).matches(req, {})
    assert not When(tool="Bash").matches(req, {})
    assert When(after="t").matches(req, {"toolu_1": "t"})
    assert When(text="first").matches(req, {})  # the newest real text: tool results skipped
    fresh = Request("POST", "/v1/messages", {}, {}, _body(_user("a"), _user("second")), 0.0)
    assert fresh.user_text == "second"
    assert When(text="sec", tool_result=False, step="TASK-3").matches(fresh, {})
    # no scaffold tool: role and step come from scaffold's prompt, else are unknown
    prompt = "# You are Codeweaver, the implementer\n...with `stepId` set to `TASK-9`:"
    plain = {"messages": [_user(prompt)]}
    by_prompt = Request("POST", "/v1/messages", {}, {}, plain, 0.0)
    assert (by_prompt.role, by_prompt.step) == ("codeweaver", "TASK-9")
    bare = Request("POST", "/v1/messages", {}, {}, {"messages": [_user("hi")]}, 0.0)
    assert (bare.role, bare.step, bare.tool_result) == (None, None, None)


def test_streams_frames_counts_occurrences_and_reports_misses() -> None:
    script = [
        Turn(when=When(text="again"), occurrence=2, reply=[text("second time")]),
        Turn(when=When(text="again"), times=1, reply=[text("first time")]),
        Turn(
            when=When(text="call"),
            reply=[text("calling"), tool("Write", {"file_path": "f", "content": "x" * 40})],
            chunk=7,
        ),
        Turn(when=When(text="boom"), http_status=529, error_message="busy"),
        Turn(when=When(text="late"), reply=[text("late but whole")], stall=0.05, stall_after=2),
    ]
    with MessagesServer(script) as srv:
        assert _post(srv.base_url, _body(_user("again"), stream=True))[0] == 200
        status, raw = _post(srv.base_url, _body(_user("again"), stream=True))
        assert status == 200
        kinds = [k for k, _ in _frames(raw)]
        assert kinds[0] == "message_start"
        assert kinds[-2:] == ["message_delta", "message_stop"]
        deltas = [f["delta"]["text"] for k, f in _frames(raw) if k == "content_block_delta"]
        assert deltas == ["second time"]
        status, raw = _post(srv.base_url, _body(_user("again")))
        assert status == 500  # both rules spent: no turn left
        assert "no turn matches" in json.loads(raw)["error"]["message"]

        status, raw = _post(srv.base_url, _body(_user("call"), stream=True))
        frames = _frames(raw)
        started = [f["content_block"] for k, f in frames if k == "content_block_start"]
        assert [b["type"] for b in started] == ["text", "tool_use"]
        partial = "".join(
            f["delta"]["partial_json"]
            for k, f in frames
            if k == "content_block_delta" and f["index"] == 1
        )
        assert json.loads(partial) == {"file_path": "f", "content": "x" * 40}
        assert len([k for k, _ in frames if k == "content_block_delta"]) > 3
        end = next(f for k, f in frames if k == "message_delta")
        assert end["delta"]["stop_reason"] == "tool_use"
        assert end["usage"]["output_tokens"] > 0

        status, raw = _post(srv.base_url, _body(_user("call")))  # not streamed: one JSON
        message = json.loads(raw)
        assert message["stop_reason"] == "tool_use"
        assert message["content"][1]["input"]["file_path"] == "f"

        status, raw = _post(srv.base_url, _body(_user("boom"), stream=True))
        assert status == 529
        assert json.loads(raw)["error"] == {"type": "overloaded_error", "message": "busy"}

        status, raw = _post(srv.base_url, _body(_user("late"), stream=True))
        assert [k for k, _ in _frames(raw)][-1] == "message_stop"  # paused, then went on

        assert [r.turn for r in srv.requests] == [
            script[1].name,
            script[0].name,
            None,
            script[2].name,
            script[2].name,
            script[3].name,
            script[4].name,
        ]
        with pytest.raises(AssertionError, match="no turn matches"):
            srv.check()


def test_chain_follows_its_own_tool_calls() -> None:
    script = chain(
        tool("Bash", {"command": "true", "description": "nothing"}),
        signal_back("complete", summary="s"),
        when=When(role="lawbringer"),
    )
    with MessagesServer(script) as srv:
        _, raw = _post(srv.base_url, _body(_user("go")))
        first = json.loads(raw)["content"][0]
        assert first["name"] == "Bash"
        answered = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": first["id"]}],
        }
        convo = [_user("go"), {"role": "assistant", "content": [first]}, answered]
        _, raw = _post(srv.base_url, _body(*convo))
        second = json.loads(raw)["content"][0]
        assert second["input"] == {"signal": "complete", "stepId": "TASK-3", "summary": "s"}
        back = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": second["id"]}]}
        _, raw = _post(
            srv.base_url, _body(*convo, {"role": "assistant", "content": [second]}, back)
        )
        assert json.loads(raw)["content"] == [{"type": "text", "text": "Done."}]
        assert json.loads(raw)["stop_reason"] == "end_turn"
        # a result of a call the chain did not make is not its business
        stray = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x"}]}
        assert _post(srv.base_url, _body(_user("go"), stray))[0] == 500
        assert srv.unused() == []


# --------------------------------------------------------------------------- real claude


@pytest.mark.interop
def test_claude_writes_a_file_and_signals_back(claude_bin: str, workspace: Workspace) -> None:
    content = "hello from the script\n" * 3
    script = chain(
        tool("Write", {"file_path": str(workspace.work / "hello.txt"), "content": content}),
        [text("Reporting back."), signal_back("complete", summary="wrote hello.txt")],
        final="All done here.",
        when=When(role="codeweaver", step="TASK-3"),
        chunk=9,  # many small deltas, a little slow: the CLI must reassemble them
        delay=0.005,
    )
    with MessagesServer(script) as srv:
        run = run_claude(claude_bin, srv, workspace)
    srv.check()
    assert run.returncode == 0, run.stderr
    assert (workspace.work / "hello.txt").read_text() == content
    record = latest_signal(workspace.signals)
    assert record is not None
    assert record.signal == Complete(signal="complete", stepId="TASK-3", summary="wrote hello.txt")
    assert {s.status for s in run.init.mcp_servers} == {"connected"}
    assert ("scaffold", "connected") in [(s.name, s.status) for s in run.init.mcp_servers]
    assert SIGNAL_TOOL in run.init.raw["tools"]
    result = run.result
    assert (result.subtype, result.is_error, result.num_turns) == ("success", False, 3)
    assert result.result == "All done here."
    assert result.total_cost_usd is not None
    assert result.total_cost_usd > 0
    assert result.session_id == run.init.session_id
    # what the CLI sent: three streamed requests, recognised as Codeweaver on TASK-3
    reqs = srv.requests
    assert [r.turn for r in reqs] == [t.name for t in script]
    assert all(r.stream and r.query == {"beta": "true"} for r in reqs)
    assert {(r.role, r.step, r.session_id) for r in reqs} == {
        ("codeweaver", "TASK-3", result.session_id)
    }
    assert reqs[0].user_text == PROMPT
    assert reqs[1].tool_result is not None
    assert reqs[1].tool_result.name == "Write"
    assert reqs[2].tool_result is not None
    assert "signal received: complete" in reqs[2].tool_result.text
    assert {(r.method, r.path) for r in srv.other_requests} <= {("HEAD", "/")}


@pytest.mark.interop
def test_resumed_session_carries_the_conversation(claude_bin: str, workspace: Workspace) -> None:
    target = workspace.work / "notes.md"
    script = [
        Turn(
            when=When(text="Add a second line", tool_result=False), reply=[text("Nothing to add.")]
        ),
        *chain(
            tool("Write", {"file_path": str(target), "content": "line one\n"}),
            final="Wrote notes.md.",
            when=When(step="TASK-3"),
        ),
    ]
    with MessagesServer(script) as srv:
        first = run_claude(claude_bin, srv, workspace)
        assert first.returncode == 0, first.stderr
        session = first.result.session_id
        assert session is not None
        second = run_claude(claude_bin, srv, workspace, "Add a second line.", resume=session)
    srv.check()
    assert second.returncode == 0, second.stderr
    assert second.result.result == "Nothing to add."
    assert second.result.session_id == session  # same id in 2.1.197 (see the notes)
    resumed = srv.requests[-1]
    assert resumed.turn == script[0].name
    assert resumed.session_id == session
    # the whole earlier conversation, then the new prompt
    msgs = resumed.messages
    assert _roles(msgs) == ["user", "assistant", "user", "assistant", "user"]
    assert resumed.prompt == PROMPT
    [use] = [b for b in msgs[1]["content"] if b["type"] == "tool_use"]
    assert (use["name"], use["input"]["file_path"]) == ("Write", str(target))
    [answer] = msgs[2]["content"]
    assert answer["type"] == "tool_result"
    assert answer["tool_use_id"] == use["id"]
    assert msgs[3]["content"] == [{"type": "text", "text": "Wrote notes.md."}]
    # the new prompt alone (no reminder block this time), marked for prompt caching
    assert [(b["type"], b["text"]) for b in msgs[4]["content"]] == [("text", "Add a second line.")]
    assert resumed.user_texts() == [PROMPT, "Add a second line."]


@pytest.mark.interop
def test_http_500_ends_the_run_with_an_error(claude_bin: str, workspace: Workspace) -> None:
    script = [Turn(when=When(role="codeweaver"), http_status=500, error_message="scripted 500")]
    with MessagesServer(script) as srv:
        run = run_claude(claude_bin, srv, workspace)
    srv.check()
    assert run.returncode != 0
    assert run.result.is_error is True
    assert run.result.api_error_status == 500
    assert len(srv.requests) == 1  # CLAUDE_CODE_MAX_RETRIES=0: no retry
    assert latest_signal(workspace.signals) is None


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts in their own group; any left running are killed."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@pytest.mark.interop
def test_stalled_answer_keeps_claude_waiting(
    claude_bin: str, workspace: Workspace, started: list[subprocess.Popen[str]]
) -> None:
    script = [Turn(when=When(role="codeweaver"), stall=math.inf)]
    with MessagesServer(script) as srv:
        proc = subprocess.Popen(
            _argv(claude_bin, workspace, PROMPT, ALLOWED, None),
            cwd=workspace.work,
            env=claude_env(srv.base_url, workspace.home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        started.append(proc)
        [request] = srv.wait_for_requests(1, timeout=60)
        assert request.turn == script[0].name
        assert request.user_text == PROMPT
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)  # no answer, so no end: the stuck timeout's job
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=30)
    events = Run(proc.returncode, stdout, "").events
    assert any(isinstance(e, SystemInit) for e in events)
    assert not any(isinstance(e, ResultEvent) for e in events)
    assert len(srv.requests) == 1


@pytest.mark.interop
def test_a_tool_that_is_not_allowed_is_denied(claude_bin: str, workspace: Workspace) -> None:
    marker = workspace.work / "ran.txt"
    bash = tool("Bash", {"command": f"touch {marker}", "description": "Create a marker"})
    ask = signal_back("needs-user-input", question="May I run Bash?", context="it was denied")
    script = [
        Turn(when=When(role="codeweaver", tool_result=False), reply=[bash], name="try-bash"),
        Turn(when=When(tool="Bash", is_error=True), reply=[ask], name="ask"),
        Turn(when=When(tool=SIGNAL_TOOL, is_error=False), reply=[text("Waiting.")], name="end"),
    ]
    with MessagesServer(script) as srv:
        run = run_claude(
            claude_bin, srv, workspace, allowed="Write Edit mcp__scaffold__signal-back"
        )
    srv.check()
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    denials = run.result.permission_denials
    assert [d.get("tool_name") for d in denials] == ["Bash"]
    assert denials[0]["tool_input"]["command"] == f"touch {marker}"
    assert [r.turn for r in srv.requests] == ["try-bash", "ask", "end"]
    refused = srv.requests[1].tool_result
    assert refused is not None
    assert refused.is_error
    results = [
        b
        for e in run.events
        if isinstance(e, UserMessage)
        for b in e.content
        if b.get("type") == "tool_result"
    ]
    assert results[0]["is_error"] is True
    record = latest_signal(workspace.signals)
    assert record is not None
    assert isinstance(record.signal, NeedsUserInput)
    assert record.signal.question == "May I run Bash?"
