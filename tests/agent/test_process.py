"""run_agent against real processes: small Python scripts that behave like agents."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from scaffold.agent.process import (
    STDERR_TAIL_BYTES,
    AgentRunOutcome,
    AgentSpec,
    agent_environment,
    is_credential_name,
    run_agent,
)
from scaffold.agent.process_group import LiveChildren
from scaffold.agent.stream import (
    AssistantMessage,
    Event,
    ResultEvent,
    SystemInit,
    Unknown,
)
from scaffold.errors import AgentError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agent"

PRELUDE = """\
import json, os, signal, subprocess, sys, time

def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
    sys.stdout.flush()

def init(sid="sess-1"):
    emit({"type": "system", "subtype": "init", "session_id": sid, "tools": ["Bash"],
          "mcp_servers": [{"name": "scaffold", "status": "connected"}],
          "model": "m", "claude_code_version": "2.1.197"})

def say(text, sid="sess-1"):
    emit({"type": "assistant", "session_id": sid,
          "message": {"id": "msg_1", "content": [{"type": "text", "text": text}]}})

def result(sid="sess-1", cost=0.01, is_error=False):
    emit({"type": "result", "subtype": "success", "is_error": is_error, "num_turns": 1,
          "session_id": sid, "total_cost_usd": cost, "permission_denials": [],
          "result": "done", "stop_reason": "end_turn"})

def spawn_grandchild(pidfile, new_session=False):
    # The grandchild writes its own pid; keep printing while it starts, so the
    # stuck watchdog only counts the silence that follows.
    code = ("import os, sys, time; p = sys.argv[1]; open(p + '.tmp', 'w').write(str(os.getpid()));"
            " os.replace(p + '.tmp', p); time.sleep(120)")
    subprocess.Popen([sys.executable, "-c", code, pidfile], start_new_session=new_session)
    while not os.path.exists(pidfile):
        emit({"type": "heartbeat"})
        time.sleep(0.05)
