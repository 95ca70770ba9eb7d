"""``executor: actions``: the App runs task agents as GitHub Actions workflow runs.

The simulator hands each dispatched workflow run to a runner that does what the
example workflow does on GitHub: check the repository out with the run's token and
run ``scaffold action slot``; the artifact and ``workflow_run`` deliveries go back to
the App, which reads the signal and fetches the pushed commits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from app_harness import (
    PYTHON,
    VALIDATORS,
    app_process,
    complete,
    plan,
    planning_tool,
    repo_files,
    requirements,
    wait_for,
    write_script,
    writer_repo,
)

from ghsim import GitHubSimulator, WorkflowDispatch, WorkflowOutcome
from git.gitrepo import git
from scaffold.demo.scripted import agent_command
from scaffold.demo.scripted import agent_env as scripted_agent_env

REPO = "acme/widgets"
WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "workflows" / "scaffold-slot.yml"


def _runner(tmp_path: Path, log: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    def run(dispatch: WorkflowDispatch) -> WorkflowOutcome:
        work = dispatch.workdir
        checkout = work / "checkout"
        header = f"AUTHORIZATION: basic {_basic(dispatch.token)}"
        git(
            tmp_path,
            "-c",
            f"http.extraheader={header}",
            "clone",
            "-q",
            dispatch.clone_url,
            str(checkout),
        )
        # as actions/checkout does: the credentials stay in the checkout's config
        git(checkout, "config", "http.extraheader", header)
        out = work / "out"
        inputs = dispatch.inputs
        argv = [
            PYTHON,
            "-m",
            "scaffold",
            "action",
            "slot",
            "--repo",
            str(checkout),
            "--task-id",
            str(inputs["task-id"]),
            "--role",
            str(inputs["role"]),
            "--run-spec",
            str(inputs["run-spec"]),
            "--quest-id",
            str(inputs["quest-id"]),
            "--output-dir",
            str(out),
            "--agent-command",
            json.dumps(agent_command()),
        ]
        if inputs.get("resume-session"):
            argv += ["--resume-session", str(inputs["resume-session"])]
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(work),
            "GITHUB_TOKEN": dispatch.token,
            "GITHUB_OUTPUT": str(work / "output"),
            "GITHUB_STEP_SUMMARY": str(work / "summary"),
            "RUNNER_TEMP": str(work),
            "GITHUB_WORKSPACE": str(checkout),
            **scripted_agent_env(tmp_path / "agent-script.json", tmp_path / "agent-state"),
        }
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        log.append({"inputs": inputs, "rc": done.returncode, "stderr": done.stderr[-2000:]})
        files = (
            {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
            if out.is_dir()
            else {}
        )
        name = f"scaffold-slot-{inputs['task-id']}-{dispatch.run_id}-1"
        return WorkflowOutcome("success" if done.returncode == 0 else "failure", {name: files})

    return run


def _basic(token: str) -> str:
    import base64

    return base64.b64encode(f"x-access-token:{token}".encode()).decode()


def _pr(sim: GitHubSimulator, branch: str) -> object | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == branch), None)


def test_slot_runs_execute_as_workflow_runs(github_sim: GitHubSimulator, tmp_path: Path) -> None:
    sim = github_sim
    files = {
        **repo_files({"executor": "actions", "actions": {"poll_s": 2}}),
        ".github/workflows/scaffold-slot.yml": WORKFLOW.read_text(),
    }
    writer_repo(sim, files)
    runs: list[dict[str, object]] = []
    sim.workflow_runner = _runner(tmp_path, runs)
    write_script(
        tmp_path,
        [
            {
                "role": "chaoswhisperer",
                "actions": [planning_tool("requirements", requirements("Two")), complete("ok")],
            },
            {
                "role": "pathseeker",
                "actions": [
                    planning_tool("tasks", plan(("a", "One", []), ("b", "Two", []))),
                    complete("ok"),
                ],
            },
            # The first run of task-1 crashes on its runner: a failed workflow run.
            {"role": "codeweaver", "step": "task-1", "attempt": 1, "actions": [{"crash": 3}]},
            {
                "role": "codeweaver",
                "step": "task-1",
                "attempt": 2,
                "actions": [{"write": "one.txt", "content": "1\n"}, complete("one built")],
            },
            {
                "role": "codeweaver",
                "step": "task-2",
                "actions": [{"write": "two.txt", "content": "2\n"}, complete("two built")],
            },
            *VALIDATORS,
        ],
    )
    with app_process(sim, tmp_path) as app:
        number = sim.open_issue(REPO, "Two", "Build one and two.", by="alice")
        sim.label_issue(REPO, number, "scaffold", by="alice")
        pr1 = wait_for("PR of task-1", lambda: _pr(sim, "scaffold/task-1"), timeout=120)
        pr2 = wait_for("PR of task-2", lambda: _pr(sim, "scaffold/task-2"), timeout=120)
        for pr in (pr1, pr2):
            sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
        for pr in (pr1, pr2):
            wait_for("merged", lambda pr=pr: sim.repo(REPO).pulls[pr.number].merged or None)
        log = app.log_text()

    repo = sim.repo(REPO)
    assert repo.file_at("main", "one.txt") == b"1\n"
    assert repo.file_at("main", "two.txt") == b"2\n"
    # Every task agent ran on a "runner": codeweaver x3 (one crash), siegemaster x2, lawbringer x2.
    roles = sorted(str(r["inputs"]["role"]) for r in runs)
    assert roles.count("codeweaver") == 3, runs
    assert roles.count("lawbringer") == 2
    assert [r["rc"] for r in runs].count(1) == 1  # the crash
    conclusions = [
        d.payload["workflow_run"]["conclusion"]
        for d in sim.deliveries_of("workflow_run", "completed")
    ]
    assert conclusions.count("failure") == 1
    assert "slot run dispatched" in log
    # every dispatch names the run holding the session to resume (none with scripted agents)
    assert all("session-run-id" in r["inputs"] for r in runs)
    # planning stayed on the server: no workflow run for ChaosWhisperer or PathSeeker
    assert not any(r["inputs"]["role"] in ("chaoswhisperer", "pathseeker") for r in runs)
