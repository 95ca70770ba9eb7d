"""The App with people in the loop: several questions, commands, a rejected PR, bots
and readers who are not obeyed, the label removed, and what agents can see."""

from __future__ import annotations

import json
from pathlib import Path

from app_harness import (
    PYTHON,
    VALIDATORS,
    app_process,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    signal,
    wait_for,
    write_script,
)

from ghsim import GitHubSimulator

REPO = "acme/widgets"

_DUMP_ENV = (
    "import json, os, sys; open(sys.argv[1], 'a').write(json.dumps(dict(os.environ)) + '\\n')"
)


def _setup(sim: GitHubSimulator, ward_log: Path) -> None:
    for login in ("alice", "mallory"):
        sim.add_user(login)
    sim.add_user("helper-bot", type="Bot")
    ward = [[PYTHON, "-c", _DUMP_ENV, str(ward_log)]]
    sim.create_repo("acme", "widgets", repo_files({"ward": ward}))
    sim.set_permission(REPO, "alice", "admin")
    sim.set_permission(REPO, "mallory", "read")
    sim.set_permission(REPO, "helper-bot", "write")
    sim.install("acme", ["widgets"])


def _ask(step: str, question: str, env_log: Path) -> dict[str, object]:
    return {
        "role": "codeweaver",
        "step": step,
        "attempt": 1,
        "actions": [
            {"run": [PYTHON, "-c", _DUMP_ENV, str(env_log)]},
            signal({"signal": "needs-user-input", "question": question, "context": "unclear"}),
        ],
    }


def _build(step: str, expect: str, path: str) -> dict[str, object]:
    return {
        "role": "codeweaver",
        "step": step,
        "attempt": 2,
        "actions": [
            {"expect_prompt_contains": expect},
            {"write": path, "content": f"{expect}\n"},
            complete(f"{step} built"),
        ],
    }


def _comments(sim: GitHubSimulator) -> list[str]:
    return [c.body for c in sim.repo(REPO).comments.values()]


def test_questions_commands_rejection_and_abort(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    # In the scripted agents' state folder: the one place outside their worktrees
    # that their sandbox (and Ward's) lets them write.
    (tmp_path / "agent-state").mkdir()
    env_log = tmp_path / "agent-state" / "agent-env.jsonl"
    ward_log = tmp_path / "agent-state" / "ward-env.jsonl"
    _setup(sim, ward_log)
    write_script(
        tmp_path,
        [
            {
                "role": "chaoswhisperer",
                "actions": [
                    planning_tool("requirements", requirements("Two widgets exist")),
                    complete("requirements written"),
                ],
            },
            {
                "role": "pathseeker",
                "actions": [
                    planning_tool("tasks", plan(("a", "Red widget", []), ("b", "Blue widget", []))),
                    complete("planned"),
                ],
            },
            _ask("task-1", "How red?", env_log),
            _ask("task-2", "How blue?", env_log),
            _build("task-1", "crimson", "red.txt"),
            _build("task-2", "navy", "blue.txt"),
            *VALIDATORS,
        ],
    )
    with app_process(sim, tmp_path) as app:
        number = sim.open_issue(REPO, "Widgets", "Make a red and a blue widget.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="helper-bot")  # a bot: ignored
        sim.unlabel_issue(REPO, number, "scaffold", by="helper-bot")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        wait_for(
            "two question comments",
            lambda: sum("scaffold:question" in b for b in _comments(sim)) == 2 or None,
        )
        sim.comment(REPO, number, "dark, I guess", by="alice")  # which question? ambiguous
        wait_for(
            "a comment explaining the ambiguity",
            lambda: any("Several questions are open" in b for b in _comments(sim)) or None,
        )
        sim.comment(REPO, number, "/answer q-9-9 whatever", by="alice")  # no such question
        sim.comment(REPO, number, "/answer q-1-1 crimson", by="mallory")  # not a writer
        sim.comment(REPO, number, "/answer q-1-1 crimson", by="alice")
        sim.comment(REPO, number, "q-2-1: navy", by="alice")
        pr1 = wait_for("PR of task-1", lambda: _pr(sim, "scaffold/task-1"))
        pr2 = wait_for("PR of task-2", lambda: _pr(sim, "scaffold/task-2"))

        sim.comment(REPO, number, "/scaffold abort", by="mallory")  # not a writer: ignored
        sim.comment(REPO, number, "/scaffold retry task-9", by="alice")
        wait_for(
            "the unknown-task notice",
            lambda: any("no task `TASK-9`" in b for b in _comments(sim)) or None,
        )
        sim.submit_review(REPO, pr2.number, "APPROVED", by="helper-bot")  # a bot's approval
        sim.close_pr(REPO, pr1.number, by="alice")  # rejected: back to To Do
        sim.submit_review(REPO, pr2.number, "APPROVED", by="alice")
        wait_for("task-2 merged", lambda: sim.repo(REPO).pulls[pr2.number].merged)

        def status(text: str) -> str | None:
            for body in _comments(sim):
                if "scaffold:status" in body and text in body:
                    return body
            return None

        wait_for("task-1 shown as rejected", lambda: status("PR closed, back in To Do"))
        sim.unlabel_issue(REPO, number, "scaffold", by="alice")
        # A stop lets a merge under way finish (Merging is not abortable): the stopped
        # quest's status shows task-2 merged once its merge is recorded.
        wait_for(
            "the stopped quest, task-2 merged",
            lambda: (
                (b := status("Stopped: label removed by alice")) is not None and "✅ merged" in b
            ),
        )

    assert not sim.repo(REPO).pulls[pr1.number].merged
    assert sim.repo(REPO).file_at("main", "blue.txt") == b"navy\n"
    assert sim.repo(REPO).file_at("main", "red.txt") is None
    comments = _comments(sim)
    assert any("`q-9-9` is not an open question" in b for b in comments)
    # Each agent saw its own answer and never the other's, the reader's or the bot's.
    invocations = (tmp_path / "agent-state" / "invocations.jsonl").read_text()
    assert "crimson" in invocations
    assert "navy" in invocations
    # No credential of any kind reached an agent's environment.
    lines = env_log.read_text().splitlines() + ward_log.read_text().splitlines()
    assert len(lines) >= 4  # two agents, and Ward at least twice
    for line in lines:
        env = json.loads(line)
        leaked = [
            k for k in env if "PRIVATE_KEY" in k or "WEBHOOK_SECRET" in k or k == "SCAFFOLD_APP_ID"
        ]
        assert not leaked
        assert not any(str(v).startswith("ghs_") or "BEGIN" in str(v) for v in env.values())
    # The task whose PR was closed is To Do again in the App's clone, with a note.
    clone = app.state / "repos" / REPO
    task1 = next((clone / "backlog" / "tasks").glob("task-1 *.md")).read_text()
    assert "status: To Do" in task1
    assert "Pull request closed without merging" in task1


def _pr(sim: GitHubSimulator, branch: str) -> object | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)
