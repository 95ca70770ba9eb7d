"""The agent's exit is seen whatever holds its pipes.

`spawn_watched` resolves a future when the child watcher reaps the leader; what is left
of the group is then stopped. Deadlines here only keep a broken build from hanging the
suite: nothing is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scaffold.agent import process_group
from scaffold.agent.process import AgentRunOutcome, AgentSpec, run_agent
from scaffold.agent.process_group import LiveChildren, spawn_watched, stop_process_group

HANG_GUARD_S = 60.0

# Spawns a grandchild in its own session that inherits stdout and stderr (so the pipes
# stay open after the leader exits), writes its pid to argv[1], then exits.
ESCAPER = """\
import os, subprocess, sys, time
pidfile = sys.argv[1]
code = ("import os, sys, time; p = sys.argv[1]; open(p + '.tmp', 'w').write(str(os.getpid()));"
        " os.replace(p + '.tmp', p); time.sleep(120)")
subprocess.Popen([sys.executable, "-c", code, pidfile], start_new_session=True)
while not os.path.exists(pidfile):
    time.sleep(0.01)
print('{"type": "heartbeat"}', flush=True)
"""

# An agent that announces itself and then waits to be killed; with argv[1], it first
# starts a child in its own process group (an MCP server it would forget).
WAITER = """\
import json, os, subprocess, sys, time
if len(sys.argv) > 1:
    code = ("import os, sys, time; p = sys.argv[1]; open(p + '.tmp', 'w').write(str(os.getpid()));"
            " os.replace(p + '.tmp', p); time.sleep(120)")
    subprocess.Popen([sys.executable, "-c", code, sys.argv[1]])
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s-1", "tools": [],
                  "mcp_servers": [], "model": "m"}), flush=True)
time.sleep(120)
"""


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_and_wait(pid: int) -> None:
    with_deadline = time.monotonic() + HANG_GUARD_S
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while alive(pid) and time.monotonic() < with_deadline:
        time.sleep(0.02)


async def pid_from(path: Path) -> int:
    while not path.exists():
        await asyncio.sleep(0.01)
    return int(path.read_text())


def test_exit_is_noticed_while_an_escaped_grandchild_holds_stdout(tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped.pid"
    agent = script(tmp_path, "escaper.py", ESCAPER)

    async def main() -> tuple[int | None, bool]:
        proc = await spawn_watched(
            sys.executable,
            str(agent),
            str(pidfile),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None
        try:
            await asyncio.wait_for(process_group._wait_exited(proc), HANG_GUARD_S)
            # Reaped, yet its stdout is still open: the grandchild holds it.
            await proc.stdout.readline()
            still_open = not proc.stdout.at_eof()
            return proc.returncode, still_open
        finally:
            if pidfile.exists():
                kill_and_wait(int(pidfile.read_text()))
            await asyncio.sleep(0)  # the loop closes the pipes it held

    returncode, still_open = asyncio.run(main())
    assert returncode == 0
    assert still_open


def test_a_process_that_exited_before_anyone_waited_is_seen(tmp_path: Path) -> None:
    async def main() -> int | None:
        proc = await spawn_watched(sys.executable, "-c", "pass", start_new_session=True)
        # Block the loop until the process has exited (not reaping it: the child
        # watcher may), so the exit comes before the wait is armed.
        with contextlib.suppress(ChildProcessError):  # the watcher reaped it first
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        await asyncio.wait_for(process_group._wait_exited(proc), HANG_GUARD_S)
        return proc.returncode

    assert asyncio.run(main()) == 0


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


def test_kill_9_of_the_agent_is_an_outcome(tmp_path: Path) -> None:
    agent = script(tmp_path, "waiter.py", WAITER)
    spec = AgentSpec(argv=[sys.executable, str(agent)], cwd=tmp_path, stuck_timeout_s=60)

    async def main() -> AgentRunOutcome:
        children = LiveChildren()
        started = asyncio.Event()
        runner = asyncio.create_task(
            run_agent(spec, on_event=lambda _: started.set(), children=children)
        )
        await asyncio.wait_for(started.wait(), HANG_GUARD_S)
        [pid] = children.pids()
        os.kill(pid, signal.SIGKILL)
        return await asyncio.wait_for(runner, HANG_GUARD_S)

    outcome = asyncio.run(main())
    assert outcome.signal == signal.SIGKILL
    assert outcome.exit_code is None
    assert not outcome.stuck
    assert outcome.stop is None  # nothing was left in its group
    assert outcome.session_id == "s-1"


def test_kill_9_of_the_agent_still_clears_what_it_left_in_its_group(tmp_path: Path) -> None:
    agent = script(tmp_path, "waiter.py", WAITER)
    pidfile = tmp_path / "mcp.pid"
    spec = AgentSpec(
        argv=[sys.executable, str(agent), str(pidfile)], cwd=tmp_path, stuck_timeout_s=60
    )

    async def main() -> tuple[AgentRunOutcome, int]:
        started = asyncio.Event()
        runner = asyncio.create_task(run_agent(spec, on_event=lambda _: started.set()))
        await asyncio.wait_for(started.wait(), HANG_GUARD_S)
        orphan = await pid_from(pidfile)
        leader = os.getpgid(orphan)
        os.kill(leader, signal.SIGKILL)
        return await asyncio.wait_for(runner, HANG_GUARD_S), orphan

    outcome, orphan = asyncio.run(main())
    try:
        assert outcome.signal == signal.SIGKILL
        assert outcome.stop == "terminated"
        assert not alive(orphan) or _is_zombie(orphan)
    finally:
        kill_and_wait(orphan)


def test_an_empty_group_is_seen_without_listing_proc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path: once the leader is reaped and nothing is left, `killpg(pgid, 0)`
    says so; /proc is never scanned."""

    def no_scan(_: int) -> object:
        raise AssertionError("/proc was listed for an empty group")

    monkeypatch.setattr(process_group, "_has_live_member", no_scan)
    agent = script(tmp_path, "quick.py", 'print(\'{"type": "heartbeat"}\')\n')
    spec = AgentSpec(argv=[sys.executable, str(agent)], cwd=tmp_path)

    outcome = asyncio.run(run_agent(spec))
    assert outcome.exit_code == 0
    assert outcome.stop is None


def test_stop_waits_for_each_group_member(tmp_path: Path) -> None:
    """A member that outlives SIGTERM for a while (it traps it) is awaited: the stop
    says "terminated" once it is gone."""
    body = """\
    import os, signal, subprocess, sys, time
    code = ("import os, signal, sys, time\\n"
            "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.2), os._exit(0)))\\n"
            "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\\n"
            "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\\n"
            "time.sleep(120)\\n")
    subprocess.Popen([sys.executable, "-c", code, sys.argv[1]])
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    time.sleep(120)
    """
    agent = script(tmp_path, "slow_term.py", body)
    pidfile = tmp_path / "member.pid"

    async def main() -> tuple[str, int]:
        proc = await spawn_watched(sys.executable, str(agent), str(pidfile), start_new_session=True)
        member = await pid_from(pidfile)
        result = await stop_process_group(proc, terminate_wait_s=HANG_GUARD_S, kill_wait_s=5)
        return result, member

    result, member = asyncio.run(main())
    assert result == "terminated"
    assert not alive(member) or _is_zombie(member)
