"""The review loop of a pull request, through the client the product uses (gidgethub under
``scaffold.github.client``): inline comments on the real diff, threads of replies, requested
reviewers, other Apps' failing checks with annotations, and an Actions job's log."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from ghsim_helpers import Receiver
from gidgethub import aiohttp as gh_aiohttp
from gidgethub import sansio

from ghsim import GitHubSimulator
from ghsim.fixture import WEBHOOK_SECRET
from ghsim.webhooks import schema_errors
from scaffold.errors import GitHubError
from scaffold.github.auth import AppCredentials
from scaffold.github.client import GitHubApp

Vars = dict[str, str | int]
REPO = "acme/calc"
BRANCH = "scaffold/task-1"
BASE_FILE = "".join(f"v{i} = {i}\n" for i in range(1, 21))
# Line 3 changed, a line added after line 15, line 19 removed: two hunks.
HEAD_FILE = (
    "".join(f"v{i} = {i}\n" for i in range(1, 3))
    + "v3 = 33\n"
    + "".join(f"v{i} = {i}\n" for i in range(4, 16))
    + "extra = 1\n"
    + "".join(f"v{i} = {i}\n" for i in range(16, 19))
    + "v20 = 20\n"
)
FIRST_HUNK = "@@ -1,6 +1,6 @@\n v1 = 1\n v2 = 2\n-v3 = 3\n+v3 = 33"
# git names the hunk after the nearest line above it that starts a "function" (by
# default any line starting with a letter), as GitHub's diff_hunk shows it too.
SECOND_HUNK_HEADER = "@@ -13,8 +13,8 @@ v12 = 12"


def setup(sim: GitHubSimulator) -> tuple[int, int, str]:
    """acme/calc with alice's pull request of two hunks; bob and carol may review."""
    sim.create_repo("acme", "calc", {"README.md": "calc\n", "src/calc.py": BASE_FILE})
    for login in ("alice", "bob", "carol"):
        sim.set_permission(REPO, login, "write")
    sim.set_permission(REPO, "dave", "none")
    inst = sim.install("acme", ["calc"])
    head = sim.push_files(REPO, BRANCH, {"src/calc.py": HEAD_FILE}, "alice", "Tune calc")
    number = sim.open_pull(REPO, BRANCH, by="alice", title="Tune calc")
    return inst, number, head


@pytest.fixture
async def github_app(github_sim: GitHubSimulator) -> AsyncIterator[GitHubApp]:
    credentials = AppCredentials(github_sim.app_id, github_sim.private_key_pem)
    app = GitHubApp(credentials, base_url=github_sim.url)
    yield app
    await app.close()


def kinds(sim: GitHubSimulator, start: int = 0) -> list[tuple[str, str | None]]:
    return [(d.event, d.action) for d in sim.deliveries[start:]]


