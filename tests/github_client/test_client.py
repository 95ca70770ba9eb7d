"""The client layer against the GitHub simulator: App auth, tokens, pagination, retries.

Every failure the simulator injects is served before the operation runs, so counting
comments afterwards shows whether a write was lost or doubled by the retries.
"""

from __future__ import annotations

import base64
import logging
import socket

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from plain_token import token_client

from ghsim.server import GitHubSimulator
from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github.auth import AppCredentials
from scaffold.github.client import GitHubApp, GitHubClient, RetryPolicy

OWNER, NAME = "octo", "demo"
REPO = f"{OWNER}/{NAME}"
REPO_VARS = {"owner": OWNER, "repo": NAME}
COMMENTS = "/repos/{owner}/{repo}/issues/{number}/comments"
KEY_PEM = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)


def comments_on(sim: GitHubSimulator, number: int) -> list[str]:
    return [c.body for c in sim.repo(REPO).comments.values() if c.issue_number == number]


async def post_comment(client: GitHubClient, number: int, body: str) -> dict[str, object]:
    result: dict[str, object] = await client.post(
        COMMENTS, {**REPO_VARS, "number": number}, data={"body": body}
    )
    return result


# ---------------------------------------------------------------- reading and writing


async def test_installation_client_reads_writes_and_pages(site, app: GitHubApp) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    repo = await client.get("/repos/{owner}/{repo}", REPO_VARS)
    assert repo["full_name"] == REPO
    assert repo["default_branch"] == "main"

    for n in range(22):
        sim.comment(REPO, site.issue, f"note {n}", "alice")
    posted = await post_comment(client, site.issue, "On it.")
    assert posted["body"] == "On it."
    assert posted["user"]["login"] == sim.bot_login  # type: ignore[index]

    every = await client.get_all(COMMENTS + "?per_page=10", {**REPO_VARS, "number": site.issue})
    assert [c["body"] for c in every] == [*(f"note {n}" for n in range(22)), "On it."]
    pages = [r for r in sim.requests if r[0] == "GET" and r[1].endswith("/comments")]
    assert len(pages) == 3  # 10 + 10 + 3, following the Link header

    default_pages = await client.get_all(COMMENTS, {**REPO_VARS, "number": site.issue})
    assert len(default_pages) == 23


async def test_more_than_thirty_comments_come_back_with_the_default_page_size(
    site, app: GitHubApp
) -> None:
    for n in range(31):
        site.sim.comment(REPO, site.issue, f"c{n}", "alice")
    client = app.installation(site.installation_id)
    every = await client.get_all(COMMENTS, {**REPO_VARS, "number": site.issue})
    assert [c["body"] for c in every] == [f"c{n}" for n in range(31)]


async def test_wrapped_lists_are_unwrapped_by_key(site, app: GitHubApp) -> None:
    client = app.installation(site.installation_id)
    repos = await client.get_all("/installation/repositories", key="repositories")
    assert [r["full_name"] for r in repos] == [REPO]


async def test_patch_put_and_delete_go_through(site, app: GitHubApp) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    issue_vars = {**REPO_VARS, "number": site.issue}
    posted = await post_comment(client, site.issue, "draft")
    edited = await client.patch(
        "/repos/{owner}/{repo}/issues/comments/{id}",
        {**REPO_VARS, "id": str(posted["id"])},
        data={"body": "final"},
    )
    assert edited["body"] == "final"
    assert comments_on(sim, site.issue) == ["final"]

    written = await client.put(
        "/repos/{owner}/{repo}/contents/{path}",
        {**REPO_VARS, "path": "notes.txt"},
        data={"message": "Add notes", "content": base64.b64encode(b"noted\n").decode()},
    )
    assert written["content"]["path"] == "notes.txt"
    assert sim.repo(REPO).file_at("main", "notes.txt") == b"noted\n"

    labels = await client.post(
        "/repos/{owner}/{repo}/issues/{number}/labels", issue_vars, data={"labels": ["a", "b"]}
    )
    assert sorted(lab["name"] for lab in labels) == ["a", "b"]
    await client.delete(
        "/repos/{owner}/{repo}/issues/{number}/labels/{name}", {**issue_vars, "name": "a"}
    )
    assert sim.repo(REPO).state.issues[site.issue].labels == ["b"]


