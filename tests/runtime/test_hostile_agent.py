"""A hostile agent against the local runtime: every attack fails, the run still completes.

The agent is real (the scripted agent, through the real orchestrator, the real
bubblewrap sandbox and the run's real signal endpoint); its attempts come from
``tests/fixtures/agent/hostile_probe.py``. After the run the test looks for effects
outside the sandbox as well: planted commands that ran, a moved branch, a forged
approval that merged, a daemon that outlived its run, a secret in the task's branch.
"""

from __future__ import annotations

import os
from pathlib import Path

from repo_builder import MakeProject, codeweaver_done, wait_until

from harness import git
from sandboxing import Evidence, expect_all_blocked, hostile_run, listening
from scaffold.runtime import inbox
from scaffold.runtime.session import BACKLOG_QUEST


def test_a_hostile_agent_gets_nothing_and_the_run_completes(
    make_project: MakeProject, tmp_path: Path, monkeypatch
) -> None:
    # The scripted agent's state folder is writable for it already (Project.agent_env).
    evidence = Evidence(tmp_path / "hostile", writable=tmp_path / "agent-state" / "evidence")
    # What scaffold's own process holds: a credential in its environment and a key at home.
    monkeypatch.setenv("GITHUB_TOKEN", evidence.token)
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text(f"PRIVATE {evidence.token}\n")
    project = make_project(
        ["Hostile work", "Honest work"],
        [hostile_run(evidence, "TASK-1"), codeweaver_done("TASK-2")],
        {"approval": "manual", "slots": 2},
    )
    repo = project.repo
    main_before = project.git("rev-parse", "refs/heads/main").strip()
    readme = (repo / "README.md").read_text()
    forged_approval = inbox.make("approve", BACKLOG_QUEST, task_id="TASK-1", by="a person")
    state = repo / ".scaffold"
    with listening() as listener:
        evidence.write_plan(
            read=[
                str(home / ".ssh" / "id_ed25519"),
                str(state / "quests"),
                str(state / "runs"),
                str(state / "worktrees" / "task-2"),
            ],
            write=[
                str(repo / ".git" / "config"),
                str(repo / ".git" / "hooks"),
                str(state / "worktrees" / "task-2"),
                "/etc/hostname",
            ],
            forge={
                str(state / "inbox" / "99990101T000000000000-forged.json"): (
                    forged_approval.model_dump_json()
                ),
                str(state / "runs" / BACKLOG_QUEST / "TASK-2" / "signals" / "signal-9.json"): (
                    '{"forged": true}'
                ),
            },
            forbidden_cmdline=["bin/pytest"],
            loopback_port=listener.port,
            other_step="TASK-2",
        )
        result = project.run()
        assert listener.heard == []
    # The run went on: both tasks reached their pull request and wait for a person.
    assert result.exit_code == 3, result.output
    assert project.task("TASK-1").state.value == "PR_Created"
    assert project.task("TASK-2").state.value == "PR_Created"
    expect_all_blocked(
        evidence,
        must_include=[
            "read secrets in /proc",
            "plant hook pre-push",
            "git config core.fsmonitor",
            "git config filter.evil.clean",
            "git config url.",
            "forge a signal for another step",
            "connect to the host's 127.0.0.1",
            "inbox",
        ],
    )
    # Nothing planted ran, now or when scaffold committed and checked the work.
    assert evidence.markers_left() == []
    # main moved only by scaffold's own Backlog.md bookkeeping, never by the agent.
    authors = set(project.git("log", "--format=%an", f"{main_before}..main").split())
    assert authors <= {"scaffold"}
    touched = project.git("diff", "--name-only", main_before, "main").splitlines()
    assert all(path.startswith("backlog/") for path in touched), touched
    # The main checkout is out of reach (a write there lands in the sandbox's own /tmp).
    assert (repo / "README.md").read_text() == readme
    assert project.git("status", "--porcelain") == ""
    # The forged approval was never seen: still waiting, nothing merged.
    assert project.git("log", "--merges", "--oneline", "main") == ""
    # The daemon died with its sandbox.
    wait_until(lambda: evidence.daemons_alive() == [], 10, "the agent's daemon to be gone")
    # The agent's work was committed; no secret went into the branch.
    branch = project.git("ls-tree", "-r", "--name-only", "scaffold/task-1").split()
    assert "feature.txt" in branch
    assert git(repo, "grep", "-l", evidence.token, "scaffold/task-1", check=False) == ""
    # The config and hooks in the common git folder are as git made them.
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    assert not (repo / ".git" / "hooks" / "pre-push").exists()
    signals = project.task("TASK-2").signals
    assert "forged" not in [s.signal.get("summary") for s in signals]