async def test_inline_comments_sit_on_their_line_of_the_real_diff(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    gh = github_app.installation(inst)
    review_id = sim.submit_review(
        REPO,
        number,
        "CHANGES_REQUESTED",
        by="bob",
        body="A few things",
        comments=[
            {"path": "src/calc.py", "line": 3, "side": "RIGHT", "body": "Why 33?"},
            {"path": "src/calc.py", "line": 16, "side": "RIGHT", "body": "Name it."},
            {"path": "src/calc.py", "line": 19, "side": "LEFT", "body": "Keep v19."},
            {
                "path": "src/calc.py",
                "start_line": 14,
                "line": 16,
                "side": "RIGHT",
                "body": "This block.",
            },
        ],
    )
    listed = await gh.get_all(
        "/repos/{owner}/{repo}/pulls/{number}/comments",
        {"owner": "acme", "repo": "calc", "number": number},
    )
    assert [c["body"] for c in listed] == ["Why 33?", "Name it.", "Keep v19.", "This block."]
    first, second, left, block = listed
    assert first["diff_hunk"] == FIRST_HUNK
    assert (first["line"], first["side"], first["position"]) == (3, "RIGHT", 4)
    assert (first["original_line"], first["original_position"]) == (3, 4)
    assert (first["start_line"], first["start_side"]) == (None, None)
    assert second["diff_hunk"] == (
        f"{SECOND_HUNK_HEADER}\n v13 = 13\n v14 = 14\n v15 = 15\n+extra = 1"
    )
    # Later hunks' headers count in the position, as GitHub's does.
    assert (second["line"], second["position"]) == (16, 12)
    assert (left["side"], left["line"], left["position"]) == ("LEFT", 19, 16)
    assert left["diff_hunk"].endswith("\n v18 = 18\n-v19 = 19")
    assert (block["start_line"], block["start_side"], block["line"]) == (14, "RIGHT", 16)
    assert block["diff_hunk"] == second["diff_hunk"]
    for comment in listed:
        assert comment["pull_request_review_id"] == review_id
        assert comment["commit_id"] == comment["original_commit_id"] == head
        assert comment["user"]["login"] == "bob"
        assert comment["path"] == "src/calc.py"
        assert comment["author_association"] == "COLLABORATOR"
        assert "in_reply_to_id" not in comment
        assert comment["html_url"].endswith(f"/pull/{number}#discussion_r{comment['id']}")
        assert comment["_links"]["pull_request"]["href"].endswith(f"/pulls/{number}")
        assert comment["reactions"]["total_count"] == 0
    one = await gh.get(
        "/repos/{owner}/{repo}/pulls/comments/{id}",
        {"owner": "acme", "repo": "calc", "id": first["id"]},
    )
    assert one == first
    pr = await gh.get(
        "/repos/{owner}/{repo}/pulls/{number}", {"owner": "acme", "repo": "calc", "number": number}
    )
    assert pr["review_comments"] == 4
    commits = await gh.get_all(
        "/repos/{owner}/{repo}/pulls/{number}/commits",
        {"owner": "acme", "repo": "calc", "number": number},
    )
    assert [c["sha"] for c in commits] == [head]
    assert commits[0]["commit"]["message"] == "Tune calc"


async def test_comments_follow_pushes_until_their_line_changes(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    gh = github_app.installation(inst)
    sim.submit_review(
        REPO,
        number,
        "COMMENTED",
        by="bob",
        body="hm",
        comments=[
            {"path": "src/calc.py", "line": 3, "body": "Why 33?"},
            {"path": "src/calc.py", "line": 16, "body": "Name it."},
        ],
    )
    url = "/repos/{owner}/{repo}/pulls/{number}/comments"
    where: Vars = {"owner": "acme", "repo": "calc", "number": number}
    # Two lines above: both comments move down two lines, onto the new head.
    moved = sim.push_files(
        REPO, BRANCH, {"src/calc.py": "# calc\n#\n" + HEAD_FILE}, "alice", "Header"
    )
    first, second = await gh.get_all(url, where)
    assert (first["line"], first["commit_id"], first["original_line"]) == (3 + 2, moved, 3)
    assert first["original_commit_id"] == head
    assert second["line"] == 18
    assert first["diff_hunk"] == FIRST_HUNK  # where it was made
    # The commented line itself changes: that comment is outdated, the other moves on.
    fixed = sim.push_files(
        REPO,
        BRANCH,
        {"src/calc.py": ("# calc\n#\n" + HEAD_FILE).replace("v3 = 33", "v3 = 3")},
        "alice",
        "Back to 3",
    )
    first, second = await gh.get_all(url, where)
    assert "line" not in first  # GitHub answers null; the REST description has no null
    assert "position" not in first
    assert (first["commit_id"], first["original_line"]) == (head, 3)
    assert (second["line"], second["commit_id"]) == (18, fixed)


async def test_replies_thread_under_the_first_comment(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    gh = github_app.installation(inst)
    review_id = sim.submit_review(
        REPO,
        number,
        "CHANGES_REQUESTED",
        by="bob",
        body="x",
        comments=[{"path": "src/calc.py", "line": 3, "side": "RIGHT", "body": "Why 33?"}],
    )
    (top_id,) = sim.review_comments_of(REPO, review_id)
    start = len(sim.deliveries)
    where: Vars = {"owner": "acme", "repo": "calc", "number": number, "id": top_id}
    answer = await gh.post(
        "/repos/{owner}/{repo}/pulls/{number}/comments/{id}/replies",
        where,
        data={"body": "Because the spec says so."},
    )
    assert answer["in_reply_to_id"] == top_id
    assert answer["user"]["login"] == sim.bot_login
    assert answer["diff_hunk"] == FIRST_HUNK
    assert (answer["path"], answer["line"], answer["side"], answer["commit_id"]) == (
        "src/calc.py",
        3,
        "RIGHT",
        head,
    )
    # A reply is a review of its own (COMMENTED), as on GitHub.
    assert answer["pull_request_review_id"] not in (None, review_id)
    assert kinds(sim, start) == [
        ("pull_request_review_comment", "created"),
        ("pull_request_review", "submitted"),
    ]
    created = sim.deliveries[start].payload
    assert created["comment"]["in_reply_to_id"] == top_id
    assert created["comment"]["id"] == answer["id"]
    assert created["pull_request"]["number"] == number
    assert sim.deliveries[start + 1].payload["review"]["state"] == "commented"

    # Bob answers the App's reply: GitHub files it under the thread's first comment too.
    again = sim.reply_review_comment(REPO, number, answer["id"], "Then fine.", by="bob")
    payload = sim.deliveries_of("pull_request_review_comment", "created")[-1].payload
    assert payload["comment"]["id"] == again
    assert payload["comment"]["in_reply_to_id"] == top_id
    assert payload["sender"]["login"] == "bob"
    # create-review-comment with in_reply_to is the older way to reply (GitHub ignores
    # every other field then; the description still requires commit_id and path).
    third = await gh.post(
        "/repos/{owner}/{repo}/pulls/{number}/comments",
        where,
        data={"body": "Noted.", "in_reply_to": again, "commit_id": head, "path": "x"},
    )
    assert third["in_reply_to_id"] == top_id
    thread = await gh.get_all("/repos/{owner}/{repo}/pulls/{number}/comments", where)
    assert [(c["id"], c.get("in_reply_to_id")) for c in thread] == [
        (top_id, None),
        (answer["id"], top_id),
        (again, top_id),
        (third["id"], top_id),
    ]
    edited = await gh.patch(
        "/repos/{owner}/{repo}/pulls/comments/{id}",
        {"owner": "acme", "repo": "calc", "id": answer["id"]},
        data={"body": "Because the spec says so (section 3)."},
    )
    assert edited["body"].endswith("(section 3).")
    change = sim.deliveries_of("pull_request_review_comment", "edited")[-1].payload
    assert change["changes"] == {"body": {"from": "Because the spec says so."}}


async def test_a_comment_outside_the_diff_is_refused(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    gh = github_app.installation(inst)
    url = "/repos/{owner}/{repo}/pulls/{number}/comments"
    where: Vars = {"owner": "acme", "repo": "calc", "number": number}
    start = len(sim.deliveries)
    for body in (
        {"path": "src/calc.py", "line": 9, "side": "RIGHT"},  # an unchanged line
        {"path": "README.md", "line": 1, "side": "RIGHT"},  # a file the PR does not touch
        {"path": "src/calc.py", "line": 9, "side": "LEFT"},  # nor on the old side
    ):
        with pytest.raises(GitHubError) as refused:
            await gh.post(url, where, data={"body": "b", "commit_id": head, **body})
        assert refused.value.status == 422
        assert "must be part of the diff" in str(refused.value)
    with pytest.raises(GitHubError) as split:
        await gh.post(
            url,
            where,
            data={
                "body": "b",
                "commit_id": head,
                "path": "src/calc.py",
                "start_line": 2,
                "line": 16,
            },
        )
    assert split.value.status == 422
    assert "same hunk" in str(split.value)
    base = sim.repo(REPO).branch_sha("main")
    assert base is not None
    with pytest.raises(GitHubError) as foreign:
        await gh.post(
            url, where, data={"body": "b", "commit_id": base, "path": "src/calc.py", "line": 3}
        )
    assert foreign.value.status == 422
    # A review whose comment is off the diff is refused whole, in GitHub's words.
    with pytest.raises(GitHubError) as whole:
        await gh.post(
            "/repos/{owner}/{repo}/pulls/{number}/reviews",
            where,
            data={
                "event": "COMMENT",
                "body": "see",
                "comments": [
                    {"path": "src/calc.py", "line": 3, "body": "fine"},
                    {"path": "src/calc.py", "line": 9, "body": "off"},
                ],
            },
        )
    assert whole.value.status == 422
    assert "diff hunk can't be blank" in str(whole.value)
    with pytest.raises(ValueError, match="must be part of the diff"):
        sim.submit_review(
            REPO, number, "COMMENTED", by="bob", comments=[{"path": "x.py", "line": 1, "body": "?"}]
        )
    assert sim.repo(REPO).review_comments == {}
    assert not [r for r in sim.repo(REPO).reviews.values() if r.pr_number == number]
    assert kinds(sim, start) == []
    # The same review with its comments on the diff goes through, comments and all.
    made = await gh.post(
        "/repos/{owner}/{repo}/pulls/{number}/reviews",
        where,
        data={
            "event": "COMMENT",
            "body": "see",
            "comments": [{"path": "src/calc.py", "line": 3, "body": "fine"}],
        },
    )
    listed = await gh.get_all(
        "/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}/comments",
        {**where, "review_id": made["id"]},
    )
    assert [(c["body"], c["position"], c["pull_request_review_id"]) for c in listed] == [
        ("fine", 4, made["id"])
    ]


async def test_requested_reviewers_come_and_go(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, _ = setup(sim)
    gh = github_app.installation(inst)
    url = "/repos/{owner}/{repo}/pulls/{number}/requested_reviewers"
    where: Vars = {"owner": "acme", "repo": "calc", "number": number}
    start = len(sim.deliveries)
    pr = await gh.post(url, where, data={"reviewers": ["bob", "carol"]})
    assert [u["login"] for u in pr["requested_reviewers"]] == ["bob", "carol"]
    asked = sim.deliveries_of("pull_request", "review_requested")
    assert [d.payload["requested_reviewer"]["login"] for d in asked] == ["bob", "carol"]
    assert asked[-1].payload["sender"]["login"] == sim.bot_login
    assert [u["login"] for u in asked[-1].payload["pull_request"]["requested_reviewers"]] == [
        "bob",
        "carol",
    ]
    listed = await gh.get(url, where)
    assert [u["login"] for u in listed["users"]] == ["bob", "carol"]
    assert listed["teams"] == []
    for login, why in (("alice", "pull request author"), ("dave", "collaborators")):
        with pytest.raises(GitHubError) as refused:
            await gh.post(url, where, data={"reviewers": [login]})
        assert refused.value.status == 422
        assert why in str(refused.value)

    # GitHubClient.delete sends no body; the call needs one (gidgethub can).
    async with aiohttp.ClientSession() as session:
        raw = gh_aiohttp.GitHubAPI(
            session, "t", oauth_token=sim.installation_token(REPO), base_url=sim.url
        )
        await raw.delete(
            f"/repos/{REPO}/pulls/{number}/requested_reviewers", data={"reviewers": ["carol"]}
        )
    left = await gh.get("/repos/{owner}/{repo}/pulls/{number}", where)
    assert [u["login"] for u in left["requested_reviewers"]] == ["bob"]
    removed = sim.deliveries_of("pull_request", "review_request_removed")[-1].payload
    assert removed["requested_reviewer"]["login"] == "carol"

    # Bob's review answers the request: he is no longer a requested reviewer.
    sim.submit_review(REPO, number, "APPROVED", by="bob")
    assert (await gh.get(url, where))["users"] == []
    pull = await gh.get("/repos/{owner}/{repo}/pulls/{number}", where)
    assert pull["requested_reviewers"] == []
    assert kinds(sim, start) == [
        ("pull_request", "review_requested"),
        ("pull_request", "review_requested"),
        ("pull_request", "review_request_removed"),
        ("pull_request_review", "submitted"),
    ]
    # A person asks too; asking again for one already asked sends nothing more.
    sim.request_review(REPO, number, ["carol"], by="alice")
    sim.request_review(REPO, number, ["carol"], by="alice")
    assert len(sim.deliveries_of("pull_request", "review_requested")) == 3
    # A reply (a COMMENTED review) answers a request as well.
    review_id = sim.submit_review(
        REPO,
        number,
        "COMMENTED",
        by="bob",
        comments=[{"path": "src/calc.py", "line": 3, "body": "?"}],
    )
    sim.reply_review_comment(
        REPO, number, sim.review_comments_of(REPO, review_id)[0], "ok", by="carol"
    )
    assert sim.repo(REPO).pulls[number].requested_reviewers == []


async def test_changes_requested_with_two_comments_delivers_comments_then_review(
    github_sim: GitHubSimulator, receiver: Receiver
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    sim.set_webhook(receiver.url, WEBHOOK_SECRET)
    start = len(sim.deliveries)
    review_id = sim.submit_review(
        REPO,
        number,
        "CHANGES_REQUESTED",
        by="bob",
        body="Please fix",
        comments=[
            {"path": "src/calc.py", "line": 3, "side": "RIGHT", "body": "one"},
            {"path": "src/calc.py", "line": 16, "side": "RIGHT", "body": "two"},
        ],
    )
    sim.wait_deliveries()
    sent = sim.deliveries[start:]
    assert [(d.event, d.action) for d in sent] == [
        ("pull_request_review_comment", "created"),
        ("pull_request_review_comment", "created"),
        ("pull_request_review", "submitted"),
    ]
    got = receiver.received[-3:]
    for d, posted in zip(sent, got, strict=True):
        event = sansio.Event.from_http(
            {k.lower(): v for k, v in posted.headers.items()}, posted.body, secret=WEBHOOK_SECRET
        )
        assert (event.event, event.data["action"]) == (d.event, d.action)
        assert schema_errors(d.event, d.action, d.payload) == []
        assert d.payload["installation"]["id"] == inst
        assert d.payload["sender"]["login"] == "bob"
    assert [d.payload["comment"]["body"] for d in sent[:2]] == ["one", "two"]
    assert {d.payload["comment"]["pull_request_review_id"] for d in sent[:2]} == {review_id}
    assert sent[0].payload["comment"]["diff_hunk"] == FIRST_HUNK
    assert sent[0].payload["comment"]["commit_id"] == head
    review = sent[2].payload["review"]
    assert (review["id"], review["state"], review["body"]) == (
        review_id,
        "changes_requested",
        "Please fix",
    )


async def test_another_apps_failing_check_run_with_annotations(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    gh = github_app.installation(inst)
    lint = sim.add_app("lint-ci")
    start = len(sim.deliveries)
    run_id = sim.add_check_run(
        REPO,
        head,
        "lint",
        app_id=lint,
        conclusion="failure",
        title="2 problems",
        summary="flake8 found 2 problems",
        text="details...",
        annotations=[
            {
                "path": "src/calc.py",
                "start_line": 3,
                "end_line": 3,
                "annotation_level": "failure",
                "message": "E225 missing whitespace",
                "title": "E225",
            },
            {
                "path": "src/calc.py",
                "start_line": 16,
                "end_line": 16,
                "annotation_level": "warning",
                "message": "W0612 unused name",
                "title": "W0612",
            },
        ],
    )
    assert kinds(sim, start) == [
        ("check_run", "created"),
        ("check_run", "completed"),
        ("check_suite", "completed"),
    ]
    created, completed, suite_done = (d.payload for d in sim.deliveries[start:])
    assert created["check_run"]["status"] == "in_progress"
    assert completed["check_run"]["conclusion"] == "failure"
    assert completed["check_run"]["app"]["id"] == lint
    assert completed["check_run"]["output"]["annotations_count"] == 2
    assert completed["check_run"]["pull_requests"][0]["number"] == number
    assert completed["sender"]["login"] == "lint-ci[bot]"
    assert suite_done["check_suite"]["conclusion"] == "failure"
    where: Vars = {"owner": "acme", "repo": "calc", "id": run_id}
    run = await gh.get("/repos/{owner}/{repo}/check-runs/{id}", where)
    assert run["output"]["title"] == "2 problems"
    assert run["output"]["text"] == "details..."
    notes = await gh.get_all("/repos/{owner}/{repo}/check-runs/{id}/annotations", where)
    assert [(n["path"], n["start_line"], n["annotation_level"], n["title"]) for n in notes] == [
        ("src/calc.py", 3, "failure", "E225"),
        ("src/calc.py", 16, "warning", "W0612"),
    ]
    for conclusion in ("timed_out", "cancelled", "skipped", "neutral", "success"):
        sim.add_check_run(REPO, head, f"lint-{conclusion}", app_id=lint, conclusion=conclusion)
    in_suite = await gh.get(
        "/repos/{owner}/{repo}/check-suites/{id}/check-runs",
        {"owner": "acme", "repo": "calc", "id": run["check_suite"]["id"]},
    )
    assert in_suite["total_count"] == 6
    assert {r["conclusion"] for r in in_suite["check_runs"]} == {
        "failure",
        "timed_out",
        "cancelled",
        "skipped",
        "neutral",
        "success",
    }


async def test_an_actions_jobs_log_through_the_redirect(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    gh = github_app.installation(inst)
    log = "2024-01-01T00:00:00Z ##[group]Run pytest\nFAILED test_calc.py::test_v3\n"
    start = len(sim.deliveries)
    job_id = sim.add_actions_job(REPO, head, "test (3.11)", conclusion="failure", log=log)
    assert kinds(sim, start) == [
        ("workflow_run", "requested"),
        ("workflow_job", "queued"),
        ("check_run", "created"),
        ("workflow_job", "in_progress"),
        ("workflow_run", "in_progress"),
        ("workflow_job", "completed"),
        ("check_run", "completed"),
        ("check_suite", "completed"),
        ("workflow_run", "completed"),
    ]
    done = sim.deliveries_of("check_run", "completed")[-1].payload["check_run"]
    assert done["id"] == job_id
    assert done["app"]["slug"] == "github-actions"
    run_id = sim.deliveries_of("workflow_run", "completed")[-1].payload["workflow_run"]["id"]
    assert done["details_url"].endswith(f"/acme/calc/actions/runs/{run_id}/job/{job_id}")
    workflow_run = sim.deliveries_of("workflow_run", "completed")[-1].payload["workflow_run"]
    assert workflow_run["check_suite_id"] == done["check_suite"]["id"]
    assert workflow_run["event"] == "pull_request"
    assert workflow_run["pull_requests"][0]["number"] == number

    where: Vars = {"owner": "acme", "repo": "calc", "id": job_id}
    job = await gh.get("/repos/{owner}/{repo}/actions/jobs/{id}", where)
    assert (job["name"], job["conclusion"], job["run_id"]) == ("test (3.11)", "failure", run_id)
    assert job["check_run_url"].endswith(f"/check-runs/{job_id}")
    check = await gh.get("/repos/{owner}/{repo}/check-runs/{id}", where)
    assert (check["name"], check["conclusion"]) == ("test (3.11)", "failure")
    # The client's download follows GitHub's 302 to the signed log URL.
    data = await gh.download("/repos/{owner}/{repo}/actions/jobs/{id}/logs", where)
    assert data.decode() == log
    # gidgethub's getitem follows it too, and answers the text.
    assert await gh.get("/repos/{owner}/{repo}/actions/jobs/{id}/logs", where) == log
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"token {sim.installation_token(REPO)}"}
        async with session.get(
            f"{sim.url}/repos/{REPO}/actions/jobs/{job_id}/logs",
            headers=headers,
            allow_redirects=False,
        ) as resp:
            assert resp.status == 302
            location = resp.headers["Location"]
        async with session.get(location) as resp:  # no token: the URL is signed
            assert resp.status == 200
            assert await resp.text() == log
        async with session.get(location.split("?")[0] + "?sig=forged") as resp:
            assert resp.status == 403
    suite = await gh.get(
        "/repos/{owner}/{repo}/check-suites/{id}/check-runs",
        {"owner": "acme", "repo": "calc", "id": done["check_suite"]["id"]},
    )
    assert [r["id"] for r in suite["check_runs"]] == [job_id]


async def test_the_timeline_tells_what_happened(
    github_sim: GitHubSimulator, github_app: GitHubApp
) -> None:
    sim = github_sim
    inst, number, head = setup(sim)
    sim.request_review(REPO, number, ["bob"], by="alice")
    review_id = sim.submit_review(
        REPO,
        number,
        "CHANGES_REQUESTED",
        by="bob",
        body="Please fix",
        comments=[{"path": "src/calc.py", "line": 3, "body": "Why 33?"}],
    )
    (top,) = sim.review_comments_of(REPO, review_id)
    sim.reply_review_comment(REPO, number, top, "Fixing.", by="alice")
    sim.push_files(
        REPO, BRANCH, {"src/calc.py": HEAD_FILE.replace("33", "3")}, "alice", "Back to 3"
    )
    sim.comment(REPO, number, "Ready again", "alice")
    sim.submit_review(REPO, number, "APPROVED", by="bob")
    merged = await github_app.installation(inst).put(
        "/repos/{owner}/{repo}/pulls/{number}/merge",
        {"owner": "acme", "repo": "calc", "number": number},
        data={"merge_method": "squash"},
    )
    text = sim.timeline_text(REPO, number)
    print(text)
    entries = sim.timeline(REPO, number)
    assert [(e.kind, e.who) for e in entries] == [
        ("opened", "alice"),
        ("review_requested", "alice"),
        ("review", "bob"),
        ("review_comment", "bob"),
        ("reply", "alice"),
        ("pushed", "alice"),
        ("comment", "alice"),
        ("review", "bob"),
        ("merged", sim.bot_login),
    ]
    assert entries[1].summary == "bob"
    assert entries[2].summary.startswith("CHANGES_REQUESTED at " + head[:7])
    assert entries[3].summary == f"#{top} src/calc.py:3: Why 33?"
    assert entries[5].summary.endswith("1 commit: Back to 3")
    assert entries[-1].summary == f"{merged['sha']} into main"
    assert "Why 33?" in text
