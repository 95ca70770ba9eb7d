"""Branch protection, mergeability, reviews, checks, merge methods, update-branch, refs."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from ghsim_helpers import clone, commit_file, git
from gidgethub import BadRequest
from gidgethub import aiohttp as gh_aiohttp

from ghsim.server import GitHubSimulator

REPO = "octo/demo"


def setup(sim: GitHubSimulator) -> None:
    sim.create_repo("octo", "demo", {"README.md": "one\ntwo\nthree\n"})
    sim.set_permission(REPO, "alice", "write")
    sim.set_permission(REPO, "mallory", "read")
    sim.install("octo", ["demo"])


def client(sim: GitHubSimulator, session: aiohttp.ClientSession) -> gh_aiohttp.GitHubAPI:
    return gh_aiohttp.GitHubAPI(
        session, "t", oauth_token=sim.installation_token(REPO), base_url=sim.url
    )


def test_protected_branch_refuses_a_direct_push(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    setup(sim)
    sim.protect_branch(REPO, "main", required_checks=["ci"], required_approvals=1)
    work = clone(sim, REPO, tmp_path / "w", sim.installation_token(REPO))
    before = sim.repo(REPO).branch_sha("main")
    commit_file(work, "x.txt", "x\n", "direct")
    pushed = git(work, "push", "origin", "main", check=False)
    assert pushed.returncode != 0
    assert "protected branch" in pushed.stderr.lower()
    assert sim.repo(REPO).branch_sha("main") == before
    # Other branches still accept pushes.
    git(work, "push", "-q", "origin", "HEAD:refs/heads/side")
    assert sim.repo(REPO).branch_sha("side") is not None


def test_git_needs_a_live_token(github_sim: GitHubSimulator, tmp_path: Path) -> None:
    sim = github_sim
    setup(sim)
    url = f"{sim.url}/git/{REPO}.git"
    anon = git(tmp_path, "clone", "-q", url, str(tmp_path / "anon"), check=False)
    assert anon.returncode != 0
    bad = git(
        tmp_path,
        "-c",
        "http.extraHeader=Authorization: Basic eC1hY2Nlc3MtdG9rZW46Z2hzX25vcGU=",
        "clone",
        "-q",
        url,
        str(tmp_path / "bad"),
        check=False,
    )
    assert bad.returncode != 0


async def test_mergeable_states_and_merge_methods(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    setup(sim)
    sim.protect_branch(REPO, "main", required_checks=["scaffold/verify"], required_approvals=1)
    head = sim.push_files(REPO, "scaffold/task-1", {"feature.txt": "f\n"}, "alice", "feature")
    async with aiohttp.ClientSession() as session:
        gh = client(sim, session)
        pr = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "T", "head": "scaffold/task-1", "base": "main"}
        )
        n = pr["number"]
        assert pr["mergeable_state"] == "blocked"
        with pytest.raises(BadRequest) as refused:
            await gh.put(f"/repos/{REPO}/pulls/{n}/merge", data={})
        assert refused.value.status_code == 405

        run = await gh.post(
            f"/repos/{REPO}/check-runs",
            data={"name": "scaffold/verify", "head_sha": head, "status": "in_progress"},
        )
        await gh.patch(
            f"/repos/{REPO}/check-runs/{run['id']}",
            data={
                "conclusion": "success",
                "output": {
                    "title": "ok",
                    "summary": "all good",
                    "annotations": [
                        {
                            "path": "feature.txt",
                            "start_line": 1,
                            "end_line": 1,
                            "annotation_level": "notice",
                            "message": "fine",
                        }
                    ],
                },
            },
        )
        notes = [a async for a in gh.getiter(f"/repos/{REPO}/check-runs/{run['id']}/annotations")]
        assert notes[0]["message"] == "fine"
        listed = await gh.getitem(f"/repos/{REPO}/commits/{head}/check-runs")
        assert listed["check_runs"][0]["conclusion"] == "success"
        suites = await gh.getitem(f"/repos/{REPO}/commits/{head}/check-suites")
        assert suites["check_suites"][0]["conclusion"] == "success"
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{n}"))[
            "mergeable_state"
        ] == "blocked"  # no approval yet

        sim.submit_review(REPO, n, "APPROVED", by="mallory")  # read access: does not count
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{n}"))["mergeable_state"] == "blocked"
        sim.submit_review(REPO, n, "APPROVED", by="alice")
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{n}"))["mergeable_state"] == "clean"

        # Base moves on: behind (strict protection), then update-branch catches up.
        sim.repo(REPO).bare.update_ref(
            "refs/heads/main",
            sim.repo(REPO).bare.commit_files(
                sim.repo(REPO).branch_sha("main"), {"other.txt": "o\n"}, "other"
            ),
        )
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{n}"))["mergeable_state"] == "behind"
        with pytest.raises(BadRequest) as stale:
            await gh.put(
                f"/repos/{REPO}/pulls/{n}/update-branch", data={"expected_head_sha": "0" * 40}
            )
        assert stale.value.status_code == 422
        await gh.put(f"/repos/{REPO}/pulls/{n}/update-branch", data={"expected_head_sha": head})
        new_head = sim.repo(REPO).branch_sha("scaffold/task-1")
        assert new_head is not None
        assert new_head != head
        assert sim.repo(REPO).file_at(new_head, "other.txt") == b"o\n"
        # The new head has no successful check yet.
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{n}"))["mergeable_state"] == "blocked"
        await gh.post(
            f"/repos/{REPO}/check-runs",
            data={"name": "scaffold/verify", "head_sha": new_head, "conclusion": "success"},
        )
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{n}"))["mergeable_state"] == "clean"
        merged = await gh.put(
            f"/repos/{REPO}/pulls/{n}/merge", data={"merge_method": "squash", "sha": new_head}
        )
        squash = sim.repo(REPO).git("rev-list", "--parents", "-n", "1", merged["sha"]).split()
        assert len(squash) == 2  # one parent
        assert sim.repo(REPO).file_at("main", "feature.txt") == b"f\n"

        # A conflicting PR is dirty.
        sim.push_files(REPO, "conflict", {"README.md": "uno\n"}, "alice", "c1")
        sim.repo(REPO).bare.update_ref(
            "refs/heads/main",
            sim.repo(REPO).bare.commit_files(
                sim.repo(REPO).branch_sha("main"), {"README.md": "eins\n"}, "c2"
            ),
        )
        pr2 = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "C", "head": "conflict", "base": "main"}
        )
        assert pr2["mergeable"] is False
        assert pr2["mergeable_state"] == "dirty"
        with pytest.raises(BadRequest) as conflict:
            await gh.put(f"/repos/{REPO}/pulls/{pr2['number']}/update-branch", data={})
        assert conflict.value.status_code == 422

    kinds = {(d.event, d.action) for d in sim.deliveries}
    assert {
        ("check_run", "created"),
        ("check_run", "completed"),
        ("check_suite", "completed"),
        ("pull_request_review", "submitted"),
        ("pull_request", "synchronize"),
    } <= kinds
    review = sim.deliveries_of("pull_request_review", "submitted")[-1].payload
    assert review["review"]["state"] == "approved"


async def test_rebase_merge_reviews_close_and_branch_deletion(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    setup(sim)
    sim.push_files(REPO, "r", {"a.txt": "a\n"}, "alice", "a")
    sim.push_files(REPO, "r", {"b.txt": "b\n"}, "alice", "b")
    sim.push_files(REPO, "main", {"c.txt": "c\n"}, "alice", "c")
    async with aiohttp.ClientSession() as session:
        gh = client(sim, session)
        pr = await gh.post(f"/repos/{REPO}/pulls", data={"title": "R", "head": "r", "base": "main"})
        review = await gh.post(
            f"/repos/{REPO}/pulls/{pr['number']}/reviews",
            data={"event": "COMMENT", "body": "looks fine"},
        )
        assert review["state"] == "COMMENTED"
        reviews = [r async for r in gh.getiter(f"/repos/{REPO}/pulls/{pr['number']}/reviews")]
        assert [r["id"] for r in reviews] == [review["id"]]
        result = await gh.put(
            f"/repos/{REPO}/pulls/{pr['number']}/merge", data={"merge_method": "rebase"}
        )
        log = sim.repo(REPO).git("log", "--format=%s", "main").split("\n")
        assert log[:3] == ["b", "a", "c"]
        assert result["sha"] == sim.repo(REPO).branch_sha("main")

        sim.push_files(REPO, "gone", {"g.txt": "g\n"}, "alice", "g")
        pr2 = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "G", "head": "gone", "base": "main"}
        )
        await gh.delete(f"/repos/{REPO}/git/refs/heads/gone")
        assert (await gh.getitem(f"/repos/{REPO}/pulls/{pr2['number']}"))["state"] == "closed"

        sim.push_files(REPO, "p", {"p.txt": "p\n"}, "alice", "p")
        pr3 = await gh.post(
            f"/repos/{REPO}/pulls", data={"title": "P", "head": "p", "base": "main"}
        )
        sim.close_pr(REPO, pr3["number"], "alice")
        got = await gh.getitem(f"/repos/{REPO}/pulls/{pr3['number']}")
        assert got["state"] == "closed"
        assert got["merged"] is False
        open_prs = [p async for p in gh.getiter(f"/repos/{REPO}/pulls")]
        assert open_prs == []
    closed = sim.deliveries_of("pull_request", "closed")
    assert [c.payload["pull_request"]["merged"] for c in closed] == [True, False, False]


async def test_contents_refs_compare_statuses(github_sim: GitHubSimulator) -> None:
    import base64

    sim = github_sim
    setup(sim)
    async with aiohttp.ClientSession() as session:
        gh = client(sim, session)
        main = sim.repo(REPO).branch_sha("main")
        ref = await gh.post(f"/repos/{REPO}/git/refs", data={"ref": "refs/heads/work", "sha": main})
        assert ref["object"]["sha"] == main
        put = await gh.put(
            f"/repos/{REPO}/contents/docs/new.md",
            data={
                "message": "add doc",
                "content": base64.b64encode(b"# doc\n").decode(),
                "branch": "work",
            },
        )
        assert put["content"]["path"] == "docs/new.md"
        got = await gh.getitem(f"/repos/{REPO}/contents/docs/new.md?ref=work")
        assert base64.b64decode(got["content"]) == b"# doc\n"
        cmp = await gh.getitem(f"/repos/{REPO}/compare/main...work")
        assert cmp["status"] == "ahead"
        assert cmp["ahead_by"] == 1
        head = sim.repo(REPO).branch_sha("work")
        await gh.post(
            f"/repos/{REPO}/statuses/{head}", data={"state": "success", "context": "lint"}
        )
        combined = await gh.getitem(f"/repos/{REPO}/commits/{head}/status")
        assert combined["state"] == "success"
        branch = await gh.getitem(f"/repos/{REPO}/branches/work")
        assert branch["commit"]["sha"] == head
        assert branch["protected"] is False
        with pytest.raises(BadRequest) as unprotected:
            await gh.getitem(f"/repos/{REPO}/branches/main/protection")
        assert unprotected.value.status_code == 404
        sim.protect_branch(REPO, "main", required_checks=["lint"])
        protection = await gh.getitem(f"/repos/{REPO}/branches/main/protection")
        assert protection["required_status_checks"]["contexts"] == ["lint"]
        await gh.patch(f"/repos/{REPO}/git/refs/heads/work", data={"sha": main, "force": True})
        assert sim.repo(REPO).branch_sha("work") == main
        assert (await gh.getitem(f"/repos/{REPO}/git/ref/heads/work"))["object"]["sha"] == main
        repo = await gh.getitem(f"/repos/{REPO}")
        assert repo["clone_url"] == f"{sim.url}/git/{REPO}.git"
        inst = await gh.getitem("/installation/repositories")
        assert [r["full_name"] for r in inst["repositories"]] == [REPO]
        limits = await gh.getitem("/rate_limit")
        assert limits["resources"]["core"]["limit"] == 5000
