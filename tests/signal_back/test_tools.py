"""The tools of a run (signal-back): the checks, the records, and the real server and client.

Also: the pure parts (binding, config, schema, the tool's decision, the record readers)
and one interop test where the real ``claude`` CLI calls ``signal-back`` against a
scripted Messages API on loopback.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness import require_tool, served_tools
from scaffold.errors import UsageError
from scaffold.roles import Role
from scaffold.signal_back import mcp_config
from scaffold.signal_back.cli import resolve_binding
from scaffold.signal_back.client import call_tool, connect
from scaffold.signal_back.endpoint import SignalEndpoint
from scaffold.signal_back.records import (
    Binding,
    SignalRecord,
    SignalWriter,
    latest_signal,
    read_signals,
)
from scaffold.signal_back.tools import handle_signal, tool_description, tool_input_schema
from scaffold.signals import Complete, NeedsRoleFollowup

FOUR: list[dict[str, Any]] = [
    {"signal": "partially-complete", "stepId": "TASK-3", "progress": "p", "continuationPoint": "c"},
    {"signal": "needs-user-input", "stepId": "TASK-3", "question": "q?", "context": "ctx"},
    {
        "signal": "needs-role-followup",
        "stepId": "TASK-3",
        "targetRole": "spiritmender",
        "reason": "lint",
        "context": "ctx",
        "resume": True,
    },
    {"signal": "complete", "stepId": "TASK-3", "summary": "all done"},
]


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


# --------------------------------------------------------------------------- pure parts


def test_binding_options_win_over_environment(tmp_path: Path) -> None:
    env = {
        "SCAFFOLD_SIGNAL_DIR": str(tmp_path / "env"),
        "SCAFFOLD_STEP_ID": "TASK-1",
        "SCAFFOLD_ROLE": "lawbringer",
        "SCAFFOLD_QUEST_ID": "q-env",
    }
    assert resolve_binding([], env) == Binding(tmp_path / "env", "TASK-1", Role.LAWBRINGER, "q-env")
    opts = ["--signal-dir", str(tmp_path / "opt"), "--step-id", "TASK-2", "--role", "Codeweaver"]
    bound = resolve_binding(opts, env)
    assert bound == Binding(tmp_path / "opt", "TASK-2", Role.CODEWEAVER, "q-env")
    with pytest.raises(UsageError, match="SCAFFOLD_STEP_ID"):
        resolve_binding(["--signal-dir", "x", "--role", "codeweaver"], {})
    with pytest.raises(UsageError, match="unknown role 'wizard'"):
        resolve_binding(["--signal-dir", "x", "--step-id", "T", "--role", "wizard"], {})


def test_tool_schema_is_one_flat_object_with_the_roles_signals(tmp_path: Path) -> None:
    schema = tool_input_schema(Binding(tmp_path, "TASK-3", Role.LAWBRINGER))
    assert schema["type"] == "object"
    assert not {"oneOf", "anyOf", "allOf", "$defs"} & set(schema)
    assert schema["required"] == ["signal", "stepId"]
    assert schema["properties"]["signal"]["enum"] == ["complete", "needs-role-followup"]
    assert "TASK-3" in schema["properties"]["stepId"]["description"]
    assert schema["properties"]["resume"]["type"] == "boolean"
    text = tool_description(Binding(tmp_path, "TASK-3", Role.LAWBRINGER))
    assert "As Lawbringer you may send: complete, needs-role-followup." in text
    assert "- needs-role-followup: stepId, targetRole, reason, context, resume" in text


def test_tool_decision_without_mcp(tmp_path: Path) -> None:
    writer = SignalWriter(Binding(tmp_path / "sig", "TASK-3", Role.CODEWEAVER, "q-1"))
    missing = handle_signal(writer, {"signal": "complete", "stepId": "TASK-3"})
    assert missing.is_error
    assert "summary" in missing.text
    assert "call signal-back again" in missing.text
    extra = handle_signal(writer, {**FOUR[3], "mood": "great"})
    assert extra.is_error
    assert "mood" in extra.text
    assert handle_signal(writer, None).is_error
    assert not (tmp_path / "sig").exists()  # nothing refused reaches the disk
    # an id spelled differently is still the caller's step
    ok = handle_signal(writer, {**FOUR[3], "stepId": "task-3"})
    assert not ok.is_error
    assert ok.record is not None
    assert ok.record.seq == 1
    followup = handle_signal(writer, FOUR[2])
    assert followup.text.startswith("signal received: needs-role-followup. Stop working now")
    assert "Spiritmender acts next" in followup.text


# --------------------------------------------------------------------------- records


def test_read_signals_reports_corrupt_files_and_keeps_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert read_signals(tmp_path / "never-created") == []
    assert latest_signal(tmp_path / "never-created") is None
    writer = SignalWriter(Binding(tmp_path, "TASK-3", Role.CODEWEAVER))
    first = writer.write(Complete(signal="complete", stepId="TASK-3", summary="one"))
    (tmp_path / "signal-2.json").write_text('{"quest_id": nul')  # torn / garbage
    (tmp_path / "signal-3.json").write_text(first.model_dump_json())  # seq says 1
    (tmp_path / ".signal-4.json.123.tmp").write_text("half")  # an unfinished write: ignored
    (tmp_path / "notes.txt").write_text("not a signal")
    third = writer.write(Complete(signal="complete", stepId="TASK-3", summary="last"))
    assert third.seq == 4

    with caplog.at_level(logging.WARNING):
        latest = latest_signal(tmp_path)
    assert latest is not None
    assert isinstance(latest.signal, Complete)
    assert latest.signal.summary == "last"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert "signal-2.json: not a signal record" in warnings[0]
    assert "signal-3.json: seq 1 does not match file name" in warnings[1]
    assert [r.seq for r in read_signals(tmp_path)] == [1, 4]


def test_record_file_format(tmp_path: Path) -> None:
    writer = SignalWriter(Binding(tmp_path, "TASK-3", Role.CODEWEAVER, "q-1"))
    writer.write(NeedsRoleFollowup.model_validate(FOUR[2]))
    data = json.loads((tmp_path / "signal-1.json").read_text())
    assert set(data) == {"quest_id", "step_id", "role", "received_at", "seq", "signal"}
    assert data["quest_id"] == "q-1"
    assert data["role"] == "codeweaver"
    assert data["seq"] == 1
    assert data["signal"] == FOUR[2]
    assert [p.name for p in tmp_path.iterdir()] == ["signal-1.json"]  # no temp file left


# --------------------------------------------------------------------------- real server


async def test_real_server_accepts_refuses_and_stores(tmp_path: Path) -> None:
    sig_dir = tmp_path / "signals"
    outcomes: list[tuple[bool, str]] = []
    async with SignalEndpoint(Binding(sig_dir, "TASK-3", Role.CODEWEAVER, "q-1")) as endpoint:
        entry = mcp_config(endpoint.url, endpoint.secret)["mcpServers"]["scaffold"]
        async with connect(entry) as client:
            assert client.server_info is not None
            assert client.server_info.name == "scaffold"
            names = [t.name for t in (await client.list_tools()).tools]
            for payload in [
                {"signal": "complete", "stepId": "TASK-3"},  # missing summary
                {"signal": "finished", "stepId": "TASK-3"},  # unknown kind
                {**FOUR[3], "stepId": "TASK-4"},  # not the caller's step
                {**FOUR[1], "resume": True},  # field of another signal
                *FOUR,
            ]:
                text, is_error = await call_tool(client, "signal-back", payload)
                outcomes.append((is_error, text))
    assert names == ["signal-back"]
    refusals, accepted = outcomes[:4], outcomes[4:]
    assert all(is_error for is_error, _ in refusals)
    assert "summary" in refusals[0][1]
    assert "signal-back again" in refusals[0][1]
    assert "must be one of" in refusals[1][1]
    assert "TASK-4" in refusals[2][1]
    assert "not your step" in refusals[2][1]
    assert "resume" in refusals[3][1]
    assert not any(is_error for is_error, _ in accepted)
    assert [text.split(".")[0] for _, text in accepted] == [
        f"signal received: {p['signal']}" for p in FOUR
    ]
    assert all("Stop working now" in text for _, text in accepted)

    records = read_signals(sig_dir)
    assert sorted(p.name for p in sig_dir.iterdir()) == [f"signal-{n}.json" for n in (1, 2, 3, 4)]
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert [r.signal.model_dump() for r in records] == FOUR
    assert {(r.quest_id, r.step_id, r.role) for r in records} == {
        ("q-1", "TASK-3", Role.CODEWEAVER)
    }
    last = latest_signal(sig_dir)
    assert last is not None
    assert last.signal.signal == "complete"


def test_signal_server_verb_serves_a_binding_from_the_environment(tmp_path: Path) -> None:
    """``scaffold signal-server`` prints the agent's MCP config, then serves until SIGTERM."""
    sig_dir = tmp_path / "signals"
    env = {
        "SCAFFOLD_SIGNAL_DIR": str(sig_dir),
        "SCAFFOLD_STEP_ID": "TASK-7",
        "SCAFFOLD_ROLE": "lawbringer",
        "PATH": os.environ.get("PATH", ""),
    }
    texts: list[tuple[bool, str]] = []
    with (tmp_path / "server.log").open("w") as errlog:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scaffold", "signal-server"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errlog,
            text=True,
        )
        try:
            assert proc.stdout is not None
            entry = json.loads(proc.stdout.readline())["mcpServers"]["scaffold"]

            async def scenario() -> dict[str, Any]:
                async with connect(entry) as client:
                    tool = (await client.list_tools()).tools[0]
                    for payload in [
                        {
                            "signal": "needs-user-input",
                            "stepId": "TASK-7",
                            "question": "?",
                            "context": "c",
                        },
                        {"signal": "complete", "stepId": "TASK-7", "summary": "reviewed"},
                    ]:
                        text, is_error = await call_tool(client, "signal-back", payload)
                        texts.append((is_error, text))
                    return tool.input_schema

            schema = anyio.run(scenario)
        finally:
            proc.terminate()
            assert proc.wait(timeout=60) == 0
    assert entry["url"].startswith("http://127.0.0.1:")
    assert schema["properties"]["signal"]["enum"] == ["complete", "needs-role-followup"]
    assert texts[0][0] is True
    assert "Lawbringer may not signal 'needs-user-input'" in texts[0][1]
    assert texts[1] == (False, "signal received: complete. Stop working now.")
    records = read_signals(sig_dir)
    assert len(records) == 1
    assert records[0].quest_id is None
    assert records[0].role is Role.LAWBRINGER
    assert "accepted signal complete" in (tmp_path / "server.log").read_text()


