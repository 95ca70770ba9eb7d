"""The scripted agent, run as a subprocess exactly as the orchestrator runs an agent.

Only one test serves the run's real tools (the agent reaches them through the mcp SDK's
HTTP client); the others exercise the stream, the state dir and the failure modes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import served_tools
from scaffold.demo.script import ScriptError, load_script
from scaffold.demo.scripted import agent_command, parse_argv
from scaffold.demo.stream_json import SIGNAL_TOOL
from scaffold.roles import Role
from scaffold.signal_back.records import Binding, latest_signal, read_signals

AGENT = agent_command()


class Agent:
    """One scripted agent setup: a work dir (its cwd), a script, a state dir."""

    def __init__(self, tmp: Path, runs: Any, step: str = "TASK-3", role: str = "codeweaver"):
        self.work = tmp / "work"
        self.work.mkdir(exist_ok=True)
        self.script = tmp / "script.json"
        self.script.write_text(json.dumps(runs))
        self.state = tmp / "state"
        self.signals = tmp / "signals"
        self.config = tmp / "mcp.json"
        self.step, self.role = step, role
        self.config.write_text(json.dumps({"mcpServers": {}}))

    def invocations(self) -> list[dict[str, Any]]:
        lines = (self.state / "invocations.jsonl").read_text("utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def binding(self) -> Binding:
        return Binding(self.signals, self.step, Role(self.role), "q-1", self.work)

    def env(self, **over: str) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "SCAFFOLD_AGENT_SCRIPT": str(self.script),
            "SCAFFOLD_AGENT_STATE": str(self.state),
            "SCAFFOLD_QUEST_ID": "q-1",
            "SCAFFOLD_STEP_ID": self.step,
            "SCAFFOLD_ROLE": self.role,
        }
        env.update(over)
        return env

    def argv(self, prompt: str, *extra: str) -> list[str]:
        flags = ["--output-format", "stream-json", "--verbose", "--mcp-config", str(self.config)]
        return [*AGENT, "-p", prompt, *flags, *extra]

    def run(self, prompt: str = "work on it", *extra: str, **env: str) -> Result:
        done = subprocess.run(
            self.argv(prompt, *extra),
            cwd=self.work,
            env=self.env(**env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Result(done)


class Result:
    def __init__(self, done: subprocess.CompletedProcess[str]) -> None:
        self.code = done.returncode
        self.stderr = done.stderr
        self.lines = done.stdout.splitlines()
        self.events: list[dict[str, Any]] = []
        self.garbage: list[str] = []
        for line in self.lines:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.garbage.append(line)

    @property
    def init(self) -> dict[str, Any]:
        assert self.events[0]["type"] == "system"
        assert self.events[0]["subtype"] == "init"
        return self.events[0]

    @property
    def result(self) -> dict[str, Any] | None:
        last = self.events[-1] if self.events else None
        return last if last is not None and last["type"] == "result" else None

    def tool_uses(self) -> list[dict[str, Any]]:
        return [
            b
            for e in self.events
            if e["type"] == "assistant"
            for b in e["message"]["content"]
            if b["type"] == "tool_use"
        ]

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            b
            for e in self.events
            if e["type"] == "user"
            for b in e["message"]["content"]
            if b["type"] == "tool_result"
        ]


# --------------------------------------------------------------------------- pure parts


def test_parse_argv_like_claude() -> None:
    head = ["-p", "do it", "--output-format", "stream-json", "--verbose", "--mcp-config=/c.json"]
    inv = parse_argv([*head, "--allowedTools", "mcp__scaffold", "--resume", "abc", "--weird-flag"])
    assert inv.prompt == "do it"
    assert inv.output_format == "stream-json"
    assert inv.verbose
    assert inv.mcp_configs == ["/c.json"]
    assert inv.resume == "abc"
    # -p as a plain flag, the prompt positional
    assert parse_argv(["--print", "--verbose", "hello"]).prompt == "hello"


def test_bad_scripts_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    for bad, message in [
        ("[{", "cannot read"),
        ('[{"actions": [{"teleport": 1}]}]', "exactly one of"),
        ('[{"actions": [{"sleep": -1}]}]', "bad sleep action"),
        ('[{"rol": "codeweaver"}]', "rol"),
        ('{"runs": [], "extra": 1}', "extra"),
    ]:
        path.write_text(bad)
        with pytest.raises(ScriptError, match=message):
            load_script(path)
    path.write_text('{"runs": [{"actions": [{"crash": 3}]}], "strict_resume": true}')
    assert load_script(path).strict_resume


# --------------------------------------------------------------------------- real runs


def test_full_run_edits_files_and_signals_through_the_real_server(tmp_path: Path) -> None:
    agent = Agent(tmp_path, [])
    (agent.work / "old.txt").write_text("bye")
    agent.script.write_text(
        json.dumps(
            [
                {
                    "role": "codeweaver",
                    "step": "task-3",
                    "cost_usd": 0.25,
                    "actions": [
                        {"expect_prompt_contains": "TASK-3"},
                        {"write": "src/app.py", "content": "x = 1\n"},
                        {"append": "src/app.py", "content": "y = 2\n"},
                        {"delete": "old.txt"},
                        {"run": [sys.executable, "-c", "print('ran ok')"]},
                        {"run": [sys.executable, "-c", "raise SystemExit(4)"]},
                        {"say": "Working."},
                        {"print_garbage": "this is not json {"},
                        {"print_long_line": 5000},
                        {"signal": {"signal": "complete", "stepId": "TASK-4", "summary": "x"}},
                        {"signal": {"signal": "partially-complete", "progress": "half"}},
                        {
                            "signal": {
                                "signal": "partially-complete",
                                "progress": "half",
                                "continuationPoint": "tests",
                            }
                        },
                        {"signal": {"signal": "complete", "summary": "all done"}},
                        {"say": "Signalled."},
                    ],
                }
            ]
        )
    )
    with served_tools(agent.binding()) as config:
        agent.config.write_text(json.dumps(config))
        out = agent.run("Implement TASK-3 please")
    assert out.code == 0, out.stderr

    assert (agent.work / "src" / "app.py").read_text() == "x = 1\ny = 2\n"
    assert not (agent.work / "old.txt").exists()

    init = out.init
    session = init["session_id"]
    assert init["mcp_servers"] == [{"name": "scaffold", "status": "connected"}]
    assert SIGNAL_TOOL in init["tools"]
    assert all(e["session_id"] == session for e in out.events)
    names = [b["name"] for b in out.tool_uses()]
    assert names == ["Write", "Edit", "Bash", "Bash", "Bash"] + [SIGNAL_TOOL] * 4
    results = out.tool_results()
    assert "ran ok" in results[3]["content"]
    assert results[4]["is_error"] is True
    assert "Exit code 4" in results[4]["content"]
    signal_results = results[5:]
    assert [r.get("is_error", False) for r in signal_results] == [True, True, False, False]
    assert "not your step" in signal_results[0]["content"]
    assert "continuationPoint" in signal_results[1]["content"]
    assert signal_results[3]["content"] == "signal received: complete. Stop working now."
    # the stepId was filled in from SCAFFOLD_STEP_ID
    assert out.tool_uses()[6]["input"]["stepId"] == "TASK-3"

    assert out.garbage == ["this is not json {"]
    assert any(len(line.encode()) == 5000 for line in out.lines)

    result = out.result
    assert result is not None
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["total_cost_usd"] == 0.25
    assert result["session_id"] == session
    assert result["result"] == "Signalled."
    assert result["num_turns"] == 10

    records = read_signals(agent.signals)
    assert [r.signal.signal for r in records] == ["partially-complete", "complete"]
    last = latest_signal(agent.signals)
    assert last is not None
    assert last.seq == 2
    assert last.quest_id == "q-1"


def test_attempt_counter_crash_then_success(tmp_path: Path) -> None:
    runs = [
        {"role": "codeweaver", "step": "TASK-3", "attempt": 1, "actions": [
            {"write": "partial.txt", "content": "half"},
            {"crash": 7},
        ]},
        {"role": "codeweaver", "step": "TASK-3", "attempt": 2, "cost_usd": 0.5, "actions": [
            {"say": "second try"},
        ]},
        {"role": "codeweaver", "attempt": 1, "actions": [{"say": "other step"}]},
    ]  # fmt: skip
    agent = Agent(tmp_path, runs)
    first = agent.run()
    assert first.code == 7
    assert first.result is None  # a crash prints no result event
    assert "exit code 7" in first.stderr
    assert (agent.work / "partial.txt").read_text() == "half"

    second = agent.run()
    assert second.code == 0
    assert second.result is not None
    assert second.result["result"] == "second try"
    assert second.result["total_cost_usd"] == 0.5

    other = agent.run(SCAFFOLD_STEP_ID="TASK-4")  # its own counter
    assert other.code == 0
    assert other.result is not None
    assert other.result["result"] == "other step"

    third = agent.run()  # attempt 3 of TASK-3 matches nothing
    assert third.code == 2
    assert third.result is not None
    assert third.result["is_error"] is True
    assert "no run matches" in third.result["result"]

    log = agent.invocations()
    assert [(e["step"], e["attempt"], e["run"]) for e in log] == [
        ("TASK-3", 1, 0),
        ("TASK-3", 2, 1),
        ("TASK-4", 1, 2),
        ("TASK-3", 3, None),
    ]
    assert all(e["prompt"] == "work on it" for e in log)


def test_a_torn_log_line_does_not_count_and_the_next_line_starts_clean(tmp_path: Path) -> None:
    """An agent killed while writing its invocation line leaves half a line: it is not an
    attempt, and the next invocation's line does not run on from it."""
    runs = [
        {"role": "codeweaver", "step": "TASK-3", "attempt": 1, "actions": [{"say": "first"}]},
        {"role": "codeweaver", "step": "TASK-3", "attempt": 2, "actions": [{"say": "second"}]},
    ]  # fmt: skip
    agent = Agent(tmp_path, runs)
    agent.state.mkdir()
    log = agent.state / "invocations.jsonl"
    log.write_text('{"session_id": "s-0", "resumed": false, "role": "codew')
    first = agent.run()
    assert first.code == 0
    assert first.result is not None
    assert first.result["result"] == "first"
    second = agent.run()
    assert second.result is not None
    assert second.result["result"] == "second"
    lines = log.read_text("utf-8").splitlines()
    assert lines[0].endswith('"role": "codew')
    assert [json.loads(line)["attempt"] for line in lines[1:]] == [1, 2]


