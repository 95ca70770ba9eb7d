"""Identity in the simulator: forks whose pull requests target their parent, reviews tied
to the commit they reviewed, a merge guarded by ``sha``, and check runs of other Apps."""

from __future__ import annotations

import aiohttp
import pytest
from gidgethub import BadRequest
from gidgethub import aiohttp as gh_aiohttp

from ghsim.server import GitHubSimulator

REPO = "acme/widgets"
FORK = "mallory/widgets"
BRANCH = "scaffold/task-1"


def setup(sim: GitHubSimulator) -> None:
    sim.create_repo("acme", "widgets", {"README.md": "widgets\n"})
    sim.set_permission(REPO, "alice", "write")
    sim.set_permission(REPO, "mallory", "read")
    sim.install("acme", ["widgets"])


def client(sim: GitHubSimulator, session: aiohttp.ClientSession) -> gh_aiohttp.GitHubAPI:
    return gh_aiohttp.GitHubAPI(
        session, "t", oauth_token=sim.installation_token(REPO), base_url=sim.url
    )


async def test_a_fork_sends_a_pull_request_whose_head_is_the_fork(
    github_sim: GitHubSimulator,
) -> None:
    sim = github_sim
    setup(sim)
    fork = sim.fork(REPO, "mallory")
    # A fork starts with every branch of its parent.
    assert fork.branch_sha("main") == sim.repo(REPO).branch_sha("main")
    real = sim.push_files(REPO, BRANCH, {"real.txt": "real\n"}, "alice", "the real task")
    evil = sim.push_files(FORK, BRANCH, {"evil.txt": "evil\n"}, "mallory", "evil")
    # A fork the App is not installed on sends it nothing.
    assert not [
        d for d in sim.deliveries_of("push") if d.payload["repository"]["full_name"] == FORK
    ]

    number = sim.open_pull(REPO, BRANCH, by="mallory", title="TASK-1", head_repo=FORK)
    opened = sim.deliveries_of("pull_request", "opened")[-1].payload
    assert opened["pull_request"]["head"]["repo"]["full_name"] == FORK
    assert opened["pull_request"]["head"]["repo"]["fork"] is True
    assert opened["pull_request"]["head"]["ref"] == BRANCH
    assert opened["pull_request"]["base"]["repo"]["full_name"] == REPO
    assert opened["repository"]["full_name"] == REPO
    # GitHub keeps refs/pull/<n>/head in the base repository, the fork's commits with it.
    assert sim.repo(REPO).git("rev-parse", f"refs/pull/{number}/head") == evil
    assert sim.repo(REPO).branch_sha(BRANCH) == real  # the namesake branch is untouched

    async with aiohttp.ClientSession() as session:
        gh = client(sim, session)
        pr = await gh.getitem(f"/repos/{REPO}/pulls/{number}")
        assert pr["head"]["label"] == f"mallory:{BRANCH}"
        assert pr["head"]["sha"] == evil
        assert pr["head"]["repo"]["id"] != pr["base"]["repo"]["id"]
        ours = [p async for p in gh.getiter(f"/repos/{REPO}/pulls?head=acme:{BRANCH}")]
        theirs = [p async for p in gh.getiter(f"/repos/{REPO}/pulls?head=mallory:{BRANCH}")]
        assert ours == []
        assert [p["number"] for p in theirs] == [number]

        # A push to the base's namesake branch is not the fork PR's; one to the fork is.
        sim.push_files(REPO, BRANCH, {"real.txt": "more\n"}, "alice", "more")
        assert not sim.deliveries_of("pull_request", "synchronize")
        moved = sim.push_files(FORK, BRANCH, {"evil.txt": "worse\n"}, "mallory", "worse")
        sync = sim.deliveries_of("pull_request", "synchronize")[-1].payload
        assert sync["pull_request"]["head"]["sha"] == moved
        assert sync["pull_request"]["head"]["repo"]["full_name"] == FORK
        assert sim.repo(REPO).git("rev-parse", f"refs/pull/{number}/head") == moved

        # The App can still create a cross-repository PR by naming the fork's owner.
        sim.push_files(FORK, "other", {"o.txt": "o\n"}, "mallory", "other")
        made = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "O", "head": "mallory:other", "base": "main"}
        )
        assert made["head"]["repo"]["full_name"] == FORK
        with pytest.raises(BadRequest) as unknown:
            await gh.post(
                f"/repos/{REPO}/pulls", data={"title": "X", "head": "nobody:other", "base": "main"}
            )
        assert unknown.value.status_code == 422

        # Merging a fork's PR brings the fork's commit, never the namesake branch.
        merged = await gh.put(f"/repos/{REPO}/pulls/{number}/merge", data={"sha": moved})
        assert merged["merged"] is True
        assert sim.repo(REPO).file_at("main", "evil.txt") == b"worse\n"
        assert sim.repo(REPO).file_at("main", "real.txt") is None


