"""One ``scaffold/diagram-check`` check run per pull request head, however slowly GitHub
answers (issue 12, item 9): the quest's own report and the ``pull_request.opened``
handler both look for a run, and with ~100 ms per call both used to find none."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from app_harness import repo_files, writer_repo

from ghsim import GitHubSimulator
from scaffold.core.states import Lifecycle
from scaffold.github.auth import AppCredentials
from scaffold.github.client import GitHubApp
from scaffold.github.comments import CHECK_NAME
from scaffold.github.diagram_pr import check_pull_request
from scaffold.github.forge import GitHubForge
from scaffold.github.runner import RepoContext
from scaffold.github.service import AppOptions, AppService
from scaffold.quest.model import PullRequest, TaskRecord
from scaffold.runtime.backlog_cache import BacklogCache
from scaffold.runtime.repo_ops import RepoOps

REPO = "acme/widgets"


@pytest.fixture
async def service(github_sim: GitHubSimulator, tmp_path: Path) -> AsyncIterator[AppService]:
    credentials = AppCredentials(github_sim.app_id, github_sim.private_key_pem)
    app = GitHubApp(credentials, base_url=github_sim.url)
    svc = AppService(app, AppOptions(state_dir=tmp_path / "state"))
    yield svc
    await svc.stop()


def _forge(ctx: RepoContext) -> GitHubForge:
    config = ctx.checkout.config()
    ops = RepoOps(
        ctx.checkout.path, config, lambda: datetime.now(UTC), print, BacklogCache(ctx.checkout.path)
    )
    return GitHubForge(
        ctx.client,
        ctx.checkout,
        ops,
        ctx.links,
        config,
        clock=lambda: datetime.now(UTC),
        status_interval_s=3600,
        permissions=ctx.permissions,
        app=ctx.app,
    )


def _runs(sim: GitHubSimulator, head: str) -> list[object]:
    return [
        r for r in sim.repo(REPO).check_runs.values() if r.head_sha == head and r.name == CHECK_NAME
    ]


@pytest.mark.parametrize("first", ["quest", "handler"])
async def test_one_check_run_per_head_under_latency(
    github_sim: GitHubSimulator, service: AppService, first: str
) -> None:
    sim = github_sim
    writer_repo(sim, repo_files())
    inst = sim.installation_for(REPO)
    assert inst is not None
    ctx = await service.open_repo(REPO, inst.id)
    head = sim.push_files(REPO, "scaffold/task-1", {"a.txt": "a\n"}, "alice", "a")
    number = sim.open_pull(REPO, "scaffold/task-1", by="sim-app-owner")
    where = {"owner": "acme", "repo": "widgets", "number": number}
    pr = await ctx.client.get("/repos/{owner}/{repo}/pulls/{number}", where)
    task = TaskRecord(
        id="TASK-1",
        branch="scaffold/task-1",
        state=Lifecycle.PR_CREATED,
        pr=PullRequest(branch="scaffold/task-1", base="main", number=number, head_sha=head),
    )
    forge = _forge(ctx)
    sim.latency_s = 0.1  # every call answered late, as with forced token refreshes

    quest = forge.report_diagram_check(head, task)
    handler = check_pull_request(ctx, pr, force=False)
    await asyncio.gather(*((quest, handler) if first == "quest" else (handler, quest)))
    # And once more each, later: a restart re-opening the PR, a redelivered event.
    await forge.report_diagram_check(head, task)
    assert await check_pull_request(ctx, pr, force=False) is None

    runs = _runs(sim, head)
    assert len(runs) == 1, runs
    assert sim.violations == []
