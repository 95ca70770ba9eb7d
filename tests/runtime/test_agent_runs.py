"""The invocation scaffold builds for an agent run, and how it reads the outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaffold.agent.claude import Claude
from scaffold.agent.process import AgentRunOutcome
from scaffold.agent.stream import McpServer, ResultEvent, StreamSummary, SystemInit, parse_line
from scaffold.config import parse_config
from scaffold.core.events import Event
from scaffold.core.lifecycle import Limits, decide
from scaffold.core.states import EventName, Lifecycle
from scaffold.quest.model import AgentRun, TaskRecord
from scaffold.roles import Role
from scaffold.runtime.agent_runs import (
    agent_env,
    describe_failure,
    init_problem,
    prepare_run,
    result_notes,
    resume_lost,
    start_problem,
)
from scaffold.runtime.prompts import PromptData

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent"


def _invocation(command: str, run: AgentRun, tmp_path: Path, **cfg: object) -> list[str]:
    text = f"agent:\n  command: {json.dumps([command])}\n"
    if cfg:
        text += "".join(f"  {k}: {v}\n" for k, v in cfg.items())
    prepared = prepare_run(
        parse_config(text),
        run,
        PromptData(step_id="TASK-4", task_title="Add the parser", request="<!-- hidden -->CSV"),
        quest_id="backlog",
        signal_dir=tmp_path / "signals",
        signal=("http://127.0.0.1:1/mcp", "secret", tmp_path / "mcp.json"),
        home=tmp_path / "home",
        env={},
    )
    inv = prepared.invocation
    assert inv.env["SCAFFOLD_STEP_ID"] == "TASK-4"
    assert inv.env["SCAFFOLD_ROLE"] == run.role.value
    return inv.argv


def test_any_agent_gets_the_contract_and_the_whole_prompt(tmp_path: Path) -> None:
    run = AgentRun(role=Role.CODEWEAVER, resume_session="abc-123", kind="retry", context="x")
    argv = _invocation("/opt/my-agent", run, tmp_path)
    assert argv[0] == "/opt/my-agent"
    assert argv[1] == "-p"
    assert "You are Codeweaver" in argv[2]  # instructions and data in one prompt
    assert "hidden" not in argv[2]  # hidden markup stripped from people's text
    assert argv[3:9] == [
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        str(tmp_path / "mcp.json"),
        "--resume",
    ]
    assert argv[9] == "abc-123"
    assert "--allowedTools" not in argv


def test_claude_gets_role_tools_system_prompt_model_and_turns(tmp_path: Path) -> None:
    run = AgentRun(role=Role.LAWBRINGER, kind="review")
    argv = _invocation("/usr/local/bin/claude", run, tmp_path, model="opus", max_turns=7)
    assert "--resume" not in argv
    assert "--strict-mcp-config" in argv
    tools = argv[argv.index("--allowedTools") + 1].split(",")
    assert "mcp__scaffold__signal-back" in tools
    assert "mcp__scaffold__create-tasks" not in tools
    system = argv[argv.index("--append-system-prompt") + 1]
    assert system.startswith("# You are Lawbringer")
    prompt = argv[argv.index("-p") + 1]
    assert "You are Lawbringer" not in prompt  # data only; instructions are the system prompt
    assert "TASK-4: Add the parser" in prompt
    assert argv[argv.index("--model") + 1] == "opus"
    assert argv[argv.index("--max-turns") + 1] == "7"


@pytest.mark.parametrize(
    ("role", "tool"),
    [
        (Role.CHAOSWHISPERER, "mcp__scaffold__write-requirements"),
        (Role.PATHSEEKER, "mcp__scaffold__create-tasks"),
    ],
)
def test_planners_get_their_planning_tool(tmp_path: Path, role: Role, tool: str) -> None:
    argv = _invocation("claude", AgentRun(role=role), tmp_path)
    tools = argv[argv.index("--allowedTools") + 1].split(",")
    assert tool in tools
    assert "Write" not in tools  # planners do not edit the code


def _init(status: str | None) -> SystemInit:
    servers = () if status is None else (McpServer("scaffold", status),)
    return SystemInit("s1", servers)


def test_init_without_a_connected_scaffold_server_is_a_failed_start() -> None:
    assert init_problem(_init("connected")) is None
    pending = init_problem(_init("pending"))
    assert pending is not None
    assert "'pending'" in pending
    missing = init_problem(_init(None))
    assert missing is not None
    assert "missing" in missing


def _outcome(
    result: ResultEvent | None, *, exit_code: int = 0, stderr: str = ""
) -> AgentRunOutcome:
    summary = StreamSummary(session_id="s1", result=result)
    return AgentRunOutcome(
        pid=1,
        exit_code=exit_code,
        signal=None,
        stuck=False,
        duration_s=1.0,
        summary=summary,
        stderr_tail=stderr,
    )


def test_real_result_lines_become_history_notes() -> None:
    denied = [
        parse_line(line.encode())
        for line in (FIXTURES / "claude-stream-denied.jsonl").read_text().splitlines()
        if line.strip()
    ][-1]
    api = [
        parse_line(line.encode())
        for line in (FIXTURES / "claude-stream-api-error.jsonl").read_text().splitlines()
        if line.strip()
    ][-1]
    assert isinstance(denied, ResultEvent)
    assert isinstance(api, ResultEvent)
    notes = result_notes(_outcome(denied))
    assert any(n.startswith("tools denied to the agent:") for n in notes)
    api_notes = result_notes(_outcome(api, exit_code=1))
    assert any("API status 500" in n for n in api_notes)
    failure = describe_failure(_outcome(api, exit_code=1))
    assert "exited with code 1" in failure
    assert "API status 500" in failure


def test_max_turns_is_a_note_and_a_refused_start_is_the_failure() -> None:
    res = ResultEvent("error_max_turns", True, 9, "s1", 0.1)
    assert any("--max-turns after 9 turns" in n for n in result_notes(_outcome(res)))
    assert describe_failure(_outcome(None), "failed start: x") == "failed start: x"


def test_a_lost_session_is_only_lost_when_resuming() -> None:
    lost = _outcome(None, exit_code=1, stderr="No conversation found with session ID: abc")
    assert resume_lost(Claude(), lost, resumed=True)
    assert not resume_lost(Claude(), lost, resumed=False)
    assert not resume_lost(Claude(), _outcome(None, exit_code=1, stderr="boom"), resumed=True)


def _prepared(tmp_path: Path, text: str, role: Role = Role.CODEWEAVER, resume: str | None = None):  # type: ignore[no-untyped-def]
    return prepare_run(
        parse_config(text),
        AgentRun(role=role, resume_session=resume),
        PromptData(step_id="TASK-1"),
        quest_id="q",
        signal_dir=tmp_path / "signals",
        signal=("http://127.0.0.1:1/mcp", "secret", tmp_path / "mcp.json"),
        home=tmp_path / "home",
        env={},
    )


def test_claude_names_its_default_model_and_a_role_its_own(tmp_path: Path) -> None:
    argv = _prepared(tmp_path, "agent:\n  command: [claude]\n").invocation.argv
    assert argv[argv.index("--model") + 1] == Claude.default_model
    text = "agent:\n  roles:\n    lawbringer: {model: opus, extra_args: [--x]}\n"
    argv = _prepared(tmp_path, text, Role.LAWBRINGER).invocation.argv
    assert argv[argv.index("--model") + 1] == "opus"
    assert argv[-1] == "--x"


def test_an_agent_never_sees_another_backends_model_key(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, "agent:\n  command: [claude]\n")
    base = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "GEMINI_API_KEY": "g", "PATH": "/b"}
    env = agent_env(base, prepared)
    assert env["ANTHROPIC_API_KEY"] == "a"
    assert env["PATH"] == "/b"
    assert "OPENAI_API_KEY" not in env
    assert "GEMINI_API_KEY" not in env


def test_claude_may_resume_under_a_new_session_id(tmp_path: Path) -> None:
    prepared = _prepared(tmp_path, "agent:\n  command: [claude]\n", resume="old")
    connected = SystemInit("new", (McpServer("scaffold", "connected"),))
    assert start_problem(prepared, "old", connected) is None
    assert start_problem(prepared, "old", _init("pending")) is not None


def test_retry_after_a_lost_session_starts_a_new_one() -> None:
    task = TaskRecord(
        id="TASK-1",
        state=Lifecycle.PROCESSING,
        role=Role.CODEWEAVER,
        sessions={"codeweaver": "gone", "siegemaster": "kept"},
        pending_run=AgentRun(role=Role.CODEWEAVER, kind="continue", context="pick up at step 3"),
    )
    event = Event(
        EventName.AGENT_FAILED,
        role=Role.CODEWEAVER,
        detail="the session could not be resumed",
        extra={"fresh_session": "1"},
    )
    d = decide(task, event, Limits())
    assert d.transition.name == "retry_on_error"
    run = d.task.pending_run
    assert run is not None
    assert run.resume_session is None
    assert "pick up at step 3" in run.context  # the continuation context is carried over
    assert d.task.sessions == {"siegemaster": "kept"}
