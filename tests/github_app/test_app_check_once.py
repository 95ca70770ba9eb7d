"""One ``scaffold/diagram-check`` check run per pull request head, however slowly GitHub
answers (issue 12, item 9): the quest's own report and the ``pull_request.opened``
handler both look for a run, and with ~100 ms per call both used to find none."""

from __future__ import annotations

import asyncio

import pytest
from app_harness import forge_of, repo_files, writer_repo

from ghsim import GitHubSimulator
from scaffold.github.comments import CHECK_NAME
from scaffold.github.diagram_pr import check_pull_request
from scaffold.github.service import AppService

REPO = "acme/widgets"


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
    forge = forge_of(ctx)
    sim.latency_s = 0.1  # every call answered late, as with forced token refreshes

    quest = forge.report_diagram_check(head)
    handler = check_pull_request(ctx, pr, force=False)
    await asyncio.gather(*((quest, handler) if first == "quest" else (handler, quest)))
    # And once more each, later: a restart re-opening the PR, a redelivered event.
    await forge.report_diagram_check(head)
    assert await check_pull_request(ctx, pr, force=False) is None

    runs = _runs(sim, head)
    assert len(runs) == 1, runs
    assert sim.violations == []
