"""Workflow dispatch through a Python runner; PyGithub reading through the simulator."""

from __future__ import annotations

import io
import urllib.request
import zipfile

import aiohttp
import github
from gidgethub import aiohttp as gh_aiohttp

from ghsim import GitHubSimulator, WorkflowDispatch, WorkflowOutcome

REPO = "octo/demo"


async def test_workflow_dispatch_runs_the_runner(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    sim.create_repo("octo", "demo", {"README.md": "x\n"})
    sim.install("octo", ["demo"])
    seen: list[WorkflowDispatch] = []

    def runner(dispatch: WorkflowDispatch) -> WorkflowOutcome:
        seen.append(dispatch)
        assert sim.live_token(dispatch.token) is not None
        return WorkflowOutcome("failure", {"report": {"result.json": b'{"ok": false}'}})

    sim.workflow_runner = runner
    async with aiohttp.ClientSession() as session:
        gh = gh_aiohttp.GitHubAPI(
            session, "t", oauth_token=sim.installation_token(REPO), base_url=sim.url
        )
        await gh.post(
            f"/repos/{REPO}/actions/workflows/agent.yml/dispatches",
            data={"ref": "main", "inputs": {"task": "task-7"}},
        )
        for worker in list(sim._workers):
            worker.join(timeout=30)
        runs = await gh.getitem(f"/repos/{REPO}/actions/runs")
        assert runs["total_count"] == 1
        run = runs["workflow_runs"][0]
        assert run["status"] == "completed"
        assert run["conclusion"] == "failure"
        assert run["head_branch"] == "main"
        jobs = await gh.getitem(f"/repos/{REPO}/actions/runs/{run['id']}/jobs")
        assert jobs["jobs"][0]["conclusion"] == "failure"
        arts = await gh.getitem(f"/repos/{REPO}/actions/runs/{run['id']}/artifacts")
        art = arts["artifacts"][0]
        assert art["name"] == "report"
        async with session.get(
            f"{sim.url}/repos/{REPO}/actions/artifacts/{art['id']}/zip",
            headers={"Authorization": f"token {sim.installation_token(REPO)}"},
            allow_redirects=False,
        ) as resp:
            assert resp.status == 302
            location = resp.headers["Location"]
        assert location.startswith(sim.url)
        data = urllib.request.urlopen(location, timeout=30).read()
        assert zipfile.ZipFile(io.BytesIO(data)).read("result.json") == b'{"ok": false}'

        # Without a runner the run stays queued and can be cancelled.
        sim.workflow_runner = None
        await gh.post(f"/repos/{REPO}/actions/workflows/agent.yml/dispatches", data={"ref": "main"})
        queued = (await gh.getitem(f"/repos/{REPO}/actions/runs?status=queued"))["workflow_runs"][0]
        await gh.post(f"/repos/{REPO}/actions/runs/{queued['id']}/cancel", data={})
        again = await gh.getitem(f"/repos/{REPO}/actions/runs/{queued['id']}")
        assert again["conclusion"] == "cancelled"
    assert seen[0].inputs == {"task": "task-7"}
    assert seen[0].workflow_id == "agent.yml"
    kinds = [(d.event, d.action) for d in sim.deliveries if d.event.startswith("workflow")]
    assert kinds[:6] == [
        ("workflow_run", "requested"),
        ("workflow_job", "queued"),
        ("workflow_job", "in_progress"),
        ("workflow_run", "in_progress"),
        ("workflow_job", "completed"),
        ("workflow_run", "completed"),
    ]
    completed = sim.deliveries_of("workflow_run", "completed")[0].payload
    assert completed["workflow_run"]["conclusion"] == "failure"


def test_pygithub_reads_an_issue(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    sim.create_repo("octo", "demo", {"README.md": "x\n"})
    sim.install("octo", ["demo"])
    number = sim.open_issue(REPO, "Read me", "Body text", "alice")
    sim.label_issue(REPO, number, "scaffold", "alice")
    sim.comment(REPO, number, "first", "alice")
    gh = github.Github(base_url=sim.url, auth=github.Auth.Token(sim.installation_token(REPO)))
    issue = gh.get_repo(REPO).get_issue(number)
    assert issue.title == "Read me"
    assert [lab.name for lab in issue.labels] == ["scaffold"]
    assert [c.body for c in issue.get_comments()] == ["first"]
    issue.edit(state="closed")
    assert sim.repo(REPO).issues[number].state == "closed"
    assert sim.deliveries_of("issues", "closed")


def test_person_rerequests_deliver(github_sim: GitHubSimulator) -> None:
    from ghsim.state import CheckRun

    sim = github_sim
    sim.create_repo("octo", "demo", {"README.md": "x\n"})
    sim.install("octo", ["demo"])
    sha = sim.push_files(REPO, "b", {"f": "1"}, "alice", "m")
    repo = sim.repo_state(REPO)
    with sim.lock:
        suite = sim.suite_for(repo, sha, "b")
        run = CheckRun(
            sim.ids.next(),
            "verify",
            sha,
            suite.id,
            status="completed",
            conclusion="failure",
            completed_at="2024-01-01T00:00:00Z",
        )
        repo.check_runs[run.id] = run
        suite.status, suite.conclusion = "completed", "failure"
    sim.rerequest_check_run(REPO, run.id, "alice")
    sim.rerequest_check_suite(REPO, suite.id, "alice")
    assert sim.deliveries_of("check_run", "rerequested")[0].payload["check_run"]["id"] == run.id
    assert (
        sim.deliveries_of("check_suite", "rerequested")[0].payload["check_suite"]["id"] == suite.id
    )