async def test_url_vars_are_escaped_not_spliced() -> None:
    """A value with ``/`` or ``..`` stays one path segment (checked on the raw path)."""
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response({"ok": True})

    server = TestServer(web.Application())
    server.app.router.add_get("/{tail:.*}", handler)
    await server.start_server()
    client, session = token_client("t", base_url=str(server.make_url("")))
    try:
        await client.get("/repos/{owner}/{repo}", {"owner": "octo", "repo": "demo/issues"})
        await client.get("/repos/{owner}/{repo}", {"owner": "o", "repo": "a?b=c#d"})
        for dots in (".", ".."):
            with pytest.raises(ScaffoldError, match="may not be"):
                await client.get("/repos/{owner}/{repo}/issues", {"owner": "o", "repo": dots})
        await client.get("/repos/{owner}/{repo}", {"owner": "o", "repo": "..."})
    finally:
        await session.close()
        await server.close()
    # "=" may stay as it is inside a path segment; the rest is escaped.
    assert seen == ["/repos/octo/demo%2Fissues", "/repos/o/a%3Fb=c%23d", "/repos/o/..."]


# ---------------------------------------------------------------- App auth and tokens


async def test_app_client_authenticates_with_a_jwt(site, app: GitHubApp) -> None:
    me = await app.app_client().get("/app")
    assert me["slug"] == site.sim.app_slug
    installations = await app.app_client().get_all("/app/installations")
    assert [i["id"] for i in installations] == [site.installation_id]
    assert site.sim.tokens_issued == 0


async def test_one_client_per_installation_and_one_token_for_many_calls(
    site, app: GitHubApp
) -> None:
    client = app.installation(site.installation_id)
    assert app.installation(site.installation_id) is client
    for _ in range(3):
        await client.get("/repos/{owner}/{repo}", REPO_VARS)
    await app.installation(site.installation_id).get("/repos/{owner}/{repo}", REPO_VARS)
    assert site.sim.tokens_issued == 1
    assert (await client.token()).startswith("ghs_")


async def test_a_short_lived_token_is_minted_again(site, clock, sleeps) -> None:
    sim = site.sim
    sim.token_ttl_s = 60
    app = GitHubApp(
        AppCredentials(sim.app_id, sim.private_key_pem),
        base_url=sim.url,
        clock=clock,
        sleep=sleeps,
        refresh_margin_s=45,
    )
    try:
        client = app.installation(site.installation_id)
        await client.get("/repos/{owner}/{repo}", REPO_VARS)
        await client.get("/repos/{owner}/{repo}", REPO_VARS)
        assert sim.tokens_issued == 1
        # The jump stays within the simulator's JWT clock-skew allowance (the same clock
        # signs the JWT that mints the next token).
        clock.advance(50)
        await client.get("/repos/{owner}/{repo}", REPO_VARS)
        assert sim.tokens_issued == 2
    finally:
        await app.close()


async def test_installations_get_their_own_clients_and_tokens(site, app: GitHubApp) -> None:
    sim = site.sim
    sim.create_repo("acme", "tools", {"README.md": "x\n"})
    other = sim.install("acme", ["tools"])
    first, second = app.installation(site.installation_id), app.installation(other)
    assert first is not second
    await first.get("/repos/{owner}/{repo}", REPO_VARS)
    await second.get("/repos/{owner}/{repo}", {"owner": "acme", "repo": "tools"})
    assert sim.tokens_issued == 2
    assert await first.token() != await second.token()
    with pytest.raises(GitHubError) as caught:  # a token only reaches its own repositories
        await second.get("/repos/{owner}/{repo}", REPO_VARS)
    assert caught.value.status == 404


async def test_a_plain_token_client(site) -> None:
    sim = site.sim
    client, session = token_client(sim.installation_token(REPO), base_url=sim.url + "/")
    try:
        assert client.base_url == sim.url
        repo = await client.get("/repos/{owner}/{repo}", REPO_VARS)
        assert repo["full_name"] == REPO
    finally:
        await session.close()


async def test_a_revoked_token_is_a_401(site) -> None:
    client, session = token_client("ghs_" + "x" * 36, base_url=site.sim.url)
    try:
        with pytest.raises(GitHubError) as caught:
            await client.get("/repos/{owner}/{repo}", REPO_VARS)
        assert caught.value.status == 401
    finally:
        await session.close()


# ---------------------------------------------------------------- retries


async def test_two_bad_gateways_then_the_write_happens_once(site, app: GitHubApp, sleeps) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    await client.get("/repos/{owner}/{repo}", REPO_VARS)  # mint the token first
    sim.inject("POST", r"/issues/\d+/comments$", status=502, times=2)
    posted = await post_comment(client, site.issue, "hello")
    assert posted["body"] == "hello"
    assert sim.injected_hits == 2
    assert sleeps.delays == [0.01, 0.02]
    assert comments_on(sim, site.issue) == ["hello"]


async def test_429_waits_for_retry_after_then_writes_once(site, app: GitHubApp, sleeps) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    await client.get("/repos/{owner}/{repo}", REPO_VARS)
    sim.inject("POST", r"/issues/\d+/comments$", status=429, headers={"Retry-After": "1"})
    await post_comment(client, site.issue, "after the limit")
    assert sleeps.delays == [1.0]
    assert comments_on(sim, site.issue) == ["after the limit"]


