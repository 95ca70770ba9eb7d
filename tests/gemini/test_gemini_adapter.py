"""The Gemini adapter on its own: the command line, settings and environment it gives a
run, and how it reads the CLI's stream-json lines (as gemini 0.61.0 prints them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaffold.agent.backend import RunRequest
from scaffold.agent.choice import BACKENDS
from scaffold.agent.gemini import Gemini, GeminiParser
from scaffold.agent.prices import SHIPPED
from scaffold.agent.stream import (
    AssistantMessage,
    ResultEvent,
    StreamLineError,
    SystemInit,
    Unknown,
    Usage,
    UserMessage,
)
from scaffold.roles import Role

SESSION = "0ef877f3-64f2-4543-93e9-fe861adf072f"


def _request(tmp_path: Path, role: Role = Role.CODEWEAVER, **changes: object) -> RunRequest:
    fields: dict[str, object] = {
        "role": role,
        "prompt": "## Start the step\n\ndata",
        "instructions": "# You are Codeweaver",
        "whole_prompt": "# You are Codeweaver\n\n## Start the step\n\ndata",
        "model": "gemini-2.5-flash",
        "max_turns": None,
        "resume_session": None,
        "signal_url": "http://127.0.0.1:4100/mcp",
        "signal_secret": "s3cret",
        "mcp_config_path": tmp_path / "mcp.json",
        "home": tmp_path / "home",
        "env": {},
        **changes,
    }
    return RunRequest(**fields)  # type: ignore[arg-type]


def test_registered_priced_and_its_host() -> None:
    gemini = BACKENDS["gemini"]
    assert isinstance(gemini, Gemini)
    assert gemini.default_model in SHIPPED
    assert gemini.model_host({}) == ("generativelanguage.googleapis.com", 443)
    assert gemini.model_host({"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/x"}) == (
        "127.0.0.1",
        9,
    )
    assert gemini.credentials == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert not gemini.reports_cost
    assert gemini.verifies_resume


def test_a_builders_first_run(tmp_path: Path) -> None:
    req = _request(tmp_path, max_turns=30)
    inv = Gemini().invocation(["/opt/gemini"], req)
    argv = inv.argv
    assert argv[:3] == ["/opt/gemini", "-p", req.whole_prompt]
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert argv[argv.index("-m") + 1] == "gemini-2.5-flash"
    assert argv[argv.index("--approval-mode") + 1] == "yolo"
    assert argv[argv.index("--allowed-mcp-server-names") + 1] == "scaffold"
    assert "--skip-trust" in argv
    assert "--resume" not in argv
    assert inv.env["GEMINI_CLI_HOME"] == str(req.home)
    assert inv.env["GEMINI_CLI_NO_RELAUNCH"] == "true"
    [(path, text)] = inv.files.items()
    assert path == req.home / ".gemini" / "settings.json"
    settings = json.loads(text)
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["general"]["maxAttempts"] == 1
    assert settings["general"]["sessionRetention"] == {"enabled": False}
    assert settings["model"]["maxSessionTurns"] == 30
    assert settings["mcpServers"]["scaffold"] == {
        "httpUrl": req.signal_url,
        "headers": {"Authorization": "Bearer s3cret"},
        "trust": True,
        "timeout": 60_000,
    }
    assert "web_fetch" in settings["tools"]["exclude"]


def test_a_planners_resumed_run(tmp_path: Path) -> None:
    req = _request(tmp_path, Role.PATHSEEKER, resume_session=SESSION)
    inv = Gemini().invocation(["gemini"], req)
    assert inv.argv[2] == req.prompt  # the instructions are in the session already
    assert inv.argv[inv.argv.index("--resume") + 1] == SESSION
    assert inv.argv[inv.argv.index("--approval-mode") + 1] == "default"
    settings = json.loads(next(iter(inv.files.values())))
    assert "maxSessionTurns" not in settings["model"]


def test_resume_lost() -> None:
    gemini = Gemini()
    assert gemini.resume_lost('Error resuming session: Invalid session identifier "x".')
    assert gemini.resume_lost(
        "Error resuming session: No previous sessions found for this project."
    )
    assert not gemini.resume_lost("[API Error: ...]")


def _line(**event: object) -> bytes:
    return json.dumps({"timestamp": "2026-11-29T03:25:14.494Z", **event}).encode()


INIT = _line(type="init", session_id=SESSION, model="gemini-2.5-flash")
ANSWER = _line(type="message", role="assistant", content="Looking.", delta=True)


def test_a_new_session_is_reported_once_the_model_answered() -> None:
    parse = GeminiParser()
    first = parse(INIT, 1)
    assert isinstance(first, SystemInit)
    assert first.session_id is None
    assert isinstance(parse(_line(type="message", role="user", content="hi"), 2), UserMessage)
    announced = parse(ANSWER, 3)
    assert isinstance(announced, SystemInit)
    assert announced.session_id == SESSION
    text = parse(ANSWER, 4)
    assert isinstance(text, AssistantMessage)
    assert (text.content[0]["text"], text.session_id) == ("Looking.", SESSION)


def test_a_resumed_session_is_reported_at_once() -> None:
    init = GeminiParser(resuming=True)(INIT, 1)
    assert isinstance(init, SystemInit)
    assert init.session_id == SESSION


def test_tool_calls_results_and_warnings() -> None:
    """Tool calls and results are kept for the transcript only."""
    parse = GeminiParser(resuming=True)
    parse(INIT, 1)
    use = parse(_line(type="tool_use", tool_name="x", tool_id="t1", parameters={}), 2)
    assert isinstance(use, Unknown)
    assert (use.type, use.session_id) == ("tool_use", SESSION)
    result = parse(_line(type="tool_result", tool_id="t1", status="error"), 3)
    assert isinstance(result, Unknown)
    warning = parse(_line(type="error", severity="warning", message="Loop detected"), 4)
    assert isinstance(warning, Unknown)
    assert (warning.type, warning.subtype) == ("error", "warning")
    assert isinstance(parse(_line(type="newer_event"), 5), Unknown)
    with pytest.raises(StreamLineError):
        parse(b"[API Error: not json]", 6)


STATS = {
    "total_tokens": 10_200,
    "input_tokens": 10_000,
    "output_tokens": 200,
    "cached": 4_000,
    "models": {"gemini-2.5-pro": {"input_tokens": 10_000}},
}


@pytest.mark.parametrize(
    ("status", "error", "subtype", "api_status"),
    [
        ("success", None, "success", None),
        (
            "error",
            {"type": "unknown", "message": '[API Error: {"error":{"code":500,"message":"x"}}]'},
            "error_during_execution",
            500,
        ),
        (
            "error",
            {"type": "FatalTurnLimitedError", "message": "Reached max session turns"},
            "error_max_turns",
            None,
        ),
    ],
)
def test_the_result(
    status: str, error: dict[str, str] | None, subtype: str, api_status: int | None
) -> None:
    parse = GeminiParser(resuming=True)
    parse(INIT, 1)
    event = parse(_line(type="result", status=status, error=error, stats=STATS), 2)
    assert isinstance(event, ResultEvent)
    assert (event.subtype, event.is_error, event.api_error_status) == (
        subtype,
        status != "success",
        api_status,
    )
    assert event.usage == Usage(input_tokens=10_000, output_tokens=200, cached_input_tokens=4_000)
    assert event.total_cost_usd is None
    assert event.session_id == SESSION
