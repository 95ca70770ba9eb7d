"""SIGTERM while an agent works: the server stops its agents and exits cleanly, and the
next start runs the interrupted step again."""

from __future__ import annotations

from pathlib import Path

from app_harness import (
    VALIDATORS,
    agent_env,
    app_process,
    codeweaver,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    wait_for,
    write_script,
    writer_repo,
)

from ghsim import GitHubSimulator
from harness import quest_pids

REPO = "acme/widgets"


def test_sigterm_stops_agents_and_the_quest_resumes(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    writer_repo(sim, repo_files())
    write_script(
        tmp_path,
        [
            {"role": "chaoswhisperer", "attempt": 1, "actions": [{"hang": True}]},
            {
                "role": "chaoswhisperer",
                "attempt": 2,
                "actions": [planning_tool("requirements", requirements("One")), complete("ok")],
            },
            {
                "role": "pathseeker",
                "actions": [planning_tool("tasks", plan(("a", "One", []))), complete("ok")],
            },
            codeweaver("task-1", {"one.txt": "1\n"}),
            *VALIDATORS,
        ],
    )
    state = tmp_path / "state"
    clone = state / "repos" / REPO
    with app_process(sim, tmp_path / "first", state=state, extra_env=agent_env(tmp_path)) as app:
        number = sim.open_issue(REPO, "One", "Add one.txt.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        wait_for("the agent to run", lambda: quest_pids("issue-1", clone) or None)
        log = tmp_path / "agent-state" / "invocations.jsonl"
        wait_for(
            "its attempt on record", lambda: log.is_file() and "chaoswhisperer" in log.read_text()
        )
        code = app.stop()
    assert code == 0
    assert quest_pids("issue-1", clone) == []  # no agent or MCP server left behind
    with app_process(sim, tmp_path / "second", state=state, extra_env=agent_env(tmp_path)):
        wait_for("the PR after the restart", lambda: bool(sim.repo(REPO).pulls) or None)
