"""The OpenAPI checks catch bad responses and unknown calls; injected faults are served."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ghsim import GitHubSimulator
from ghsim import openapi as oa

REPO = "octo/demo"


def call(
    sim: GitHubSimulator, method: str, path: str, token: str, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        sim.url + path,
        data=data,
        method=method,
        headers={
            "Authorization": f"token {token}",
            "Content-Type": "application/json",
            "Accept": "application/vnd.github+json",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, dict(resp.headers), json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, dict(err.headers), json.loads(raw) if raw else None


@pytest.fixture
def sim(tmp_path: Path) -> Any:
    with GitHubSimulator(tmp_path / "sim", webhook_secret="s") as s:
        s.create_repo("octo", "demo", {"README.md": "x\n"})
        s.install("octo", ["demo"])
        yield s


def test_a_broken_response_is_a_violation(sim: GitHubSimulator) -> None:
    number = sim.open_issue(REPO, "t", "b", "alice")
    token = sim.installation_token(REPO)
    status, _, _ = call(sim, "GET", f"/repos/{REPO}/issues/{number}", token)
    assert status == 200
    assert sim.violations == []

    def break_issue(operation_id: str, status: int, payload: Any) -> Any:
        if operation_id == "issues/get":
            payload = dict(payload)
            del payload["number"]
        return payload

    sim.response_hook = break_issue
    call(sim, "GET", f"/repos/{REPO}/issues/{number}", token)
    assert any("issues/get" in v and "number" in v for v in sim.violations)


def test_validator_api_rejects_a_hand_made_bad_response() -> None:
    found = oa.find_operation("GET", "/repos/o/r/issues/1")
    assert found is not None
    op, params = found
    request = oa.SpecRequest("GET", oa.spec_path(op, params))
    assert oa.request_errors(request) == []
    assert oa.response_errors(request, oa.SpecResponse(200, b'{"id": "nope"}')) != []


def test_unknown_operation_is_a_violation_and_404(sim: GitHubSimulator) -> None:
    status, _, body = call(sim, "GET", f"/repos/{REPO}/hooks", sim.installation_token(REPO))
    assert status == 404
    assert body["message"] == "Not Found"
    assert any("no such operation" in v for v in sim.violations)


def test_a_bad_request_body_is_a_violation(sim: GitHubSimulator) -> None:
    number = sim.open_issue(REPO, "t", "b", "alice")
    status, _, _ = call(
        sim,
        "POST",
        f"/repos/{REPO}/issues/{number}/comments",
        sim.installation_token(REPO),
        {"body": 42},
    )
    assert status == 422
    assert any("issues/create-comment" in v for v in sim.violations)


def test_normal_responses_carry_rate_limit_headers(sim: GitHubSimulator) -> None:
    _, headers, _ = call(sim, "GET", f"/repos/{REPO}", sim.installation_token(REPO))
    for name in (
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "X-RateLimit-Used",
        "X-RateLimit-Resource",
    ):
        assert name in headers
    assert sim.violations == []


def test_injected_faults_are_served_then_cleared(sim: GitHubSimulator) -> None:
    number = sim.open_issue(REPO, "t", "b", "alice")
    token = sim.installation_token(REPO)
    path = f"/repos/{REPO}/issues/{number}"
    reset = str(int(time.time()) + 60)
    sim.inject("GET", r"/issues/\d+$", status=502, times=1)
    sim.inject(
        "GET",
        r"/issues/\d+$",
        status=403,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
        body={"message": "API rate limit exceeded"},
    )
    sim.inject("GET", r"/issues/\d+$", status=429, headers={"Retry-After": "1"})
    statuses = []
    for _ in range(4):
        status, headers, body = call(sim, "GET", path, token)
        statuses.append(status)
        if status == 403:
            assert headers["X-RateLimit-Remaining"] == "0"
            assert headers["X-RateLimit-Reset"] == reset
            assert body["message"] == "API rate limit exceeded"
        if status == 429:
            assert headers["Retry-After"] == "1"
    assert statuses == [502, 403, 429, 200]
    assert sim.injected_hits == 3
    assert sim.violations == []


def test_a_delayed_fault_times_out_a_client(sim: GitHubSimulator) -> None:
    sim.inject("GET", r"^/repos/octo/demo$", status=200, body={}, delay_s=2.0)
    req = urllib.request.Request(
        sim.url + f"/repos/{REPO}",
        headers={"Authorization": f"token {sim.installation_token(REPO)}"},
    )
    with pytest.raises(OSError):
        urllib.request.urlopen(req, timeout=0.3)
    assert sim.injected_hits == 1
