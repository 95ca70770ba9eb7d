"""The App's side through gidgethub: JWT, installation token, issues, git push, PR, merge."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from ghsim_helpers import clone, commit_file, git
from gidgethub import BadRequest
from gidgethub import aiohttp as gh_aiohttp
from gidgethub.apps import get_installation_access_token, get_jwt

from ghsim.server import GitHubSimulator

REPO = "octo/demo"


def setup(sim: GitHubSimulator) -> int:
    sim.create_repo("octo", "demo", {"README.md": "hello\n", "src/app.py": "print('hi')\n"})
    sim.set_permission(REPO, "alice", "write")
    return sim.install("octo", ["demo"])


async def app_client(
    sim: GitHubSimulator, session: aiohttp.ClientSession, inst: int
) -> gh_aiohttp.GitHubAPI:
    gh = gh_aiohttp.GitHubAPI(session, "scaffold-tests", base_url=sim.url)
    token = await get_installation_access_token(
        gh, installation_id=str(inst), app_id=str(sim.app_id), private_key=sim.private_key_pem
    )
    assert token["token"].startswith("ghs_")
    return gh_aiohttp.GitHubAPI(
        session, "scaffold-tests", oauth_token=token["token"], base_url=sim.url
    )


async def test_label_comment_push_pr_merge(github_sim: GitHubSimulator, tmp_path: Path) -> None:
    sim = github_sim
    inst = setup(sim)
    number = sim.open_issue(REPO, "Add a greeting", "Please greet", "alice")
    sim.label_issue(REPO, number, "scaffold", "alice")
    async with aiohttp.ClientSession() as session:
        jwt_client = gh_aiohttp.GitHubAPI(session, "scaffold-tests", base_url=sim.url)
        app = await jwt_client.getitem(
            "/app", jwt=get_jwt(app_id=str(sim.app_id), private_key=sim.private_key_pem)
        )
        assert app["slug"] == "scaffold-app"
        gh = await app_client(sim, session, inst)
        assert sim.tokens_issued == 1

        issue = await gh.getitem(f"/repos/{REPO}/issues/{number}")
        assert [lab["name"] for lab in issue["labels"]] == ["scaffold"]
        await gh.post(
            f"/repos/{REPO}/issues/{number}/labels", data={"labels": ["scaffold:working"]}
        )
        await gh.delete(f"/repos/{REPO}/issues/{number}/labels/scaffold")
        comment = await gh.post(f"/repos/{REPO}/issues/{number}/comments", data={"body": "On it."})
        assert comment["user"]["login"] == "scaffold-app[bot]"
        reaction = await gh.post(
            f"/repos/{REPO}/issues/comments/{comment['id']}/reactions", data={"content": "eyes"}
        )
        assert reaction["content"] == "eyes"
        perm = await gh.getitem(f"/repos/{REPO}/collaborators/alice/permission")
        assert perm["permission"] == "write"

        token = sim.installation_token(REPO)
        work = clone(sim, REPO, tmp_path / "work", token)
        git(work, "checkout", "-q", "-b", "scaffold/task-1")
        head = commit_file(work, "greet.py", "print('hello')\n", "Add greeting")
        git(work, "push", "-q", "origin", "scaffold/task-1")
        assert sim.repo(REPO).branch_sha("scaffold/task-1") == head

        pr = await gh.post(
            f"/repos/{REPO}/pulls",
            data={
                "title": "Add greeting",
                "head": "scaffold/task-1",
                "base": "main",
                "body": f"Closes #{number}",
            },
        )
        assert pr["head"]["sha"] == head
        assert pr["mergeable_state"] == "clean"
        assert pr["head"]["repo"]["clone_url"] == f"{sim.url}/git/{REPO}.git"
        files = [f async for f in gh.getiter(f"/repos/{REPO}/pulls/{pr['number']}/files")]
        assert [f["filename"] for f in files] == ["greet.py"]

        # A second push to the PR's branch: pull_request.synchronize.
        head2 = commit_file(work, "greet.py", "print('hello, world')\n", "Polish greeting")
        git(work, "push", "-q", "origin", "scaffold/task-1")

        with pytest.raises(BadRequest) as conflict:
            await gh.put(f"/repos/{REPO}/pulls/{pr['number']}/merge", data={"sha": head})
        assert conflict.value.status_code == 409

        result = await gh.put(
            f"/repos/{REPO}/pulls/{pr['number']}/merge",
            data={"sha": head2, "merge_method": "merge"},
        )
        assert result["merged"] is True
        assert await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}/merge") is None  # 204

    repo = sim.repo(REPO)
    main = repo.branch_sha("main")
    assert main == result["sha"]
    parents = repo.git("rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert parents[1] == head2
    assert repo.file_at("main", "greet.py") == b"print('hello, world')\n"
    sim.wait_deliveries()
    kinds = [(d.event, d.action) for d in sim.deliveries]
    for expected in [
        ("issues", "opened"),
        ("issues", "labeled"),
        ("issues", "unlabeled"),
        ("issue_comment", "created"),
        ("push", None),
        ("pull_request", "opened"),
        ("pull_request", "synchronize"),
        ("check_suite", "requested"),
        ("pull_request", "closed"),
    ]:
        assert expected in kinds, expected
    closed = sim.deliveries_of("pull_request", "closed")[-1].payload
    assert closed["pull_request"]["merged"] is True
    assert closed["installation"]["id"] == inst
    bot_comment = sim.deliveries_of("issue_comment", "created")[-1].payload
    assert bot_comment["sender"]["login"] == "scaffold-app[bot]"
    assert bot_comment["sender"]["type"] == "Bot"


async def test_bad_tokens_are_401(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    setup(sim)
    number = sim.open_issue(REPO, "t", "b", "alice")
    async with aiohttp.ClientSession() as session:
        for headers in ({"Authorization": "token ghs_not_a_real_token"}, {}):
            async with session.get(
                f"{sim.url}/repos/{REPO}/issues/{number}", headers=headers
            ) as resp:
                assert resp.status == 401
                assert "message" in await resp.json()
        sim.token_ttl_s = -1
        expired = sim.installation_token(REPO)
        async with session.get(
            f"{sim.url}/repos/{REPO}/issues/{number}", headers={"Authorization": f"token {expired}"}
        ) as resp:
            assert resp.status == 401
        bad_jwt = get_jwt(app_id="999", private_key=sim.private_key_pem)
        async with session.get(
            f"{sim.url}/app", headers={"Authorization": f"Bearer {bad_jwt}"}
        ) as resp:
            assert resp.status == 401
        async with session.get(
            f"{sim.url}/app", headers={"Authorization": f"Bearer {sim.app_jwt(expires_in=3600)}"}
        ) as resp:
            assert resp.status == 401


async def test_unknown_issue_is_404_and_validation_422(github_sim: GitHubSimulator) -> None:
    sim = github_sim
    setup(sim)
    async with aiohttp.ClientSession() as session:
        gh = gh_aiohttp.GitHubAPI(
            session, "t", oauth_token=sim.installation_token(REPO), base_url=sim.url
        )
        with pytest.raises(BadRequest) as missing:
            await gh.getitem(f"/repos/{REPO}/issues/999")
        assert missing.value.status_code == 404
        with pytest.raises(Exception) as bad:
            await gh.post(f"/repos/{REPO}/labels", data={"name": "x", "color": "nothex"})
        assert getattr(bad.value, "status_code", None) == 422
