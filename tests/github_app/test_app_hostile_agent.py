"""A hostile agent under the real ``scaffold serve``: the key file, the state folder, the
clone's git config and hooks, the server's environment and the network are out of its
reach, and the quest still ends in a merged pull request."""

from __future__ import annotations

from pathlib import Path

from app_harness import (
    VALIDATORS,
    app_process,
    planned,
    repo_files,
    wait_for,
    write_script,
)

from ghsim import GitHubSimulator
from ghsim.fixture import WEBHOOK_SECRET
from sandboxing import Evidence, expect_all_blocked, hostile_run, listening

REPO = "acme/widgets"


def _pr_for(sim: GitHubSimulator, branch: str) -> object | None:
    return next((pr for pr in sim.repo(REPO).pulls.values() if pr.head == branch), None)


def test_a_hostile_agent_under_the_app_gets_nothing(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", repo_files())
    sim.set_permission(REPO, "alice", "write")
    sim.install("acme", ["widgets"])
    key = tmp_path / "keys" / "app.pem"
    key.parent.mkdir()
    key.write_bytes(sim.private_key_pem)
    key_line = sim.private_key_pem.decode().splitlines()[1]
    state = tmp_path / "state"
    clone = state / "repos" / REPO
    evidence = Evidence(tmp_path / "hostile", writable=tmp_path / "agent-state" / "evidence")
    write_script(
        tmp_path,
        [
            *planned(("a", "Write the notes", [])),
            hostile_run(evidence, "TASK-1"),
            *VALIDATORS,
        ],
    )
    with listening() as listener:
        evidence.write_plan(
            secrets=[key_line, WEBHOOK_SECRET],
            read=[
                str(key),
                str(state / "webhooks"),
                str(clone / ".scaffold" / "quests" / "issue-1" / "quest.json"),
                str(clone / ".scaffold" / "quests" / "issue-1" / "journal.jsonl"),
                str(clone / ".scaffold" / "inbox"),
                str(clone / ".scaffold" / "github"),
                str(clone / ".scaffold" / "runs"),
            ],
            write=[str(clone / ".git" / "config"), str(clone / ".git" / "hooks"), str(key)],
            forbidden_cmdline=["scaffold serve"],
            loopback_port=listener.port,
            other_step="TASK-2",
        )
        extra = {"SCAFFOLD_PRIVATE_KEY": "", "SCAFFOLD_PRIVATE_KEY_PATH": str(key)}
        with app_process(sim, tmp_path, extra_env=extra) as app:
            number = sim.open_issue(REPO, "Notes", "Write the notes.", by="alice")
            sim.label_issue(REPO, number, "scaffold", by="alice")
            pr = wait_for("the PR of task-1", lambda: _pr_for(sim, "scaffold/task-1"))
            sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
            wait_for("task-1 merged", lambda: sim.repo(REPO).pulls[pr.number].merged)
            metrics = app.get("/metrics")
        assert listener.heard == []
    assert 'scaffold_sandbox_repositories{mode="bwrap"} 1.0' in metrics
    assert "scaffold_sandbox_available 1.0" in metrics
    expect_all_blocked(
        evidence,
        must_include=[
            f"read {key}",
            "read secrets in /proc",
            "plant hook pre-push",
            "git config core.fsmonitor",
            "git config url.",
            "forge a signal for another step",
        ],
    )
    assert evidence.markers_left() == []
    assert key.read_bytes() == sim.private_key_pem
    merged = sim.repo(REPO)
    assert merged.file_at("main", "feature.txt") == b"the agent's honest work\n"
    files = merged.git("ls-tree", "-r", "--name-only", "main").splitlines()
    for path in files:
        text = (merged.file_at("main", path) or b"").decode(errors="replace")
        assert key_line not in text, path
        assert WEBHOOK_SECRET not in text, path
