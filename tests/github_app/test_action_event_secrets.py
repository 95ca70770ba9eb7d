"""The Action's ``event`` mode keeps the workflow's token out of its agents' reach.

``scaffold action event`` gets GITHUB_TOKEN in its environment. It takes the token
into memory at once, drops it from ``os.environ`` and makes itself non-dumpable, so a
child of an agent, reading ``/proc/<scaffold>/environ`` (which still shows the
environment scaffold was started with), is refused. Everything runs without root's
capabilities, as a same-user process on a runner would (root's CAP_SYS_PTRACE would
read any process); the agent runs without a sandbox, the worst case.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from app_harness import (
    PYTHON,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    write_script,
    writer_repo,
)

from credtrap import ENVIRON_PROBE, capless, leaks
from ghsim import GitHubSimulator

REPO = "acme/widgets"


def test_an_agents_child_cannot_read_the_token_from_scaffold(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    writer_repo(sim, repo_files({"sandbox": {"mode": "off"}}))
    probe = tmp_path / "probe.json"
    write_script(
        tmp_path,
        [
            {
                "role": "chaoswhisperer",
                "actions": [
                    {"run": [PYTHON, "-c", ENVIRON_PROBE, str(probe)]},
                    planning_tool("requirements", requirements("Nothing")),
                    complete("ok"),
                ],
            },
            {
                "role": "pathseeker",
                "actions": [planning_tool("tasks", plan()), complete("ok")],
            },
        ],
    )
    number = sim.open_issue(REPO, "Nothing", "Nothing to do.", by="alice")
    sim.label_issue(REPO, number, "scaffold", by="alice")
    delivery = sim.deliveries_of("issues", "labeled")[-1]
    (tmp_path / "event.json").write_text(json.dumps(delivery.payload), encoding="utf-8")
    token = sim.installation_token(REPO)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_TOKEN": token,
        "GITHUB_API_URL": sim.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "1001",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "RUNNER_TEMP": str(tmp_path),
        "SCAFFOLD_AGENT_SCRIPT": str(tmp_path / "agent-script.json"),
        "SCAFFOLD_AGENT_STATE": str(tmp_path / "agent-state"),
    }
    state = tmp_path / "state"
    done = subprocess.run(
        [*capless(), PYTHON, "-m", "scaffold", "action", "event", "--state-dir", str(state)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    seen = json.loads(probe.read_text())
    assert seen["scaffold_pid"] is not None
    # the read that handed a child GITHUB_TOKEN before is refused now ...
    assert seen.get("error") == "PermissionError", seen.get("scaffold_environ", "")[:300]
    # ... while the same read of a same-user dumpable process (the agent) works
    assert seen["agent_readable"] is True
    # and the token is gone from scaffold's own environment: nothing it started has it
    assert "GITHUB_TOKEN" not in seen["own_env"]
    assert leaks((token,), probe, tmp_path / "agent-state", state / "repos") == []