async def test_reviews_are_of_a_commit_and_the_merge_honours_sha(
    github_sim: GitHubSimulator,
) -> None:
    sim = github_sim
    setup(sim)
    first = sim.push_files(REPO, BRANCH, {"a.txt": "a\n"}, "alice", "a")
    async with aiohttp.ClientSession() as session:
        gh = client(sim, session)
        pr = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "T", "head": BRANCH, "base": "main"}
        )
        n = pr["number"]
        approval = sim.submit_review(REPO, n, "APPROVED", by="alice")
        submitted = sim.deliveries_of("pull_request_review", "submitted")[-1].payload
        assert submitted["review"]["commit_id"] == first
        second = sim.push_files(REPO, BRANCH, {"b.txt": "b\n"}, "alice", "b")
        reviews = [r async for r in gh.getiter(f"/repos/{REPO}/pulls/{n}/reviews")]
        assert [(r["id"], r["state"], r["commit_id"]) for r in reviews] == [
            (approval, "APPROVED", first)
        ]
        # A review of an earlier commit can be recorded on purpose, too.
        old = sim.submit_review(REPO, n, "COMMENTED", by="alice", body="x", commit_id=first)
        assert sim.repo(REPO).reviews[old].commit_id == first

        with pytest.raises(BadRequest) as moved:
            await gh.put(f"/repos/{REPO}/pulls/{n}/merge", data={"sha": first})
        assert moved.value.status_code == 409
        assert not sim.repo(REPO).pulls[n].merged

        sim.dismiss_review(REPO, approval, by="alice")
        dismissed = sim.deliveries_of("pull_request_review", "dismissed")[-1].payload
        assert dismissed["review"]["state"] == "dismissed"
        reviews = [r async for r in gh.getiter(f"/repos/{REPO}/pulls/{n}/reviews")]
        assert reviews[0]["state"] == "DISMISSED"

        merged = await gh.put(f"/repos/{REPO}/pulls/{n}/merge", data={"sha": second})
        assert merged["merged"] is True


async def test_check_runs_carry_the_app_that_created_them(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    setup(sim)
    head = sim.push_files(REPO, BRANCH, {"a.txt": "a\n"}, "alice", "a")
    other = sim.add_app("other-ci")
    sim.protect_branch(
        REPO,
        "main",
        required_checks=["scaffold/diagram-check"],
        required_approvals=0,
        check_apps={"scaffold/diagram-check": sim.app_id},
    )
    async with aiohttp.ClientSession() as session:
        gh = client(sim, session)
        pr = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "T", "head": BRANCH, "base": "main"}
        )
        spoof = sim.add_check_run(REPO, head, "scaffold/diagram-check", app_id=other)
        created = sim.deliveries_of("check_run", "created")[-1].payload
        assert created["check_run"]["app"]["id"] == other
        assert created["check_run"]["app"]["name"] == "other-ci"
        assert created["sender"]["login"] == "other-ci[bot]"
        # The check is pinned to the App under test: another App's success does not count.
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}"))[
            "mergeable_state"
        ] == "blocked"
        protection = await gh.getitem(f"/repos/{REPO}/branches/main/protection")
        assert protection["required_status_checks"]["checks"] == [
            {"context": "scaffold/diagram-check", "app_id": sim.app_id}
        ]

        mine = await gh.post(
            f"/repos/{REPO}/check-runs",
            data={"name": "scaffold/diagram-check", "head_sha": head, "conclusion": "success"},
        )
        assert mine["app"]["id"] == sim.app_id
        listed = await gh.getitem(f"/repos/{REPO}/commits/{head}/check-runs?filter=all")
        apps = {r["id"]: r["app"]["id"] for r in listed["check_runs"]}
        assert apps == {spoof: other, mine["id"]: sim.app_id}
        suites = await gh.getitem(f"/repos/{REPO}/commits/{head}/check-suites")
        assert {s["app"]["id"] for s in suites["check_suites"]} == {other, sim.app_id}
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}"))[
            "mergeable_state"
        ] == "clean"


def test_closing_records_who_closed(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    setup(sim)
    sim.push_files(REPO, BRANCH, {"a.txt": "a\n"}, "alice", "a")
    number = sim.open_pull(REPO, BRANCH, by="alice")
    sim.close_pr(REPO, number, by="mallory")
    assert sim.repo(REPO).pulls[number].issue.closed_by == "mallory"
    closed = sim.deliveries_of("pull_request", "closed")[-1].payload
    assert closed["sender"]["login"] == "mallory"
    assert closed["pull_request"]["merged"] is False


async def test_a_fork_workflows_token_reads_and_never_writes(
    github_sim: GitHubSimulator,
) -> None:
    """GitHub gives a workflow run for a fork's pull request a read-only GITHUB_TOKEN."""
    sim = github_sim
    setup(sim)
    sim.fork(REPO, "mallory")
    sim.push_files(FORK, BRANCH, {"f.txt": "f\n"}, "mallory", "f")
    number = sim.open_pull(REPO, BRANCH, by="mallory", title="F", head_repo=FORK)
    token = sim.fork_workflow_token(REPO)
    async with aiohttp.ClientSession() as session:
        gh = gh_aiohttp.GitHubAPI(session, "t", oauth_token=token, base_url=sim.url)
        pr = await gh.getitem(f"/repos/{REPO}/pulls/{number}")
        assert pr["head"]["repo"]["full_name"] == FORK
        for url, data in (
            (f"/repos/{REPO}/issues/{number}/comments", {"body": "hi"}),
            (f"/repos/{REPO}/check-runs", {"name": "x", "head_sha": pr["head"]["sha"]}),
            (f"/repos/{REPO}/statuses/{pr['head']['sha']}", {"state": "success"}),
        ):
            with pytest.raises(BadRequest) as refused:
                await gh.post(url, data=data)
            assert refused.value.status_code == 403
            assert "Resource not accessible by integration" in str(refused.value)
    assert not [c for c in sim.repo(REPO).comments.values() if c.issue_number == number]
