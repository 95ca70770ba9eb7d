"""examples/workflows/scaffold-slot.yml under act: one agent slot as a user runs it.

The workflow is dispatched for TASK-1 with the scripted agent (named in the checkout's
``.github/scaffold.yml``); a step before the action, the way
``google-github-actions/auth`` does by default, leaves a credential file in the
workspace. Only the agent's file may reach the task branch.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from actionkit import ROOT, Repo
from actkit import example_workflow, new_act, offline_install_env, require_prepared

from git.gitrepo import git
from scaffold.demo.scripted import agent_command
from scaffold.demo.scripted import agent_env as scripted_agent_env

# act runs whole jobs (the event test: two, with five agents): more than the default
# timeout on a busy machine, with act's own timeout below this one.
pytestmark = [pytest.mark.act, pytest.mark.timeout(240)]

CREDS = "gha-creds-0123.json"
# What google-github-actions/auth runs before the next steps: a credential file in the
# workspace (and its path in the environment).
AUTH_STEP = f"""\
      - name: Authenticate (writes a credential file into the workspace)
        run: |
          echo '{{"type": "external_account"}}' > "$GITHUB_WORKSPACE/{CREDS}"

"""
# After the action: the file is still there, untracked, beside the agent's task branch.
CHECK_STEP = f"""
      - name: The credential file stayed in the workspace
        run: |
          test -f "$GITHUB_WORKSPACE/{CREDS}"
          echo "untracked: $(git -C "$GITHUB_WORKSPACE" ls-files --others --exclude-standard | tr '\\n' ' ')"
"""


def test_slot_commits_only_the_agents_work(tmp_path: Path, act_action_cache: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    repo = Repo.create(tmp_path / "ws")
    config = {"agent": {"command": agent_command()}}
    repo.write(".github/scaffold.yml", json.dumps(config) + "\n")
    repo.write(".gitignore", "build/\n")
    base = repo.commit("scaffold config")
    repo.git("remote", "add", "origin", str(origin))
    repo.git("push", "-q", "origin", "main")

    script = tmp_path / "agent-script.json"
    actions = [
        {"write": "work/TASK-1.txt", "content": "done\n"},
        {"signal": {"signal": "complete", "summary": "codeweaver finished TASK-1"}},
    ]
    script.write_text(json.dumps([{"actions": actions}]), encoding="utf-8")
    env = {
        **offline_install_env(require_prepared(), tmp_path),
        **scripted_agent_env(script, tmp_path / "agent-state"),
        # the pinned Claude Code is on PATH: the action installs nothing from npm
        "PATH": f"{ROOT / '.tools' / 'node_modules' / '.bin'}:{os.environ['PATH']}",
    }
    act = new_act(tmp_path, act_action_cache, repo.root, env)
    text = example_workflow("scaffold-slot.yml")
    text = text.replace(
        "      # <owner>: the account", AUTH_STEP + "      # <owner>: the account", 1
    )
    assert AUTH_STEP in text
    text = text.rstrip("\n") + "\n" + CHECK_STEP
    workflow = act.write_workflow("scaffold-slot.yml", text)
    inputs = {"task-id": "TASK-1", "role": "codeweaver", "quest-id": "q1"}
    run = act.run("workflow_dispatch", {"inputs": inputs}, workflow)
    log = run.text()
    assert run.returncode == 0, log[-6000:]

    outputs = run.step_outputs("slot")
    assert outputs["signal"] == "complete"
    head = outputs["head-sha"]
    assert len(head) == 40
    assert outputs["session-id"]
    assert outputs["output-dir"].endswith("/scaffold-slot")
    assert outputs["blocking"] == outputs["handled"] == ""
    # exactly action.yml's outputs: not what act copies from the last inner step (the
    # upload's artifact-id) after the mapping
    assert "artifact-id" not in outputs
    assert len(outputs) == 8
    # the workflow's Result step read them through `steps.slot.outputs`
    assert f"signal=complete session={outputs['session-id']} head={head}" in log

    # the task branch holds the agent's file and nothing else
    assert git(origin, "rev-parse", "refs/heads/scaffold/task-1") == head
    assert git(origin, "rev-parse", f"{head}^") == base
    files = git(origin, "diff-tree", "--no-commit-id", "--name-only", "-r", head).split()
    assert files == ["work/TASK-1.txt"]
    assert git(origin, "log", "-1", "--format=%s", head) == (
        "TASK-1 codeweaver: codeweaver finished TASK-1"
    )

    # the run's files were uploaded as the artifact the workflow names
    [archive] = [p for p in run.artifacts.rglob("*") if p.is_file()]
    assert "scaffold-slot-TASK-1-" in str(archive)
    names: set[str] = set()
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            names = {Path(n).name for n in z.namelist()}
    assert {"signal.json", "outcome.json", "transcript.jsonl"} <= names
    assert "### scaffold slot: TASK-1 (codeweaver)" in log
    assert run.step_results()["5"] == "success"
    # (the workflow file, written after the checkout's commit, was not committed either)
    assert f"untracked: .github/workflows/scaffold-slot.yml {CREDS} " in log