"""


def agent_script(tmp_path: Path, body: str, name: str = "agent.py") -> Path:
    path = tmp_path / name
    path.write_text(PRELUDE + textwrap.dedent(body))
    return path


def spec_for(tmp_path: Path, script: Path, *args: str, **kw: Any) -> AgentSpec:
    return AgentSpec(argv=[sys.executable, str(script), *args], cwd=tmp_path, **kw)


def run(
    spec: AgentSpec, children: LiveChildren | None = None
) -> tuple[AgentRunOutcome, list[Event]]:
    events: list[Event] = []
    outcome = asyncio.run(run_agent(spec, on_event=events.append, children=children))
    return outcome, events


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, deadline_s: float = 20.0) -> bool:
    """True once `pid` no longer exists. An orphan killed with its group is reaped by
    init, which may take a moment; the deadline is generous, not a measurement."""
    end = time.monotonic() + deadline_s
    while pid_alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


async def wait_for_file(path: Path) -> int:
    while not path.exists():
        await asyncio.sleep(0.02)
    return int(path.read_text())


# --- normal runs --------------------------------------------------------------------


def test_valid_stream_and_clean_exit(tmp_path: Path) -> None:
    script = agent_script(tmp_path, 'init()\nsay("hello")\nresult(cost=0.42)\n')
    outcome, events = run(spec_for(tmp_path, script))

    assert [type(e) for e in events] == [SystemInit, AssistantMessage, ResultEvent]
    assert outcome.ok
    assert (outcome.exit_code, outcome.signal, outcome.stuck) == (0, None, False)
    assert outcome.stop is None
    assert outcome.session_id == "sess-1"
    assert outcome.summary.total_cost_usd == 0.42
    assert outcome.pid > 0
    assert outcome.duration_s > 0
    assert not pid_alive(outcome.pid)


def test_real_claude_output_through_a_process(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())\n")
    outcome, events = run(spec_for(tmp_path, script, str(FIXTURES / "claude-stream.jsonl")))

    assert outcome.ok
    assert len(events) == 6
    assert outcome.summary.session_id == "7ea34705-b514-46a9-9dee-57da0843462d"
    assert outcome.summary.total_cost_usd == pytest.approx(0.0032)


def test_garbage_lines_are_noted_and_the_run_continues(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path,
        """
        init()
        print("Traceback? no, just noise", flush=True)
        sys.stdout.write('{"type": "assistant", "message": \\n')
        sys.stdout.buffer.write(b"\\xff\\xfe\\n")
        result()
        """,
    )
    outcome, events = run(spec_for(tmp_path, script))

    assert [type(e) for e in events] == [SystemInit, ResultEvent]
    assert outcome.ok
    assert outcome.summary.malformed_count == 3


def test_two_megabyte_line_is_skipped(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path,
        """
        init()
        sys.stdout.write('{"type": "assistant", "message": {"content": "' + "x" * 2_000_000 + '"}}\\n')
        say("after the big line")
        result()
        """,
    )
    outcome, events = run(spec_for(tmp_path, script))

    assert [type(e) for e in events] == [SystemInit, AssistantMessage, ResultEvent]
    assert outcome.ok
    assert outcome.summary.malformed_count == 1


def test_exit_without_result(tmp_path: Path) -> None:
    script = agent_script(tmp_path, 'init()\nsay("bye")\n')
    outcome, _ = run(spec_for(tmp_path, script))

    assert outcome.exit_code == 0
    assert outcome.result is None
    assert not outcome.ok
    assert outcome.session_id == "sess-1"


def test_crash_with_exit_1_keeps_stderr(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path,
        'init()\nsys.stderr.write("No conversation found with session ID: abc\\n")\nsys.exit(1)\n',
    )
    outcome, _ = run(spec_for(tmp_path, script))

    assert (outcome.exit_code, outcome.signal) == (1, None)
    assert not outcome.ok
    assert "No conversation found" in outcome.stderr_tail


def test_api_error_result_is_not_ok(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "init()\nresult(is_error=True)\nsys.exit(1)\n")
    outcome, _ = run(spec_for(tmp_path, script))
    assert outcome.result is not None
    assert outcome.result.is_error
    assert not outcome.ok


def test_unknown_event_types_are_delivered(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path,
        """
        init()
        emit({"type": "stream_event", "event": {}})
        emit({"type": "system", "subtype": "status", "status": "compacting"})
        emit({"type": "brand_new_thing", "x": 1})
        result()
        """,
    )
    outcome, events = run(spec_for(tmp_path, script))

    unknown = [(e.type, e.subtype) for e in events if isinstance(e, Unknown)]
    assert unknown == [("stream_event", None), ("system", "status"), ("brand_new_thing", None)]
    assert outcome.ok


def test_new_session_id_mid_stream_newest_is_kept(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path,
        """
        init("first")
        say("one", sid="first")
        say("two", sid="second")
        result(sid="second")
        """,
    )
    outcome, _ = run(spec_for(tmp_path, script))
    assert outcome.session_id == "second"


def test_stderr_tail_is_bounded(tmp_path: Path) -> None:
    script = agent_script(
        tmp_path, 'sys.stderr.write("e" * 200_000 + "THE END")\nsys.stderr.flush()\nresult()\n'
    )
    outcome, _ = run(spec_for(tmp_path, script))
    assert len(outcome.stderr_tail) == STDERR_TAIL_BYTES
    assert outcome.stderr_tail.endswith("THE END")


def test_async_on_event_is_awaited_in_order(tmp_path: Path) -> None:
    script = agent_script(tmp_path, 'init()\nsay("a")\nsay("b")\nresult()\n')
    seen: list[str] = []

    async def slow_consumer(event: Event) -> None:
        await asyncio.sleep(0.01)
        seen.append(type(event).__name__)

    outcome = asyncio.run(run_agent(spec_for(tmp_path, script), on_event=slow_consumer))
    assert outcome.ok
    assert seen == ["SystemInit", "AssistantMessage", "AssistantMessage", "ResultEvent"]


# --- environment --------------------------------------------------------------------


def test_agent_gets_step_variables_and_no_credentials(tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    script = agent_script(
        tmp_path, "json.dump(dict(os.environ), open(sys.argv[1], 'w'))\nresult()\n"
    )
    secrets = {
        "GITHUB_TOKEN": "ghs_1",
        "GH_TOKEN": "ghs_2",
        "GITHUB_PAT": "ghp_3",
        "GH_ENTERPRISE_TOKEN": "4",
        "GITHUB_ENTERPRISE_TOKEN": "5",
        "ACTIONS_RUNTIME_TOKEN": "6",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "7",
        "SCAFFOLD_PRIVATE_KEY": "-----BEGIN",
        "SCAFFOLD_PRIVATE_KEY_PATH": "/k.pem",
        "SCAFFOLD_WEBHOOK_SECRET": "w",
        "SCAFFOLD_APP_ID": "123",
        "MY_GITHUB_API_KEY": "8",
        "github_app_secret": "9",
    }
    base = {**os.environ, **secrets, "SCAFFOLD_GITHUB_URL": "http://127.0.0.1:1", "KEEP_ME": "1"}
    step = {"SCAFFOLD_QUEST_ID": "q-1", "SCAFFOLD_STEP_ID": "task-3", "SCAFFOLD_ROLE": "Codeweaver"}
    outcome, _ = run(spec_for(tmp_path, script, str(dump), env=step, base_env=base))

    assert outcome.ok
    seen = json.loads(dump.read_text())
    for name, value in step.items():
        assert seen[name] == value
    assert not set(secrets) & set(seen)
    assert seen["KEEP_ME"] == "1"
    assert seen["SCAFFOLD_GITHUB_URL"] == "http://127.0.0.1:1"
    assert seen["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True),
        ("GH_TOKEN", True),
        ("SCAFFOLD_PRIVATE_KEY_PATH", True),
        ("SCAFFOLD_WEBHOOK_SECRET", True),
        ("SCAFFOLD_APP_ID", True),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", True),
        ("INPUT_GITHUB_TOKEN", True),
        ("GITHUB_APP_PRIVATE_KEY", True),
        ("github_webhook_secret", True),
        ("GITHUB_WORKSPACE", False),
        ("SCAFFOLD_GITHUB_URL", False),
        ("SCAFFOLD_STEP_ID", False),
        ("ANTHROPIC_API_KEY", False),
        ("GH_HOST", False),
    ],
)
def test_is_credential_name(name: str, secret: bool) -> None:
    assert is_credential_name(name) is secret


def test_agent_environment_refuses_credentials_in_extra() -> None:
    with pytest.raises(AgentError, match="GH_TOKEN"):
        agent_environment({}, {"GH_TOKEN": "x"})
    assert agent_environment({"A": "1", "GH_TOKEN": "x"}, {"B": "2"}) == {"A": "1", "B": "2"}


# --- stuck, killed, cancelled -------------------------------------------------------


def test_stuck_agent_is_killed_with_its_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = agent_script(
        tmp_path, "init()\nspawn_grandchild(sys.argv[1])\nsay('working')\ntime.sleep(120)\n"
    )
    spec = spec_for(tmp_path, script, str(pidfile), stuck_timeout_s=0.5)
    outcome, events = run(spec)

    assert outcome.stuck
    assert outcome.signal == signal.SIGTERM
    assert outcome.exit_code is None
    assert outcome.stop == "terminated"
    assert not outcome.ok
    assert isinstance(events[-1], AssistantMessage)
    assert not pid_alive(outcome.pid)
    assert wait_gone(int(pidfile.read_text()))


def test_stuck_agent_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = agent_script(
        tmp_path,
        """
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild
        spawn_grandchild(sys.argv[1])
        time.sleep(120)
        """,
    )
    spec = spec_for(tmp_path, script, str(pidfile), stuck_timeout_s=0.5, terminate_grace_s=0.3)
    outcome, _ = run(spec)

    assert outcome.stuck
    assert outcome.stop == "killed"
    assert outcome.signal == signal.SIGKILL
    assert wait_gone(int(pidfile.read_text()))


def test_silent_after_closing_stdout_still_counts_as_stuck(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "init()\nos.close(1)\ntime.sleep(120)\n")
    outcome, _ = run(spec_for(tmp_path, script, stuck_timeout_s=0.5))
    assert outcome.stuck
    assert outcome.session_id == "sess-1"


def test_cancelling_the_runner_kills_and_reaps_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = agent_script(
        tmp_path,
        """
        spawn_grandchild(sys.argv[1])
        while True:
            say("still here")
            time.sleep(0.05)
        """,
    )
    children = LiveChildren()
    spec = spec_for(tmp_path, script, str(pidfile), stuck_timeout_s=60)

    async def main() -> tuple[int, list[int]]:
        task = asyncio.create_task(run_agent(spec, children=children))
        grandchild = await wait_for_file(pidfile)
        leaders = children.pids()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return grandchild, leaders

    grandchild, leaders = asyncio.run(main())
    assert len(leaders) == 1
    assert not pid_alive(leaders[0])  # reaped: not even a zombie of ours
    assert wait_gone(grandchild)
    assert len(children) == 0


def test_stop_request_stops_the_group_and_still_returns_an_outcome(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = agent_script(
        tmp_path,
        "init('kept')\nspawn_grandchild(sys.argv[1])\nsay('signalled', sid='kept')\ntime.sleep(120)\n",
    )
    stop = asyncio.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, AssistantMessage):
            stop.set()

    spec = spec_for(tmp_path, script, str(pidfile), stuck_timeout_s=60)
    outcome = asyncio.run(run_agent(spec, on_event=on_event, stop_requested=stop))

    assert outcome.stopped
    assert not outcome.stuck
    assert outcome.stop == "terminated"
    assert outcome.signal == signal.SIGTERM
    assert outcome.session_id == "kept"
    assert wait_gone(int(pidfile.read_text()))


def test_on_event_error_stops_the_agent_and_propagates(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = agent_script(tmp_path, "spawn_grandchild(sys.argv[1])\ninit()\ntime.sleep(120)\n")

    def explode(event: Event) -> None:
        if isinstance(event, SystemInit):
            raise RuntimeError("consumer broke")

    with pytest.raises(RuntimeError, match="consumer broke"):
        asyncio.run(run_agent(spec_for(tmp_path, script, str(pidfile)), on_event=explode))
    assert wait_gone(int(pidfile.read_text()))


def test_leftover_children_are_stopped_after_a_normal_exit(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = agent_script(tmp_path, "spawn_grandchild(sys.argv[1])\ninit()\nresult()\n")
    outcome, _ = run(spec_for(tmp_path, script, str(pidfile)))

    assert outcome.ok
    assert outcome.stop == "terminated"
    assert wait_gone(int(pidfile.read_text()))


def test_escaped_process_holding_stdout_cannot_hang_the_runner(tmp_path: Path) -> None:
    """A grandchild in its own session survives the group kill and keeps the pipe open;
    draining gives up after drain_timeout_s."""
    pidfile = tmp_path / "escaped.pid"
    script = agent_script(
        tmp_path, "spawn_grandchild(sys.argv[1], new_session=True)\ninit()\nresult()\n"
    )
    spec = spec_for(tmp_path, script, str(pidfile), drain_timeout_s=0.3)

    async def main() -> AgentRunOutcome:
        try:
            return await run_agent(spec)
        finally:
            # Ours to clean up; do it while the loop still runs so the pipe it held
            # is closed by the loop, not at interpreter exit.
            if pidfile.exists():
                escaped = int(pidfile.read_text())
                os.kill(escaped, signal.SIGKILL)
                while pid_alive(escaped):
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.05)

    outcome = asyncio.run(main())
    assert outcome.ok
    assert outcome.stop is None


# --- the registry -------------------------------------------------------------------


def test_live_children_tracks_a_run_while_it_lasts(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "init()\nresult()\n")
    children = LiveChildren()
    during: list[list[int]] = []
    spec = spec_for(tmp_path, script)

    outcome = asyncio.run(
        run_agent(spec, on_event=lambda e: during.append(children.pids()), children=children)
    )
    assert during[0] == [outcome.pid]
    assert outcome.pid not in children
    assert len(children) == 0


def test_orchestrator_can_stop_every_live_agent(tmp_path: Path) -> None:
    pidfiles = [tmp_path / f"gc{i}.pid" for i in range(2)]
    script = agent_script(tmp_path, "spawn_grandchild(sys.argv[1])\ntime.sleep(120)\n")
    children = LiveChildren()

    async def main() -> list[AgentRunOutcome]:
        tasks = [
            asyncio.create_task(
                run_agent(spec_for(tmp_path, script, str(p), stuck_timeout_s=60), children=children)
            )
            for p in pidfiles
        ]
        for p in pidfiles:
            await wait_for_file(p)
        assert len(children) == 2
        assert len(children.kill_all()) == 2
        return list(await asyncio.gather(*tasks))

    outcomes = asyncio.run(main())
    assert [o.signal for o in outcomes] == [signal.SIGKILL, signal.SIGKILL]
    assert not any(o.stuck for o in outcomes)
    assert len(children) == 0
    for p in pidfiles:
        assert wait_gone(int(p.read_text()))


# --- spec and start errors ----------------------------------------------------------


def test_missing_program_is_an_agent_error(tmp_path: Path) -> None:
    spec = AgentSpec(argv=[str(tmp_path / "no-such-agent")], cwd=tmp_path)
    with pytest.raises(AgentError, match="cannot start agent"):
        asyncio.run(run_agent(spec))


def test_missing_cwd_is_an_agent_error(tmp_path: Path) -> None:
    spec = AgentSpec(argv=[sys.executable, "-c", "pass"], cwd=tmp_path / "gone")
    with pytest.raises(AgentError, match="cannot start agent"):
        asyncio.run(run_agent(spec))


def test_spec_validation() -> None:
    with pytest.raises(AgentError, match="empty"):
        AgentSpec(argv=[], cwd=Path())
    with pytest.raises(AgentError, match="stuck_timeout_s"):
        AgentSpec(argv=["x"], cwd=Path(), stuck_timeout_s=0)
    assert AgentSpec(argv=["a", "b"], cwd=Path()).argv == ("a", "b")


# --- a backend's own output format -----------------------------------------------


class _TurnCounter:
    """A parser for a made-up format: one line per turn; past two turns it says the
    turn limit was passed, as a backend whose CLI has no limit of its own does."""

    def __init__(self) -> None:
        self.turns = 0

    def __call__(self, line: bytes, line_no: int) -> Event:
        data = json.loads(line)
        self.turns += 1
        if self.turns > 2:
            return ResultEvent(
                "error_max_turns", True, self.turns, "t1", None, (), None, None, None, data,
                turn_limit_passed=True,
            )  # fmt: skip
        return Unknown(type="turn", subtype=None, session_id="t1", raw=data)


def test_a_parser_past_the_turn_limit_stops_an_agent_that_goes_on(tmp_path: Path) -> None:
    script = agent_script(tmp_path, 'while True:\n    emit({"turn": 1})\n    time.sleep(0.05)\n')
    outcome, _ = run(spec_for(tmp_path, script, parse=_TurnCounter(), terminate_grace_s=2))
    assert outcome.result is not None
    assert outcome.result.subtype == "error_max_turns"
    assert outcome.signal is not None  # stopped by scaffold, not by itself
    assert not outcome.stopped  # nobody asked: the limit did
    assert outcome.session_id == "t1"
    assert not pid_alive(outcome.pid)
