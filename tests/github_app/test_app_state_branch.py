"""The quest file lives in the repository: the App pushes it to the state branch, and a
new server with an empty state folder (no clone, no quest store, no links) carries the
quest on from the repository alone."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from app_harness import (
    VALIDATORS,
    agent_env,
    app_process,
    asks_then_plans,
    codeweaver,
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
QUESTION = "Which language should the greeting use?"


def _setup(sim: GitHubSimulator) -> None:
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", repo_files())
    sim.set_permission(REPO, "alice", "write")
    # The default branch is protected; the state branch is pushed all the same.
    sim.protect_branch(
        REPO, "main", required_checks=["scaffold/diagram-check"], required_approvals=1
    )
    sim.install("acme", ["widgets"])


def _state(sim: GitHubSimulator, quest_id: str) -> dict[str, Any] | None:
    repo = sim.repo(REPO)
    for path in (f"quests/{quest_id}.json", f"quests/done/{quest_id}.json"):
        data = repo.file_at("scaffold/state", path)
        if data is not None:
            doc: dict[str, Any] = json.loads(data)
            return doc
    return None


def _pr_for(sim: GitHubSimulator, branch: str) -> Any:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)


def test_a_new_server_with_an_empty_state_folder_finishes_the_quest(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _setup(sim)
    write_script(
        tmp_path,
        [
            *asks_then_plans(
                QUESTION,
                "English please",
                ("a", "Write the greeting", []),
                ("b", "Write the farewell", []),
            ),
            codeweaver("task-1", {"notes/greeting.txt": "hello\n"}),
            codeweaver("task-2", {"notes/farewell.txt": "goodbye\n"}),
            *VALIDATORS,
        ],
    )
    first = tmp_path / "first-state"
    with app_process(sim, tmp_path / "first", state=first, extra_env=agent_env(tmp_path)):
        number = sim.open_issue(REPO, "Greetings", "A greeting and a farewell.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        wait_for(
            "the question on the state branch",
            lambda: (_state(sim, "issue-1") or {}).get("quest", {}).get("questions") or None,
        )
        sim.comment(REPO, number, "English please", by="alice")
        prs = [
            wait_for(f"the PR of task-{n}", lambda n=n: _pr_for(sim, f"scaffold/task-{n}"))
            for n in (1, 2)
        ]

        def both_wait_for_approval() -> bool | None:
            doc = _state(sim, "issue-1") or {}
            tasks = doc.get("quest", {}).get("tasks", {})
            states = {t.get("state") for t in tasks.values()}
            return (len(tasks) == 2 and states <= {"PR_Created", "Merging"}) or None

        wait_for("both tasks waiting for approval on the branch", both_wait_for_approval)

    # The server's disk is gone: clone, quest store, links, delivery records.
    shutil.rmtree(first)
    second = tmp_path / "second-state"
    # The new server's look for each task's open pull request is slow: task-2's approval
    # comes while it may have no record of task-2's PR yet (lost with the disk when the
    # first server stopped before publishing it). That delivery then finds no task; the
    # approval is read back from GitHub when the PR is found.
    sim.inject("GET", r"/widgets/pulls$", status=0, delay_s=5, times=2)
    with app_process(sim, tmp_path / "second", state=second, extra_env=agent_env(tmp_path)):
        pr1, pr2 = prs
        sim.submit_review(REPO, pr2.number, "APPROVED", by="alice")
        sim.submit_review(REPO, pr1.number, "APPROVED", by="alice")

        # Both are approved at once: either may merge first. The other is then behind its
        # protected base: it is brought up to date first, and an approval holds for the
        # head it reviewed: approved again, merged.
        def merged(pr: Any) -> bool:
            return bool(sim.repo(REPO).pulls[pr.number].merged)

        first = wait_for("one of the two merged", lambda: next(filter(merged, prs), None))
        other = pr2 if first is pr1 else pr1

        def merged_or_asked_again() -> str | None:
            if merged(other):
                return "merged"
            asked = any(
                c.issue_number == other.number and "scaffold:approve-again" in c.body
                for c in sim.repo(REPO).comments.values()
            )
            return "asked" if asked else None

        if wait_for("the other merged or brought up to date", merged_or_asked_again) == "asked":
            sim.submit_review(REPO, other.number, "APPROVED", by="alice")
        wait_for("the other merged", lambda: merged(other))
        done = wait_for(
            "the finished quest on the branch",
            lambda: (d := _state(sim, "issue-1")) and d["quest"]["phase"] == "done" and d,
        )

    repo = sim.repo(REPO)
    assert repo.file_at("main", "notes/greeting.txt") == b"hello\n"
    assert repo.file_at("main", "notes/farewell.txt") == b"goodbye\n"
    assert repo.file_at("scaffold/state", "quests/issue-1.json") is None  # moved to done/
    # Nothing done twice: one question asked, one plan, one agent run per task, one PR
    # each, one status comment (the new server edits the one the first made).
    comments = list(repo.comments.values())
    assert sum(QUESTION in c.body for c in comments) == 1
    assert sum("scaffold:status" in c.body for c in comments) == 1
    assert len(repo.pulls) == 2
    rows = [
        json.loads(line)
        for line in (tmp_path / "agent-state" / "invocations.jsonl").read_text().splitlines()
    ]
    roles = [r["role"] for r in rows]
    assert roles.count("chaoswhisperer") == 2
    assert roles.count("pathseeker") == 1
    assert roles.count("codeweaver") == 2
    # The answer and who gave it, the link to the issue, and a bounded history.
    quest = done["quest"]
    assert quest["questions"]["q-plan-1"]["answer"] == "English please"
    assert quest["questions"]["q-plan-1"]["answered_by"] == "alice"
    assert done["link"]["issue_number"] == number
    assert {t["outcome"] for t in quest["tasks"].values()} == {"merged"}
    assert done["history"]["recent"]
    story = repo.git("log", "--format=%s", "scaffold/state").splitlines()
    assert any("asks q-plan-1" in s for s in story)
    assert any("merged TASK-1" in s for s in story)


MEET = """
import pathlib, sys, time
meet, me = pathlib.Path(sys.argv[1]), sys.argv[2]
meet.mkdir(parents=True, exist_ok=True)
(meet / me).write_text("here")
deadline = time.monotonic() + 60
while time.monotonic() < deadline and len(list(meet.iterdir())) < 2:
    time.sleep(0.1)
