"""examples/workflows/scaffold-event.yml under act, against the GitHub simulator.

Two workflow runs, as GitHub would start them: the ``issues.labeled`` event (scaffold
plans the issue and a scripted Codeweaver opens a pull request) and the approving
``pull_request_review.submitted`` (scaffold merges it). The action talks to the
simulator (``GITHUB_API_URL``) with the workflow's token (``secrets.GITHUB_TOKEN``);
the state folder goes from the first run to the second through ``actions/cache``,
whose path is the same string in both runs although act gives each its own workspace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from actionkit import ROOT
from actkit import example_workflow, new_act, offline_install_env, require_prepared

from ghsim import GitHubSimulator
from ghsim.fixture import github_sim  # noqa: F401
from git.gitrepo import git
from github_app.app_harness import VALIDATORS, codeweaver, planned, repo_files, write_script
from github_app.app_harness import agent_env as scripted_agent_env

# act runs whole jobs (the event test: two, with five agents): more than the default
# timeout on a busy machine, with act's own timeout below this one.
pytestmark = [pytest.mark.act, pytest.mark.timeout(420)]

REPO = "acme/widgets"


def _handled(outputs: dict[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(outputs["handled"])
    return data


def test_label_opens_a_pr_and_approval_merges_it(
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
    act_action_cache: Path,
) -> None:
    sim = github_sim
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", repo_files())
    sim.set_permission(REPO, "alice", "write")
    sim.install("acme", ["widgets"])
    write_script(
        tmp_path,
        [*planned(("a", "One", [])), codeweaver("task-1", {"one.txt": "1\n"}), *VALIDATORS],
    )
    # the workflow's own checkout: act names the repository after its origin
    workspace = tmp_path / "ws"
    workspace.mkdir()
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "remote", "add", "origin", f"https://github.com/{REPO}")
    env = {
        **offline_install_env(require_prepared(), tmp_path),
        **scripted_agent_env(tmp_path),
        "PATH": f"{ROOT / '.tools' / 'node_modules' / '.bin'}:{os.environ['PATH']}",
        "GITHUB_API_URL": sim.url,
    }
    act = new_act(tmp_path, act_action_cache, workspace, env)
    act.secrets["GITHUB_TOKEN"] = sim.installation_token(REPO)
    workflow = act.write_workflow("scaffold.yml", example_workflow("scaffold-event.yml"))
    caches = tmp_path / "actions-cache"

    number = sim.open_issue(REPO, "One file", "Add one.txt.", by="alice")
    sim.label_issue(REPO, number, "scaffold", by="alice")
    labeled = sim.deliveries_of("issues", "labeled")[-1]
    first = act.run("issues", labeled.payload, workflow, cache_server=caches, run_id=101)
    log = first.text()
    assert first.returncode == 0, log[-6000:]
    assert _handled(first.step_outputs("0")) == {"issues.labeled:handled": 1}
    assert "Cache not found for input keys: scaffold-state-acme/widgets-" in log
    [pull] = sim.repo(REPO).pulls.values()
    assert pull.head == "scaffold/task-1"
    assert not pull.merged
    # the pull request holds the agent's work (and the task's backlog file), nothing else
    files = sim.repo(REPO).git("diff", "--name-only", f"{pull.base_sha}...{pull.head_sha}")
    assert [f for f in files.splitlines() if not f.startswith("backlog/")] == ["one.txt"]

    sim.submit_review(REPO, pull.number, "APPROVED", by="alice")
    approved = sim.deliveries_of("pull_request_review", "submitted")[-1]
    second = act.run(
        "pull_request_review", approved.payload, workflow, cache_server=caches, run_id=102
    )
    log = second.text()
    assert second.returncode == 0, log[-6000:]
    # the state the first run saved was restored: the same cache path in both runs
    assert "Cache restored from key: scaffold-state-acme/widgets-101-1" in log
    assert "pull_request_review.submitted:handled" in _handled(second.step_outputs("0"))
    assert sim.repo(REPO).pulls[pull.number].merged
    assert sim.repo(REPO).file_at("main", "one.txt") == b"1\n"
    assert sim.repo(REPO).file_at("main", ".scaffold-state/.gitignore") is None
