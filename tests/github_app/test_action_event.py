"""The Action's ``event`` mode: scaffold without a server. Each event is one workflow run
(``scaffold action event``) with the workflow's token, sharing a state folder the way
the composite action keeps it in the Actions cache; a scheduled run reconciles."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from app_harness import (
    PYTHON,
    VALIDATORS,
    codeweaver,
    complete,
    plan,
    planned,
    planning_tool,
    repo_files,
    requirements,
    write_script,
    writer_repo,
)

from ghsim import DeliveryRecord, GitHubSimulator
from sandboxing import Evidence, expect_all_blocked, hostile_run, listening
from scaffold.demo.scripted import agent_env as scripted_agent_env

REPO = "acme/widgets"


class Workflow:
    """Runs `scaffold action event` like a GitHub Actions job would, one event at a time."""

    def __init__(self, sim: GitHubSimulator, root: Path) -> None:
        self.sim = sim
        self.root = root
        self.state = root / "state"
        self.runs = 0

    def run(self, event: str, payload: dict[str, object]) -> dict[str, object]:
        self.runs += 1
        work = self.root / f"run-{self.runs}"
        work.mkdir(parents=True)
        (work / "event.json").write_text(json.dumps(payload), encoding="utf-8")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(work),
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(work / "event.json"),
            "GITHUB_TOKEN": self.sim.installation_token(REPO),
            "GITHUB_API_URL": self.sim.url,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_RUN_ID": str(1000 + self.runs),
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_OUTPUT": str(work / "output"),
            "RUNNER_TEMP": str(work),
            **scripted_agent_env(self.root / "agent-script.json", self.root / "agent-state"),
        }
        done = subprocess.run(
            [PYTHON, "-m", "scaffold", "action", "event", "--state-dir", str(self.state)],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        output = (work / "output").read_text(encoding="utf-8")
        return {"stdout": done.stdout, "output": output}

    def deliver(self, record: DeliveryRecord) -> dict[str, object]:
        return self.run(record.event, record.payload)


def _last(sim: GitHubSimulator, event: str, action: str) -> DeliveryRecord:
    return sim.deliveries_of(event, action)[-1]


def test_issue_to_merge_one_workflow_run_per_event(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    writer_repo(sim, repo_files())
    write_script(
        tmp_path,
        [
            {
                "role": "chaoswhisperer",
                "actions": [planning_tool("requirements", requirements("Two")), complete("ok")],
            },
            {
                "role": "pathseeker",
                "actions": [
                    planning_tool("tasks", plan(("a", "One", []), ("b", "Two", []))),
                    complete("ok"),
                ],
            },
            codeweaver("task-1", {"one.txt": "1\n"}),
            codeweaver("task-2", {"two.txt": "2\n"}),
            *VALIDATORS,
        ],
    )
    wf = Workflow(sim, tmp_path)
    number = sim.open_issue(REPO, "Two files", "Add one.txt and two.txt.", by="alice")
    sim.label_issue(REPO, number, "scaffold", by="alice")
    first = wf.deliver(_last(sim, "issues", "labeled"))
    assert "issues.labeled:handled" in str(first["output"])
    pulls = {p.head: p for p in sim.repo(REPO).pulls.values()}
    assert set(pulls) == {"scaffold/task-1", "scaffold/task-2"}
    # The token's App, learnt from the first check run, is kept for later runs: the PR's
    # own event finds scaffold's check there (by App, not by name) and adds none.
    assert (wf.state / "token-app-id").read_text().strip() == str(sim.app_id)
    runs = len(sim.repo(REPO).check_runs)
    opened = sim.deliveries_of("pull_request", "opened")
    wf.deliver(
        next(d for d in opened if d.payload["pull_request"]["head"]["ref"] == "scaffold/task-1")
    )
    assert len(sim.repo(REPO).check_runs) == runs

    sim.submit_review(REPO, pulls["scaffold/task-1"].number, "APPROVED", by="alice")
    wf.deliver(_last(sim, "pull_request_review", "submitted"))
    assert sim.repo(REPO).pulls[pulls["scaffold/task-1"].number].merged

    # This approval's workflow run never happened: the scheduled run reconciles it.
    sim.submit_review(REPO, pulls["scaffold/task-2"].number, "APPROVED", by="alice")
    wf.run("schedule", {"schedule": "*/30 * * * *"})
    assert sim.repo(REPO).pulls[pulls["scaffold/task-2"].number].merged

    repo = sim.repo(REPO)
    assert repo.file_at("main", "one.txt") == b"1\n"
    assert repo.file_at("main", "two.txt") == b"2\n"
    status = [c.body for c in repo.comments.values() if "scaffold:status" in c.body]
    assert len(status) == 1
    assert status[0].count("✅ merged") == 2


def test_a_hostile_agent_in_event_mode_gets_nothing(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    """The workflow's token (in scaffold's environment), the state folder the Actions cache
    keeps and the clone's git config and hooks are out of the agent's reach."""
    sim = github_sim
    writer_repo(sim, repo_files())
    evidence = Evidence(tmp_path / "hostile", writable=tmp_path / "agent-state" / "evidence")
    write_script(
        tmp_path,
        [
            *planned(("a", "One", [])),
            hostile_run(evidence, "TASK-1"),
            *VALIDATORS,
        ],
    )
    wf = Workflow(sim, tmp_path)
    clone = wf.state / "repos" / REPO
    with listening() as listener:
        evidence.write_plan(
            secret_names=["GITHUB_TOKEN", "INPUT_GITHUB_TOKEN"],
            read=[
                str(clone / ".scaffold" / "quests" / "issue-1" / "quest.json"),
                str(clone / ".scaffold" / "inbox"),
                str(clone / ".scaffold" / "runs"),
            ],
            write=[str(clone / ".git" / "config"), str(clone / ".git" / "hooks")],
            forbidden_cmdline=["action event"],
            loopback_port=listener.port,
            other_step="TASK-2",
        )
        number = sim.open_issue(REPO, "One file", "Add one file.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        wf.deliver(_last(sim, "issues", "labeled"))
        assert listener.heard == []
    [pull] = sim.repo(REPO).pulls.values()
    sim.submit_review(REPO, pull.number, "APPROVED", by="alice")
    wf.deliver(_last(sim, "pull_request_review", "submitted"))
    assert sim.repo(REPO).pulls[pull.number].merged
    expect_all_blocked(
        evidence,
        must_include=[
            "read secrets in /proc",
            "credential variables",
            "plant hook pre-push",
            "git config url.",
        ],
    )
    assert evidence.markers_left() == []
    assert sim.repo(REPO).file_at("main", "feature.txt") == b"the agent's honest work\n"


def test_an_evicted_cache_continues_from_the_state_branch(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    """The Actions cache is a speed-up only: a workflow run that starts with nothing (the
    cache was evicted) finds the quest, its question and answer, and its PRs on the
    repository's state branch, and carries on without asking or planning again."""
    sim = github_sim
    writer_repo(sim, repo_files())
    write_script(
        tmp_path,
        [
            {
                "role": "chaoswhisperer",
                "attempt": 1,
                "actions": [
                    planning_tool("requirements", requirements("One")),
                    complete("ok"),
                ],
            },
            {
                "role": "pathseeker",
                "actions": [planning_tool("tasks", plan(("a", "One", []))), complete("ok")],
            },
            codeweaver("task-1", {"one.txt": "1\n"}),
            *VALIDATORS,
        ],
    )
    wf = Workflow(sim, tmp_path)
    number = sim.open_issue(REPO, "One file", "Add one.txt.", by="alice")
    sim.label_issue(REPO, number, "scaffold", by="alice")
    wf.deliver(_last(sim, "issues", "labeled"))
    [pr] = sim.repo(REPO).pulls.values()
    shutil.rmtree(wf.state)  # evicted: the next run starts from nothing

    sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
    wf.deliver(_last(sim, "pull_request_review", "submitted"))

    repo = sim.repo(REPO)
    assert repo.pulls[pr.number].merged
    assert repo.file_at("main", "one.txt") == b"1\n"
    invocations = (tmp_path / "agent-state" / "invocations.jsonl").read_text().splitlines()
    roles = [json.loads(line)["role"] for line in invocations]
    assert roles.count("chaoswhisperer") == 1
    assert roles.count("pathseeker") == 1
    assert roles.count("codeweaver") == 1
    doc = json.loads(repo.file_at("scaffold/state", "quests/done/issue-1.json") or b"{}")
    assert doc["quest"]["phase"] == "done"
    assert sum("scaffold:status" in c.body for c in repo.comments.values()) == 1