pathlib.Path("met.txt").write_text("met\\n" if len(list(meet.iterdir())) >= 2 else "alone\\n")
"""


def _quest_runs(title: str, meet: Path) -> list[dict[str, Any]]:
    """Planning and one task for the issue called ``title``; its Codeweaver waits (up to
    a minute) for the other quest's Codeweaver to be working at the same time."""
    return [
        {
            "role": "chaoswhisperer",
            "prompt_contains": title,
            "actions": [planning_tool("requirements", requirements(title)), complete("ok")],
        },
        {
            "role": "pathseeker",
            "prompt_contains": title,
            "actions": [
                planning_tool("tasks", plan(("a", f"Write the {title}", []))),
                complete("ok"),
            ],
        },
        {
            "role": "codeweaver",
            "prompt_contains": f"Write the {title}",
            "actions": [
                {"run": [sys.executable, "-c", MEET, str(meet), title]},
                complete(f"{title} written"),
            ],
        },
    ]


def test_two_quests_of_one_repository_run_at_the_same_time(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    sim.add_user("alice")
    # Without the sandbox the two agents can meet in a folder outside their worktrees.
    files = repo_files({"slots": 2, "sandbox": {"mode": "off"}})
    sim.create_repo("acme", "widgets", files)
    sim.set_permission(REPO, "alice", "write")
    sim.install("acme", ["widgets"])
    meet = tmp_path / "meet"
    write_script(
        tmp_path,
        [*_quest_runs("greeting", meet), *_quest_runs("farewell", meet), *VALIDATORS],
    )
    with app_process(sim, tmp_path / "app", extra_env=agent_env(tmp_path)):
        for title in ("greeting", "farewell"):
            number = sim.open_issue(REPO, title, f"Add the {title}.", by="alice")
            sim.label_issue(REPO, number, "scaffold", by="alice")
        prs = [
            wait_for(f"the PR of task-{n}", lambda n=n: _pr_for(sim, f"scaffold/task-{n}"))
            for n in (1, 2)
        ]
        for pr in prs:
            # each quest owns its own task: one per quest, labelled with its quest
            assert sim.repo(REPO).file_at(pr.head, "met.txt") == b"met\n"
        on_branch = {
            q: wait_for(f"{q} on the state branch", lambda q=q: (_state(sim, q) or {}).get("quest"))
            for q in ("issue-1", "issue-2")
        }
    owned = {q: sorted(doc["tasks"]) for q, doc in on_branch.items()}
    assert sorted(owned.values()) == [["TASK-1"], ["TASK-2"]]
