"""The App when things go wrong: a PR that conflicts after another merged, one that is
behind its protected base (brought up to date, then approved again: an approval holds
for the commit it reviewed), GitHub failing and rate limiting, a restart of the server,
and a delivery that never arrives (reconciliation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    agent_env,
    app_process,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    wait_for,
    write_script,
)

from ghsim import GitHubSimulator

REPO = "acme/widgets"


def _weave(step: str, attempt: int, files: dict[str, str]) -> dict[str, object]:
    actions: list[dict[str, object]] = [{"write": p, "content": c} for p, c in files.items()]
    return {
        "role": "codeweaver",
        "step": step,
        "attempt": attempt,
        "actions": [*actions, complete(f"{step} built (run {attempt})")],
    }


def _pr(sim: GitHubSimulator, branch: str) -> object | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)


def _merged(sim: GitHubSimulator, number: int) -> bool | None:
    return sim.repo(REPO).pulls[number].merged or None


def _approve_again(sim: GitHubSimulator, pr: Any) -> bool | None:
    """scaffold's notice that the PR's head as it is now needs a fresh approval."""
    marker = f"scaffold:approve-again {pr.head_sha}"
    comments = sim.repo(REPO).comments.values()
    return any(c.issue_number == pr.number and marker in c.body for c in comments) or None


def test_conflict_behind_faults_restart_and_a_lost_delivery(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", {**repo_files(), "shared.txt": "zero\n"})
    sim.set_permission(REPO, "alice", "write")
    sim.protect_branch(
        REPO, "main", required_checks=["scaffold/diagram-check"], required_approvals=1
    )
    sim.install("acme", ["widgets"])
    write_script(
        tmp_path,
        [
            {
                "role": "chaoswhisperer",
                "actions": [
                    planning_tool("requirements", requirements("Three parts")),
                    complete("ok"),
                ],
            },
            {
                "role": "pathseeker",
                "actions": [
                    planning_tool(
                        "tasks",
                        plan(("a", "Part one", []), ("b", "Part two", []), ("c", "Part three", [])),
                    ),
                    complete("planned"),
                ],
            },
            _weave("task-1", 1, {"shared.txt": "one\n", "a.txt": "a\n"}),
            _weave("task-2", 1, {"shared.txt": "two\n", "b.txt": "b\n"}),
            # The conflict fix: the merge of main is in progress in the worktree.
            _weave("task-2", 2, {"shared.txt": "one\ntwo\n"}),
            _weave("task-3", 1, {"c.txt": "c\n"}),
            *VALIDATORS,
        ],
    )
    state = tmp_path / "state"
    # GitHub hiccups while the first PRs are opened: a 502, then a secondary rate limit.
    sim.inject("POST", r"/repos/acme/widgets/pulls$", status=502, times=1)
    sim.inject(
        "POST",
        r"/repos/acme/widgets/issues/\d+/comments$",
        status=429,
        headers={"Retry-After": "1"},
        body={"message": "You have exceeded a secondary rate limit."},
        times=1,
    )
    with app_process(sim, tmp_path / "first", state=state, extra_env=agent_env(tmp_path)):
        number = sim.open_issue(REPO, "Three parts", "Build parts one to three.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        prs = {
            n: wait_for(f"PR of task-{n}", lambda n=n: _pr(sim, f"scaffold/task-{n}"))
            for n in (1, 2, 3)
        }
    assert sim.injected_hits >= 2
    # A restart: the new server picks the quest up from its state directory.
    with app_process(sim, tmp_path / "second", state=state, extra_env=agent_env(tmp_path)):
        sim.submit_review(REPO, prs[1].number, "APPROVED", by="alice")
        wait_for("task-1 merged", lambda: _merged(sim, prs[1].number))
        # task-2 now conflicts with main: back to Codeweaver, pushed again, re-approved.
        sim.submit_review(REPO, prs[2].number, "APPROVED", by="alice")
        wait_for(
            "task-2's conflict resolved and pushed",
            lambda: (
                (sim.repo(REPO).file_at("scaffold/task-2", "shared.txt") == b"one\ntwo\n") or None
            ),
        )
        sim.submit_review(REPO, prs[2].number, "APPROVED", by="alice")
        wait_for("task-2 merged", lambda: _merged(sim, prs[2].number))
    # task-3 is behind main now; its approval is lost (GitHub does not retry).
    sim.hold_deliveries(True)
    sim.submit_review(REPO, prs[3].number, "APPROVED", by="alice")
    sim.hold_deliveries(False)
    env = {**agent_env(tmp_path), "SCAFFOLD_RECONCILE_INTERVAL_S": "1"}
    with app_process(sim, tmp_path / "third", state=state, extra_env=env):
        # Reconciliation finds the approval; merging first brings the branch up to date,
        # which moves its head. An approval holds for the commit it reviewed: scaffold asks
        # for a fresh one, and merges once it is given.
        wait_for("the approve-again notice", lambda: _approve_again(sim, prs[3]))
        sim.submit_review(REPO, prs[3].number, "APPROVED", by="alice")
        wait_for("task-3 merged", lambda: _merged(sim, prs[3].number))

    repo = sim.repo(REPO)
    assert repo.file_at("main", "shared.txt") == b"one\ntwo\n"
    for name in ("a.txt", "b.txt", "c.txt"):
        assert repo.file_at("main", name) is not None
    # Nothing was done twice: one PR per task, one status comment.
    assert len(repo.pulls) == 3
    assert sum("scaffold:status" in c.body for c in repo.comments.values()) == 1
