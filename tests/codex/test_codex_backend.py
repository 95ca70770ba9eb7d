"""The Codex adapter on its own: its command lines, its ``config.toml`` (checked by the
real CLI's ``--strict-config``), and its event stream as scaffold's events."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from scaffold.agent.backend import RunRequest
from scaffold.agent.codex import Codex, CodexParser, thread_usage
from scaffold.agent.stream import (
    AssistantMessage,
    ResultEvent,
    StreamDecoder,
    StreamLineError,
    SystemInit,
    Unknown,
    Usage,
)
from scaffold.roles import Role

THREAD = "01a2254a-b594-7740-868f-ee01c2c668bf"


def _req(tmp_path: Path, **changes: Any) -> RunRequest:
    fields: dict[str, Any] = {
        "role": Role.CODEWEAVER,
        "prompt": "## Start the step\n\nthe data",
        "instructions": '# You are Codeweaver\n"quoted" \\ and \x7f',
        "whole_prompt": "everything",
        "model": "gpt-5.5",
        "max_turns": None,
        "resume_session": None,
        "signal_url": "http://127.0.0.2:8765/mcp",
        "signal_secret": "s3cret",
        "mcp_config_path": tmp_path / "mcp.json",
        "home": tmp_path / "home",
        "env": {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "TMPDIR": str(tmp_path / "elsewhere")},
    }
    fields.update(changes)
    return RunRequest(**fields)


def _config(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    inv = Codex().invocation(["codex"], _req(tmp_path, **changes))
    return tomllib.loads(inv.files[tmp_path / "home" / ".codex" / "config.toml"])


def test_a_fresh_run_and_a_resume(tmp_path: Path) -> None:
    inv = Codex().invocation(["/opt/codex"], _req(tmp_path))
    assert inv.argv == [
        "/opt/codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
        "--",
        "## Start the step\n\nthe data",
    ]
    assert inv.env["CODEX_HOME"] == str(tmp_path / "home" / ".codex")
    assert inv.env["SCAFFOLD_SIGNAL_TOKEN"] == "s3cret"
    assert "TMPDIR" not in inv.env  # CODEX_HOME is not under it
    resumed = Codex().invocation(["codex"], _req(tmp_path, resume_session=THREAD))
    assert resumed.argv[:3] == ["codex", "exec", "resume"]
    assert resumed.argv[-3:] == ["--", THREAD, "## Start the step\n\nthe data"]


def test_the_config(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert config["model"] == "gpt-5.5"
    assert config["developer_instructions"] == '# You are Codeweaver\n"quoted" \\ and \x7f'
    assert config["sandbox_mode"] == "workspace-write"
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9/v1"
    assert provider["env_key"] == "OPENAI_API_KEY"
    server = config["mcp_servers"]["scaffold"]
    assert server["url"] == "http://127.0.0.2:8765/mcp"
    assert server["required"] is True
    assert "s3cret" not in json.dumps(config)  # the secret is in the environment only
    assert config["features"] == {"plugins": False, "unbounded_connection_retries": False}
    assert _config(tmp_path, role=Role.PATHSEEKER)["sandbox_mode"] == "read-only"
    assert _config(tmp_path, sandboxed=True)["sandbox_mode"] == "danger-full-access"
    public = _config(tmp_path, env={})
    assert public["model_providers"]["scaffold"]["base_url"] == "https://api.openai.com/v1"


def test_codex_home_is_kept_out_of_the_temporary_folder(tmp_path: Path) -> None:
    inv = Codex().invocation(["codex"], _req(tmp_path, env={"TMPDIR": str(tmp_path)}))
    assert inv.env["TMPDIR"] == str(tmp_path / "home" / ".tmp")
    assert tmp_path / "home" / ".tmp" / ".keep" in inv.files
    sandboxed = _req(tmp_path, env={"TMPDIR": str(tmp_path)}, sandboxed=True)
    assert "TMPDIR" not in Codex().invocation(["codex"], sandboxed).env


def test_the_model_host_and_credentials() -> None:
    codex = Codex()
    assert codex.model_host({}) == ("api.openai.com", 443)
    assert codex.model_host({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}) == (
        "127.0.0.1",
        8080,
    )
    assert codex.credentials == ("OPENAI_API_KEY", "CODEX_API_KEY")
    assert codex.resume_lost(
        f"Error: thread/resume failed: no rollout found for thread id {THREAD}"
    )
    assert not codex.resume_lost("Error: something else")


@pytest.mark.interop
def test_the_real_cli_accepts_the_config(tmp_path: Path, codex_bin: str) -> None:
    """``--strict-config`` refuses unknown keys; the run then fails only at its MCP server
    (nothing listens there), which is ``required``."""
    req = _req(tmp_path, signal_url="http://127.0.0.1:9/mcp")
    inv = Codex().invocation([codex_bin], req)
    for path, text in inv.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    argv = [*inv.argv[:2], "--strict-config", *inv.argv[2:]]
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "k", **inv.env}
    proc = subprocess.run(
        argv,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert b"required MCP servers failed to initialize" in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == b""


# --------------------------------------------------------------------------- events


def _line(kind: str, **fields: Any) -> bytes:
    return json.dumps({"type": kind, **fields}).encode()


def _item(kind: str, item_id: str, item_type: str, **fields: Any) -> bytes:
    return _line(kind, item={"id": item_id, "type": item_type, **fields})


def _mcp(kind: str, item_id: str) -> bytes:
    status = "in_progress" if kind == "item.started" else "completed"
    result = None if status == "in_progress" else {"content": [{"type": "text", "text": "ok"}]}
    return _item(
        kind,
        item_id,
        "mcp_tool_call",
        server="scaffold",
        tool="signal-back",
        arguments={"signal": "complete"},
        result=result,
        error=None,
        status=status,
    )


def _shell(kind: str, item_id: str) -> bytes:
    done = kind == "item.completed"
    return _item(
        kind,
        item_id,
        "command_execution",
        command="/bin/bash -lc true",
        aggregated_output="out" if done else "",
        exit_code=0 if done else None,
        status="completed" if done else "in_progress",
    )


USAGE = {"input_tokens": 3000, "cached_input_tokens": 600, "output_tokens": 300}


def test_a_run_as_events() -> None:
    parse = CodexParser(max_turns=None)
    init = parse(_line("thread.started", thread_id=THREAD), 1)
    assert isinstance(init, SystemInit)
    assert init.session_id == THREAD
    assert init.mcp_servers == (("scaffold", "connected"),)
    assert isinstance(parse(_line("turn.started"), 2), Unknown)
    # Tool calls are kept for the transcript only.
    assert isinstance(parse(_mcp("item.started", "item_0"), 3), Unknown)
    assert isinstance(parse(_mcp("item.completed", "item_0"), 4), Unknown)
    text = parse(_item("item.completed", "item_1", "agent_message", text="Done."), 5)
    assert isinstance(text, AssistantMessage)
    assert text.content == ({"type": "text", "text": "Done."},)
    warning = parse(_line("error", message="Reconnecting... 1/2"), 6)
    assert isinstance(warning, Unknown)
    result = parse(_line("turn.completed", usage=USAGE), 7)
    assert isinstance(result, ResultEvent)
    assert (result.subtype, result.is_error, result.num_turns) == ("success", False, 2)
    assert result.usage == Usage(input_tokens=3000, output_tokens=300, cached_input_tokens=600)
    assert result.session_id == THREAD


def test_a_failed_turn_and_bad_lines() -> None:
    parse = CodexParser(max_turns=None)
    failed = parse(_line("turn.failed", error={"message": "stream disconnected"}), 1)
    assert isinstance(failed, ResultEvent)
    assert failed.is_error
    assert (failed.subtype, failed.result) == ("error_during_execution", "stream disconnected")
    for bad in (b"not json", b"[1]", b'{"type": 3}', _line("thread.started")):
        with pytest.raises(StreamLineError):
            parse(bad, 9)
    assert isinstance(parse(_item("item.completed", "i", "reasoning", text="hm"), 2), Unknown)


def test_turns_counted_and_the_limit_passed() -> None:
    """Parallel calls are one turn; the limit passes once the last turn's calls are done."""
    decoder = StreamDecoder(parse=CodexParser(max_turns=2))
    lines = [
        _line("thread.started", thread_id=THREAD),
        _shell("item.started", "a"),  # turn 1: two calls at once
        _shell("item.started", "b"),
        _shell("item.completed", "a"),
        _shell("item.completed", "b"),
        _item("item.completed", "c", "agent_message", text="thinking"),  # turn 2
        _shell("item.started", "d"),
        _shell("item.completed", "d"),  # turn 2 done: a third would follow
    ]
    events = decoder.feed(b"\n".join(lines) + b"\n")
    limits = [e for e in events if isinstance(e, ResultEvent)]
    assert len(limits) == 1
    [limit] = limits
    assert limit.turn_limit_passed
    assert (limit.subtype, limit.is_error, limit.num_turns) == ("error_max_turns", True, 2)
    assert events[-1] is limit
    assert decoder.summary.session_id == THREAD


