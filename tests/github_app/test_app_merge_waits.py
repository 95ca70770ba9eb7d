"""A merge that waits looks again as soon as the forge changes, not when the run ends.

Three independent tasks under strict protection (a pull request must be up to date with
``main``): the first two open their pull requests while the third's agent is still at
work (held by a gate the test opens last). Both are approved; the first merges, which
puts the second behind ``main``. The App brings it up to date, DiagramChecks the new
head and, once that head is approved too, merges it, all while the third agent still
runs: the quest's run does not end in between, so nothing waits for its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    app_process,
    codeweaver,
    complete,
    planned,
    repo_files,
    wait_for,
    write_script,
)

from ghsim import GitHubSimulator

REPO = "acme/widgets"


def _setup(sim: GitHubSimulator) -> None:
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", repo_files({"slots": 3}))
    sim.set_permission(REPO, "alice", "write")
    sim.protect_branch(
        REPO, "main", required_checks=["scaffold/diagram-check"], required_approvals=1, strict=True
    )
    sim.install("acme", ["widgets"])


def _pr_for(sim: GitHubSimulator, branch: str) -> Any | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)


def test_a_waiting_merge_goes_on_while_another_task_still_runs(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    gate = tmp_path / "agent-state" / "go"
    write_script(
        tmp_path,
        [
            *planned(("a", "First", []), ("b", "Second", []), ("c", "Third", [])),
            codeweaver("task-1", {"notes/first.txt": "one\n"}),
            codeweaver("task-2", {"notes/second.txt": "two\n"}),
            {
                "role": "codeweaver",
                "step": "task-3",
                "actions": [
                    {"run": ["sh", "-c", f"while [ ! -e '{gate}' ]; do sleep 0.05; done"]},
                    {"write": "notes/third.txt", "content": "three\n"},
                    complete("task-3 built"),
                ],
            },
            *VALIDATORS,
        ],
    )
    with app_process(sim, tmp_path) as app:
        issue = sim.open_issue(REPO, "Three notes", "Write three notes.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        first = wait_for("the PR of task-1", lambda: _pr_for(sim, "scaffold/task-1"))
        second = wait_for("the PR of task-2", lambda: _pr_for(sim, "scaffold/task-2"))
        sim.submit_review(REPO, first.number, "APPROVED", by="alice")
        sim.submit_review(REPO, second.number, "APPROVED", by="alice")
        pulls = sim.repo(REPO).pulls
        merged = wait_for(
            "one of them merged",
            lambda: next((n for n in (first.number, second.number) if pulls[n].merged), None),
        )
        later = pulls[second.number if merged == first.number else first.number]
        approved_head = later.head_sha

        def moved() -> str | None:
            head = sim.repo(REPO).pulls[later.number].head_sha
            return head if head != approved_head else None

        # Behind main after the first merge: brought up to date while task-3 still runs.
        new_head = wait_for("the other PR brought up to date", moved)
        sim.submit_review(REPO, later.number, "APPROVED", by="alice")
        wait_for("the other PR merged", lambda: sim.repo(REPO).pulls[later.number].merged or None)
        assert not gate.exists()
        assert sim.repo(REPO).pulls[later.number].merge_commit_sha
        merged_head = sim.repo(REPO).pulls[later.number].head_sha
        assert merged_head == new_head
        # No run of the quest ended while the third agent was held.
        ended = [r for r in app.log_records() if r.get("msg") == "quest run ended"]
        assert ended == []

        gate.touch()
        third = wait_for("the PR of task-3", lambda: _pr_for(sim, "scaffold/task-3"))
        approved: set[str] = set()

        def merged_once_approved() -> bool | None:
            pr = sim.repo(REPO).pulls[third.number]
            if pr.merged:
                return True
            if pr.head_sha not in approved:  # brought up to date: the new head is approved
                approved.add(pr.head_sha)
                sim.submit_review(REPO, third.number, "APPROVED", by="alice")
            return None

        wait_for("task-3 merged", merged_once_approved)

    repo = sim.repo(REPO)
    for name, text in (("first", b"one\n"), ("second", b"two\n"), ("third", b"three\n")):
        assert repo.file_at("main", f"notes/{name}.txt") == text