def test_server_without_a_binding_exits_2() -> None:
    env = {"PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "scaffold", "signal-server", "--step-id", "TASK-1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--signal-dir" in done.stderr
    assert done.stdout == ""


# --------------------------------------------------------------------------- real claude


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _answer(tool_input: dict[str, Any] | None) -> bytes:
    """A streamed assistant message: a signal-back tool call, or the closing text."""
    block: dict[str, Any]
    if tool_input is not None:
        block = {"type": "tool_use", "id": "toolu_01T", "name": "mcp__scaffold__signal-back"}
        block["input"] = {}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": "Signalled."}
        stop = "end_turn"
    message: dict[str, Any] = {"id": "msg_01T", "type": "message", "role": "assistant"}
    message["content"] = []
    message |= {"model": "claude-sonnet-4-5", "stop_reason": None}
    message["usage"] = {"input_tokens": 10, "output_tokens": 1}
    return _sse(
        [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ]
    )


@pytest.fixture
def scripted_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A Messages API that calls signal-back once, then ends the turn."""
    requests: list[dict[str, Any]] = []
    payload = {"signal": "complete", "stepId": "TASK-3", "summary": "via real claude"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:
            self.send_response(404)
            self.end_headers()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            requests.append(body)
            if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                self.send_response(404)
                self.end_headers()
                return
            tools = [t.get("name") for t in body.get("tools", [])]
            answered = any(
                isinstance(m.get("content"), list)
                and any(b.get("type") == "tool_result" for b in m["content"])
                for m in body.get("messages", [])
            )
            wants_call = "mcp__scaffold__signal-back" in tools and not answered
            data = _answer(payload if wants_call else None)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.interop
def test_real_claude_signals_through_the_server(
    tmp_path: Path, scripted_api: tuple[str, list[dict[str, Any]]]
) -> None:
    claude = require_tool("claude", "SCAFFOLD_CLAUDE_BIN")
    url, requests = scripted_api
    sig_dir = tmp_path / "signals"
    config = tmp_path / "mcp.json"
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "MCP_CONNECTION_NONBLOCKING": "0",
        "SCAFFOLD_QUEST_ID": "q-1",
        "SCAFFOLD_STEP_ID": "TASK-3",
        "SCAFFOLD_ROLE": "codeweaver",
    }
    argv = [claude, "-p", "Implement TASK-3 and report back.", "--output-format", "stream-json"]
    argv += ["--verbose", "--mcp-config", str(config), "--strict-mcp-config"]
    argv += ["--allowedTools", "mcp__scaffold"]
    with served_tools(Binding(sig_dir, "TASK-3", Role.CODEWEAVER, "q-1")) as served:
        config.write_text(json.dumps(served))
        done = subprocess.run(
            argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0, done.stderr
    init = events[0]
    assert {"name": "scaffold", "status": "connected"} in init["mcp_servers"]
    assert "mcp__scaffold__signal-back" in init["tools"]
    results = [
        b
        for e in events
        if e["type"] == "user"
        for b in e["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    assert len(results) == 1
    assert "signal received: complete" in json.dumps(results[0]["content"])
    assert events[-1]["type"] == "result"
    assert events[-1]["is_error"] is False
    # the tool the model saw is our flat schema
    tools = [t for r in requests for t in r.get("tools", [])]
    sent = next(t for t in tools if t["name"] == "mcp__scaffold__signal-back")
    assert sent["input_schema"]["properties"]["signal"]["enum"][0] == "complete"
    record = latest_signal(sig_dir)
    assert isinstance(record, SignalRecord)
    assert record.signal.model_dump() == {
        "signal": "complete",
        "stepId": "TASK-3",
        "summary": "via real claude",
    }
