"""Workflow runs: a dispatch is handed to a Python runner in a worker thread."""

from __future__ import annotations

import io
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .state import Artifact, now_iso

if TYPE_CHECKING:
    from .server import GitHubSimulator
    from .state import RepoState, WorkflowRun

CONCLUSIONS = ("success", "failure", "cancelled", "timed_out")


@dataclass
class WorkflowDispatch:
    full_name: str
    workflow_id: str
    ref: str
    inputs: dict[str, Any]
    run_id: int
    token: str
    workdir: Path
    clone_url: str
    api_url: str


@dataclass
class WorkflowOutcome:
    conclusion: str
    artifacts: dict[str, dict[str, bytes]] = field(default_factory=dict)
    log: str = ""  # the job's log, as its log download serves it


def zip_files(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
    return buf.getvalue()


def run_workflow(sim: GitHubSimulator, repo: RepoState, run: WorkflowRun) -> None:
    """Worker body: in_progress deliveries, the runner, completion deliveries."""
    from . import events

    runner = sim.workflow_runner
    assert runner is not None
    with sim.lock:
        if run.status == "completed":
            return
        run.status = "in_progress"
        run.job_started_at = run.updated_at = now_iso()
        events.workflow(sim, repo, run, "workflow_job", "in_progress")
        events.workflow(sim, repo, run, "workflow_run", "in_progress")
        inst = sim.installation_for(repo.full_name)
        token = sim.issue_token(inst.id).token if inst else ""
    with tempfile.TemporaryDirectory(prefix="ghsim-run-", dir=sim.root) as tmp:
        dispatch = WorkflowDispatch(
            repo.full_name,
            run.workflow_id,
            run.head_branch,
            dict(run.inputs),
            run.id,
            token,
            Path(tmp),
            f"{sim.urls.git}/{repo.full_name}.git",
            sim.url,
        )
        try:
            outcome = runner(dispatch)
        except Exception:  # a crashing runner is a failed job, as a crashing step would be
            outcome = WorkflowOutcome("failure")
    if outcome.conclusion not in CONCLUSIONS:
        outcome = WorkflowOutcome("failure", outcome.artifacts, outcome.log)
    with sim.lock:
        if run.status == "completed":  # cancelled meanwhile
            return
        run.log = outcome.log
        for name, files in outcome.artifacts.items():
            run.artifacts.append(Artifact(sim.ids.next(), name, run.id, zip_files(files)))
        finish(sim, repo, run, outcome.conclusion)


def finish(sim: GitHubSimulator, repo: RepoState, run: WorkflowRun, conclusion: str) -> None:
    from . import events

    run.status = "completed"
    run.conclusion = conclusion
    run.job_completed_at = run.updated_at = now_iso()
    events.workflow(sim, repo, run, "workflow_job", "completed")
    events.workflow(sim, repo, run, "workflow_run", "completed")