def test_a_review_round_in_event_mode(github_sim: GitHubSimulator, tmp_path: Path) -> None:
    """Changes requested, one workflow run per event: the round's fix is pushed to the same
    pull request and answered in the review's thread; the approval of the new head merges."""
    sim = github_sim
    writer_repo(sim, repo_files())
    write_script(
        tmp_path,
        [
            *planned(("a", "One", [])),
            {
                "role": "codeweaver",
                "step": "TASK-1",
                "attempt": 1,
                "actions": [{"write": "one.txt", "content": "1\n"}, complete("one")],
            },
            {
                "role": "codeweaver",
                "step": "TASK-1",
                "attempt": 2,
                "actions": [
                    {"expect_prompt_contains": "spell it out"},
                    {"expect_prompt_contains": "one.txt, line 1"},
                    {"write": "one.txt", "content": "one\n"},
                    complete("spelt out"),
                ],
            },
            *VALIDATORS,
        ],
    )
    wf = Workflow(sim, tmp_path)
    number = sim.open_issue(REPO, "One", "Add one.txt.", by="alice")
    sim.label_issue(REPO, number, "scaffold", by="alice")
    wf.deliver(_last(sim, "issues", "labeled"))
    [pr] = sim.repo(REPO).pulls.values()
    review = sim.submit_review(
        REPO,
        pr.number,
        "CHANGES_REQUESTED",
        by="alice",
        body="Numbers in words, please.",
        comments=[{"path": "one.txt", "line": 1, "side": "RIGHT", "body": "spell it out"}],
    )
    [comment_id] = sim.review_comments_of(REPO, review)
    # The inline comment's own event comes first and asks nothing of scaffold.
    head = sim.repo(REPO).branch_sha("scaffold/task-1")
    wf.deliver(_last(sim, "pull_request_review_comment", "created"))
    assert sim.repo(REPO).branch_sha("scaffold/task-1") == head
    wf.deliver(_last(sim, "pull_request_review", "submitted"))
    assert sim.repo(REPO).file_at("scaffold/task-1", "one.txt") == b"one\n"
    assert len(sim.repo(REPO).pulls) == 1
    replies = [c for c in sim.repo(REPO).review_comments.values() if c.in_reply_to_id == comment_id]
    assert len(replies) == 1
    assert "Addressed in" in replies[0].body
    assert "alice" in sim.repo(REPO).pulls[pr.number].requested_reviewers
    sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
    wf.deliver(_last(sim, "pull_request_review", "submitted"))
    assert sim.repo(REPO).pulls[pr.number].merged
    assert sim.repo(REPO).file_at("main", "one.txt") == b"one\n"
