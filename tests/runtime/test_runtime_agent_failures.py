"""Agents that crash, hang, print garbage or signal badly, driven by the real orchestrator."""

from __future__ import annotations

from repo_builder import (
    PYTHON,
    MakeProject,
    Project,
    TaskSpec,
    complete,
    write,
)

from harness import signal_action
from scaffold.core.states import Lifecycle
from scaffold.signal_back.records import read_signals

# Leaves a grandchild behind in the agent's process group (and with its environment).
SPAWN_SLEEPER = [
    PYTHON,
    "-c",
    "import subprocess as s, sys; s.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
    " stdout=s.DEVNULL, stderr=s.DEVNULL)",
]


def _failures(project: Project, task_id: str) -> list[str]:
    """The reasons of the task's ``agent_failed`` transitions, from the quest history."""
    return [
        str(e.detail.get("reason", ""))
        for e in project.history()
        if e.task_id == task_id and e.event == "agent_failed"
    ]


def test_crash_is_retried_resuming_the_same_session(make_project: MakeProject) -> None:
    project = make_project(
        ["Load the settings"],
        [
            {"role": "codeweaver", "attempt": 1, "actions": [{"say": "Loading..."}, {"crash": 1}]},
            {
                "role": "codeweaver",
                "attempt": 2,
                "expect_resumed": True,
                "actions": [
                    {"expect_prompt_contains": "previous attempt failed"},
                    write("notes/settings.txt", "defaults\n"),
                    complete("settings loaded"),
                ],
            },
        ],
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    first, second = project.invocations(role="codeweaver")
    assert first["resumed"] is False
    assert second["resumed"] is True
    assert second["session_id"] == first["session_id"]
    reasons = _failures(project, "TASK-1")
    assert len(reasons) == 1
    assert "exited with code 1 without an accepted signal-back" in reasons[0]
    assert "crashing with exit code 1" in reasons[0]  # the stderr tail is kept
    task = project.task("TASK-1")
    assert task.outcome == "merged"
    assert task.sessions["codeweaver"] == first["session_id"]


def test_hung_agent_is_killed_with_its_group_then_blocked(make_project: MakeProject) -> None:
    project = make_project(
        ["Think forever"],
        [{"role": "codeweaver", "actions": [{"run": SPAWN_SLEEPER}, {"hang": True}]}],
        # Long enough for an agent to start and log its invocation on a loaded machine
        # (a run silent for longer from its spawn is stuck before it is counted).
        {"agent": {"stuck_timeout_s": 5, "max_attempts": 2}},
    )

    result = project.run()

    assert result.exit_code == 1, result.output
    runs = project.invocations(role="codeweaver")
    assert len(runs) == 3  # the first run and max_attempts retries
    assert all(r["resumed"] for r in runs[1:])
    assert {r["session_id"] for r in runs} == {runs[0]["session_id"]}
    # Every process of the quest (the agents, their sleepers: found by environment from
    # outside, as the pids the agents saw are those of their own PID namespace) is gone.
    assert project.live_agents() == []
    task = project.task("TASK-1")
    assert task.state is Lifecycle.BLOCKED
    assert task.blocked_reason is not None
    assert "Codeweaver failed 3 times" in task.blocked_reason
    assert "stuck" in task.blocked_reason
    assert "(5s, agent.stuck_timeout_s)" in task.blocked_reason  # which timeout, and its key
    # The live log says why each run failed, not only "agent_failed".
    assert "agent_failed (stays Processing): stuck: no output" in result.output
    assert "TASK-1" in result.report.reason
    assert "stuck" in result.report.reason
    assert len(_failures(project, "TASK-1")) == 3


def test_garbage_and_a_2mb_line_do_not_stop_the_run(make_project: MakeProject) -> None:
    project = make_project(
        ["Be noisy"],
        [
            {
                "role": "codeweaver",
                "actions": [
                    {"print_garbage": "this is not json {"},
                    {"print_garbage": '{"type": "assistant", "message": 42}'},
                    {"print_garbage": "\u00ff\u0000 binary-ish \ufffd"},
                    {"print_long_line": 2 * 1024 * 1024},
                    {"say": "still here"},
                    write("notes/noisy.txt", "ok\n"),
                    complete("done despite the noise"),
                ],
            }
        ],
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    task = project.task("TASK-1")
    assert task.outcome == "merged"
    [run] = project.invocations(role="codeweaver")
    # the init event after the garbage was still read: the session is known
    assert task.sessions["codeweaver"] == run["session_id"]
    assert _failures(project, "TASK-1") == []


def test_exit_zero_without_a_signal_is_a_crash(make_project: MakeProject) -> None:
    project = make_project(
        ["Forget to report"],
        [{"role": "codeweaver", "actions": [{"say": "All done, I think."}]}],
    )

    result = project.run()

    assert result.exit_code == 1, result.output
    reasons = _failures(project, "TASK-1")
    assert len(reasons) == 3
    assert all("exited with code 0 without an accepted signal-back" in r for r in reasons)
    task = project.task("TASK-1")
    assert task.state is Lifecycle.BLOCKED
    assert task.blocked_reason
    assert "without an accepted signal-back" in task.blocked_reason
    assert project.backlog_task("TASK-1").status == "In Progress"


def test_invalid_signal_is_refused_and_a_valid_one_after_it_counts(
    make_project: MakeProject,
) -> None:
    project = make_project(
        ["Signal twice"],
        [
            {
                "role": "codeweaver",
                "actions": [
                    write("notes/twice.txt", "ok\n"),
                    {"signal": {"signal": "finished", "summary": "not a signal name"}},
                    {"signal": {"signal": "complete", "summary": ""}},
                    complete("second try is valid"),
                ],
            }
        ],
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    assert _failures(project, "TASK-1") == []
    [run] = project.invocations(role="codeweaver")
    run_dir = project.repo / ".scaffold" / "runs" / "backlog" / "TASK-1" / "001-codeweaver"
    records = read_signals(run_dir / "signals")
    assert [(r.seq, r.signal.signal) for r in records] == [(1, "complete")]
    assert project.task("TASK-1").last_summary == "second try is valid"
    assert run["session_id"] == project.task("TASK-1").sessions["codeweaver"]


def test_signal_for_another_step_is_refused_and_the_run_is_a_crash(
    make_project: MakeProject,
) -> None:
    wrong = {"signal": "complete", "stepId": "TASK-2", "summary": "finished TASK-2"}
    project = make_project(
        ["First", TaskSpec("Second", deps=("TASK-1",))],
        [
            # through the real MCP server, then (the retry) through its handler alone
            {"role": "codeweaver", "step": "TASK-1", "attempt": 1, "actions": [{"signal": wrong}]},
            {"role": "codeweaver", "step": "TASK-1", "actions": [signal_action(wrong)]},
            {"role": "codeweaver", "step": "TASK-2", "actions": [complete("never")]},
        ],
        {"agent": {"max_attempts": 1}, "slots": 1},
    )

    result = project.run()

    assert result.exit_code == 1, result.output
    runs = project.invocations()
    assert [(r["step"], r["role"]) for r in runs] == [("TASK-1", "codeweaver")] * 2
    run_root = project.repo / ".scaffold" / "runs" / "backlog" / "TASK-1"
    for run_dir in run_root.iterdir():
        assert read_signals(run_dir / "signals") == []
    reasons = _failures(project, "TASK-1")
    assert len(reasons) == 2
    assert all("without an accepted signal-back" in r for r in reasons)
    assert project.task("TASK-1").state is Lifecycle.BLOCKED
