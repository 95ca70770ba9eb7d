"""The command line around a run: config errors, questions, approvals, safety limits."""

from __future__ import annotations

from datetime import timedelta

from repo_builder import MakeProject, codeweaver_done, complete, write

from scaffold.core.states import Lifecycle
from scaffold.demo.scripted import agent_command

ANSWER = "Use the blue greeting, please"


def test_malformed_config_exits_2_naming_file_and_key(make_project: MakeProject) -> None:
    project = make_project(["Never runs"], [codeweaver_done("TASK-1")])
    project.write_config(
        "slots: 2\nagent:\n  command: [python]\n  stuck_timeout_s: soon\napproval: auto\n"
    )

    proc = project.cli("run")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ".github/scaffold.yml" in proc.stderr
    assert "agent.stuck_timeout_s" in proc.stderr
    assert "line 4" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert project.invocations() == []

    status = project.status_json()  # status still works and reports the problem
    [error] = [e for e in status["errors"] if "scaffold.yml" in e["path"]]
    assert "agent.stuck_timeout_s" in error["reason"]


def test_unknown_question_is_a_usage_error(make_project: MakeProject) -> None:
    project = make_project(["Nothing"], [])

    proc = project.cli("answer", "q-unknown", "x")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "q-unknown" in proc.stderr
    assert "no pending question" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_question_answer_resumes_the_same_session(make_project: MakeProject) -> None:
    ask = {
        "signal": "needs-user-input",
        "question": "Which greeting?",
        "context": "Two greetings are plausible.",
    }
    project = make_project(
        ["Add the greeting"],
        [
            {"role": "codeweaver", "attempt": 1, "actions": [{"signal": ask}]},
            {
                "role": "codeweaver",
                "attempt": 2,
                "expect_resumed": True,
                "actions": [
                    {"expect_prompt_contains": ANSWER},
                    write("notes/greeting.txt", "blue\n"),
                    complete("greeting added"),
                ],
            },
        ],
    )

    first = project.run()

    assert first.exit_code == 3, first.output
    assert "q-1-1" in first.report.reason
    status = project.status_json()
    [quest] = status["quests"]
    [pending] = quest["pending_questions"]
    assert pending == {
        "id": "q-1-1",
        "task": "TASK-1",
        "role": "codeweaver",
        "question": "Which greeting?",
        "context": "Two greetings are plausible.",
    }
    [task] = [t for t in status["tasks"] if t["id"] == "TASK-1"]
    assert task["question"] == "q-1-1"
    assert task["state"] == "Processing"

    answered = project.cli("answer", "q-1-1", ANSWER)
    assert answered.returncode == 0, answered.stderr

    second = project.run()

    assert second.exit_code == 0, second.output
    asked, resumed = project.invocations(role="codeweaver")
    assert resumed["resumed"] is True
    assert resumed["session_id"] == asked["session_id"]
    assert ANSWER in resumed["prompt"]
    question = project.quest().questions["q-1-1"]
    assert question.answer == ANSWER
    assert project.task("TASK-1").outcome == "merged"
    again = project.cli("answer", "q-1-1", "late")
    assert again.returncode == 2  # answered already: no longer pending


def test_manual_approval_then_merge(make_project: MakeProject) -> None:
    project = make_project(
        ["Needs a reviewer"], [codeweaver_done("TASK-1")], {"approval": "manual"}
    )

    first = project.run()

    assert first.exit_code == 3, first.output
    assert "waiting for approval: TASK-1" in first.report.reason
    assert project.task("TASK-1").state is Lifecycle.PR_CREATED
    assert project.merge_subjects() == []
    assert project.scaffold_branches() == ["scaffold/task-1"]

    approved = project.cli("approve", "task-1")
    assert approved.returncode == 0, approved.stderr

    second = project.run()

    assert second.exit_code == 0, second.output
    task = project.task("TASK-1")
    assert task.outcome == "merged"
    assert task.pr is not None
    assert task.pr.state == "merged"
    assert project.merges_of(1) == 1
    assert project.backlog_task("TASK-1").status == "Done"
    assert project.scaffold_branches() == []
    assert len(project.invocations()) == 3  # approving ran no agent


