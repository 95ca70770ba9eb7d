"""The Action's ``diagram-check`` on a pull request from a fork, end to end in the simulator.

GitHub runs such a workflow with a read-only ``GITHUB_TOKEN`` and no secrets. The step
needs neither: it fetches the fork's head from ``refs/pull/<n>/head`` of the base
repository, reads the code without running it, uses the base's ``diagrams`` settings,
and reports through annotations and the job summary, which says what it cannot post.
"""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from actionkit import ARCH, Step, mermaid_doc

from ghsim.fixture import github_sim  # noqa: F401
from ghsim.server import GitHubSimulator
from git.gitrepo import git

REPO = "acme/widgets"
FORK = "mallory/widgets"


def _checkout(sim: GitHubSimulator, token: str, where: Path) -> str:
    """What actions/checkout does: one commit of the base branch, the token in the config."""
    where.mkdir()
    git(where, "init", "-q")
    git(where, "remote", "add", "origin", sim.repo(REPO).clone_url)
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    git(where, "config", f"http.{sim.urls.git}/.extraheader", f"AUTHORIZATION: basic {basic}")
    git(where, "fetch", "-q", "--depth=1", "origin", "+refs/heads/main:refs/remotes/origin/main")
    git(where, "checkout", "-q", "--detach", "origin/main")
    return git(where, "rev-parse", "HEAD")


def test_diagram_check_on_a_fork_pull_request_with_the_read_only_token(
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    sim = github_sim
    marker = tmp_path / "the-fork-code-ran"
    sim.create_repo(
        "acme",
        "widgets",
        {
            "README.md": "widgets\n",
            "app/pkg/__init__.py": "",
            ARCH: mermaid_doc("flowchart LR\n    pkg"),
        },
    )
    sim.install("acme", ["widgets"])
    sim.fork(REPO, "mallory")
    hostile = f"import pathlib\n\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    sim.push_files(
        FORK,
        "payments",
        {
            "app/pkg/payment.py": hostile + "\n\ndef pay() -> None:\n    pass\n",
            "conftest.py": hostile,
            "setup.py": hostile,
            # The fork tries to switch its own check off: the base's settings apply.
            ".github/scaffold.yml": "diagrams:\n  ignore: ['**']\n",
        },
        "mallory",
        "payments",
    )
    number = sim.open_pull(REPO, "payments", by="mallory", title="Payments", head_repo=FORK)
    payload = sim.deliveries_of("pull_request", "opened")[-1].payload
    assert payload["pull_request"]["head"]["repo"]["full_name"] == FORK

    token = sim.fork_workflow_token(REPO)
    workspace = tmp_path / "workspace"
    checked_out = _checkout(sim, token, workspace)
    step = Step(
        tmp_path / "step",
        workspace,
        "pull_request",
        payload,
        extra_env={"GITHUB_SHA": checked_out, "GITHUB_TOKEN": token},
    )
    proc = step.run("diagram-check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert [e.split(",", 1)[0] for e in errors] == ["::error file=app/pkg/payment.py"]
    assert step.outputs()["blocking"] == "true"
    summary = step.summary()
    assert "payment" in summary
    assert f"comes from a fork ({FORK})" in summary
    assert "cannot post a pull request comment, a check run of its own or a commit status" in (
        " ".join(summary.split())
    )
    assert not marker.exists()

    # What the summary says it cannot do, the token indeed cannot do.
    request = urllib.request.Request(
        f"{sim.url}/repos/{REPO}/issues/{number}/comments",
        data=json.dumps({"body": "hello"}).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    assert "Resource not accessible by integration" in refused.value.read().decode()
    git(workspace, "fetch", "-q", "origin", f"+refs/pull/{number}/head:refs/heads/pr")
    push = subprocess.run(
        ["git", "push", "-q", "origin", "refs/heads/pr:refs/heads/from-the-fork"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=False,
    )
    assert push.returncode != 0
    assert sim.repo(REPO).branch_sha("from-the-fork") is None
