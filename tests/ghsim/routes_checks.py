"""Check runs and check suites."""

from __future__ import annotations

from typing import Any

from . import events
from .context import ApiError, Ctx, Reply, invalid, not_found, paginate, route
from .state import CheckRun, CheckSuite, RepoState, now_iso

STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)


def _run(ctx: Ctx, repo: RepoState) -> CheckRun:
    run = repo.check_runs.get(ctx.int_param("check_run_id"))
    if run is None:
        raise not_found()
    return run


def _apply(ctx: Ctx, run: CheckRun, body: dict[str, Any]) -> None:
    if "status" in body:
        status = ctx.field("status", str, resource="CheckRun")
        if status not in STATUSES:
            raise invalid("CheckRun", "status")
        run.status = status
    if body.get("conclusion") is not None:
        conclusion = ctx.field("conclusion", str, resource="CheckRun")
        if conclusion not in CONCLUSIONS:
            raise invalid("CheckRun", "conclusion")
        run.conclusion = conclusion
        run.status = "completed"
    if run.status == "completed" and run.conclusion is None:
        raise invalid(
            "CheckRun",
            "conclusion",
            "missing_field",
            "conclusion is required when status is completed",
        )
    for key in ("details_url", "external_id", "started_at", "completed_at"):
        if key in body:
            setattr(run, key, ctx.field(key, str, required=False, resource="CheckRun"))
    if run.status == "completed" and run.completed_at is None:
        run.completed_at = now_iso()
    output = body.get("output")
    if output is not None:
        if not isinstance(output, dict) or not isinstance(output.get("summary", ""), str):
            raise invalid("CheckRun", "output")
        run.output.update({k: output.get(k) for k in ("title", "summary", "text") if k in output})
        annotations = output.get("annotations") or []
        if not isinstance(annotations, list) or len(annotations) > 50:
            raise invalid("CheckRun", "output.annotations")
        for note in annotations:
            if not isinstance(note, dict) or not {
                "path",
                "start_line",
                "end_line",
                "annotation_level",
                "message",
            } <= set(note):
                raise invalid("CheckRun", "output.annotations")
            run.annotations.append(dict(note))


def _settle_suite(ctx: Ctx, repo: RepoState, suite: CheckSuite) -> None:
    events.settle_suite(ctx.sim, repo, suite, ctx.actor_login)


@route("checks/create")
async def create(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = sim.git_of(repo)
        name = ctx.field("name", str, resource="CheckRun")
        head_sha = ctx.field("head_sha", str, resource="CheckRun")
        if len(head_sha) != 40 or not git.object_exists(head_sha):
            raise ApiError(422, "No commit found for SHA: " + head_sha)
        branch = next((p.head for p in repo.pulls.values() if p.head_sha == head_sha), None)
        suite = sim.suite_for(repo, head_sha, branch)
        run = CheckRun(sim.ids.next(), name, head_sha, suite.id, started_at=now_iso())
        _apply(ctx, run, ctx.body if isinstance(ctx.body, dict) else {})
        repo.check_runs[run.id] = run
        events.check_run(sim, repo, run, "created", ctx.actor_login)
        _settle_suite(ctx, repo, suite)
        return Reply(201, sim.check_run_json(repo, run))


@route("checks/get")
async def get(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        return Reply(200, ctx.sim.check_run_json(repo, _run(ctx, repo)))


@route("checks/update")
async def update(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        run = _run(ctx, repo)
        was_completed = run.status == "completed"
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if "name" in body:
            run.name = ctx.field("name", str, resource="CheckRun")
        _apply(ctx, run, body)
        if run.status == "completed" and not was_completed:
            events.check_run(sim, repo, run, "completed", ctx.actor_login)
        _settle_suite(ctx, repo, repo.check_suites[run.suite_id])
        return Reply(200, sim.check_run_json(repo, run))


@route("checks/list-annotations")
async def list_annotations(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        run = _run(ctx, repo)
        items = [
            {
                "path": a["path"],
                "start_line": a["start_line"],
                "end_line": a["end_line"],
                "start_column": a.get("start_column"),
                "end_column": a.get("end_column"),
                "annotation_level": a["annotation_level"],
                "title": a.get("title"),
                "message": a["message"],
                "raw_details": a.get("raw_details"),
                "blob_href": f"{ctx.sim.urls.web}/{repo.full_name}/blob/{run.head_sha}/{a['path']}",
            }
            for a in run.annotations
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("checks/rerequest-run")
async def rerequest_run(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        run = _run(ctx, repo)
        if run.status != "completed":
            raise ApiError(403, "This check run is not rerequestable")
        events.check_run(sim, repo, run, "rerequested", ctx.actor_login)
    return Reply(201, {})


@route("checks/rerequest-suite")
async def rerequest_suite(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        suite = repo.check_suites.get(ctx.int_param("check_suite_id"))
        if suite is None:
            raise not_found()
        events.check_suite(sim, repo, suite, "rerequested", ctx.actor_login)
    return Reply(201, {})


@route("checks/list-for-ref")
async def list_for_ref(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        sha = sim.git_of(repo).resolve(ctx.params["ref"])
        if sha is None:
            raise not_found()
        name = ctx.query.get("check_name")
        status = ctx.query.get("status")
        runs = sorted(
            (r for r in repo.check_runs.values() if r.head_sha == sha), key=lambda r: -r.id
        )
        if ctx.query.get("filter", "latest") == "latest":
            seen: set[str] = set()
            latest = []
            for r in runs:
                if r.name not in seen:
                    seen.add(r.name)
                    latest.append(r)
            runs = latest
        items = [
            sim.check_run_json(repo, r)
            for r in runs
            if (name is None or r.name == name) and (status is None or r.status == status)
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, {"total_count": len(items), "check_runs": chunk}, headers)


@route("checks/list-suites-for-ref")
async def list_suites(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        sha = sim.git_of(repo).resolve(ctx.params["ref"])
        if sha is None:
            raise not_found()
        items = [
            sim.suite_json(repo, s)
            for s in sorted(repo.check_suites.values(), key=lambda s: s.id)
            if s.head_sha == sha
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, {"total_count": len(items), "check_suites": chunk}, headers)


@route("checks/list-for-suite")
async def list_for_suite(ctx: Ctx) -> Reply:
    """The runs of one check suite (``filter=latest``, the default: the newest run of each
    name), newest first."""
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        suite = repo.check_suites.get(ctx.int_param("check_suite_id"))
        if suite is None:
            raise not_found()
        name = ctx.query.get("check_name")
        status = ctx.query.get("status")
        runs = sorted(
            (r for r in repo.check_runs.values() if r.suite_id == suite.id), key=lambda r: -r.id
        )
        if ctx.query.get("filter", "latest") == "latest":
            seen: set[str] = set()
            latest = []
            for r in runs:
                if r.name not in seen:
                    seen.add(r.name)
                    latest.append(r)
            runs = latest
        items = [
            sim.check_run_json(repo, r)
            for r in runs
            if (name is None or r.name == name) and (status is None or r.status == status)
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, {"total_count": len(items), "check_runs": chunk}, headers)
