"""The client layer replayed from recorded cassettes: requests and answers without a network.

Each cassette in ``cassettes/`` holds one run of a short sequence (get the repository,
list its labels, comment on an issue, edit the comment, react to it, read a
collaborator's permission), recorded with vcrpy through ``GitHubClient`` (gidgethub
over aiohttp). Replaying needs no simulator and no network: vcrpy refuses any request
the cassette does not hold (``record_mode="none"``, matching method, path, query and
body), and every recorded answer must be used.

The cassettes are safe to publish: the ``Authorization`` header is dropped, ``token``
fields and anything shaped like a GitHub token are masked, only a few response headers
are kept, and the recording host is rewritten to ``https://api.github.com`` (web and
git links to ``https://github.com``), which is also where the replay points the
client. ``<cassette>.target.json`` names the repository, issue and user of a recording.

Re-record against the GitHub simulator (deterministic: the simulator's timestamps are
pinned)::

    SCAFFOLD_RECORD=sim .venv/bin/pytest tests/github_client/test_cassettes.py

Record against real GitHub (never in CI; it writes ``client_sequence_github.yaml``,
leaves one comment with a reaction on the issue, and needs a token that can write
issues of that repository)::

    SCAFFOLD_RECORD=github SCAFFOLD_GITHUB_TOKEN=... SCAFFOLD_RECORD_REPO=owner/name \\
        [SCAFFOLD_RECORD_ISSUE=1] [SCAFFOLD_RECORD_USER=login] \\
        .venv/bin/pytest tests/github_client/test_cassettes.py
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import vcr
import yaml
from plain_token import token_client
from vcr.request import Request

from ghsim.server import GitHubSimulator
from scaffold.github.client import DEFAULT_API_URL, GitHubClient

CASSETTES = Path(__file__).parent / "cassettes"
SIM_CASSETTE = "client_sequence_sim"
GITHUB_CASSETTE = "client_sequence_github"
MODE = os.environ.get("SCAFFOLD_RECORD", "")
PUBLIC_WEB = "https://github.com"
MASKED = "[redacted]"
BODY = "scaffold cassette: first text"
EDITED = "scaffold cassette: edited text"
KEPT_HEADERS = {"content-type", "link", "location", "x-github-media-type"}
_TOKEN = re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})")
_TIMESTAMP = re.compile(rb'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"')
PINNED_TIME = b'"2025-01-01T00:00:00Z"'


@dataclass(frozen=True)
class Target:
    repo: str
    issue: int
    user: str

    @property
    def vars(self) -> dict[str, str]:
        owner, name = self.repo.split("/", 1)
        return {"owner": owner, "repo": name}


async def run_sequence(client: GitHubClient, target: Target) -> dict[str, Any]:
    v = target.vars
    repo = await client.get("/repos/{owner}/{repo}", v)
    labels = await client.get_all("/repos/{owner}/{repo}/labels", v)
    comment = await client.post(
        "/repos/{owner}/{repo}/issues/{number}/comments",
        {**v, "number": target.issue},
        data={"body": BODY},
    )
    comment_vars = {**v, "comment_id": comment["id"]}
    edited = await client.patch(
        "/repos/{owner}/{repo}/issues/comments/{comment_id}", comment_vars, data={"body": EDITED}
    )
    reaction = await client.post(
        "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
        comment_vars,
        data={"content": "eyes"},
    )
    permission = await client.get(
        "/repos/{owner}/{repo}/collaborators/{username}/permission",
        {**v, "username": target.user},
    )
    return {
        "repo": repo,
        "labels": labels,
        "comment": comment,
        "edited": edited,
        "reaction": reaction,
        "permission": permission,
    }


# ---------------------------------------------------------------- scrubbing


def _rewrite(text: str, origin: str) -> str:
    if origin != DEFAULT_API_URL:  # the simulator: its web and git links, then the API
        text = text.replace(f"{origin}/_web", PUBLIC_WEB).replace(f"{origin}/git", PUBLIC_WEB)
        text = text.replace(origin, DEFAULT_API_URL)
    return _TOKEN.sub(MASKED, text)


def _mask_token_fields(data: Any) -> Any:
    if isinstance(data, dict):
        return {
            k: (MASKED if k == "token" and isinstance(v, str) else _mask_token_fields(v))
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [_mask_token_fields(v) for v in data]
    return data


def scrub_request(origin: str) -> Callable[[Request], Request]:
    def scrub(request: Request) -> Request:
        request.uri = _rewrite(request.uri, origin)
        if isinstance(request.body, bytes) and request.body:
            request.body = _rewrite(request.body.decode(), origin).encode()
        return request

    return scrub


def scrub_response(origin: str, *, pin_times: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def scrub(response: dict[str, Any]) -> dict[str, Any]:
        response["headers"] = {
            name: [_rewrite(str(v), origin) for v in values]
            for name, values in response["headers"].items()
            if name.lower() in KEPT_HEADERS
        }
        body = response.get("body", {}).get("string")
        if body:
            try:
                data = json.loads(body)
            except ValueError:
                text = body.decode(errors="replace")
            else:
                masked = _mask_token_fields(data)
                text = body.decode() if masked == data else json.dumps(masked)
            raw = _rewrite(text, origin).encode()
            response["body"]["string"] = _TIMESTAMP.sub(PINNED_TIME, raw) if pin_times else raw
        return response

    return scrub


def recorder(origin: str, *, pin_times: bool = False) -> vcr.VCR:
    return vcr.VCR(
        cassette_library_dir=str(CASSETTES),
        serializer="yaml",
        match_on=["method", "path", "query", "body"],
        filter_headers=["authorization", "cookie"],
        before_record_request=scrub_request(origin),
        before_record_response=scrub_response(origin, pin_times=pin_times),
        decode_compressed_response=True,
    )


def cassette_path(name: str) -> Path:
    return CASSETTES / f"{name}.yaml"


def target_path(name: str) -> Path:
    return CASSETTES / f"{name}.target.json"


# ---------------------------------------------------------------- recording


async def record_from_simulator(tmp: Path) -> None:
    with GitHubSimulator(tmp / "ghsim", webhook_secret="cassettes") as sim:
        sim.create_repo("octo", "demo", {"README.md": "hello\n"})
        sim.install("octo", ["demo"])
        number = sim.open_issue("octo/demo", "Add a greeting", "Please greet", "alice")
        sim.label_issue("octo/demo", number, "scaffold", "alice")
        sim.set_permission("octo/demo", "alice", "write")
        target = Target("octo/demo", number, "alice")
        await _record(SIM_CASSETTE, target, sim.installation_token("octo/demo"), sim.url, True)
        await sim.wait_deliveries_async(timeout=5)
    assert not sim.violations, sim.violations


async def record_from_github() -> None:
    token = os.environ["SCAFFOLD_GITHUB_TOKEN"]
    repo = os.environ["SCAFFOLD_RECORD_REPO"]
    issue = int(os.environ.get("SCAFFOLD_RECORD_ISSUE", "1"))
    user = os.environ.get("SCAFFOLD_RECORD_USER", repo.split("/", 1)[0])
    await _record(GITHUB_CASSETTE, Target(repo, issue, user), token, DEFAULT_API_URL, False)


async def _record(name: str, target: Target, token: str, base_url: str, pin: bool) -> None:
    cassette_path(name).unlink(missing_ok=True)
    client, session = token_client(token, base_url=base_url)
    try:
        with recorder(base_url, pin_times=pin).use_cassette(
            cassette_path(name).name, record_mode="all"
        ):
            await run_sequence(client, target)
    finally:
        await session.close()
    target_path(name).write_text(json.dumps(asdict(target), indent=2) + "\n")


# ---------------------------------------------------------------- tests


async def test_cassettes_are_recorded_and_safe(tmp_path: Path) -> None:
    """Records first when ``SCAFFOLD_RECORD`` asks; always checks what is committed."""
    if MODE == "sim":
        await record_from_simulator(tmp_path)
    elif MODE == "github":
        await record_from_github()
    else:
        assert MODE == "", f"SCAFFOLD_RECORD must be 'sim' or 'github', not {MODE!r}"
    names = sorted(p.name.removesuffix(".yaml") for p in CASSETTES.glob("*.yaml"))
    assert SIM_CASSETTE in names
    for name in names:
        text = cassette_path(name).read_text()
        assert "authorization" not in text.lower()
        assert not _TOKEN.search(text)
        assert "x-access-token" not in text
        assert "127.0.0.1" not in text
        assert "localhost" not in text
        interactions = yaml.safe_load(text)["interactions"]
        assert [i["request"]["method"] for i in interactions] == [
            "GET",
            "GET",
            "POST",
            "PATCH",
            "POST",
            "GET",
        ]
        assert all(i["request"]["uri"].startswith(DEFAULT_API_URL + "/") for i in interactions)
        assert Target(**json.loads(target_path(name).read_text()))


def _replayable() -> list[str]:
    return sorted(
        p.name.removesuffix(".yaml")
        for p in CASSETTES.glob("*.yaml")
        if target_path(p.name.removesuffix(".yaml")).exists()
    ) or [SIM_CASSETTE]


@pytest.mark.parametrize("name", _replayable())
async def test_replay_without_a_network(name: str) -> None:
    target = Target(**json.loads(target_path(name).read_text()))
    client, session = token_client("ghs_" + "0" * 36)  # the public base URL, never reached
    try:
        with recorder(DEFAULT_API_URL).use_cassette(
            cassette_path(name).name, record_mode="none", allow_playback_repeats=False
        ) as cassette:
            got = await run_sequence(client, target)
            assert cassette.all_played
            assert cassette.play_count == 6
    finally:
        await session.close()
    assert got["repo"]["full_name"].lower() == target.repo.lower()
    assert got["labels"]
    assert all(isinstance(label["name"], str) for label in got["labels"])
    assert got["comment"]["body"] == BODY
    assert got["edited"]["id"] == got["comment"]["id"]
    assert got["edited"]["body"] == EDITED
    assert got["reaction"]["content"] == "eyes"
    assert got["permission"]["user"]["login"].lower() == target.user.lower()
    assert got["permission"]["permission"] in ("admin", "write", "read", "none")
    if name == SIM_CASSETTE:
        assert [label["name"] for label in got["labels"]] == ["scaffold"]
        assert got["permission"]["permission"] == "write"
        assert got["comment"]["html_url"].startswith(PUBLIC_WEB + "/octo/demo/")


async def test_a_request_the_cassette_does_not_hold_is_refused() -> None:
    target = Target(**json.loads(target_path(SIM_CASSETTE).read_text()))
    client, session = token_client("ghs_" + "0" * 36)
    try:
        with recorder(DEFAULT_API_URL).use_cassette(
            cassette_path(SIM_CASSETTE).name, record_mode="none"
        ):
            await client.get("/repos/{owner}/{repo}", target.vars)
            with pytest.raises(vcr.errors.CannotOverwriteExistingCassetteException):
                await client.post(
                    "/repos/{owner}/{repo}/issues/{number}/comments",
                    {**target.vars, "number": target.issue},
                    data={"body": "a different text"},
                )
    finally:
        await session.close()
