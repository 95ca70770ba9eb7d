"""GitHub Actions: workflow dispatch, runs, jobs, artifacts."""

from __future__ import annotations

import re
import secrets
from typing import Any

from . import events
from . import objects as ob
from .actions import finish, run_workflow
from .context import ApiError, Ctx, Reply, invalid, not_found, paginate, route
from .state import RepoState, WorkflowRun

_WORKFLOW = re.compile(r"^[A-Za-z0-9_.-]+$")


def _run(ctx: Ctx, repo: RepoState) -> WorkflowRun:
    run = repo.workflow_runs.get(ctx.int_param("run_id"))
    if run is None:
        raise not_found()
    return run


def _run_json(ctx: Ctx, repo: RepoState, run: WorkflowRun) -> dict[str, Any]:
    return ctx.sim.workflow_run_json(repo, run)


@route("actions/create-workflow-dispatch")
async def dispatch(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        workflow_id = ctx.params["workflow_id"]
        if not _WORKFLOW.match(workflow_id):
            raise not_found()
        ref = ctx.field("ref", str, resource="Workflow")
        inputs = ctx.field("inputs", dict, required=False, default={}, resource="Workflow")
        sha = sim.git_of(repo).resolve(ref)
        if sha is None:
            raise invalid("Workflow", "ref", "invalid", f"No ref found for: {ref}")
        number = 1 + sum(1 for r in repo.workflow_runs.values() if r.workflow_id == workflow_id)
        run = WorkflowRun(
            sim.ids.next(),
            workflow_id,
            workflow_id.rsplit(".", 1)[0],
            ref,
            sha,
            number,
            dict(inputs),
            ctx.actor_login,
            sim.ids.next(),
        )
        repo.workflow_runs[run.id] = run
        events.workflow(sim, repo, run, "workflow_run", "requested")
        events.workflow(sim, repo, run, "workflow_job", "queued")
        if sim.workflow_runner is not None:
            sim.spawn(lambda: run_workflow(sim, repo, run), f"ghsim-run-{run.id}")
        if ctx.field(
            "return_run_details", bool, required=False, default=False, resource="Workflow"
        ):
            obj = _run_json(ctx, repo, run)
            return Reply(
                200, {"workflow_run_id": run.id, "run_url": obj["url"], "html_url": obj["html_url"]}
            )
    return Reply(204)


@route("actions/list-workflow-runs-for-repo")
async def list_runs(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        branch = ctx.query.get("branch")
        status = ctx.query.get("status")
        runs = [
            _run_json(ctx, repo, r)
            for r in sorted(repo.workflow_runs.values(), key=lambda r: -r.id)
            if (branch is None or r.head_branch == branch)
            and (status is None or status in (r.status, r.conclusion))
        ]
    chunk, headers = paginate(ctx, runs)
    return Reply(200, {"total_count": len(runs), "workflow_runs": chunk}, headers)


@route("actions/get-workflow-run")
async def get_run(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        return Reply(200, _run_json(ctx, repo, _run(ctx, repo)))


@route("actions/cancel-workflow-run")
async def cancel(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        run = _run(ctx, repo)
        if run.status == "completed":
            raise ApiError(409, "Cannot cancel a workflow run that is completed.")
        run.cancel_requested = True
        finish(sim, repo, run, "cancelled")
    return Reply(202, {})


@route("actions/list-jobs-for-workflow-run")
async def jobs(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        run = _run(ctx, repo)
        items = [ob.job_obj(ctx.sim.urls, repo, run)]
    return Reply(200, {"total_count": 1, "jobs": items})


def _artifact_json(ctx: Ctx, repo: RepoState, run: WorkflowRun, art: Any) -> dict[str, Any]:
    api = ctx.sim.urls.repo(repo.full_name)
    return {
        "id": art.id,
        "node_id": ob.node_id("Artifact", art.id),
        "name": art.name,
        "size_in_bytes": len(art.data),
        "url": f"{api}/actions/artifacts/{art.id}",
        "archive_download_url": f"{api}/actions/artifacts/{art.id}/zip",
        "expired": False,
        "created_at": art.created_at,
        "expires_at": "2099-01-01T00:00:00Z",
        "updated_at": art.created_at,
        "digest": None,
        "workflow_run": {
            "id": run.id,
            "repository_id": repo.id,
            "head_repository_id": repo.id,
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
        },
    }


@route("actions/list-workflow-run-artifacts")
async def artifacts(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        run = _run(ctx, repo)
        name = ctx.query.get("name")
        items = [
            _artifact_json(ctx, repo, run, a)
            for a in run.artifacts
            if name is None or a.name == name
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, {"total_count": len(items), "artifacts": chunk}, headers)


@route("actions/download-artifact")
async def download(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        if ctx.params["archive_format"] != "zip":
            raise not_found()
        wanted = ctx.int_param("artifact_id")
        for run in repo.workflow_runs.values():
            for art in run.artifacts:
                if art.id == wanted:
                    return Reply(302, None, {"Location": f"{ctx.sim.url}/_artifacts/{art.id}.zip"})
    raise not_found()


def _job(ctx: Ctx, repo: RepoState) -> WorkflowRun:
    run = ctx.sim.job_run(repo, ctx.int_param("job_id"))
    if run is None:
        raise not_found()
    return run


@route("actions/get-job-for-workflow-run")
async def get_job(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        return Reply(200, ob.job_obj(ctx.sim.urls, repo, _job(ctx, repo)))


@route("actions/download-job-logs-for-workflow-run")
async def job_logs(ctx: Ctx) -> Reply:
    """GitHub answers 302 with a short-lived signed URL on another host, which needs no
    token; here it is a path of the simulator carrying a per-job signature."""
    with ctx.sim.lock:
        repo = ctx.repo()
        run = _job(ctx, repo)
        if not run.log_key:
            run.log_key = secrets.token_urlsafe(18)
        location = f"{ctx.sim.url}/_logs/jobs/{run.job_id}?sig={run.log_key}"
    return Reply(302, None, {"Location": location})
