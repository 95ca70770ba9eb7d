"""The App starts no agent without a working sandbox, and says so on the issue, unless the
repository's config turns the sandbox off in writing."""

from __future__ import annotations

from pathlib import Path

from app_harness import (
    VALIDATORS,
    agent_env,
    app_process,
    codeweaver,
    planned,
    repo_files,
    wait_for,
    write_script,
)

from ghsim import GitHubSimulator

REPO = "acme/widgets"


def _script() -> list[dict[str, object]]:
    return [
        *planned(("a", "Notes", [])),
        codeweaver("task-1", {"notes.txt": "n\n"}),
        *VALIDATORS,
    ]


def _comment(sim: GitHubSimulator, text: str) -> str | None:
    return next((c.body for c in sim.repo(REPO).comments.values() if text in c.body), None)


def test_no_sandbox_no_agents_unless_off_is_written(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", repo_files())
    sim.set_permission(REPO, "alice", "write")
    sim.install("acme", ["widgets"])
    write_script(tmp_path, _script())
    # A bubblewrap that cannot make namespaces; the agents' script where each server looks.
    broken = {"SCAFFOLD_BWRAP": "/bin/false", **agent_env(tmp_path)}
    with app_process(sim, tmp_path / "one", extra_env=broken) as app:
        number = sim.open_issue(REPO, "Notes", "Write notes.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        said = wait_for("the refusal on the issue", lambda: _comment(sim, "cannot start agents"))
        assert "sandbox: {mode: off}" in said
        metrics = app.get("/metrics")
    assert 'scaffold_sandbox_repositories{mode="refused"} 1.0' in metrics
    assert "scaffold_sandbox_available 0.0" in metrics
    assert not (tmp_path / "agent-state" / "invocations.jsonl").exists()  # no agent ran

    # Written out in the repository's config: the same quest goes on after a restart.
    config = repo_files({"sandbox": {"mode": "off"}})[".github/scaffold.yml"]
    sim.push_files(REPO, "main", {".github/scaffold.yml": config}, by="alice", message="off")
    state = tmp_path / "one" / "state"
    with app_process(sim, tmp_path / "two", extra_env=broken, state=state) as app:
        wait_for("the PR, without a sandbox as written", lambda: _pr(sim, "scaffold/task-1"))
        assert 'scaffold_sandbox_repositories{mode="off"} 1.0' in app.get("/metrics")


def _pr(sim: GitHubSimulator, branch: str) -> object | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)
