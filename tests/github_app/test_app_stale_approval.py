"""An approval holds for the commit it reviewed: once the head moves (a push, scaffold's own
conflict fix), the PR merges only after a writer approves the new head, and neither a late
delivery of the old approval nor reconciliation merges it meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    app_process,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    wait_for,
    write_script,
)
from app_settle import log_mark, reconciled, settle

from ghsim import GitHubSimulator

REPO = "acme/widgets"
RECONCILE_EVERY_S = {"SCAFFOLD_RECONCILE_INTERVAL_S": "1"}


def _setup(sim: GitHubSimulator, files: dict[str, str] | None = None) -> None:
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", {**repo_files(), **(files or {})})
    sim.set_permission(REPO, "alice", "write")
    sim.install("acme", ["widgets"])


def _weave(step: str, attempt: int, files: dict[str, str]) -> dict[str, object]:
    actions: list[dict[str, object]] = [{"write": p, "content": c} for p, c in files.items()]
    return {
        "role": "codeweaver",
        "step": step,
        "attempt": attempt,
        "actions": [*actions, complete(f"{step} built (run {attempt})")],
    }


def _planning(*tasks: tuple[str, str, list[str]]) -> list[dict[str, object]]:
    return [
        {
            "role": "chaoswhisperer",
            "actions": [planning_tool("requirements", requirements("Parts")), complete("ok")],
        },
        {"role": "pathseeker", "actions": [planning_tool("tasks", plan(*tasks)), complete("ok")]},
    ]


def _pr(sim: GitHubSimulator, branch: str) -> Any | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)


def _reviewed_at(sim: GitHubSimulator, number: int, sha: str) -> bool | None:
    marker = f"scaffold:review {sha}"
    reviews = sim.repo(REPO).reviews.values()
    return any(r.pr_number == number and marker in r.body for r in reviews) or None


def _approve_again(sim: GitHubSimulator, number: int, sha: str) -> list[str]:
    marker = f"scaffold:approve-again {sha}"
    return [
        c.body
        for c in sim.repo(REPO).comments.values()
        if c.issue_number == number and marker in c.body
    ]


def _merged_after(sim: GitHubSimulator, number: int, review_id: int) -> bool:
    """The PR's merge was delivered after the review ``review_id`` was."""
    order = [
        ("review", d.payload["review"]["id"])
        if d.event == "pull_request_review"
        else ("merged", d.payload["number"])
        for d in sim.deliveries
        if d.event == "pull_request_review"
        or (
            d.event == "pull_request"
            and d.action == "closed"
            and d.payload["pull_request"]["merged"]
        )
    ]
    return order.index(("merged", number)) > order.index(("review", review_id))


def test_an_approval_delivered_after_a_push_does_not_merge_the_new_head(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    write_script(
        tmp_path,
        [*_planning(("a", "The part", [])), _weave("task-1", 1, {"a.txt": "a\n"}), *VALIDATORS],
    )
    # No reconciliation here (it could read the approval before the push below; that the
    # pass does not reuse an approval of an earlier commit is the next test's).
    with app_process(sim, tmp_path) as app:
        issue = sim.open_issue(REPO, "Part", "Build the part.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        pr = wait_for("the PR", lambda: _pr(sim, "scaffold/task-1"))
        first = pr.head_sha
        wait_for("Lawbringer's review", lambda: _reviewed_at(sim, pr.number, first))

        # Alice approves the first head; before scaffold hears of it, a push moves the head.
        sim.hold_deliveries(True)
        sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
        late = sim.deliveries_of("pull_request_review", "submitted")[-1]
        second = sim.push_files(REPO, "scaffold/task-1", {"b.txt": "b\n"}, "alice", "more")
        sim.hold_deliveries(False)
        sim.redeliver(late.delivery_id)  # the approval of `first`, arriving now

        # Not merged: the approval is of `first`, the head is `second`; scaffold says so.
        wait_for(
            "the late approval acted on",
            lambda: (
                _approve_again(sim, pr.number, second) or sim.repo(REPO).pulls[pr.number].merged
            ),
        )
        assert not sim.repo(REPO).pulls[pr.number].merged
        assert _approve_again(sim, pr.number, second)
        assert sim.repo(REPO).branch_sha("scaffold/task-1") == second
        # Whatever wakes the quest meanwhile, the merge step finds no approval of `second`.
        settle(sim, app, REPO, issue)
        assert not sim.repo(REPO).pulls[pr.number].merged
        assert len(_approve_again(sim, pr.number, second)) == 1  # said once per head

        fresh = sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
        wait_for("merged after the fresh approval", lambda: sim.repo(REPO).pulls[pr.number].merged)

    assert _merged_after(sim, pr.number, fresh)
    assert sim.repo(REPO).file_at("main", "b.txt") == b"b\n"  # the head that was approved


def test_a_conflict_fix_needs_a_fresh_approval_reconciliation_included(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim, {"shared.txt": "zero\n"})
    write_script(
        tmp_path,
        [
            *_planning(("a", "Part one", []), ("b", "Part two", [])),
            _weave("task-1", 1, {"shared.txt": "one\n"}),
            _weave("task-2", 1, {"shared.txt": "two\n"}),
            # The conflict fix: the merge of main is in progress in the worktree.
            _weave("task-2", 2, {"shared.txt": "one\ntwo\n"}),
            *VALIDATORS,
        ],
    )
    with app_process(sim, tmp_path, extra_env=RECONCILE_EVERY_S) as app:
        issue = sim.open_issue(REPO, "Parts", "Build parts one and two.", by="alice")
        sim.label_issue(REPO, issue, "scaffold", by="alice")
        pr1 = wait_for("PR of task-1", lambda: _pr(sim, "scaffold/task-1"))
        pr2 = wait_for("PR of task-2", lambda: _pr(sim, "scaffold/task-2"))
        wait_for("task-2 reviewed", lambda: _reviewed_at(sim, pr2.number, pr2.head_sha))
        sim.submit_review(REPO, pr1.number, "APPROVED", by="alice")
        wait_for("task-1 merged", lambda: sim.repo(REPO).pulls[pr1.number].merged)

        # Approved, task-2 conflicts with main: Codeweaver fixes it and scaffold pushes it.
        sim.submit_review(REPO, pr2.number, "APPROVED", by="alice")
        fixed = wait_for(
            "the conflict fix pushed and reviewed",
            lambda: (
                pr2.head_sha
                if sim.repo(REPO).file_at(pr2.head_sha, "shared.txt") == b"one\ntwo\n"
                and _reviewed_at(sim, pr2.number, pr2.head_sha)
                else None
            ),
        )
        # The approval was of the code before the fix: reconciliation must not reuse it.
        reconciled(app, log_mark(app))
        assert not sim.repo(REPO).pulls[pr2.number].merged
        settle(sim, app, REPO, issue)
        assert not sim.repo(REPO).pulls[pr2.number].merged
        assert sim.repo(REPO).branch_sha("scaffold/task-2") == fixed

        fresh = sim.submit_review(REPO, pr2.number, "APPROVED", by="alice")
        wait_for("task-2 merged", lambda: sim.repo(REPO).pulls[pr2.number].merged)

    assert _merged_after(sim, pr2.number, fresh)
    assert sim.repo(REPO).file_at("main", "shared.txt") == b"one\ntwo\n"
