"""The quest lives in the repository: ``kill -9``, then ``.scaffold/`` deleted entirely,
and ``scaffold run`` carries on from the state branch alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

from repo_builder import (
    MakeProject,
    codeweaver_done,
    complete,
    wait_until,
    write,
)

from harness import git, plan, relay_call, requirements, scaffold_cli, signal_action
from scaffold.quest.model import QuestPhase
from scaffold.state.branch import StateBranch

ANSWER = "English please"


RUNS = [
    {
        "role": "chaoswhisperer",
        "attempt": 1,
        "actions": [
            signal_action(
                {
                    "signal": "needs-user-input",
                    "question": "Which language?",
                    "context": "The request does not say.",
                }
            )
        ],
    },
    {
        "role": "chaoswhisperer",
        "attempt": 2,
        "actions": [
            {"expect_prompt_contains": ANSWER},
            relay_call("write-requirements", requirements("A greeting and a farewell")),
            complete("requirements written"),
        ],
    },
    {
        "role": "pathseeker",
        "actions": [
            relay_call(
                "create-tasks",
                plan(("a", "Write the greeting", []), ("b", "Write the farewell", [])),
            ),
            complete("two tasks"),
        ],
    },
    {
        "role": "codeweaver",
        "step": "TASK-1",
        "actions": [write("notes/greeting.txt", "hello\n"), complete("greeting")],
    },
    # TASK-2's first run is still working when scaffold is killed.
    {
        "role": "codeweaver",
        "step": "TASK-2",
        "attempt": 1,
        "actions": [{"sleep": 60}, complete("never reached")],
    },
    {
        "role": "codeweaver",
        "step": "TASK-2",
        "attempt": 2,
        "actions": [write("notes/farewell.txt", "goodbye\n"), complete("farewell")],
    },
]


def test_kill_9_then_no_scaffold_folder_resumes_from_the_state_branch(
    make_project: MakeProject,
) -> None:
    project = make_project([], RUNS, {"slots": 2, "state": {"interval_s": 1}})
    asked = project.cli("quest", "Greet and say goodbye")
    assert asked.returncode == 3, asked.stdout + asked.stderr
    answered = project.cli("answer", "q-plan-1", ANSWER)
    assert answered.returncode == 0, answered.stderr
    branch = StateBranch(project.repo)

    def task_1_merged_on_the_branch() -> bool:
        doc = branch.read().get("quest-1")
        return (
            doc is not None
            and doc.quest.tasks.get("TASK-1", None) is not None
            and (doc.quest.tasks["TASK-1"].outcome == "merged")
        )

    run = project.cli_popen("run")
    try:
        wait_until(task_1_merged_on_the_branch, 90, "TASK-1 merged on the state branch")
        wait_until(
            lambda: len(project.invocations(step="TASK-2", role="codeweaver")) == 1,
            60,
            "TASK-2's agent to start",
        )
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    wait_until(lambda: project.live_agents("quest-1") == [], 30, "the agents to die")
    shutil.rmtree(project.repo / ".scaffold")

    # Any clone that has the branch can say where the quest is, before any run.
    status = project.status_json()
    [quest] = [q for q in status["quests"] if q["id"] == "quest-1"]
    assert quest["phase"] == "executing"

    result = project.cli("run", timeout=180)

    assert result.returncode == 0, result.stdout + result.stderr
    assert project.merges_of(1) == 1, project.merge_subjects()
    assert project.merges_of(2) == 1, project.merge_subjects()
    assert len(project.merge_subjects()) == 2
    for n in (1, 2):
        assert project.backlog_task(f"TASK-{n}").status == "Done"
    # Nothing asked twice, nothing planned twice; the answer was kept.
    assert len(project.invocations(role="chaoswhisperer")) == 2
    assert len(project.invocations(role="pathseeker")) == 1
    assert len(project.invocations(step="TASK-1", role="codeweaver")) == 1
    done = project.quest("quest-1")
    assert done.phase is QuestPhase.DONE
    assert done.questions["q-plan-1"].answer == ANSWER
    assert project.scaffold_branches() == []
    assert project.worktrees() == [str(project.repo)]

    # The branch holds the finished quest, and its log reads as the quest's story.
    files = project.git("ls-tree", "-r", "--name-only", "scaffold/state").split()
    assert files == ["quests/done/quest-1.json"]
    story = project.git("log", "--format=%s", "scaffold/state").splitlines()
    assert "scaffold: quest-1: asks q-plan-1" in story
    assert any("merged TASK-1" in s for s in story)
    # The last merge may share the final commit ("done; merged TASK-2").
    assert story[0].startswith("scaffold: quest-1: done")
    assert any("merged TASK-2" in s for s in story)

    doctor = project.cli("doctor")
    assert "ok   state: scaffold/state (local): 1 quest(s), open: -" in doctor.stdout, doctor.stdout

    shown = project.cli("quest", "show", "quest-1")
    assert shown.returncode == 0, shown.stderr
    for needed in ("Greet and say goodbye", "done", "TASK-1", "TASK-2", "q-plan-1", ANSWER):
        assert needed in shown.stdout, shown.stdout
    assert "merged TASK-1" in shown.stdout

    # A fresh clone that fetched the branch tells the same story, with no .scaffold/ at all.
    clone = project.root / "clone"
    git(project.root, "clone", "-q", str(project.repo), str(clone))
    env = {**os.environ, **project.agent_env}
    status = scaffold_cli(clone, ("status", "--json"), env)
    assert status.returncode == 0, status.stderr
    [seen] = [q for q in json.loads(status.stdout)["quests"] if q["id"] == "quest-1"]
    assert seen["phase"] == "done"
    told = scaffold_cli(clone, ("quest", "show", "quest-1"), env)
    assert told.returncode == 0, told.stderr
    assert "merged TASK-2" in told.stdout
    assert not (clone / ".scaffold").exists()


def _asking_quest(title: str, answer: str) -> list[dict[str, object]]:
    """A quest that asks one question, then plans one task of its own."""
    return [
        {
            "role": "chaoswhisperer",
            "prompt_contains": f"Add the {title}",
            "resumed": False,
            "actions": [
                signal_action(
                    {"signal": "needs-user-input", "question": f"{title}?", "context": "-"}
                )
            ],
        },
        {
            "role": "chaoswhisperer",
            "prompt_contains": answer,
            "actions": [
                relay_call("write-requirements", requirements("A greeting and a farewell")),
                complete("requirements"),
            ],
        },
        {
            "role": "pathseeker",
            "prompt_contains": f"Add the {title}",
            "actions": [
                relay_call("create-tasks", plan(("a", f"Write the {title}", []))),
                complete("planned"),
            ],
        },
        {
            "role": "codeweaver",
            "prompt_contains": f"Write the {title}",
            "actions": [write(f"notes/{title}.txt", f"{title}\n"), complete(title)],
        },
    ]


def test_one_run_drives_every_open_quest_at_once(make_project: MakeProject) -> None:
    """Two quests waiting on answers: both answered, one `scaffold run` finishes both,
    each with the task its own PathSeeker planned."""
    project = make_project(
        [],
        [*_asking_quest("greeting", "Say hello"), *_asking_quest("farewell", "Say goodbye")],
        {"slots": 2},
    )
    for title in ("greeting", "farewell"):
        asked = project.cli("quest", f"Add the {title}")
        assert asked.returncode == 3, asked.stdout + asked.stderr
    # q-plan-1 is asked by both quests: the id alone is ambiguous, --quest says which.
    ambiguous = project.cli("answer", "q-plan-1", "Say hello")
    assert ambiguous.returncode == 2
    assert "pending in quest-1 and quest-2" in ambiguous.stderr
    for qid, text in (("quest-1", "Say hello"), ("quest-2", "Say goodbye")):
        answered = project.cli("answer", "--quest", qid, "q-plan-1", text)
        assert answered.returncode == 0, answered.stderr

    result = project.cli("run", timeout=180)

    assert "running 2 quests at once: quest-1, quest-2" in result.stdout, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr
    for qid, title in (("quest-1", "greeting"), ("quest-2", "farewell")):
        quest = project.quest(qid)
        assert quest.phase is QuestPhase.DONE
        [task] = quest.tasks.values()
        assert task.title == f"Write the {title}"
        assert task.outcome == "merged"
        assert f"quest:{qid}" in project.backlog_task(task.id).labels
    assert len(project.merge_subjects()) == 2


def _commit_by_hand(repo: Path, folder: str, name: str, data: str) -> str:
    """A commit holding ``folder/name`` only, made without scaffold (as a person could)."""
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=data).strip()
    inner = git(repo, "mktree", stdin=f"100644 blob {blob}\t{name}\n").strip()
    root = git(repo, "mktree", stdin=f"040000 tree {inner}\t{folder}\n").strip()
    return git(repo, "commit-tree", root, "-m", "hand-made").strip()


def test_a_broken_file_on_the_state_branch_is_reported_and_kept(
    make_project: MakeProject,
) -> None:
    """Someone pushed a quest file that does not parse: status names it, runs go on, and
    scaffold never drops or rewrites a file it does not understand."""
    project = make_project(["Add the greeting"], [codeweaver_done("TASK-1")])
    broken = '{"format": 1, "quest": {"id": "quest-9", "tasks": "oops"}}'
    commit = _commit_by_hand(project.repo, "quests", "quest-9.json", broken)
    project.git("update-ref", "refs/heads/scaffold/state", commit)

    status = project.status_json()
    [problem] = [e for e in status["errors"] if "quest-9" in e["path"]]
    assert problem["path"] == "scaffold/state:quests/quest-9.json"
    assert "tasks" in problem["reason"]

    result = project.cli("run")

    assert result.returncode == 0, result.stdout + result.stderr
    files = project.git("ls-tree", "-r", "--name-only", "scaffold/state").split()
    assert files == ["quests/backlog.json", "quests/quest-9.json"]
    kept = project.git("show", "scaffold/state:quests/quest-9.json")
    assert kept == '{"format": 1, "quest": {"id": "quest-9", "tasks": "oops"}}'


def test_quest_show_says_what_is_wrong(make_project: MakeProject) -> None:
    project = make_project(["Nothing"], [])
    for args, says in (
        (("quest", "show"), "which quest? scaffold quest show QUEST_ID"),
        (("quest", "show", "quest-7"), "no quest 'quest-7' here or on scaffold/state"),
        (("quest", "show", "../x"), "invalid quest id"),
        (("quest", "add", "a", "parser"), 'quote the request: scaffold quest "what you want"'),
    ):
        proc = project.cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert says in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert project.git("branch", "--list", "scaffold/state") == ""  # nothing was started
