"""The App's identity rules in process, against the simulator: two questions asked at once
both keep their comment ids (one lock per repository for the links), what counts as an
approval (the reviewed commit, the reviewer's latest decision, write access), and which
``scaffold/diagram-check`` the merge counts (the App's own)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from app_harness import forge_of, repo_files, writer_repo

from ghsim import GitHubSimulator
from scaffold.core.states import EventName, Lifecycle
from scaffold.github.access import same_repository
from scaffold.github.comments import CHECK_NAME
from scaffold.github.links import LinkStore, QuestLink
from scaffold.github.runner import RepoContext
from scaffold.github.service import AppService
from scaffold.quest.model import PullRequest, Quest, Question, TaskRecord
from scaffold.roles import Role

REPO = "acme/widgets"


async def _repo(sim: GitHubSimulator, service: AppService) -> RepoContext:
    writer_repo(sim, repo_files())
    sim.set_permission(REPO, "mallory", "read")
    inst = sim.installation_for(REPO)
    assert inst is not None
    return await service.open_repo(REPO, inst.id)


def _link_issue(sim: GitHubSimulator, ctx: RepoContext, title: str, body: str) -> int:
    """An issue alice opened, linked to quest ``issue-1``."""
    issue = sim.open_issue(REPO, title, body, by="alice")
    ctx.links.put(
        QuestLink(
            quest_id="issue-1",
            repo=REPO,
            issue_number=issue,
            installation_id=ctx.installation_id,
            requested_by="alice",
        )
    )
    return issue


def _task_at_its_pull_request(ctx: RepoContext) -> tuple[TaskRecord, Quest]:
    """Task 1 with a commit on its branch in the App's checkout, at the pull request step."""
    git = ["git", "-C", str(ctx.checkout.path)]
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env = {**os.environ, **who, "GIT_COMMITTER_EMAIL": "t@x"}
    work = subprocess.run(
        [*git, "commit-tree", "-p", "HEAD", "-m", "task-1: work", "HEAD^{tree}"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    subprocess.run([*git, "branch", "scaffold/task-1", work], check=True)
    task = TaskRecord(
        id="task-1",
        state=Lifecycle.PR_CREATED,
        branch="scaffold/task-1",
        worktree=str(ctx.checkout.path),  # no Backlog.md file of the task: nothing to mark
    )
    return task, Quest(id="issue-1", tasks={"task-1": task})


def _question(qid: str, task_id: str) -> Question:
    return Question(
        id=qid,
        task_id=task_id,
        role=Role.CODEWEAVER,
        session_id=None,
        question=f"{qid}?",
        context="",
        asked_at=datetime.now(UTC),
    )


async def test_two_questions_asked_at_once_keep_both_comment_ids(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    sim = github_sim
    ctx = await _repo(sim, service)
    _link_issue(sim, ctx, "Two", "two questions at once")
    q1, q2 = _question("q-1-1", "task-1"), _question("q-2-1", "task-2")
    quest = Quest(
        id="issue-1",
        tasks={
            "task-1": TaskRecord(id="task-1", question_id=q1.id),
            "task-2": TaskRecord(id="task-2", question_id=q2.id),
        },
        questions={q1.id: q1, q2.id: q2},
    )
    forge = forge_of(ctx)
    # Both asks read the link before either has its comment: the second write must not
    # drop the first one's id. Another store of the same folder shares the lock too.
    other = LinkStore(ctx.links.folder)
    await asyncio.gather(
        forge.ask(quest, q1),
        forge.ask(quest, q2),
        asyncio.to_thread(other.update, "issue-1", status_comment_id=7),
    )
    link = ctx.links.get("issue-1")
    assert link is not None
    comments = {c.id: c.body for c in sim.repo(REPO).comments.values()}
    assert set(link.question_comments) == {"q-1-1", "q-2-1"}
    assert "q-1-1" in comments[link.question_comments["q-1-1"]]
    assert "q-2-1" in comments[link.question_comments["q-2-1"]]
    assert link.status_comment_id == 7
    # Asked once each: asking again finds the recorded comment.
    await asyncio.gather(forge.ask(quest, q1), forge.ask(quest, q2))
    assert len(comments) == len(sim.repo(REPO).comments) == 2


async def test_an_approval_holds_for_the_commit_it_reviewed(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    sim = github_sim
    ctx = await _repo(sim, service)
    sim.add_user("carol")
    sim.set_permission(REPO, "carol", "maintain")
    first = sim.push_files(REPO, "scaffold/task-1", {"a.txt": "a\n"}, "alice", "a")
    number = sim.open_pull(REPO, "scaffold/task-1", by="sim-app-owner")
    where = {"owner": "acme", "repo": "widgets"}

    async def approver(head: str) -> str | None:
        return await ctx.permissions.approver(number, head)

    assert await approver(first) is None
    sim.submit_review(REPO, number, "APPROVED", by="mallory")  # read access
    assert await approver(first) is None
    alice = sim.submit_review(REPO, number, "APPROVED", by="alice")
    assert await approver(first) == "alice"
    sim.submit_review(REPO, number, "COMMENTED", by="alice", body="nit")  # not a decision
    assert await approver(first) == "alice"

    second = sim.push_files(REPO, "scaffold/task-1", {"b.txt": "b\n"}, "alice", "b")
    assert await approver(second) is None  # the approval was of the first commit
    assert await approver(first) == "alice"

    sim.submit_review(REPO, number, "APPROVED", by="carol")
    assert await approver(second) == "carol"
    sim.submit_review(REPO, number, "CHANGES_REQUESTED", by="carol", body="wait")
    assert await approver(second) is None  # her later decision cancels her approval
    sim.dismiss_review(REPO, alice, by="carol")
    assert await approver(first) is None  # a dismissed approval counts for nothing

    pr = await ctx.client.get("/repos/{owner}/{repo}/pulls/{number}", {**where, "number": number})
    assert same_repository(pr, REPO)
    sim.fork(REPO, "mallory")
    sim.push_files("mallory/widgets", "scaffold/task-1", {"e.txt": "e\n"}, "mallory", "e")
    fork_pr = sim.open_pull(REPO, "scaffold/task-1", by="mallory", head_repo="mallory/widgets")
    pr = await ctx.client.get("/repos/{owner}/{repo}/pulls/{number}", {**where, "number": fork_pr})
    assert not same_repository(pr, REPO)


async def test_the_merge_counts_only_the_apps_own_diagram_check(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    sim = github_sim
    ctx = await _repo(sim, service)
    lookalike = sim.add_app("lookalike-ci")
    sim.protect_branch(REPO, "main", required_checks=[CHECK_NAME], required_approvals=0)
    head = sim.push_files(REPO, "scaffold/task-1", {"a.txt": "a\n"}, "alice", "a")
    number = sim.open_pull(REPO, "scaffold/task-1", by="sim-app-owner")
    sim.submit_review(REPO, number, "APPROVED", by="alice")
    where = {"owner": "acme", "repo": "widgets"}
    failed = await ctx.client.post(
        "/repos/{owner}/{repo}/check-runs",
        where,
        data={"name": CHECK_NAME, "head_sha": head, "conclusion": "failure"},
    )
    # A later, passing run of the same name from another App: GitHub itself would take it.
    sim.add_check_run(REPO, head, CHECK_NAME, app_id=lookalike)
    assert sim.repo(REPO).check_runs[failed["id"]].conclusion == "failure"
    task = TaskRecord(
        id="task-1",
        branch="scaffold/task-1",
        state=Lifecycle.MERGING,
        pr=PullRequest(branch="scaffold/task-1", base="main", number=number),
    )
    quest = Quest(id="issue-1", tasks={"task-1": task})
    forge = forge_of(ctx)
    assert await forge.merge_pull_request(quest, task) is None
    assert not sim.repo(REPO).pulls[number].merged

    await ctx.client.post(
        "/repos/{owner}/{repo}/check-runs",
        where,
        data={"name": CHECK_NAME, "head_sha": head, "conclusion": "success"},
    )
    done = await forge.merge_pull_request(quest, task)
    assert done is not None
    assert done.name is EventName.MERGE_COMPLETE
    assert sim.repo(REPO).pulls[number].merged


async def test_a_flush_during_a_status_post_in_flight_keeps_one_status_comment(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    sim = github_sim
    ctx = await _repo(sim, service)
    _link_issue(sim, ctx, "Status", "one status comment")
    quest = Quest(id="issue-1", tasks={"task-1": TaskRecord(id="task-1")})
    forge = forge_of(ctx, status_interval_s=0)
    sim.answer_latency_s = 0.5  # the first status comment is made, its answer is slow
    forge.progress(quest)
    repo = sim.repo(REPO)
    while not any("scaffold:status" in c.body for c in repo.comments.values()):
        await asyncio.sleep(0.005)
    sim.answer_latency_s = 0.0
    await forge.flush(quest)  # the run ends before the answer came
    statuses = [c for c in sim.repo(REPO).comments.values() if "scaffold:status" in c.body]
    assert len(statuses) == 1
    link = ctx.links.get("issue-1")
    assert link is not None
    assert link.status_comment_id == statuses[0].id


async def test_a_pr_a_writer_closed_while_no_run_watched_is_a_rejection_not_a_new_pr(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    sim = github_sim
    ctx = await _repo(sim, service)
    _link_issue(sim, ctx, "Reject", "closed while resuming")
    task, quest = _task_at_its_pull_request(ctx)
    forge = forge_of(ctx)
    first = await forge.open_pull_request(quest, task)
    assert first.event is None
    assert first.pr.number is not None
    task = task.model_copy(update={"pr": first.pr})
    quest = quest.model_copy(update={"tasks": {"task-1": task}})

    # Closed by a reader: the same PR is reopened and the task goes on.
    sim.close_pr(REPO, first.pr.number, by="mallory")
    again = await forge.open_pull_request(quest, task)
    assert again.event is None
    assert again.pr.number == first.pr.number
    assert sim.repo(REPO).pulls[first.pr.number].issue.state == "open"

    # Closed by a writer (the delivery went to a run that was ending): a rejection.
    sim.close_pr(REPO, first.pr.number, by="alice")
    rejected = await forge.open_pull_request(quest, task)
    assert rejected.event is not None
    assert rejected.event.name is EventName.PR_REJECTED
    assert rejected.event.detail == "closed by alice"
    assert rejected.pr.state == "closed"
    assert len(sim.repo(REPO).pulls) == 1  # no new pull request

    # A later attempt (the rejection recorded the PR closed) gets a new pull request.
    retry = task.model_copy(update={"pr": rejected.pr})
    quest = quest.model_copy(update={"tasks": {"task-1": retry}})
    fresh = await forge.open_pull_request(quest, retry)
    assert fresh.event is None
    assert fresh.pr.number != first.pr.number
    assert len(sim.repo(REPO).pulls) == 2


async def test_a_pr_found_open_with_no_record_brings_its_heads_approval(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    """A server whose state was lost finds its task's pull request open: a writer's
    approval of that head (given while no task owned the PR, its delivery lost) is read
    back as the task's approval; a reader's is not."""
    sim = github_sim
    ctx = await _repo(sim, service)
    _link_issue(sim, ctx, "Lost state", "approved while the server had no record")
    task, quest = _task_at_its_pull_request(ctx)
    forge = forge_of(ctx)
    first = await forge.open_pull_request(quest, task)
    assert first.event is None
    assert first.pr.number is not None

    sim.submit_review(REPO, first.pr.number, "APPROVED", by="mallory")  # read access
    unapproved = await forge_of(ctx).open_pull_request(quest, task)  # still no record
    assert unapproved.pr.number == first.pr.number
    assert unapproved.event is None

    sim.submit_review(REPO, first.pr.number, "APPROVED", by="alice")
    found = await forge_of(ctx).open_pull_request(quest, task)
    assert found.pr.number == first.pr.number
    assert found.event is not None
    assert found.event.name is EventName.PR_APPROVED
    assert found.event.detail == "alice"
    assert len(sim.repo(REPO).pulls) == 1


async def test_a_pr_merged_on_github_is_not_opened_again(
    github_sim: GitHubSimulator, service: AppService
) -> None:
    """A task still waiting at its pull request that a person merged on GitHub (the merge's
    delivery not seen yet): nothing is pushed or opened again (GitHub would refuse a new
    pull request: no commits between the branches), and the merge is finished."""
    sim = github_sim
    ctx = await _repo(sim, service)
    _link_issue(sim, ctx, "Merged", "merged by a person")
    sim.push_files(REPO, "scaffold/task-1", {"a.txt": "a\n"}, "alice", "a")
    number = sim.open_pull(REPO, "scaffold/task-1", by="sim-app-owner")
    where = {"owner": "acme", "repo": "widgets", "number": number}
    await ctx.client.put("/repos/{owner}/{repo}/pulls/{number}/merge", where, data={})
    assert sim.repo(REPO).pulls[number].merged
    task = TaskRecord(
        id="task-1",
        state=Lifecycle.PR_CREATED,
        branch="scaffold/task-1",
        worktree=str(ctx.checkout.path),
        pr=PullRequest(branch="scaffold/task-1", base="main", number=number),
    )
    quest = Quest(id="issue-1", tasks={"task-1": task})
    opened = await forge_of(ctx).open_pull_request(quest, task)
    assert opened.merged
    assert opened.event is not None
    assert opened.event.name is EventName.PR_APPROVED
    assert len(sim.repo(REPO).pulls) == 1


async def test_a_check_suite_for_a_push_that_is_no_pull_request_costs_nothing(
    github_sim: GitHubSimulator, service: AppService, tmp_path: Path
) -> None:
    """scaffold's own state-branch pushes each bring a ``check_suite.requested``: with no
    pull request to check, it is handled without a call to GitHub or a fetch."""
    import time

    from scaffold.server.delivery import Delivery

    sim = github_sim
    writer_repo(sim, repo_files())
    inst = sim.installation_for(REPO)
    assert inst is not None
    sha = sim.push_files(REPO, "scaffold/state", {"quests/x.json": "{}"}, "alice", "state")
    [record] = [
        d
        for d in sim.deliveries_of("check_suite", "requested")
        if d.payload["check_suite"]["head_sha"] == sha
    ]
    assert record.payload["check_suite"]["pull_requests"] == []
    before = len(sim.requests)
    await service.handle(
        Delivery("d-1", "check_suite", "requested", record.payload, inst.id, time.time())
    )
    assert len(sim.requests) == before
    assert not (tmp_path / "state" / "repos").exists()