def _rollout(sessions: Path, *totals: dict[str, int]) -> None:
    """A rollout of THREAD whose token counts reached ``totals`` in turn."""
    day = sessions / "2026" / "11" / "29"
    day.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": THREAD}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
    ]
    lines += [
        {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": t}}}
        for t in totals
    ]
    rollout = day / f"rollout-2026-11-29T03-13-02-{THREAD}.jsonl"
    rollout.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def test_the_usage_of_a_run_stopped_at_its_turn_limit(tmp_path: Path) -> None:
    """No ``turn.completed`` comes: the tokens so far are read from the rollout."""
    _rollout(tmp_path, {"input_tokens": 2000, "output_tokens": 50})
    parse = CodexParser(max_turns=1, sessions=tmp_path)
    parse(_line("thread.started", thread_id=THREAD), 1)
    parse(_shell("item.started", "a"), 2)
    limit = parse(_shell("item.completed", "a"), 3)
    assert isinstance(limit, ResultEvent)
    assert limit.turn_limit_passed
    assert limit.usage == Usage(input_tokens=2000, output_tokens=50)


def test_a_resumed_run_counts_its_own_tokens(tmp_path: Path) -> None:
    """The CLI's usage after a resume is the thread's; the rollout has the total before."""
    sessions = tmp_path / "home" / ".codex" / "sessions"
    _rollout(
        sessions,
        {"input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 100},
        {"input_tokens": 3000, "cached_input_tokens": 600, "output_tokens": 300},
    )
    assert thread_usage(sessions, THREAD) == Usage(3000, 300, 600)
    assert thread_usage(sessions, "01a2254a-0000-7000-8000-000000000000") is None

    parse = Codex().parser(_req(tmp_path, resume_session=THREAD))
    parse(_line("thread.started", thread_id=THREAD), 1)
    total = {"input_tokens": 9000, "cached_input_tokens": 600, "output_tokens": 320}
    result = parse(_line("turn.completed", usage=total), 2)
    assert isinstance(result, ResultEvent)
    assert result.usage == Usage(input_tokens=6000, output_tokens=20, cached_input_tokens=0)