async def test_primary_rate_limit_waits_until_the_reset(
    site, app: GitHubApp, sleeps, clock
) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    await client.get("/repos/{owner}/{repo}", REPO_VARS)
    reset = int(clock()) + 42
    sim.inject(
        "POST",
        r"/issues/\d+/comments$",
        status=403,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
        body={"message": "API rate limit exceeded"},
    )
    await post_comment(client, site.issue, "after the reset")
    assert sleeps.delays == [43.0]
    assert comments_on(sim, site.issue) == ["after the reset"]


async def test_a_rate_limit_resetting_too_late_is_reported(
    site, app: GitHubApp, sleeps, clock
) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    await client.get("/repos/{owner}/{repo}", REPO_VARS)
    sim.inject(
        "POST",
        r"/issues/\d+/comments$",
        status=403,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(clock()) + 7200)},
        body={"message": "API rate limit exceeded"},
    )
    with pytest.raises(GitHubError) as caught:
        await post_comment(client, site.issue, "never")
    assert caught.value.status == 403
    assert sleeps.delays == []
    assert comments_on(sim, site.issue) == []


async def test_a_timeout_is_retried(site, clock, sleeps) -> None:
    sim = site.sim
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, timeout_s=1.0)
    app = GitHubApp(
        AppCredentials(sim.app_id, sim.private_key_pem),
        base_url=sim.url,
        policy=policy,
        clock=clock,
        sleep=sleeps,
    )
    try:
        client = app.installation(site.installation_id)
        await client.get("/repos/{owner}/{repo}", REPO_VARS)
        sim.inject("GET", rf"^/repos/{REPO}$", status=200, body={}, delay_s=2.5)
        repo = await client.get("/repos/{owner}/{repo}", REPO_VARS)
        assert repo["full_name"] == REPO  # the second, undelayed answer
        assert sim.injected_hits == 1
        assert sleeps.delays == [0.01]
    finally:
        await app.close()


async def test_giving_up_after_max_attempts_raises_with_the_status(
    site, app: GitHubApp, sleeps
) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    await client.get("/repos/{owner}/{repo}", REPO_VARS)
    sim.inject("POST", r"/issues/\d+/comments$", status=503, times=10)
    with pytest.raises(GitHubError) as caught:
        await post_comment(client, site.issue, "lost")
    err = caught.value
    assert err.status == 503
    assert err.method == "POST"
    assert err.path == COMMENTS
    assert sim.injected_hits == app.policy.max_attempts == 4
    assert len(sleeps.delays) == 3
    assert comments_on(sim, site.issue) == []


async def test_no_response_at_all_gives_up_with_no_status(sleeps, clock) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = GitHubApp(
        AppCredentials(1, KEY_PEM),
        base_url=f"http://127.0.0.1:{port}",
        policy=RetryPolicy(max_attempts=3),
        clock=clock,
        sleep=sleeps,
    )
    try:
        with pytest.raises(GitHubError) as caught:
            await app.app_client().get("/app")
        assert caught.value.status is None
        assert "no response" in str(caught.value)
        assert sleeps.delays == [0.5, 1.0]
    finally:
        await app.close()


async def test_404_is_raised_at_once(site, app: GitHubApp, sleeps) -> None:
    client = app.installation(site.installation_id)
    with pytest.raises(GitHubError) as caught:
        await client.get("/repos/{owner}/{repo}/issues/{number}", {**REPO_VARS, "number": 999})
    assert caught.value.status == 404
    assert sleeps.delays == []


async def test_422_is_raised_at_once_with_githubs_message(site, app: GitHubApp, sleeps) -> None:
    client = app.installation(site.installation_id)
    with pytest.raises(GitHubError) as caught:
        await client.post(
            "/repos/{owner}/{repo}/labels", REPO_VARS, data={"name": "x", "color": "zzzzzz"}
        )
    assert caught.value.status == 422
    assert "Validation Failed" in str(caught.value)
    assert sleeps.delays == []


async def test_retry_logs_carry_no_token(
    site, app: GitHubApp, caplog: pytest.LogCaptureFixture
) -> None:
    sim = site.sim
    client = app.installation(site.installation_id)
    await client.get("/repos/{owner}/{repo}", REPO_VARS)
    token = await client.token()
    sim.inject("POST", r"/issues/\d+/comments$", status=502)
    sim.inject("POST", r"/issues/\d+/comments$", status=429, headers={"Retry-After": "0"})
    with caplog.at_level(logging.DEBUG):
        await post_comment(client, site.issue, "logged")
    retries = [r for r in caplog.records if r.name == "scaffold.github"]
    assert len(retries) == 2
    assert {r.reason for r in retries} == {  # type: ignore[attr-defined]
        "HTTP 502",
        "secondary rate limit (429, Retry-After 0)",
    }
    everything = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records) + caplog.text
    assert "ghs_" not in everything
    assert token not in everything