def test_resume_keeps_the_session_id(tmp_path: Path) -> None:
    runs = [
        {"resumed": False, "actions": [{"say": "asking"}]},
        {"resumed": True, "expect_resumed": True, "actions": [
            {"expect_prompt_contains": "Answer: blue"},
            {"say": "resumed"},
        ]},
    ]  # fmt: skip
    agent = Agent(tmp_path, runs)
    first = agent.run()
    session = first.init["session_id"]
    assert first.code == 0

    again = agent.run("Answer: blue", "--resume", session)
    assert again.code == 0, again.stderr
    assert again.init["session_id"] == session
    assert again.result is not None
    assert again.result["session_id"] == session
    assert again.result["result"] == "resumed"

    wrong_answer = agent.run("Answer: red", "--resume", session)
    assert wrong_answer.code == 3
    assert "Answer: blue" in wrong_answer.stderr

    log = agent.invocations()
    assert [(e["session_id"] == session, e["resumed"]) for e in log] == [
        (True, False),
        (True, True),
        (True, True),
    ]


def test_expectations_and_refusals_fail_loudly(tmp_path: Path) -> None:
    agent = Agent(tmp_path, [])
    cases: list[tuple[list[dict[str, Any]], int, str]] = [
        ([{"expect_resumed": True, "actions": []}], 3, "expected resumed=True"),
        ([{"actions": [{"expect_prompt_contains": "nope"}]}], 3, "nope"),
        ([{"actions": [{"write": "../escape.txt", "content": "x"}]}], 3, "leaves"),
        ([{"actions": [{"write": "/tmp/abs.txt", "content": "x"}]}], 3, "relative"),
        ([{"actions": [{"delete": "missing.txt"}]}], 3, "does not exist"),
        ([{"actions": [{"teleport": True}]}], 3, "exactly one of"),
    ]
    for runs, code, message in cases:
        agent.script.write_text(json.dumps(runs))
        out = agent.run()
        assert out.code == code, (runs, out.stderr)
        assert message in out.stderr
        assert out.result is None
    assert not (tmp_path / "escape.txt").exists()

    no_verbose = subprocess.run(
        [*AGENT, "-p", "x", "--output-format", "stream-json"],
        env=agent.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert no_verbose.returncode == 1
    assert "requires --verbose" in no_verbose.stderr

    agent.script.write_text(json.dumps({"runs": [{"actions": []}], "strict_resume": True}))
    unknown = agent.run("x", "--resume", "00000000-0000-4000-8000-000000000000")
    assert unknown.code == 1
    assert "No conversation found with session ID" in unknown.stderr


def test_signal_without_an_mcp_server_is_a_tool_error(tmp_path: Path) -> None:
    agent = Agent(tmp_path, [{"actions": [{"signal": {"signal": "complete", "summary": "x"}}]}])
    out = agent.run()
    assert out.code == 0
    assert out.init["mcp_servers"] == []
    assert SIGNAL_TOOL not in out.init["tools"]
    [result] = out.tool_results()
    assert result["is_error"] is True
    assert "No such tool available" in result["content"]
    assert not agent.signals.exists()


def test_hang_prints_nothing_until_killed(tmp_path: Path) -> None:
    agent = Agent(tmp_path, [{"actions": [{"say": "about to hang"}, {"hang": True}]}])
    proc = subprocess.Popen(
        agent.argv("x"),
        cwd=agent.work,
        env=agent.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["type"] == "system"
        assert (
            json.loads(proc.stdout.readline())["message"]["content"][0]["text"] == "about to hang"
        )
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.stdout.read() == ""  # no result event ever came
    assert proc.returncode == -signal.SIGKILL


def test_json_output_format_prints_only_the_result(tmp_path: Path) -> None:
    agent = Agent(tmp_path, [{"cost_usd": 0, "actions": [{"say": "hello"}]}])
    done = subprocess.run(
        [*AGENT, "-p", "x", "--output-format", "json"],
        cwd=agent.work,
        env=agent.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    [line] = done.stdout.splitlines()
    result = json.loads(line)
    assert result["type"] == "result"
    assert result["result"] == "hello"
    assert result["total_cost_usd"] == 0
