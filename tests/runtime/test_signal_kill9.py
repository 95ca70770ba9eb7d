"""``kill -9`` of scaffold between "signal durable" and "tool answered": nothing lost, nothing doubled.

The real ``scaffold run`` is started with one change: right after the HTTP endpoint has
stored an accepted signal (fsynced) and before it can answer, the process kills itself
with SIGKILL. The agent never hears its acknowledgement. The next ``scaffold run``
applies the stored signal exactly once: one merge, no second agent run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from repo_builder import MakeProject, complete, write

from scaffold.signal_back.records import read_signals

# ``python -m scaffold run`` whose endpoint dies between the durable write and the answer.
_DIE_AFTER_DURABLE = """
import os, signal
import scaffold.signal_back.tools as run_tools
real = run_tools.handle_call
def durable_then_killed(*args):
    outcome = real(*args)
    if outcome.record is not None:
        os.kill(os.getpid(), signal.SIGKILL)  # on disk; the answer never leaves
    return outcome
run_tools.handle_call = durable_then_killed
from scaffold.cli.entry import main
main()
"""


@pytest.mark.parametrize("sandbox", ["off", "bwrap"])
def test_kill_9_after_the_durable_write_applies_the_signal_once(
    make_project: MakeProject, sandbox: str
) -> None:
    step = "TASK-1"
    project = make_project(
        ["One"],
        [
            {
                "role": "codeweaver",
                "step": step,
                "attempt": 1,
                "actions": [
                    write("notes/task-1.txt", "TASK-1\n"),
                    complete("TASK-1 implemented"),  # a real MCP call over HTTP
                    complete("TASK-1 implemented"),  # the agent retries: nobody answers
                    {"sleep": 30},
                ],
            }
        ],
        {"slots": 1, "sandbox": {"mode": sandbox}},
    )
    first = subprocess.run(
        [sys.executable, "-c", _DIE_AFTER_DURABLE, "run"],
        cwd=project.repo,
        env={**os.environ, **project.agent_env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    runs_dir = project.repo / ".scaffold" / "runs" / "backlog"
    stored = [r for d in runs_dir.glob(f"{step}/*") for r in read_signals(d / "signals")]
    assert [r.signal.signal for r in stored] == ["complete"]

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.merges_of(1) == 1, project.merge_subjects()
    assert project.backlog_task(step).status == "Done"
    assert project.task(step).outcome == "merged"
    assert project.git("show", "main:notes/task-1.txt") == "TASK-1\n"
    # The stored signal was used: no second agent run, no second signal.
    assert len(project.invocations(step=step, role="codeweaver")) == 1
    stored = [r for d in runs_dir.glob(f"{step}/*") for r in read_signals(d / "signals")]
    assert [r.role.value for r in stored].count("codeweaver") == 1
    assert project.live_agents() == []