def test_reject_sends_the_task_back_to_do(make_project: MakeProject) -> None:
    project = make_project(
        ["Not wanted after all"], [codeweaver_done("TASK-1")], {"approval": "manual"}
    )
    assert project.run().exit_code == 3

    rejected = project.cli("reject", "TASK-1", "--reason", "we do not need it")
    assert rejected.returncode == 0, rejected.stderr

    second = project.run()

    # A rejection is a person's decision, not a failure of the run.
    assert second.exit_code == 0, second.output
    assert "rejected, back in To Do: TASK-1" in second.report.reason
    task = project.task("TASK-1")
    assert task.state is Lifecycle.IDLE
    assert task.outcome == "rejected"
    assert task.pr is not None
    assert task.pr.state == "closed"
    bt = project.backlog_task("TASK-1")
    assert bt.status == "To Do"
    assert bt.implementation_notes is not None
    assert "Pull request closed without merging: we do not need it" in bt.implementation_notes
    assert project.scaffold_branches() == []
    assert project.worktrees() == [str(project.repo)]
    assert project.merge_subjects() == []
    assert len(project.invocations()) == 3


def test_cost_limit_stops_new_work_with_exit_4_for_this_run(make_project: MakeProject) -> None:
    project = make_project(
        ["Expensive", "Never started"],
        [
            codeweaver_done("TASK-1", cost_usd=0.01),
            codeweaver_done("TASK-2", cost_usd=0.01),
        ],
        {"slots": 1, "safety": {"max_cost_usd": 0.001}},
    )

    result = project.run()

    assert result.exit_code == 4, result.output
    assert [(r["step"], r["role"]) for r in project.invocations()] == [("TASK-1", "codeweaver")]
    status = project.status_json()
    [quest] = status["quests"]
    assert quest["stop_reason"]
    assert "cost" in quest["stop_reason"]
    assert quest["cost_usd"] == 0.01
    states = {t["id"]: t for t in status["tasks"]}
    assert states["TASK-2"]["state"] == "Idle", result.output
    assert states["TASK-1"]["state"] == "Idle", result.output
    assert states["TASK-1"]["outcome"] == "aborted"
    assert states["TASK-1"]["status"] == "To Do"

    # Budgets are per run: the next run may spend its own $0.001 (one agent run).
    again = project.cli("run")
    assert again.returncode == 4, again.stdout + again.stderr
    assert "cost" in again.stdout
    assert len(project.invocations()) == 2

    # With a budget that fits, and the quest's clock 5 h on (max_hours is 4 per run),
    # the next run finishes both tasks, the stopped one included.
    project.write_config(
        {
            "slots": 2,
            "agent": {"command": agent_command(), "max_attempts": 2},
            "approval": "auto",
            "safety": {"max_cost_usd": 1.0},
        }
    )
    last = project.run(clock_offset=timedelta(hours=5))
    assert last.exit_code == 0, last.output
    assert project.task("TASK-1").outcome == "merged"
    assert project.task("TASK-2").outcome == "merged"
    assert project.quest().stop_reason is None


def test_abort_without_a_running_scaffold_is_refused(make_project: MakeProject) -> None:
    project = make_project(["Nothing"], [])
    assert project.run().exit_code == 1  # the task never had an agent script: Blocked

    proc = project.cli("abort")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no scaffold run is active" in proc.stderr


def test_abort_stops_a_running_scaffold_and_its_agents(make_project: MakeProject) -> None:
    from repo_builder import wait_until

    slow = {"role": "codeweaver", "actions": [{"sleep": 30}, complete("late")]}
    project = make_project(["Slow one", "Slow two"], [slow])
    run = project.cli_popen("run")
    try:
        wait_until(lambda: len(project.live_agents()) >= 2, what="two agents running")

        proc = project.cli("abort", "--reason", "changed my mind")
        assert proc.returncode == 0, proc.stderr

        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, output
    assert "changed my mind" in output
    assert project.live_agents() == []
    for task_id in ("TASK-1", "TASK-2"):
        task = project.task(task_id)
        assert task.state is Lifecycle.IDLE
        assert task.outcome == "aborted"
        assert project.backlog_task(task_id).status == "To Do"
    assert project.worktrees() == [str(project.repo)]
